// The shared-state page (`/state`): a chat beside a to-do list and a document, both rendered from
// the agent's state, for a bridge run with `--shared-state` and
// `--predict-state document=write_document.document`.
//
// - The model edits the to-dos with the bridge's server tool `update_state` (JSON Patch): the
//   bridge sends STATE_DELTA, CopilotKit applies it to `agent.state`, the list re-renders. The
//   state goes back to the bridge with every run, so the model sees the list as it is now.
// - `write_document` is this page's tool: its handler sets `state.document`. Before it runs, while
//   the model is still writing the call, the bridge's CUSTOM PredictState tells CopilotKit that
//   the call's `document` argument is `state.document`, and CopilotKit copies the argument into
//   the state as it streams in: the panel fills as the model writes.
//
// The provider is `<CopilotKit>`, not `<CopilotKitProvider>`: in react-core 1.74 only the former
// mounts the listener that reads PredictState (CopilotListeners: on each TOOL_CALL_ARGS of a
// predicted tool, `agent.setState` with the argument parsed so far).
import {
  CopilotChat,
  CopilotKit,
  useAgent,
  UseAgentUpdate,
  useCopilotKit,
  useFrontendTool,
} from "@copilotkit/react-core/v2";
import { useCallback, useEffect, useState } from "react";
import { z } from "zod";

import { ErrorBanners, Header, PROPERTIES, type ReportedError, WIRING_PROPS } from "./shell";

type Todo = { text: string; done: boolean };
type SharedState = { todos: Todo[]; document: string };

/** The state a new conversation starts from: a JSON object, so the bridge shares it. */
const INITIAL_STATE: SharedState = { todos: [], document: "" };

/** The agent's state, read as this page's; whatever is missing or malformed reads as empty. */
function readState(state: unknown): SharedState {
  const shared = (state ?? {}) as Partial<Record<keyof SharedState, unknown>>;
  const todos = Array.isArray(shared.todos) ? (shared.todos as unknown[]) : [];
  return {
    todos: todos.map((item) => {
      const todo = (item ?? {}) as Partial<Record<keyof Todo, unknown>>;
      return { text: String(todo.text ?? ""), done: todo.done === true };
    }),
    document: typeof shared.document === "string" ? shared.document : "",
  };
}

/** The agent and its state, re-rendered on every change of the state. */
function useSharedState() {
  const { agent } = useAgent({ updates: [UseAgentUpdate.OnStateChanged] });
  useEffect(() => {
    // Through the runtime, the agent is swapped for the real one once /info answers: each starts
    // empty, and each gets the initial state.
    if (Object.keys(agent.state ?? {}).length === 0) agent.setState(INITIAL_STATE);
  }, [agent]);
  return { agent, state: readState(agent.state) };
}

/** write_document's card in the chat: how much of the document the call holds so far. */
function DocumentCard({
  args,
  status,
}: {
  args: Partial<{ document: string }>;
  status: string;
}) {
  const written = args.document?.length ?? 0;
  return (
    <div
      className="tool-card"
      data-testid="tool-card"
      data-tool-name="write_document"
      data-status={status}
    >
      <div className="tool-card-head">
        <span className="tool-name">write_document</span>
        <span className={`tool-status tool-status-${status}`}>{status}</span>
      </div>
      <p className="tool-progress">
        {status === "complete" ? "Written" : "Writing"}: {written} characters, shown in the
        document panel.
      </p>
    </div>
  );
}

/** The page's tool: the model writes the document by calling it; it runs here. */
function WriteDocument() {
  const { agent } = useAgent({ updates: [] });
  useFrontendTool(
    {
      name: "write_document",
      description: "Write the document the user sees, whole (it replaces the one shown)",
      parameters: z.object({ document: z.string().describe("The whole document, as text") }),
      handler: async ({ document }) => {
        agent.setState({ ...readState(agent.state), document });
        return `The document is written (${document.length} characters).`;
      },
      render: DocumentCard,
    },
    [agent],
  );
  return null;
}

function TodoList({ todos }: { todos: Todo[] }) {
  return (
    <section className="panel todos" data-testid="todos">
      <h2>To-dos</h2>
      {todos.length === 0 ? (
        <p className="empty">Nothing to do. Ask: “Add a to-do: water the plants”.</p>
      ) : (
        <ul>
          {todos.map((todo, index) => (
            <li key={index} data-testid="todo" data-done={todo.done}>
              <input type="checkbox" checked={todo.done} readOnly aria-label={todo.text} />
              <span className={todo.done ? "done" : ""}>{todo.text}</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function DocumentPanel({ document }: { document: string }) {
  return (
    <section className="panel document" data-testid="document-panel">
      <h2>Document</h2>
      {document ? (
        <p data-testid="document">{document}</p>
      ) : (
        <p className="empty">No document yet. Ask: “Please write_document about the cake”.</p>
      )}
    </section>
  );
}

function SharedStatePanels() {
  const { state } = useSharedState();
  return (
    <aside className="state-panels">
      <TodoList todos={state.todos} />
      <DocumentPanel document={state.document} />
    </aside>
  );
}

/** Shows (and records, for the tests) every error CopilotKit reports. */
function ReportErrors({ onReport }: { onReport: (error: ReportedError) => void }) {
  const { copilotkit } = useCopilotKit();
  useEffect(() => {
    const subscription = copilotkit.subscribe({
      onError: ({ error, code }) => onReport({ code: String(code), message: error.message }),
    });
    return () => subscription.unsubscribe();
  }, [copilotkit, onReport]);
  return null;
}

export function StatePage() {
  const [errors, setErrors] = useState<ReportedError[]>([]);
  const report = useCallback((reported: ReportedError) => {
    window.copilotErrors.push(reported);
    setErrors((seen) => [...seen, reported]);
  }, []);
  return (
    <CopilotKit {...WIRING_PROPS} properties={PROPERTIES}>
      <ReportErrors onReport={report} />
      <WriteDocument />
      <div className="page">
        <Header title="agui-bridge × CopilotKit: shared state" />
        <ErrorBanners errors={errors} />
        <div className="state-layout">
          <SharedStatePanels />
          <main className="chat">
            <CopilotChat
              labels={{ chatInputPlaceholder: "Add a to-do, tick one off, ask for a document…" }}
            />
          </main>
        </div>
      </div>
    </CopilotKit>
  );
}
