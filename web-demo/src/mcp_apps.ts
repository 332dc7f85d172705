// MCP Apps (README "Generative UI (MCP Apps)"): a tool of the bridge's --mcp servers that brings
// a UI. After its result the bridge sends ACTIVITY_SNAPSHOT {activityType: "mcp-apps", content:
// {result, resourceUri, serverHash, serverId, toolInput}}; the widget's HTML is the ui://
// resource, read through a proxied run (forwardedProps.__proxiedMCPRequest, answered by the
// bridge without the model, the result in RUN_FINISHED.result).
//
// The page shows the activity as a card and the widget as a sandboxed preview. Hosting it fully
// (the widget calling its tools, the host answering its ui/* messages) is CopilotKit's job.

import { HttpAgent, type AgentSubscriber } from "@ag-ui/client";

export const MCP_APPS_ACTIVITY = "mcp-apps";

/** An `mcp-apps` activity's content, as the bridge sends it. */
export interface McpAppActivity {
  resourceUri: string;
  serverHash: string;
  serverId: string;
  toolInput: Record<string, unknown>;
  /** The tool's MCP CallToolResult. */
  result: Record<string, unknown>;
}

/** The content read as an `mcp-apps` activity; undefined when it is not one. */
export function readActivity(content: unknown): McpAppActivity | undefined {
  if (!isRecord(content)) return undefined;
  const { resourceUri, serverHash, serverId, toolInput, result } = content;
  if (typeof resourceUri !== "string" || typeof serverHash !== "string") return undefined;
  if (typeof serverId !== "string") return undefined;
  return {
    resourceUri,
    serverHash,
    serverId,
    toolInput: isRecord(toolInput) ? toolInput : {},
    result: isRecord(result) ? result : {},
  };
}

/** The text parts of an MCP result, joined; what the model read of it. */
export function resultText(result: Record<string, unknown>): string {
  const parts = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  return parts
    .flatMap((part) => (isRecord(part) && typeof part.text === "string" ? [part.text] : []))
    .join("\n");
}

/** Where a widget's request goes: the chat's agent, as the person is signed in to it. */
export interface WidgetTarget {
  url: string;
  headers: Record<string, string>;
  threadId: string;
  /** The page's hooks for the runs it makes (the event inspector). */
  subscriber: AgentSubscriber;
}

/**
 * The widget's HTML: `resources/read` of its ui:// resource through a proxied run, on an agent
 * of its own (the chat's may be running) with the chat's thread and no messages.
 */
export async function readWidgetHtml(target: WidgetTarget, app: McpAppActivity): Promise<string> {
  const { url, headers, threadId } = target;
  const agent = new HttpAgent({ url, headers, threadId });
  let failure: string | undefined;
  const { result } = await agent.runAgent(
    {
      forwardedProps: {
        __proxiedMCPRequest: {
          serverHash: app.serverHash,
          serverId: app.serverId,
          method: "resources/read",
          params: { uri: app.resourceUri },
        },
      },
    },
    {
      ...target.subscriber,
      onRunErrorEvent: (params) => {
        failure = params.event.message;
        return target.subscriber.onRunErrorEvent?.(params);
      },
    },
  );
  if (failure !== undefined) throw new Error(failure);
  if (!isRecord(result)) throw new Error("the bridge answered no result");
  if (result.isError === true) {
    throw new Error(typeof result.error === "string" ? result.error : resultText(result));
  }
  const contents = Array.isArray(result.contents) ? (result.contents as unknown[]) : [];
  const items = contents.filter(isRecord);
  const item = items.find((entry) => entry.uri === app.resourceUri) ?? items[0];
  if (typeof item?.text === "string") return item.text;
  if (typeof item?.blob === "string") {
    const bytes = Uint8Array.from(atob(item.blob), (char) => char.charCodeAt(0));
    return new TextDecoder().decode(bytes);
  }
  throw new Error(`${app.resourceUri} holds no HTML`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
