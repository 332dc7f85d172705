// One run with a shared state through the official client, and its events folded again by the
// client's own compactEvents (what a runner that stores runs does, CopilotRuntime's among them),
// for tests/hostile/test_hostile_state.py: deltas that come out of order fail either way.
//
// Reads one JSON object from stdin: {"client": "1.0.0", "url": "...", "state": {...}}.
// Prints one JSON line: the agent's state at the end, the snapshot compactEvents folds from the
// run's state events (started from the run's input state), what it threw, whether the run failed
// or was rejected, and every warning or error the client logged.

import { readFileSync } from "node:fs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const { HttpAgent, compactEvents } = await import(`ag-ui-client-${spec.client}`);
const logged = captureConsole();

const events = [];
const report = { failed: false, rejected: null, compacted: null, compactError: null };
const agent = new HttpAgent({ url: spec.url, threadId: "state", initialState: spec.state });
try {
  await agent.runAgent(
    { tools: [], forwardedProps: {} },
    {
      onEvent: ({ event }) => events.push(event),
      onRunFailed: () => {
        report.failed = true;
      },
    },
  );
} catch (error) {
  report.rejected = `${error.name}: ${error.message}`;
}
report.state = agent.state;
try {
  // The run's input state right after RUN_STARTED, as a runner that folds a run's state events
  // from its start must put it (compactEvents folds each run's from {}).
  const at = events.findIndex((event) => event.type === "RUN_STARTED") + 1;
  const input = { type: "STATE_SNAPSHOT", snapshot: spec.state };
  const folded = compactEvents([...events.slice(0, at), input, ...events.slice(at)]);
  report.compacted = folded.filter((event) => event.type === "STATE_SNAPSHOT").at(-1)?.snapshot;
} catch (error) {
  report.compactError = `${error.name}: ${error.message}`;
}
report.deltas = events.filter((event) => event.type === "STATE_DELTA").length;
process.stdout.write(`${JSON.stringify({ ...report, logged })}\n`);
