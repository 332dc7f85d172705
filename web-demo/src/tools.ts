// The frontend tools: the model asks for them, the browser runs them, and their results go back
// to the model in a follow-up run. One changes the page; one returns (made-up, local) data.

import type { Tool } from "@ag-ui/client";

export const FRONTEND_TOOLS: Tool[] = [
  {
    name: "get_weather",
    description: "Get the current weather for a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "The city, e.g. Paris" } },
      required: ["city"],
    },
  },
  {
    name: "change_background",
    description: "Change the background colour of the user's page.",
    parameters: {
      type: "object",
      properties: {
        color: { type: "string", description: "A CSS colour: a name like lightblue, or #rrggbb" },
      },
      required: ["color"],
    },
  },
];

/** The page's own tools; any other the model calls is the bridge's (a server tool). */
export const FRONTEND_TOOL_NAMES = new Set(FRONTEND_TOOLS.map((tool) => tool.name));

/**
 * The bridge's shared-state tool (`--shared-state`, on in `agui-bridge demo`): an edit that
 * applies shows as the state cards it changes, not as a tool card; one that fails or is declined
 * gets its tool card, so the reason stays on the page.
 */
export const STATE_TOOL = "update_state";

/** What a tool gave back: `content` goes to the model; `error` marks a failed call. */
export interface ToolOutcome {
  content: string;
  error?: string;
}

const CONDITIONS = ["sunny", "partly cloudy", "cloudy", "light rain", "windy", "clear"];

/** Runs a tool call in the browser. `argumentsJson` is the call's arguments as streamed. */
export function runTool(name: string, argumentsJson: string): ToolOutcome {
  let args: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(argumentsJson || "{}");
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      return failure("the arguments are not a JSON object");
    }
    args = parsed as Record<string, unknown>;
  } catch {
    return failure("the arguments are not valid JSON");
  }
  switch (name) {
    case "get_weather":
      return getWeather(args);
    case "change_background":
      return changeBackground(args);
    default:
      return failure(`this page has no tool named ${JSON.stringify(name)}`);
  }
}

function getWeather(args: Record<string, unknown>): ToolOutcome {
  const city = typeof args.city === "string" ? args.city.trim() : "";
  if (!city) return failure("get_weather needs a city");
  // Made-up but stable: the same city always gets the same weather.
  let hash = 0;
  for (const char of city.toLowerCase()) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  const weather = {
    city,
    temperatureC: 8 + (hash % 20),
    conditions: CONDITIONS[hash % CONDITIONS.length],
  };
  return { content: JSON.stringify(weather) };
}

function changeBackground(args: Record<string, unknown>): ToolOutcome {
  const color = typeof args.color === "string" ? args.color.trim() : "";
  if (!color || !CSS.supports("color", color)) {
    return failure(`${JSON.stringify(color)} is not a CSS colour`);
  }
  document.documentElement.style.setProperty("--page-bg", color);
  return { content: JSON.stringify({ ok: true, background: color }) };
}

/** Puts the page's own background back. */
export function resetBackground(): void {
  document.documentElement.style.removeProperty("--page-bg");
}

function failure(message: string): ToolOutcome {
  return { content: JSON.stringify({ ok: false, error: message }), error: message };
}
