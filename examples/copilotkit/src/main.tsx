// A CopilotKit v2 chat whose agent is agui-bridge, with two frontend tools; the bridge's own
// (server) tools get a card too, with the result the bridge sent.
//
//   ?wiring=runtime (default)  the page talks to CopilotRuntime (server.mjs), whose HttpAgent
//                              talks to the bridge
//   ?wiring=direct             the page's own HttpAgent talks to the bridge (which must allow
//                              this page's origin: `agui-bridge demo --cors-origin …`)
//   ?model=NAME                sent as forwardedProps.model (the bridge's model choice)
//   &thread=ID                 (direct) the chat's thread, added when missing: a reload shows it
//                              again, and an answer still going on, through ThreadAgent's
//                              connect() (src/shell.tsx; the bridge with --threads)
//
// A server tool under approval (`agui-bridge … --approve PATTERN`, or `@requires_approval`) ends
// the run with an AG-UI interrupt; `useInterrupt` shows an approval card for it, and Approve /
// Deny resumes the interrupted run. A server tool that asks the person (`--ask-user`) ends it
// with an "input_required" interrupt: a form from its schema (src/question_card.tsx).
//
// The chat takes attachments (its "+" menu, drop or paste): images, PDFs, text files and audio up
// to 5 MB each, sent as AG-UI parts of the user message; a file it refuses is said under the
// header.
//
// At `/state` (same query), the shared-state page instead: src/state_page.tsx.
import "@copilotkit/react-core/v2/styles.css";
import "./page.css";

import {
  type AttachmentsConfig,
  CopilotChat,
  CopilotKitProvider,
  type Interrupt,
  type InterruptResolveFn,
  useAgent,
  useFrontendTool,
  useInterrupt,
  useRenderTool,
} from "@copilotkit/react-core/v2";
import { StrictMode, useEffect, useState, useSyncExternalStore } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";

import {
  ErrorBanners,
  Header,
  pageThread,
  PROPERTIES,
  type ReportedError,
  WIRING_PROPS,
} from "./shell";
import { Questions } from "./question_card";
import { StatePage } from "./state_page";

type ToolCall = { name: string; args: Record<string, unknown> };

declare global {
  interface Window {
    /** Every frontend tool call, in order, as its handler received it (read by the tests). */
    toolCalls: ToolCall[];
    /** Every answer the approval card gave (resolve's payload), in order (read by the tests). */
    approvals: ApprovalPayload[];
  }
}

window.toolCalls = [];
window.approvals = [];

/** Fake weather, the same for a city every time. */
function fakeWeather(city: string) {
  const seed = [...city.toLowerCase()].reduce((sum, c) => sum + c.charCodeAt(0), 0);
  const conditions = ["sunny", "partly cloudy", "light rain", "windy"][seed % 4];
  return { city, temperature: 12 + (seed % 15), conditions };
}

type ToolCardProps = {
  name: string;
  args: Partial<Record<string, unknown>>;
  status: string;
  result?: string;
  /** Where the tool runs: "browser" (this page's handler) or "server" (the bridge). */
  runsOn?: "browser" | "server";
};

function ToolCard({ name, args, status, result, runsOn = "browser" }: ToolCardProps) {
  return (
    <div
      className={`tool-card tool-card-${runsOn}`}
      data-testid="tool-card"
      data-tool-name={name}
      data-status={status}
      data-runs-on={runsOn}
    >
      <div className="tool-card-head">
        <span className="tool-name">{name}</span>
        {runsOn === "server" && <span className="tool-where">run by the bridge</span>}
        <span className={`tool-status tool-status-${status}`}>{status}</span>
      </div>
      <pre data-testid="tool-args">{JSON.stringify(args)}</pre>
      {result !== undefined && <pre data-testid="tool-result">{result}</pre>}
    </div>
  );
}

/** What CopilotKit hands a catch-all (`"*"`) renderer. */
type AnyToolProps = {
  name: string;
  toolCallId: string;
  parameters: unknown;
  status: "inProgress" | "executing" | "complete";
  result: string | undefined;
};

/**
 * The bridge's TOOL_CALL_RESULT contents, by tool call id, as they streamed. Needed for a call
 * that waited for approval: CopilotKit's useInterrupt stores the answer (`{"approved": true}`) as
 * the call's tool message before resuming, and when the run finishes it keeps that first tool
 * message and drops the bridge's result. The card shows what the bridge said all the same.
 */
const bridgeResults = new Map<string, string>();
const resultListeners = new Set<() => void>();
function subscribeToResults(listener: () => void) {
  resultListeners.add(listener);
  return () => void resultListeners.delete(listener);
}
function useBridgeResult(toolCallId: string): string | undefined {
  return useSyncExternalStore(subscribeToResults, () => bridgeResults.get(toolCallId));
}

/** The tool calls an open approval card is about: their server cards say they wait for it. */
const awaitingApproval = new Set<string>();
function setAwaiting(toolCallId: string, waiting: boolean) {
  if (waiting) awaitingApproval.add(toolCallId);
  else awaitingApproval.delete(toolCallId);
  for (const listener of resultListeners) listener();
}
function useAwaitingApproval(toolCallId: string): boolean {
  return useSyncExternalStore(subscribeToResults, () => awaitingApproval.has(toolCallId));
}

/** Records the bridge's tool results as they stream (see bridgeResults). */
function BridgeResults() {
  const { agent } = useAgent({ updates: [] });
  useEffect(() => {
    const subscription = agent.subscribe({
      onToolCallResultEvent: ({ event }) => {
        bridgeResults.set(event.toolCallId, event.content);
        for (const listener of resultListeners) listener();
      },
    });
    return () => subscription.unsubscribe();
  }, [agent]);
  return null;
}

/**
 * The card of a tool this page does not define: one of the bridge's server tools, which the bridge
 * runs inside the run and answers with TOOL_CALL_RESULT. CopilotKit stores that result as the
 * call's tool message, so the card shows it, complete; the page registers no handler for it, so
 * nothing runs in the browser. A call that waited for approval shows the bridge's result too, not
 * the approval CopilotKit stored in its place.
 */
function ServerToolCard({ name, toolCallId, parameters, status, result }: AnyToolProps) {
  const fromBridge = useBridgeResult(toolCallId);
  const awaiting = useAwaitingApproval(toolCallId);
  const args =
    parameters !== null && typeof parameters === "object"
      ? (parameters as Record<string, unknown>)
      : {};
  return (
    <ToolCard
      name={name}
      args={args}
      status={fromBridge !== undefined ? "complete" : awaiting ? "awaitingApproval" : status}
      result={fromBridge ?? result}
      runsOn="server"
    />
  );
}

/** What the approval card resolves an interrupt with (the bridge's responseSchema). */
type ApprovalPayload = {
  approved: boolean;
  editedArgs?: Record<string, unknown>;
  reason?: string;
};

/** The tool call an interrupt is about, found in the agent's messages by its id. */
function useInterruptedCall(toolCallId: string | undefined) {
  const { agent } = useAgent({ updates: [] });
  for (const message of agent.messages) {
    if (message.role !== "assistant") continue;
    const call = message.toolCalls?.find((toolCall) => toolCall.id === toolCallId);
    if (!call) continue;
    let args: Record<string, unknown> = {};
    try {
      args = JSON.parse(call.function.arguments || "{}") as Record<string, unknown>;
    } catch {
      // Shown as the interrupt's message says it; the bridge signed the original anyway.
    }
    return { name: call.function.name, args };
  }
  return undefined;
}

/**
 * The approval card for a `tool_call` interrupt: the tool, its arguments (editable, as JSON), the
 * bridge's message and expiry, Approve / Deny (with an optional reason). Approve resolves with
 * `{approved: true}` (and `editedArgs` when the arguments were changed), Deny with
 * `{approved: false, reason}`; useInterrupt then adds its tool message and resumes the
 * interrupted run, which runs the tool (or tells the model it was declined).
 */
function ApprovalCard({
  interrupt,
  resolve,
}: {
  interrupt: Interrupt;
  resolve: InterruptResolveFn;
}) {
  const call = useInterruptedCall(interrupt.toolCallId);
  const original = JSON.stringify(call?.args ?? {}, null, 2);
  const [argsText, setArgsText] = useState(original);
  const [reason, setReason] = useState("");
  const [problem, setProblem] = useState("");
  const [sent, setSent] = useState(false);
  useEffect(() => {
    const id = interrupt.toolCallId;
    if (!id) return;
    setAwaiting(id, true);
    return () => setAwaiting(id, false);
  }, [interrupt.toolCallId]);

  const answer = (payload: ApprovalPayload) => {
    window.approvals.push(payload);
    setSent(true);
    void resolve(payload, interrupt.id);
  };
  const approve = () => {
    if (argsText.trim() === original.trim()) return answer({ approved: true });
    let edited: unknown;
    try {
      edited = JSON.parse(argsText);
    } catch (error) {
      return setProblem(`The arguments are not JSON: ${(error as Error).message}`);
    }
    if (edited === null || typeof edited !== "object" || Array.isArray(edited)) {
      return setProblem("The arguments must be a JSON object.");
    }
    answer({ approved: true, editedArgs: edited as Record<string, unknown> });
  };
  const deny = () => answer({ approved: false, ...(reason.trim() ? { reason: reason.trim() } : {}) });

  return (
    <div
      className="approval-card"
      data-testid="approval-card"
      data-tool-name={call?.name ?? ""}
      data-tool-call-id={interrupt.toolCallId ?? ""}
    >
      <div className="approval-head">
        <span className="approval-title">Approve this call?</span>
        <span className="tool-name" data-testid="approval-tool">
          {call?.name ?? "a server tool"}
        </span>
      </div>
      {interrupt.message && (
        <p className="approval-message" data-testid="approval-message">
          {interrupt.message}
        </p>
      )}
      <label className="approval-label">
        arguments
        <textarea
          data-testid="approval-args"
          value={argsText}
          spellCheck={false}
          rows={Math.min(8, argsText.split("\n").length)}
          onChange={(event) => {
            setArgsText(event.target.value);
            setProblem("");
          }}
          disabled={sent}
        />
      </label>
      {problem && (
        <p className="approval-problem" data-testid="approval-problem">
          {problem}
        </p>
      )}
      <label className="approval-label">
        reason (if you deny)
        <input
          data-testid="approval-reason"
          value={reason}
          onChange={(event) => setReason(event.target.value)}
          disabled={sent}
        />
      </label>
      <div className="approval-actions">
        {interrupt.expiresAt && (
          <span className="approval-expiry" data-testid="approval-expiry">
            until {new Date(interrupt.expiresAt).toLocaleTimeString()}
          </span>
        )}
        <button
          type="button"
          className="approval-deny"
          data-testid="approval-deny"
          onClick={deny}
          disabled={sent}
        >
          Deny
        </button>
        <button
          type="button"
          className="approval-approve"
          data-testid="approval-approve"
          onClick={approve}
          disabled={sent}
        >
          {argsText.trim() === original.trim() ? "Approve" : "Approve with edits"}
        </button>
      </div>
    </div>
  );
}

/** Shows the approval card, in the chat, for each tool call the bridge holds for approval. */
function Approvals() {
  useInterrupt({
    enabled: ({ value }) => (value as Interrupt | undefined)?.reason === "tool_call",
    render: ({ interrupt, interrupts, resolve }) => (
      <div className="approvals">
        {(interrupts.length > 0 ? interrupts : interrupt ? [interrupt] : []).map((open) => (
          <ApprovalCard key={open.id} interrupt={open} resolve={resolve} />
        ))}
      </div>
    ),
  });
  return null;
}

function FrontendTools() {
  useFrontendTool({
    name: "get_weather",
    description: "Current weather for a city",
    parameters: z.object({ city: z.string().describe("The city, e.g. Paris") }),
    handler: async ({ city }) => {
      window.toolCalls.push({ name: "get_weather", args: { city } });
      return fakeWeather(city);
    },
    render: ToolCard,
  });
  useFrontendTool({
    name: "change_background",
    description: "Change the page background",
    parameters: z.object({ color: z.string().describe("A CSS color, e.g. lightblue") }),
    handler: async ({ color }) => {
      window.toolCalls.push({ name: "change_background", args: { color } });
      document.body.style.backgroundColor = color;
      return { background: color };
    },
    render: ToolCard,
  });
  // A renderer only (no handler): any other tool the model calls is the bridge's.
  useRenderTool({ name: "*", render: (props: AnyToolProps) => <ServerToolCard {...props} /> }, []);
  return null;
}

/** What the chat attaches, and how big (CopilotKit's default is 20 MB; the bridge takes a body of
 * 16 MiB by default, `--max-body-bytes`, and base64 makes a file a third bigger). */
const ATTACHMENTS = {
  enabled: true,
  accept: "image/*,application/pdf,text/*,.md,.csv,.json,audio/*",
  maxSize: 5 * 1024 * 1024,
} satisfies AttachmentsConfig;

function App() {
  const [errors, setErrors] = useState<ReportedError[]>([]);
  const [refused, setRefused] = useState<string[]>([]);
  const [threadId] = useState(pageThread);
  return (
    <CopilotKitProvider
      {...WIRING_PROPS}
      properties={PROPERTIES}
      onError={({ error, code }) => {
        const reported = { code: String(code), message: error.message };
        window.copilotErrors.push(reported);
        setErrors((seen) => [...seen, reported]);
      }}
    >
      <FrontendTools />
      <BridgeResults />
      <Approvals />
      <Questions />
      <div className="page">
        <Header title="agui-bridge × CopilotKit" />
        <ErrorBanners errors={errors} />
        {refused.map((message, index) => (
          <p className="attachment-problem" data-testid="attachment-problem" key={index}>
            {message}
          </p>
        ))}
        <main className="chat">
          <CopilotChat
            threadId={threadId}
            labels={{
              chatInputPlaceholder: "Ask for the weather, the time, a background colour…",
            }}
            attachments={{
              ...ATTACHMENTS,
              onUploadFailed: ({ message }) => setRefused((seen) => [...seen, message]),
            }}
          />
        </main>
      </div>
    </CopilotKitProvider>
  );
}

// `/state` is the shared-state page (src/state_page.tsx); any other path, the chat.
const PAGE = window.location.pathname === "/state" ? <StatePage /> : <App />;

createRoot(document.getElementById("root")!).render(<StrictMode>{PAGE}</StrictMode>);
