// A CopilotKit v2 chat whose agent is agui-bridge, with two frontend tools; the bridge's own
// (server) tools get a card too, with the result the bridge sent.
//
//   ?wiring=runtime (default)  the page talks to CopilotRuntime (server.mjs), whose HttpAgent
//                              talks to the bridge
//   ?wiring=direct             the page's own HttpAgent talks to the bridge (which must allow
//                              this page's origin: `agui-bridge demo --cors-origin …`)
//   ?model=NAME                sent as forwardedProps.model (the bridge's model choice)
import "@copilotkit/react-core/v2/styles.css";
import "./page.css";

import { HttpAgent } from "@ag-ui/client";
import {
  CopilotChat,
  CopilotKitProvider,
  type CopilotKitProviderProps,
  useAgent,
  UseAgentUpdate,
  useFrontendTool,
  useRenderTool,
} from "@copilotkit/react-core/v2";
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";

type Wiring = "runtime" | "direct";
type ToolCall = { name: string; args: Record<string, unknown> };
type ReportedError = { code: string; message: string };

declare global {
  interface Window {
    /** Every frontend tool call, in order, as its handler received it (read by the tests). */
    toolCalls: ToolCall[];
    /** Every error CopilotKit reported through the provider's onError. */
    copilotErrors: ReportedError[];
  }
}

const query = new URLSearchParams(window.location.search);
const WIRING: Wiring = query.get("wiring") === "direct" ? "direct" : "runtime";
const MODEL = query.get("model") ?? "";
const RUNTIME_URL = "/api/copilotkit";
const BRIDGE_URL =
  document.querySelector<HTMLMetaElement>('meta[name="agui-bridge-url"]')?.content ?? "";

window.toolCalls = [];
window.copilotErrors = [];

/** What wires the provider to its agent: the runtime's URL, or the bridge itself. */
function wiringProps(): Partial<CopilotKitProviderProps> {
  if (WIRING === "runtime") return { runtimeUrl: RUNTIME_URL };
  // No runtime: the provider takes the agent instance. `agents__unsafe_dev_only` is CopilotKit's
  // name for a local, unsecured agent; `selfManagedAgents` is the same map for production (a
  // CopilotKit Enterprise feature: without a license key it warns on every load).
  return { agents__unsafe_dev_only: { default: new HttpAgent({ url: BRIDGE_URL }) } };
}
const WIRING_PROPS = wiringProps();
// The provider sends `properties` as every run's forwardedProps; the bridge reads `model` there.
const PROPERTIES = MODEL ? { model: MODEL } : {};

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
  parameters: unknown;
  status: "inProgress" | "executing" | "complete";
  result: string | undefined;
};

/**
 * The card of a tool this page does not define: one of the bridge's server tools, which the bridge
 * runs inside the run and answers with TOOL_CALL_RESULT. CopilotKit stores that result as the
 * call's tool message, so the card shows it, complete; the page registers no handler for it, so
 * nothing runs in the browser.
 */
function ServerToolCard({ name, parameters, status, result }: AnyToolProps) {
  const args =
    parameters !== null && typeof parameters === "object"
      ? (parameters as Record<string, unknown>)
      : {};
  return <ToolCard name={name} args={args} status={status} result={result} runsOn="server" />;
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
  useRenderTool({ name: "*", render: ServerToolCard }, []);
  return null;
}

/** Whether the agent is running (its follow-up runs included), for people and tests alike. */
function RunStatus() {
  const { agent } = useAgent({ updates: [UseAgentUpdate.OnRunStatusChanged] });
  const state = agent.isRunning ? "running" : "idle";
  return (
    <span className={`run-status run-status-${state}`} data-testid="run-status" data-state={state}>
      {state}
    </span>
  );
}

function App() {
  const [errors, setErrors] = useState<ReportedError[]>([]);
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
      <div className="page">
        <header>
          <h1>agui-bridge × CopilotKit</h1>
          <p data-testid="wiring">
            wiring <b>{WIRING}</b> · model <b>{MODEL || "the bridge's default"}</b> · <RunStatus />
          </p>
        </header>
        {errors.map((error, index) => (
          <p className="error" data-testid="error" key={index}>
            {error.code}: {error.message}
          </p>
        ))}
        <main className="chat">
          <CopilotChat
            labels={{
              chatInputPlaceholder: "Ask for the weather, the time, a background colour…",
            }}
          />
        </main>
      </div>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
