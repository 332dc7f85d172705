// Runs one RunAgentInput, exactly as given (parentRunId and all), through a client line's
// HttpAgent.run (its SSE parser and event schemas) and its verifyEvents (the protocol's order
// rules), for tests that send what runAgent() would not (driven by tests/hostile/).
//
// Reads one JSON object from stdin: {"client": "1.0.0", "url": "...", "input": <RunAgentInput>}.
// Prints one JSON line: {"events": [the events that passed], "error": null or the error's
// message, "logged": [warnings and errors the client logged]}.

import { readFileSync } from "node:fs";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const spec = JSON.parse(readFileSync(0, "utf8"));
const client = await import(`ag-ui-client-${spec.client ?? "1.0.0"}`);
const { lastValueFrom, tap, toArray } = await import("rxjs");

const logged = captureConsole();
const agent = new client.HttpAgent({ url: spec.url, threadId: spec.input.threadId });
const events = [];
let error = null;
try {
  await lastValueFrom(
    agent.run(spec.input).pipe(
      client.verifyEvents(false),
      tap((event) => events.push(event)),
      toArray(),
    ),
  );
} catch (caught) {
  error = `${caught.name}: ${caught.message}`;
}
process.stdout.write(`${JSON.stringify({ events, error, logged })}\n`);
