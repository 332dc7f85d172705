// Runs one or more AG-UI runs through the official client and prints what it received, for
// tests that judge the events themselves (the live llama.cpp tests: tests/live/).
//
// Reads one JSON object from stdin:
//   {"client": "1.0.0",             the client line (package ag-ui-client-<version>)
//    "runs": [{"url": "...",         the agent's URL
//              "threadId": "...",
//              "messages": [...],    the history (AG-UI messages)
//              "tools": [...],       frontend tools
//              "state": {...},
//              "forwardedProps": {...},
//              "abortAfter": "TEXT_MESSAGE_CONTENT"  optional: abort the run when this many
//              "abortCount": 3}]}    events of that type have arrived (a client that leaves)
// The runs go at once (Promise.all). Prints one JSON line: per run, the events as the
// subscriber saw them (after the client's own verification and schema checks), the messages
// the agent holds at the end, whether onRunFailed was called, what runAgent rejected with
// (null when it resolved), and every warning or error the client logged.

import { readFileSync } from "node:fs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const { HttpAgent } = await import(`ag-ui-client-${spec.client ?? "1.0.0"}`);

const logged = captureConsole();

async function one(run) {
  const report = { events: [], messages: [], failed: false, rejected: null, aborted: false };
  const agent = new HttpAgent({
    url: run.url,
    headers: run.headers ?? {},
    threadId: run.threadId ?? "live",
    initialMessages: run.messages ?? [],
    initialState: run.state ?? {},
  });
  let seen = 0;
  const subscriber = {
    onEvent: ({ event }) => {
      report.events.push(event);
      if (run.abortAfter && event.type === run.abortAfter && ++seen === (run.abortCount ?? 1)) {
        report.aborted = true;
        agent.abortRun();
      }
    },
    onRunFailed: () => {
      report.failed = true;
    },
  };
  try {
    await agent.runAgent(
      { tools: run.tools ?? [], forwardedProps: run.forwardedProps ?? {} },
      subscriber,
    );
  } catch (error) {
    report.rejected = `${error.name}: ${error.message}`;
  }
  report.messages = agent.messages;
  report.state = agent.state;
  return report;
}

const reports = await Promise.all(spec.runs.map(one));
process.stdout.write(`${JSON.stringify({ reports, logged })}\n`);
