// Sends attachments as a frontend does with the official client: agent.addMessage with a user
// message of content parts, then runAgent (CopilotKit's chat does the same with the file a
// person picks). Driven by tests/hostile/test_hostile_parts.py.
//
// Reads one JSON object from stdin: {"client": "1.0.0", "url": "...", "content": [parts]}.
// Prints one JSON line: the types of the events the subscriber saw (after the client's own
// verification), whether onRunFailed was called, what runAgent rejected with (null when it
// resolved), the user message as the agent holds it after the run, and every warning or error
// the client logged.

import { readFileSync } from "node:fs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const { HttpAgent } = await import(`ag-ui-client-${spec.client}`);
const logged = captureConsole();

const agent = new HttpAgent({ url: spec.url, threadId: "attachments" });
agent.addMessage({ id: "u1", role: "user", content: spec.content });
const report = { events: [], failed: false, rejected: null };
try {
  await agent.runAgent(
    {},
    {
      onEvent: ({ event }) => report.events.push(event.type),
      onRunFailed: () => {
        report.failed = true;
      },
    },
  );
} catch (error) {
  report.rejected = `${error.name}: ${error.message}`;
}
report.user = agent.messages.find((message) => message.id === "u1");
process.stdout.write(`${JSON.stringify({ ...report, logged })}\n`);
