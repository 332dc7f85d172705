// CopilotKit's runtime reads an AG-UI stream through @ag-ui/client's convertToLegacyEvents, which
// is where predictive state lives: after a CUSTOM PredictState, each TOOL_CALL_ARGS of the named
// tool puts the argument (as much of its JSON as has come) into the state, as an
// AgentStateMessage. This runs one run through a client line's HttpAgent and that converter.
//
// Reads one JSON object from stdin: {"client": "1.0.0", "input": <RunAgentInput>, "url": "..."}.
// Prints one JSON line: {"events": [the AG-UI events], "states": [each AgentStateMessage's
// state, parsed], "logged": [warnings and errors the client logged]}.

// The CommonJS build, as require() loads it: the ES module build's `import … from
// "untruncate-json"` gets the module object, not the function, under Node's ESM loader, so its
// predictive state silently does nothing there (a bundler, as in a browser page, resolves it).

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { captureConsole } from "./capture_console.mjs";

process.env.NODE_ENV ??= "test";

const require = createRequire(import.meta.url);
const spec = JSON.parse(readFileSync(0, "utf8"));
const client = require(`ag-ui-client-${spec.client ?? "1.0.0"}`);
const { lastValueFrom, tap, toArray } = require("rxjs");

const logged = captureConsole();

const input = spec.input;
const agent = new client.HttpAgent({ url: spec.url, threadId: input.threadId });
const events = [];
const legacy = await lastValueFrom(
  agent.run(input).pipe(
    tap((event) => events.push(event)),
    client.convertToLegacyEvents(input.threadId, input.runId, "agent"),
    toArray(),
  ),
);
const states = legacy
  .filter((event) => event.type === "AgentStateMessage")
  .map((event) => JSON.parse(event.state));
process.stdout.write(`${JSON.stringify({ events, states, logged })}\n`);
