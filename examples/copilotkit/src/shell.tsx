// What the example's pages share: the wiring the query asks for, the errors CopilotKit reports,
// and the run-status badge the tests wait on.
import { HttpAgent } from "@ag-ui/client";
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

/** What wires the provider to its agent: the runtime's URL, or the bridge itself. */
function wiringProps(): Pick<CopilotKitProviderProps, "runtimeUrl" | "agents__unsafe_dev_only"> {
  if (WIRING === "runtime") return { runtimeUrl: RUNTIME_URL };
  // No runtime: the provider takes the agent instance. `agents__unsafe_dev_only` is CopilotKit's
  // name for a local, unsecured agent; `selfManagedAgents` is the same map for production (a
  // CopilotKit Enterprise feature: without a license key it warns on every load).
  return { agents__unsafe_dev_only: { default: new HttpAgent({ url: BRIDGE_URL }) } };
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
