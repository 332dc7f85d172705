// What the example's pages share: the wiring the query asks for, the agent and its thread, the
// errors CopilotKit reports, and the run-status badge the tests wait on.
import { HttpAgent, randomUUID, type RunAgentInput } from "@ag-ui/client";
import { type CopilotKitProviderProps, useAgent, UseAgentUpdate } from "@copilotkit/react-core/v2";

export type Wiring = "runtime" | "direct";
export type ReportedError = { code: string; message: string };

declare global {
  interface Window {
    /** Every error CopilotKit reported (the provider's onError), read by the tests. */
    copilotErrors: ReportedError[];
  }
}
window.copilotErrors = [];

const query = new URLSearchParams(window.location.search);
export const WIRING: Wiring = query.get("wiring") === "direct" ? "direct" : "runtime";
export const MODEL = query.get("model") ?? "";
const RUNTIME_URL = "/api/copilotkit";
const BRIDGE_URL =
  document.querySelector<HTMLMetaElement>('meta[name="agui-bridge-url"]')?.content ?? "";

/**
 * An HttpAgent whose thread survives a reload. CopilotChat, given a `threadId`, calls the agent's
 * `connect()` when it mounts; a run with no messages is the bridge's hydrate (`--threads`): the
 * thread's messages and state, and a run still going on in it followed to its end.
 */
export class ThreadAgent extends HttpAgent {
  protected connect(input: RunAgentInput) {
    return this.run({ ...input, messages: [] });
  }
}

/** The thread the page was opened with (`&thread=…`, as a reload keeps it), if any. */
const OPENED_THREAD = query.get("thread");

/**
 * The direct wiring's thread, kept in the page's URL: a reload restores it, the page opened
 * without one starts a new thread. Through the runtime, none (as before): CopilotChat makes its
 * own.
 */
export function pageThread(): string | undefined {
  if (WIRING !== "direct") return undefined;
  if (OPENED_THREAD) return OPENED_THREAD;
  const thread = randomUUID();
  query.set("thread", thread);
  history.replaceState(history.state, "", `?${query}${window.location.hash}`);
  return thread;
}

/** What wires the provider to its agent: the runtime's URL, or the bridge itself. */
function wiringProps(): Pick<CopilotKitProviderProps, "runtimeUrl" | "agents__unsafe_dev_only"> {
  if (WIRING === "runtime") return { runtimeUrl: RUNTIME_URL };
  // No runtime: the provider takes the agent instance. `agents__unsafe_dev_only` is CopilotKit's
  // name for a local, unsecured agent; `selfManagedAgents` is the same map for production (a
  // CopilotKit Enterprise feature: without a license key it warns on every load).
  // Opened with a thread, the page restores it; a new thread has nothing to restore, and a plain
  // HttpAgent's connect() asks the bridge nothing (to a bridge without --threads, a hydrate would
  // be a run of the model with no messages).
  const Agent = OPENED_THREAD ? ThreadAgent : HttpAgent;
  return { agents__unsafe_dev_only: { default: new Agent({ url: BRIDGE_URL }) } };
}
export const WIRING_PROPS = wiringProps();
// The provider sends `properties` as every run's forwardedProps; the bridge reads `model` there.
export const PROPERTIES = MODEL ? { model: MODEL } : {};

/** Whether the agent is running (its follow-up runs included), for people and tests alike. */
export function RunStatus() {
  const { agent } = useAgent({ updates: [UseAgentUpdate.OnRunStatusChanged] });
  const state = agent.isRunning ? "running" : "idle";
  return (
    <span className={`run-status run-status-${state}`} data-testid="run-status" data-state={state}>
      {state}
    </span>
  );
}

/** The page's header: its title, the wiring, the model and the run status. */
export function Header({ title }: { title: string }) {
  return (
    <header>
      <h1>{title}</h1>
      <p data-testid="wiring">
        wiring <b>{WIRING}</b> · model <b>{MODEL || "the bridge's default"}</b> · <RunStatus />
      </p>
    </header>
  );
}

/** The errors CopilotKit reported, one banner each. */
export function ErrorBanners({ errors }: { errors: ReportedError[] }) {
  return errors.map((error, index) => (
    <p className="error" data-testid="error" key={index}>
      {error.code}: {error.message}
    </p>
  ));
}
