// The official AG-UI client (@ag-ui/client) applying given events, with no HTTP: for tests that
// judge what a list of events does to the messages and state a client holds (the thread fold,
// bridge/serve/threads/fold.py, driven by tests/threads/test_threads_fold_client.py).
//
// Reads one JSON object from stdin:
//   {"client": "1.0.0",                    the client line (package ag-ui-client-<version>)
//    "cases": [{"messages": [...],         what the agent holds before (AG-UI messages)
//               "state": {...},            its state
//               "events": [...]}]}         the events its run receives (wire JSON, camelCase)
// Each case runs through the client's whole pipeline, as a run from HttpAgent would: its
// compatibility boundary, schema checks, chunk expansion, verifier (order), then its reducer.
// Prints one JSON line: per case, the messages and state the agent holds at the end, its
// pendingInterrupts, whether onRunFailed was called, what runAgent rejected with (null when it
// resolved), and every warning or error the client logged during it.

import { readFileSync } from "node:fs";
import { from } from "rxjs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const { AbstractAgent } = await import(`ag-ui-client-${spec.client ?? "1.0.0"}`);

const logged = captureConsole();

class Replayed extends AbstractAgent {
  constructor(config, events) {
    super(config);
    this.events = events;
  }

  run() {
    return from(this.events);
  }
}

async function one(run) {
  const before = logged.length;
  const agent = new Replayed(
    { threadId: "t", initialMessages: run.messages ?? [], initialState: run.state ?? {} },
    run.events,
  );
  const report = { failed: false, rejected: null };
  try {
    await agent.runAgent({}, { onRunFailed: () => (report.failed = true) });
  } catch (error) {
    report.rejected = `${error.name}: ${error.message}`;
  }
  report.messages = agent.messages;
  report.state = agent.state;
  report.pendingInterrupts = agent.pendingInterrupts ?? [];
  report.logged = logged.slice(before);
  return report;
}

const reports = [];
for (const run of spec.cases) reports.push(await one(run));
process.stdout.write(`${JSON.stringify({ reports })}\n`);
