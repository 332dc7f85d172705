// The official AG-UI client (@ag-ui/client) against a running bridge, for every model.
//
// Driven by tests/test_node_client.py, which starts the servers and sets:
//   AGUI_BRIDGE_URL  the agent's URL (POST), e.g. http://127.0.0.1:8000/
//   AGUI_MODELS      comma-separated model names, sent as forwardedProps.model
//   AGUI_API         "responses" when the bridge's upstream is a Responses API: the reasoning
//                    then comes as one message per summary part, and one of them carries the
//                    encrypted reasoning, which the client must keep and send back
//   AGUI_CLIENT      the client line to run, e.g. 1.0.0, 0.0.59 (CopilotKit 1.74 / runtime
//                    1.75), 0.0.52: the package ag-ui-client-<version> (an npm alias of
//                    @ag-ui/client@<version> in package.json); default 1.0.0
//   AGUI_SERVER_TOOL the name of a tool the bridge runs itself (e.g. get_time): then only the
//                    mixed-turn test runs, a server tool and a frontend tool in one turn
//   AGUI_SERVER_RESULT what that tool returns (a string), if the test may know it
//   AGUI_APPROVAL_TOOL the name of a server tool under approval (e.g. send_mail): then only the
//                    approval tests run: the interrupt and its resume (approve, edit, deny,
//                    cancel), with a run between them that the client refuses, then a later turn
//   AGUI_ALREADY_RUN  with AGUI_APPROVAL_TOOL: what the bridge answers for an approval used
//                    already; then, instead, the approve-twice tests run: two agents holding the
//                    same thread resume one interrupt with an approval, one after the other (a
//                    replay) and at once (a double click, a retried POST)
//   AGUI_MCP_APP_TOOL the name of an MCP App's UI tool the bridge runs (e.g. ui__board, from an
//                    --mcp server): then only the MCP Apps tests run: the tool's mcp-apps
//                    activity, and the widget's requests as proxied runs (no model)
//   AGUI_MCP_APP_HTML the HTML its ui:// resource holds, which resources/read must return
//   AGUI_SHARED_STATE the agent's initial state (JSON) when the bridge runs --shared-state: then
//                    only the shared-state test runs: a plan the model writes and ticks off, then
//                    a to-do it adds, each run checked for its state events (STATE_DELTA,
//                    STATE_SNAPSHOT) and agent.state after it
//   AGUI_PREDICT_STATE with AGUI_SHARED_STATE: the PredictState value (JSON) the bridge's
//                    --predict-state sends; every model step must open with it, right after its
//                    STEP_STARTED
//
// The client checks every stream itself: its verifier throws on an out-of-order event, its
// schema check throws on a malformed one and warns when it strips a field it does not know.
// A thrown error fails the run; so does any warning the client logs (see captureConsole).
// Per model, three runs reach the upstream: the tool call, the answer after the tool results,
// and a greeting without tools; in the mixed-turn test, the turn, the answer, and the answer
// again from a history that holds the server's result JSON-encoded. The Python side counts on
// that.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { EventType } from "@ag-ui/core";

const CLIENT = process.env.AGUI_CLIENT ?? "1.0.0";
const { HttpAgent } = await import(`ag-ui-client-${CLIENT}`);
// 1.0 announces its protocol in RunAgentInput and reads RUN_FINISHED.outcome's pending calls;
// the 0.0.x lines send no protocolVersion, and the bridge must send them no 1.0-only field.
const SPEAKS_1_0 = Number(CLIENT.split(".")[0]) >= 1;

// In "test" the client freezes what it hands subscribers and rethrows their TypeErrors
// instead of logging them, so a broken subscriber cannot pass unnoticed.
process.env.NODE_ENV ??= "test";

const BRIDGE_URL = process.env.AGUI_BRIDGE_URL;
const MODELS = (process.env.AGUI_MODELS ?? "")
  .split(",")
  .map((name) => name.trim())
  .filter(Boolean);
if (!BRIDGE_URL || MODELS.length === 0) {
  throw new Error("set AGUI_BRIDGE_URL (the agent's URL) and AGUI_MODELS (comma-separated)");
}

const API = process.env.AGUI_API ?? "chat";
const RUN_TIMEOUT_MS = 20_000;
// The model that streams no reasoning at all.
const PLAIN_MODEL = "scripted-plain";
const TOOLS_PROMPT = "What's the weather in Paris and make the background lightblue";
const TOOLS = [
  {
    name: "get_weather",
    description: "Get the current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
  {
    name: "change_background",
    description: "Change the page's background color",
    parameters: {
      type: "object",
      properties: { color: { type: "string" } },
      required: ["color"],
    },
  },
];

/** What the application answers for a call, as the tool message's JSON content. */
function toolResult(call) {
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "get_weather") {
    return { city: args.city, temperature: 21, conditions: "sunny" };
  }
  return { ok: true, background: args.color };
}

/**
 * An agent that keeps, per run, the request body it sent (`agent.sentBodies`) and the SSE text it
 * received (`agent.wires`, with when the request went and the response ended), both as they went
 * over the wire. Recorded by wrapping the global `fetch`: the 0.0.52 client takes no `fetch`
 * option. It starts from `initialMessages` when given (a conversation so far), else from the
 * prompt, and holds `initialState` when given (the shared state the page starts with).
 */
function newAgent(
  prompt,
  initialMessages = [{ id: randomUUID(), role: "user", content: prompt }],
  initialState = undefined,
) {
  const agent = new HttpAgent({
    url: BRIDGE_URL,
    threadId: randomUUID(),
    initialMessages,
    ...(initialState === undefined ? {} : { initialState }),
  });
  return Object.assign(agent, { sentBodies: [], wires: [] });
}

const realFetch = globalThis.fetch;
// The agents whose runs are under way, by their run's abort signal (which the client hands
// `fetch`): two agents may run at once, resuming the same interrupt.
const recording = new Map();
globalThis.fetch = async (url, init) => {
  const agent = recording.get(init?.signal);
  if (!agent || String(url) !== BRIDGE_URL) return realFetch(url, init);
  agent.sentBodies.push(JSON.parse(init.body));
  const sentAt = performance.now();
  const response = await realFetch(url, init);
  const wire = { text: "", sentAt, endedAt: undefined };
  agent.wires.push(wire);
  if (!response.body) return response;
  const decoder = new TextDecoder();
  const recorder = new TransformStream({
    transform(chunk, controller) {
      wire.text += decoder.decode(chunk, { stream: true });
      controller.enqueue(chunk);
    },
    flush() {
      wire.endedAt = performance.now();
    },
  });
  const { status, statusText, headers } = response;
  return new Response(response.body.pipeThrough(recorder), { status, statusText, headers });
};

/** The event types in received SSE text: what the server sent, before the client judged it. */
function wireTypes(text) {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => {
      try {
        return JSON.parse(line.slice(5)).type;
      } catch {
        return `(not JSON: ${line.slice(5, 80)})`;
      }
    });
}

// The logs of the runs under way: a warning or error goes to each (runs may overlap, and a
// logged line cannot tell which run it came from), and is printed when no run is under way.
const capturing = new Set();
for (const level of ["warn", "error"]) {
  const print = console[level];
  console[level] = (...args) => {
    if (capturing.size === 0) return print.apply(console, args);
    const line = `${level}: ${args.map((a) => (a instanceof Error ? a.stack : String(a))).join(" ")}`;
    for (const logged of capturing) logged.push(line);
  };
}

/** Calls `console.warn`/`console.error` made while `body` runs, kept instead of printed. */
async function captureConsole(body) {
  const logged = [];
  capturing.add(logged);
  try {
    return { value: await body(), logged };
  } finally {
    capturing.delete(logged);
  }
}

/**
 * One run through the client, with everything the subscriber saw. Fails if the client throws
 * (a protocol violation), logs a warning, the run takes longer than RUN_TIMEOUT_MS, or the
 * stream carries RUN_ERROR. `proxied`: an MCP App widget's request, which no model answers (so
 * no token usage).
 */
async function run(agent, params, { interrupted = false, proxied = false } = {}) {
  const seen = {
    events: [],
    runErrors: [],
    finished: [],
    failures: [],
    // What the typed hooks saw of the state and CUSTOM events, and each state the agent took on.
    deltas: [],
    snapshots: [],
    customs: [],
    states: [],
  };
  const subscriber = {
    onEvent: ({ event }) => {
      seen.events.push(event);
    },
    onStateDeltaEvent: ({ event }) => {
      seen.deltas.push(event);
    },
    onStateSnapshotEvent: ({ event }) => {
      seen.snapshots.push(event);
    },
    onCustomEvent: ({ event }) => {
      seen.customs.push(event);
    },
    onStateChanged: ({ state }) => {
      seen.states.push(structuredClone(state));
    },
    onRunErrorEvent: ({ event }) => {
      seen.runErrors.push(event);
    },
    onRunFinishedEvent: (finished) => {
      seen.finished.push(finished);
    },
    onRunFailed: ({ error }) => {
      seen.failures.push(error);
    },
  };
  const wire = () => wireTypes(agent.wires.at(-1)?.text ?? "").join(", ") || "(nothing)";
  const abortController = new AbortController();
  let timedOut = false;
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      abortController.abort();
      reject(new Error(`no RUN_FINISHED or RUN_ERROR within ${RUN_TIMEOUT_MS} ms`));
    }, RUN_TIMEOUT_MS);
  });
  let captured;
  recording.set(abortController.signal, agent);
  try {
    captured = await captureConsole(() =>
      Promise.race([agent.runAgent({ ...params, abortController }, subscriber), timeout]),
    );
  } catch (error) {
    const reason = timedOut ? error.message : `the client rejected the stream: ${error.message}`;
    throw new Error(`${reason}\nevents on the wire: ${wire()}`, { cause: error });
  } finally {
    clearTimeout(timer);
    recording.delete(abortController.signal);
  }
  assert.deepEqual(captured.logged, [], `the client complained; events on the wire: ${wire()}`);
  assert.deepEqual(seen.failures, [], "onRunFailed was called");
  const errors = seen.runErrors.map((event) => `${event.code ?? "(no code)"}: ${event.message}`);
  assert.deepEqual(errors, [], `the run ended with RUN_ERROR; events on the wire: ${wire()}`);
  assert.equal(seen.finished.length, 1, `expected one RUN_FINISHED; events on the wire: ${wire()}`);
  // 0.0.52 hands subscribers no outcome at all; 0.0.59 and 1.0 say "success" (or "interrupt").
  if (interrupted) assert.equal(seen.finished[0].outcome, "interrupt");
  else assert.ok([undefined, "success"].includes(seen.finished[0].outcome));
  // Token usage reaches every line's subscribers on RUN_FINISHED (the scripted model reports it).
  const usage = seen.finished[0].event.usage;
  if (!proxied) {
    assert.ok(usage?.[0]?.outputTokens > 0, `no usage on RUN_FINISHED: ${JSON.stringify(usage)}`);
  }
  assertProtocol(agent, { interrupted });
  return { ...seen, result: captured.value, types: seen.events.map((event) => event.type) };
}

/** The run's request announced the client's line, and the answer was shaped for it. */
function assertProtocol(agent, { interrupted = false } = {}) {
  const sent = agent.sentBodies.at(-1);
  const frames = wireFrames(agent.wires.at(-1)?.text ?? "");
  const started = frames.find((frame) => frame.type === EventType.RUN_STARTED);
  const finished = frames.find((frame) => frame.type === EventType.RUN_FINISHED);
  if (SPEAKS_1_0) {
    assert.equal(sent.protocolVersion, "1.0", "the 1.0 client announces its protocol");
    assert.equal(started.protocolVersion, "1.0");
  } else {
    assert.equal(sent.protocolVersion, undefined, `client ${CLIENT} announces no protocol`);
    assert.equal(started.protocolVersion, undefined, "no 1.0 field for a 0.0.x client");
    if (interrupted) {
      // The interrupt outcome is the one a 0.0.59 client knows (and needs): it goes to all.
      assert.equal(finished.outcome?.type, "interrupt", "the interrupt outcome reaches 0.0.x");
    } else {
      assert.equal(finished.outcome, undefined, "no 1.0 outcome for a 0.0.x client");
    }
  }
}

function wireFrames(text) {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => JSON.parse(line.slice(5)));
}

function eventsOf(seen, type) {
  return seen.events.filter((event) => event.type === type);
}

function assertReasoning(seen, model) {
  const reasoning = eventsOf(seen, EventType.REASONING_MESSAGE_CONTENT);
  if (model === PLAIN_MODEL) {
    assert.equal(reasoning.length, 0, "the plain model streams no reasoning");
  } else {
    assert.ok(reasoning.length > 0, `no REASONING_MESSAGE_CONTENT; events: ${seen.types}`);
  }
}

const SERVER_TOOL = process.env.AGUI_SERVER_TOOL;
const SERVER_RESULT = process.env.AGUI_SERVER_RESULT;
const MIXED_PROMPT = "What time is it? And make the background lightblue.";

/** Whether a text is a JSON-encoded string ("\"12:00\""). */
function isJsonString(text) {
  try {
    return typeof JSON.parse(text) === "string";
  } catch {
    return false;
  }
}

/**
 * The application's part of a tool loop: answer the calls that have no result yet. A server
 * tool's call has its result already (from TOOL_CALL_RESULT), so it is never run here.
 */
function answerOpenCalls(agent) {
  const answered = new Set(
    agent.messages.filter((message) => message.role === "tool").map((m) => m.toolCallId),
  );
  const open = agent.messages
    .flatMap((message) => (message.role === "assistant" ? (message.toolCalls ?? []) : []))
    .filter((call) => !answered.has(call.id));
  const results = open.map((call) => ({
    id: randomUUID(),
    role: "tool",
    toolCallId: call.id,
    content: JSON.stringify(toolResult(call)),
  }));
  agent.addMessages(results);
  return { open, results };
}

const APPROVAL_TOOL = process.env.AGUI_APPROVAL_TOOL;
const APPROVAL_PROMPT = `Please ${APPROVAL_TOOL} to the team`;

// How a person answers, and what the model then reads as the call's result (the bridge's
// tool answers "mail sent to <to>"; the Python side counts the runs of each case).
const APPROVAL_CASES = [
  {
    name: "approved: the tool runs in the resumed run",
    entry: { status: "resolved", payload: { approved: true } },
    told: (content) => content.startsWith("mail sent to "),
  },
  {
    name: "approved with edited arguments: the tool runs with them",
    entry: {
      status: "resolved",
      payload: { approved: true, editedArgs: { to: "bob@example.com" } },
    },
    told: (content) => content === "mail sent to bob@example.com",
  },
  {
    name: "denied: the model is told, with the reason",
    entry: { status: "resolved", payload: { approved: false, reason: "not now" } },
    told: (content) => content === "The user declined: not now",
  },
  {
    name: "cancelled: the model is told, nothing runs",
    entry: { status: "cancelled" },
    told: (content) => content.startsWith("The user cancelled this call"),
  },
];

const MCP_APP_TOOL = process.env.AGUI_MCP_APP_TOOL;
const MCP_APP_HTML = process.env.AGUI_MCP_APP_HTML;
const MCP_APP_PROMPT = `Please show ${MCP_APP_TOOL}`;
const MCP_APPS_ACTIVITY = "mcp-apps";

/**
 * A widget's request as CopilotKit's MCP Apps renderer sends it: a run on the chat's agent whose
 * forwardedProps carry only `__proxiedMCPRequest`. Its RUN_FINISHED.result, what the client's
 * runAgent returns, and the agent's messages before and after.
 */
async function proxiedRun(agent, request) {
  const before = structuredClone(agent.messages);
  const seen = await run(
    agent,
    { tools: [], forwardedProps: { __proxiedMCPRequest: request } },
    { proxied: true },
  );
  assert.deepEqual(seen.types, [EventType.RUN_STARTED, EventType.RUN_FINISHED]);
  return { ...seen, before };
}

for (const model of MCP_APP_TOOL ? MODELS : []) {
  describe(`${model}: the MCP App tool ${MCP_APP_TOOL} (@ag-ui/client ${CLIENT})`, () => {
    test("its result is followed by the mcp-apps activity, kept as an activity message", async () => {
      const agent = newAgent(MCP_APP_PROMPT);
      const params = { tools: [], forwardedProps: { model } };

      const first = await run(agent, params);
      const [started] = eventsOf(first, EventType.TOOL_CALL_START);
      assert.equal(started?.toolCallName, MCP_APP_TOOL, `events: ${first.types}`);
      const [result] = eventsOf(first, EventType.TOOL_CALL_RESULT);
      const activities = eventsOf(first, EventType.ACTIVITY_SNAPSHOT);
      assert.equal(activities.length, 1, `events: ${first.types}`);
      const [activity] = activities;
      assert.equal(
        first.types[first.types.indexOf(EventType.TOOL_CALL_RESULT) + 1],
        EventType.ACTIVITY_SNAPSHOT,
        "the activity follows the tool's result",
      );
      assert.equal(activity.activityType, MCP_APPS_ACTIVITY);
      assert.equal(activity.replace, true);
      const { content } = activity;
      assert.equal(content.resourceUri, "ui://board/app.html");
      assert.equal(content.serverId, MCP_APP_TOOL.split("__")[0]);
      assert.match(content.serverHash, /^[0-9a-f]{32}$/);
      const call = agent.messages.flatMap((message) => message.toolCalls ?? [])[0];
      assert.deepEqual(content.toolInput, JSON.parse(call.function.arguments), "the arguments");
      assert.equal(content.result.content[0].text, result.content, "the whole MCP result");

      // Every line keeps it as a message of role "activity" (what CopilotKit renders), after
      // the call's result, and counts it among the run's new messages.
      const kept = agent.messages.filter((message) => message.role === "activity");
      assert.deepEqual(kept, [
        { id: activity.messageId, role: "activity", activityType: MCP_APPS_ACTIVITY, content },
      ]);
      const toolAt = agent.messages.findIndex((m) => m.toolCallId === started.toolCallId);
      assert.ok(toolAt >= 0 && agent.messages.indexOf(kept[0]) > toolAt, "after the result");
      assert.ok(first.result.newMessages.some((message) => message.id === activity.messageId));
      const answer = first.result.newMessages.find(
        (message) => message.role === "assistant" && message.content,
      );
      assert.ok(answer?.content.includes(result.content), "the model answered from the result");

      // A later turn: the client keeps the activity but never sends it; the bridge gets a
      // history it knows.
      agent.addMessage({ id: randomUUID(), role: "user", content: "Thanks, that is all." });
      await run(agent, params);
      const roles = agent.sentBodies[1].messages.map((message) => message.role);
      assert.ok(!roles.includes("activity"), `sent: ${roles}`);
      assert.ok(agent.messages.some((message) => message.id === activity.messageId));
    });

    test("the widget's requests: proxied runs answered without the model, no new message", async () => {
      const agent = newAgent(MCP_APP_PROMPT);
      const first = await run(agent, { tools: [], forwardedProps: { model } });
      const [{ content }] = eventsOf(first, EventType.ACTIVITY_SNAPSHOT);
      const target = { serverHash: content.serverHash, serverId: content.serverId };

      const read = await proxiedRun(agent, {
        ...target,
        method: "resources/read",
        params: { uri: content.resourceUri },
      });
      const [item] = read.result.result.contents;
      assert.equal(item.uri, content.resourceUri);
      assert.equal(item.mimeType, "text/html;profile=mcp-app");
      if (MCP_APP_HTML !== undefined) assert.equal(item.text, MCP_APP_HTML);
      assert.deepEqual(read.finished[0].event.result, read.result.result, "RUN_FINISHED.result");
      assert.deepEqual(read.result.newMessages, [], "a proxied run adds no message");
      assert.deepEqual(agent.messages, read.before, "the conversation is as it was");

      const called = await proxiedRun(agent, {
        ...target,
        method: "tools/call",
        params: { name: "bump", arguments: {} },
      });
      assert.match(called.result.result.content[0].text, /^\d+$/);
      assert.ok(!called.result.result.isError);
      assert.deepEqual(called.result.newMessages, []);

      // A refusal is a result the widget can read, not a failed run.
      const refused = await proxiedRun(agent, {
        ...target,
        method: "resources/read",
        params: { uri: "notes://secret" },
      });
      assert.equal(refused.result.result.isError, true);
      assert.equal(typeof refused.result.result.error, "string");
      assert.equal(refused.result.result.content[0].text, refused.result.result.error);
      assert.deepEqual(agent.messages, read.before);
    });
  });
}

const ALREADY_RUN = process.env.AGUI_ALREADY_RUN;
const APPROVE = { status: "resolved", payload: { approved: true } };

/** A run that ends with the approval tool's interrupt: its call's TOOL_CALL_START and the one
 * interrupt. */
async function interruptedRun(agent, params) {
  const first = await run(agent, params, { interrupted: true });
  const [started] = eventsOf(first, EventType.TOOL_CALL_START);
  assert.equal(started?.toolCallName, APPROVAL_TOOL, `events: ${first.types}`);
  const interrupts = first.finished[0].interrupts;
  assert.equal(interrupts.length, 1);
  return { started, interrupt: interrupts[0] };
}

/** Another agent holding the same thread, messages and pending interrupt (another tab, the page
 * again after a retry), with a record of its own. */
function copyOf(agent) {
  return Object.assign(agent.clone(), { sentBodies: [], wires: [] });
}

/** A resumed run the client accepts as a whole (`run` checks it): the original call's one
 * result, nothing pending after, the model's answer quoting it; the result's content. */
async function resumedRun(agent, params, resume, started) {
  const seen = await run(agent, { ...params, resume });
  assert.deepEqual(agent.sentBodies.at(-1).resume, resume);
  assert.deepEqual(eventsOf(seen, EventType.TOOL_CALL_START), [], "no new call starts");
  const results = eventsOf(seen, EventType.TOOL_CALL_RESULT);
  assert.deepEqual(
    results.map((event) => event.toolCallId),
    [started.toolCallId],
    "one result, for the original call",
  );
  assert.deepEqual(agent.pendingInterrupts, [], "nothing is pending any more");
  const answer = seen.result.newMessages.find((message) => message.role === "assistant");
  assert.ok(answer?.content.includes(results[0].content), `events: ${seen.types}`);
  return results[0].content;
}

const ran = (content) => (content.startsWith("mail sent to ") ? "ran" : content);

for (const model of APPROVAL_TOOL && ALREADY_RUN ? MODELS : []) {
  describe(`${model}: ${APPROVAL_TOOL} approved twice (@ag-ui/client ${CLIENT})`, () => {
    const params = { tools: [], forwardedProps: { model } };

    test("a replay of the approval: the tool ran once, the replay is told so", async () => {
      const agent = newAgent(APPROVAL_PROMPT);
      const { started, interrupt } = await interruptedRun(agent, params);
      const replay = copyOf(agent);
      const resume = [{ interruptId: interrupt.id, ...APPROVE }];

      const first = await resumedRun(agent, params, resume, started);
      const again = await resumedRun(replay, params, resume, started);
      assert.equal(ran(first), "ran", first);
      assert.equal(again, ALREADY_RUN);
    });

    test("the approval sent twice at once: one runs the tool, the other is told so", async () => {
      const agent = newAgent(APPROVAL_PROMPT);
      const { started, interrupt } = await interruptedRun(agent, params);
      const resume = [{ interruptId: interrupt.id, ...APPROVE }];

      const both = [agent, copyOf(agent)];
      const contents = await Promise.all(
        both.map((one) => resumedRun(one, params, resume, started)),
      );
      assert.deepEqual(contents.map(ran).sort(), [ALREADY_RUN, "ran"].sort(), `${contents}`);
      const [mine, theirs] = both.map((one) => one.wires.at(-1));
      assert.ok(
        Math.max(mine.sentAt, theirs.sentAt) < Math.min(mine.endedAt, theirs.endedAt),
        "both requests were under way at once",
      );
    });
  });
}

for (const model of APPROVAL_TOOL && !ALREADY_RUN ? MODELS : []) {
  describe(`${model}: ${APPROVAL_TOOL} under approval (@ag-ui/client ${CLIENT})`, () => {
    for (const { name, entry, told } of APPROVAL_CASES) {
      test(name, async () => {
        const agent = newAgent(APPROVAL_PROMPT);
        const params = { tools: [], forwardedProps: { model } };

        const first = await run(agent, params, { interrupted: true });
        const [started] = eventsOf(first, EventType.TOOL_CALL_START);
        assert.equal(started?.toolCallName, APPROVAL_TOOL, `events: ${first.types}`);
        assert.deepEqual(eventsOf(first, EventType.TOOL_CALL_RESULT), [], "nothing ran yet");
        const interrupts = first.finished[0].interrupts;
        assert.equal(interrupts.length, 1);
        const [interrupt] = interrupts;
        assert.equal(interrupt.reason, "tool_call");
        assert.equal(interrupt.toolCallId, started.toolCallId);
        assert.ok(interrupt.message.startsWith(`Run ${APPROVAL_TOOL}(`), interrupt.message);
        assert.deepEqual(
          agent.pendingInterrupts.map((pending) => pending.id),
          [interrupt.id],
          "the client keeps the interrupt pending",
        );

        // A run that leaves it unanswered: the client refuses to send it.
        await assert.rejects(agent.runAgent(params), /interrupt/);
        assert.equal(agent.sentBodies.length, 1, "the refused run never reached the bridge");

        const resume = [{ interruptId: interrupt.id, ...entry }];
        const second = await run(agent, { ...params, resume });
        assert.deepEqual(agent.sentBodies[1].resume, resume);
        assert.deepEqual(eventsOf(second, EventType.TOOL_CALL_START), [], "no new call starts");
        const results = eventsOf(second, EventType.TOOL_CALL_RESULT);
        assert.deepEqual(
          results.map((event) => event.toolCallId),
          [started.toolCallId],
          "the result answers the original call",
        );
        assert.ok(told(results[0].content), `the model read: ${results[0].content}`);
        assert.deepEqual(agent.pendingInterrupts, [], "nothing is pending any more");
        const answer = second.result.newMessages.find((message) => message.role === "assistant");
        assert.ok(answer?.content.includes(results[0].content), `events: ${second.types}`);

        // A later turn: the answered call goes back with the result the client kept.
        agent.addMessage({ id: randomUUID(), role: "user", content: "Thanks, that is all." });
        const third = await run(agent, params);
        assert.deepEqual(eventsOf(third, EventType.TOOL_CALL_START), [], `events: ${third.types}`);
        const kept = agent.sentBodies[2].messages.filter(
          (message) => message.role === "tool" && message.toolCallId === started.toolCallId,
        );
        assert.deepEqual(
          kept.map((message) => message.content),
          [results[0].content],
          "the later turn carries the call's one result",
        );
      });
    }
  });
}

for (const model of SERVER_TOOL ? MODELS : []) {
  describe(`${model} with the server tool ${SERVER_TOOL} (@ag-ui/client ${CLIENT})`, () => {
    test("a server tool and a frontend tool in one turn", async () => {
      const agent = newAgent(MIXED_PROMPT);
      const params = { tools: TOOLS, forwardedProps: { model } };

      const first = await run(agent, params);
      const started = eventsOf(first, EventType.TOOL_CALL_START);
      const byName = Object.fromEntries(started.map((e) => [e.toolCallName, e.toolCallId]));
      assert.deepEqual(Object.keys(byName).sort(), ["change_background", SERVER_TOOL].sort());
      const serverResults = eventsOf(first, EventType.TOOL_CALL_RESULT);
      assert.deepEqual(
        serverResults.map((event) => event.toolCallId),
        [byName[SERVER_TOOL]],
        "the bridge answers its own call, and only that one",
      );
      // The client keeps the result as a tool message: the card can show it completed.
      const stored = agent.messages.find(
        (message) => message.role === "tool" && message.toolCallId === byName[SERVER_TOOL],
      );
      assert.ok(stored, `the client kept no tool message for the server call: ${first.types}`);
      assert.equal(stored.content, serverResults[0].content);
      // A string result comes as the string, not as JSON text (which a card shows in quotes).
      assert.ok(
        !isJsonString(stored.content),
        `the server's result came JSON-encoded: ${stored.content}`,
      );
      if (SERVER_RESULT !== undefined) assert.equal(stored.content, SERVER_RESULT);
      if (SPEAKS_1_0) {
        assert.deepEqual(
          first.finished[0].pendingToolCallIds,
          [byName.change_background],
          "only the frontend's call is pending",
        );
      }

      const { open, results } = answerOpenCalls(agent);
      assert.deepEqual(
        open.map((call) => call.function.name),
        ["change_background"],
        "the page runs only its own tool",
      );
      const history = structuredClone(agent.messages);

      const second = await run(agent, params);
      assert.deepEqual(eventsOf(second, EventType.TOOL_CALL_START), [], "no further tool calls");
      assert.deepEqual(eventsOf(second, EventType.TOOL_CALL_RESULT), []);
      const answer = second.result.newMessages.find((message) => message.role === "assistant");
      assert.ok(answer, `no assistant message in run 2; events: ${second.types}`);
      for (const content of [stored.content, results[0].content]) {
        assert.ok(answer.content.includes(content), `the answer does not quote ${content}`);
      }
      const sentTools = agent.sentBodies[1].messages.filter((m) => m.role === "tool");
      assert.deepEqual(
        sentTools.map((m) => [m.toolCallId, m.content]),
        [
          [byName[SERVER_TOOL], stored.content],
          [byName.change_background, results[0].content],
        ],
        "run 2 sends both results back, the server's as the client stored it",
      );

      // A client that keeps the server's result JSON-encoded (a history from before the bridge
      // sent strings as they are, an adapter that encodes every result) asks the same: the
      // Python side checks that this run's upstream request is the last one's, byte for byte.
      const isServerResult = (message) =>
        message.role === "tool" && message.toolCallId === byName[SERVER_TOOL];
      const encoded = history.map((message) =>
        isServerResult(message)
          ? { ...message, content: JSON.stringify(message.content) }
          : message,
      );
      const again = newAgent(MIXED_PROMPT, encoded);
      const third = await run(again, params);
      const sentAgain = again.sentBodies[0].messages.find(isServerResult);
      assert.equal(sentAgain.content, JSON.stringify(stored.content));
      const answerAgain = third.result.newMessages.find((message) => message.role === "assistant");
      assert.equal(answerAgain?.content, answer.content, "the model read the same either way");
    });
  });
}

const SHARED_STATE = process.env.AGUI_SHARED_STATE && JSON.parse(process.env.AGUI_SHARED_STATE);
const PREDICT_STATE = JSON.parse(process.env.AGUI_PREDICT_STATE ?? "null");
// The scripted model writes a plan of three steps and ticks them off one update_state a turn,
// and adds a to-do (bridge/cli/demo/state.py).
const PLAN_PROMPT = "Make a plan to bake a cake";
const TODO_PROMPT = "Add a to-do: water the plants";
const NEW_TODO = { text: "water the plants", done: false };

/**
 * A run's state events as the client took them: every STATE_DELTA on the wire reached the
 * subscriber (through `onStateDeltaEvent` too), each right after its update_state result, and
 * the client applied each one (a patch it cannot apply is a warning, which fails the run); the one
 * STATE_SNAPSHOT comes right before RUN_FINISHED, is the state those deltas made, and is the
 * state the agent holds after the run. With --predict-state, CUSTOM PredictState is the first
 * event of each model step (CopilotKit's converter forgets it at each step's start and end).
 * The run's deltas.
 */
function assertStateEvents(agent, seen) {
  const frames = wireFrames(agent.wires.at(-1).text);
  const deltas = eventsOf(seen, EventType.STATE_DELTA);
  assert.ok(deltas.length > 0, `no STATE_DELTA; events: ${seen.types}`);
  assert.deepEqual(
    deltas.map((event) => event.delta),
    frames.filter((frame) => frame.type === EventType.STATE_DELTA).map((frame) => frame.delta),
    "every STATE_DELTA on the wire reached the subscriber",
  );
  assert.deepEqual(seen.deltas, deltas, "onStateDeltaEvent saw each one");
  seen.types.forEach((type, at) => {
    if (type === EventType.STATE_DELTA) {
      assert.equal(seen.types[at - 1], EventType.TOOL_CALL_RESULT, `events: ${seen.types}`);
    }
  });
  for (const event of eventsOf(seen, EventType.TOOL_CALL_START)) {
    assert.equal(event.toolCallName, "update_state");
  }

  const snapshots = eventsOf(seen, EventType.STATE_SNAPSHOT);
  assert.equal(snapshots.length, 1, `events: ${seen.types}`);
  assert.deepEqual(seen.snapshots, snapshots, "onStateSnapshotEvent saw it");
  assert.deepEqual(seen.types.slice(-2), [EventType.STATE_SNAPSHOT, EventType.RUN_FINISHED]);
  const [{ snapshot }] = snapshots;
  assert.deepEqual(snapshot, agent.state, "the snapshot is the state the agent holds");
  // onStateChanged: once per delta applied, then once for the snapshot, which changes nothing.
  assert.equal(seen.states.length, deltas.length + 1, "the client applied every delta");
  assert.deepEqual(seen.states.at(-2), snapshot, "the deltas alone made the snapshot's state");

  if (PREDICT_STATE) {
    const modelSteps = seen.events.flatMap((event, at) =>
      event.type === EventType.STEP_STARTED && event.stepName === "model" ? [at] : [],
    );
    assert.ok(modelSteps.length > 0, `no model step; events: ${seen.types}`);
    assert.deepEqual(
      seen.customs.map((event) => [event.name, event.value]),
      modelSteps.map(() => ["PredictState", PREDICT_STATE]),
      "onCustomEvent saw PredictState, once per model step",
    );
    assert.deepEqual(
      modelSteps.map((at) => seen.events[at + 1]),
      seen.customs,
      "each right after its model step's start",
    );
  }
  return deltas;
}

for (const model of SHARED_STATE ? MODELS : []) {
  describe(`${model}: shared state (@ag-ui/client ${CLIENT})`, () => {
    test("the model plans and ticks the steps off, then adds a to-do: agent.state follows", async () => {
      const agent = newAgent(PLAN_PROMPT, undefined, SHARED_STATE);
      const params = { tools: [], forwardedProps: { model } };

      const first = await run(agent, params);
      assert.deepEqual(agent.sentBodies[0].state, SHARED_STATE, "run 1 sends the initial state");
      assert.equal(assertStateEvents(agent, first).length, 4, "the plan, then three ticks");
      const { steps, ...rest } = agent.state;
      assert.deepEqual(rest, SHARED_STATE, "the rest of the state is as it was");
      assert.equal(steps?.length, 3, `state: ${JSON.stringify(agent.state)}`);
      assert.ok(
        steps.every((step) => step.status === "completed" && step.description),
        `steps: ${JSON.stringify(steps)}`,
      );
      const answer = first.result.newMessages.findLast((message) => message.role === "assistant");
      assert.match(answer?.content ?? "", /the 3 steps of the plan are complete/);
      const afterPlan = structuredClone(agent.state);

      // The next turn: the client sends the state it holds, and the model edits that.
      agent.addMessage({ id: randomUUID(), role: "user", content: TODO_PROMPT });
      const second = await run(agent, params);
      assert.deepEqual(agent.sentBodies[1].state, afterPlan, "run 2 sends the state it holds");
      assert.equal(assertStateEvents(agent, second).length, 1);
      assert.deepEqual(agent.state, { ...afterPlan, todos: [...afterPlan.todos, NEW_TODO] });
    });
  });
}

for (const model of SERVER_TOOL || APPROVAL_TOOL || MCP_APP_TOOL || SHARED_STATE ? [] : MODELS) {
  describe(`${model} (@ag-ui/client ${CLIENT})`, () => {
    test("tool calls, then the answer from their results", async () => {
      const agent = newAgent(TOOLS_PROMPT);
      const params = { tools: TOOLS, forwardedProps: { model } };

      const first = await run(agent, params);
      assertReasoning(first, model);
      const started = eventsOf(first, EventType.TOOL_CALL_START);
      assert.deepEqual(
        started.map((event) => event.toolCallName).sort(),
        ["change_background", "get_weather"],
        "the model calls both tools in parallel",
      );

      const assistants = agent.messages.filter((message) => message.role === "assistant");
      assert.equal(assistants.length, 1, "one assistant message holds the turn's tool calls");
      const calls = assistants[0].toolCalls ?? [];
      assert.deepEqual(
        calls.map((call) => call.id),
        started.map((event) => event.toolCallId),
      );
      for (const call of calls) {
        assert.doesNotThrow(
          () => JSON.parse(call.function.arguments),
          `arguments of ${call.function.name} are not JSON: ${call.function.arguments}`,
        );
      }
      if (SPEAKS_1_0) {
        assert.deepEqual(
          first.finished[0].pendingToolCallIds,
          calls.map((call) => call.id),
          "RUN_FINISHED names every call as pending",
        );
      }
      const reasoningAt = agent.messages.findIndex((message) => message.role === "reasoning");
      if (model === PLAIN_MODEL) {
        assert.equal(reasoningAt, -1);
      } else {
        assert.ok(reasoningAt >= 0, "the client keeps a reasoning message");
        assert.ok(agent.messages[reasoningAt].content.length > 0);
        assert.ok(
          reasoningAt < agent.messages.indexOf(assistants[0]),
          "the reasoning message comes before the assistant message it belongs to",
        );
      }

      // Kept by the client from REASONING_ENCRYPTED_VALUE (Responses API upstreams only).
      const kept = agent.messages
        .filter((message) => message.role === "reasoning" && message.encryptedValue)
        .map((message) => [message.id, message.encryptedValue]);

      const results = calls.map((call) => ({
        id: randomUUID(),
        role: "tool",
        toolCallId: call.id,
        content: JSON.stringify(toolResult(call)),
      }));
      agent.addMessages(results);

      const second = await run(agent, params);
      assertReasoning(second, model);
      assert.deepEqual(eventsOf(second, EventType.TOOL_CALL_START), [], "no further tool calls");
      if (SPEAKS_1_0) assert.deepEqual(second.finished[0].pendingToolCallIds, []);
      const answer = second.result.newMessages.find((message) => message.role === "assistant");
      assert.ok(answer, `no assistant message in run 2; events: ${second.types}`);
      for (const result of results) {
        assert.ok(
          answer.content.includes(result.content),
          `the answer does not quote the tool result ${result.content}:\n${answer.content}`,
        );
      }

      assert.equal(agent.sentBodies.length, 2);
      const sentRoles = agent.sentBodies[1].messages
        .map((message) => message.role)
        .filter((role, i, roles) => role !== "reasoning" || roles[i - 1] !== "reasoning");
      const expectedRoles =
        model === PLAIN_MODEL
          ? ["user", "assistant", "tool", "tool"]
          : ["user", "reasoning", "assistant", "tool", "tool"];
      assert.deepEqual(sentRoles, expectedRoles, "what the client sent back in run 2");
      if (model !== PLAIN_MODEL) {
        const sentReasoning = agent.sentBodies[1].messages[1];
        assert.equal(sentReasoning.content, agent.messages[reasoningAt].content);
      }
      if (API === "responses" && model !== PLAIN_MODEL) {
        assert.equal(kept.length, 1, "the client keeps the encrypted reasoning on its message");
        const sent = agent.sentBodies[1].messages.filter((message) => message.encryptedValue);
        assert.deepEqual(
          sent.map((message) => [message.id, message.encryptedValue]),
          kept,
          "run 2 sends the encrypted reasoning back",
        );
      }
    });

    test("a greeting without tools", async () => {
      const agent = newAgent("Hello there! How are you today?");
      const seen = await run(agent, { forwardedProps: { model } });
      assertReasoning(seen, model);
      assert.deepEqual(eventsOf(seen, EventType.TOOL_CALL_START), []);
      const texts = seen.result.newMessages.filter((message) => message.role === "assistant");
      assert.equal(texts.length, 1, `expected one assistant message; events: ${seen.types}`);
      assert.ok(texts[0].content.trim().length > 0, "the answer has text");
    });
  });
}
