// Conversations through the official AG-UI client (@ag-ui/client) over HTTP, keeping the bytes
// it received: for tests that fold the same frames themselves and compare with what the client
// holds (the thread fold, bridge/serve/threads/fold.py, driven by
// tests/threads/test_threads_fold_client.py).
//
// Reads one JSON object from stdin:
//   {"client": "1.0.0",                          the client line (ag-ui-client-<version>)
//    "conversations": [{"url": "...",            the agent's URL
//                       "threadId": "...",
//                       "messages": [...],       the history the agent starts with
//                       "state": {...},
//                       "turns": [{"add": [...],            messages added before the run
//                                  "tools": [...],          frontend tools
//                                  "forwardedProps": {...},
//                                  "approve": true,         answer every pending interrupt
//                                                           with {approved: true} (resume)
//                                  "answer": {...},         or with this payload
//                                  "resume": [...]}]}]}     or send exactly this resume
// The conversations go one after the other, each turn a run of one agent (the messages carry
// over). Prints one JSON line: per conversation, per turn, what the agent held before the run
// (messages, state, pendingInterrupts), the response body as received, and what it holds after,
// whether onRunFailed was called and what runAgent rejected with; and every warning or error
// the client logged.

import { readFileSync } from "node:fs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const { HttpAgent } = await import(`ag-ui-client-${spec.client ?? "1.0.0"}`);

const logged = captureConsole();
const copy = (value) => JSON.parse(JSON.stringify(value ?? null));

async function conversation(talk) {
  let body = null;
  // The client reads one branch of the body; the other is kept as it came.
  const keeping = async (url, init) => {
    const response = await fetch(url, init);
    const [read, kept] = response.body.tee();
    body = new Response(kept).text();
    return new Response(read, { status: response.status, headers: response.headers });
  };
  const agent = new HttpAgent({
    url: talk.url,
    threadId: talk.threadId ?? "fold",
    initialMessages: talk.messages ?? [],
    initialState: talk.state ?? {},
    fetch: keeping,
  });
  const turns = [];
  for (const turn of talk.turns) {
    for (const message of turn.add ?? []) agent.addMessage(message);
    const report = {
      before: copy(agent.messages),
      stateBefore: copy(agent.state),
      interruptsBefore: copy(agent.pendingInterrupts ?? []),
      failed: false,
      rejected: null,
    };
    const parameters = { tools: turn.tools ?? [], forwardedProps: turn.forwardedProps ?? {} };
    if (turn.approve || "answer" in turn) {
      const payload = turn.approve ? { approved: true } : turn.answer;
      parameters.resume = agent.pendingInterrupts.map((interrupt) => ({
        interruptId: interrupt.id,
        status: "resolved",
        payload,
      }));
    }
    if (turn.resume) parameters.resume = turn.resume;
    body = null;
    try {
      await agent.runAgent(parameters, { onRunFailed: () => (report.failed = true) });
    } catch (error) {
      report.rejected = `${error.name}: ${error.message}`;
    }
    report.body = body === null ? null : await body;
    report.messages = copy(agent.messages);
    report.state = copy(agent.state);
    report.pendingInterrupts = copy(agent.pendingInterrupts ?? []);
    turns.push(report);
  }
  return turns;
}

const reports = [];
for (const talk of spec.conversations) reports.push(await conversation(talk));
process.stdout.write(`${JSON.stringify({ reports, logged })}\n`);
