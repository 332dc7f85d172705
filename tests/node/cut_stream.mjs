// Runs at once through the official AG-UI client (@ag-ui/client 1.0), for a replica to be killed
// while they stream: what the client reports for each. Driven by tests/test_load_balancer.py.
//
//   AGUI_BRIDGE_URL  the agent's URL behind the load balancer
//   AGUI_TOKEN       the bridges' --auth-token, sent as Authorization: Bearer …
//   AGUI_THREADS     comma-separated thread ids, one run each
//
// Prints "streaming" once every run has its first events, then, when all have ended, one JSON
// line: per thread, the event types the subscriber saw, whether onRunFailed was called, and
// what runAgent rejected with (null when it resolved); and the rejections nothing handled.

import { HttpAgent } from "ag-ui-client-1.0.0";

const threads = process.env.AGUI_THREADS.split(",");
const headers = { Authorization: `Bearer ${process.env.AGUI_TOKEN}` };
let streaming = 0;
// The client (1.0.0) also rethrows the cut stream's error from its reader's cancel() when it
// tears the request down, where nothing can catch it: without this handler Node would end the
// process on that unhandled rejection. Kept in the report, not judged.
const unhandled = [];
process.on("unhandledRejection", (reason) => unhandled.push(`${reason?.name}: ${reason?.message}`));

async function one(threadId) {
  const report = { threadId, types: [], failed: false, rejected: null };
  const agent = new HttpAgent({
    url: process.env.AGUI_BRIDGE_URL,
    headers,
    threadId,
    initialMessages: [{ id: `${threadId}-u`, role: "user", content: "Hi" }],
  });
  const subscriber = {
    onEvent: ({ event }) => {
      report.types.push(event.type);
      if (report.types.length === 2 && ++streaming === threads.length) {
        process.stdout.write("streaming\n");
      }
    },
    onRunFailed: () => {
      report.failed = true;
    },
  };
  try {
    await agent.runAgent({}, subscriber);
  } catch (error) {
    report.rejected = `${error.name}: ${error.message}`;
  }
  return report;
}

const reports = await Promise.all(threads.map(one));
process.stdout.write(`${JSON.stringify({ reports, unhandled })}\n`);
