// A thread's messages on the page. A hydrate's MESSAGES_SNAPSHOT (the conversation before a
// reload, or before the run the hydrate follows) is drawn as turns with the cards the live
// events make: thinking (folded), answers, tool cards with their results, MCP App cards. The
// events that follow it go on in the last turn, as in any run. What a tool call's result and an
// MCP App's activity look like is decided here once, for the live events and a restored thread.

import type { ContentPart, Message, ToolCall } from "@ag-ui/client";

import { fromPart, type Attachment } from "./attachments";
import { MCP_APPS_ACTIVITY, readActivity, resultText, type McpAppActivity } from "./mcp_apps";
import { FRONTEND_TOOL_NAMES, STATE_TOOL } from "./tools";
import type { ConversationView, ToolCard, TurnView } from "./view";

/** Fetches an MCP App's widget HTML (through a proxied run on the thread). */
export type OpenWidget = (app: McpAppActivity) => Promise<string>;

/**
 * Replaces the conversation shown with the thread's messages: a turn per user message, the
 * messages after it in that turn. Returns the last turn, where a run going on continues.
 */
export function showThread(
  view: ConversationView,
  messages: readonly Message[],
  openWidget: OpenWidget,
): TurnView | undefined {
  view.clear();
  const turns: TurnView[] = [];
  const current = (): TurnView => turns.at(-1) ?? push(turns, view.startTurn(""));
  for (const message of messages) {
    switch (message.role) {
      case "user": {
        const { text, attachments } = userContent(message.content);
        turns.push(view.startTurn(text, attachments));
        break;
      }
      case "reasoning":
        if (message.content) current().restoredThinking(message.id, message.content);
        break;
      case "assistant": {
        const turn = current();
        if (message.content) {
          const block = turn.textBlock(message.id);
          block.append(message.content);
          block.end();
        }
        for (const call of message.toolCalls ?? []) showCall(turn, call);
        break;
      }
      case "tool":
        showToolResult(current(), message.toolCallId, textOf(message.content), messages, {
          failed: message.error !== undefined,
        });
        break;
      case "activity":
        showActivity(current(), message.id, message.activityType, message.content, openWidget);
        break;
      default: // system and developer messages are the app's, not the conversation's
    }
  }
  // Only the last turn may go on; the earlier ones are over (an unanswered call: "Not run").
  for (const turn of turns.slice(0, -1)) turn.finish();
  return turns.at(-1);
}

/** A tool call's card as it stands once its arguments are complete. An update_state call has
 * none: its result decides whether it gets one (`showToolResult`). */
function showCall(turn: TurnView, call: ToolCall): void {
  if (call.function.name === STATE_TOOL) return;
  const card = turn.toolCard(call.id, call.function.name);
  if (!FRONTEND_TOOL_NAMES.has(call.function.name)) card.runsOnServer();
  card.appendArgs(call.function.arguments);
  card.endArgs();
}

/**
 * A tool call's result on its card; false when nothing is shown for it (an update_state that
 * applied: the state cards show it). A call with no card is an update_state, perhaps of an
 * earlier run (an approval's): one that failed or was declined gets a card, so the reason
 * stays on the page. The bridge words a failure as "Error: …", a declined call as "The user
 * declined…".
 */
export function showToolResult(
  turn: TurnView,
  toolCallId: string,
  content: string,
  messages: readonly Message[],
  { failed = false } = {},
): boolean {
  let card = turn.findToolCard(toolCallId);
  if (!card) {
    if (content.startsWith("State updated")) return false;
    card = stateEditCard(turn, toolCallId, messages);
  }
  if (content.startsWith("The user declined")) card.setDeclined(content);
  else card.setResult(content, failed || content.startsWith("Error:"));
  return true;
}

/** The tool card of an update_state call that changed nothing, with its arguments. */
function stateEditCard(turn: TurnView, id: string, messages: readonly Message[]): ToolCard {
  const call = toolCallsOf(messages).find((known) => known.id === id);
  const card = turn.toolCard(id, call?.function.name ?? STATE_TOOL);
  card.runsOnServer();
  card.appendArgs(call?.function.arguments ?? "");
  card.endArgs();
  return card;
}

/** An `mcp-apps` activity as its card, the widget one click away; false for another kind. */
export function showActivity(
  turn: TurnView,
  id: string,
  activityType: string,
  content: unknown,
  openWidget: OpenWidget,
): boolean {
  if (activityType !== MCP_APPS_ACTIVITY) return false;
  const app = readActivity(content);
  if (!app) return false;
  const data = {
    serverId: app.serverId,
    resourceUri: app.resourceUri,
    input: JSON.stringify(app.toolInput, null, 2),
    result: resultText(app.result),
  };
  turn.appCard(id, data, () => openWidget(app));
  return true;
}

export function toolCallsOf(messages: readonly Message[]): ToolCall[] {
  return messages.flatMap((message) =>
    message.role === "assistant" ? (message.toolCalls ?? []) : [],
  );
}

/** A tool result's content as the cards show it: text, or its parts as JSON. */
export function textOf(content: string | ContentPart[]): string {
  return typeof content === "string" ? content : JSON.stringify(content);
}

/** A user message's text and files, as the page sent them: the text part first, then files. */
function userContent(content: string | ContentPart[]): {
  text: string;
  attachments: Attachment[];
} {
  if (typeof content === "string") return { text: content, attachments: [] };
  const text = content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n");
  const attachments = content.flatMap((part) => fromPart(part) ?? []);
  return { text, attachments };
}

function push<T>(list: T[], item: T): T {
  list.push(item);
  return item;
}
