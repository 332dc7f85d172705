// One conversation with the agent through the official client (@ag-ui/client's HttpAgent): a
// user turn is a run, plus one follow-up run per round of frontend tool calls, until the model
// answers without calling a tool, the user stops it, or the run fails.

import {
  HttpAgent,
  randomUUID,
  type AgentSubscriber,
  type BaseEvent,
  type Interrupt,
  type Message,
  type ResumeEntry,
  type TokenUsage,
  type ToolCall,
} from "@ag-ui/client";

import { toPart, type Attachment } from "./attachments";
import {
  MCP_APPS_ACTIVITY,
  readActivity,
  readWidgetHtml,
  resultText,
  type McpAppActivity,
} from "./mcp_apps";
import { readState, type StateParts } from "./state_cards";
import { FRONTEND_TOOLS, runTool } from "./tools";
import type { ConversationView, ToolCard, TurnView } from "./view";

/** The page's own tools; any other the model calls is the bridge's (a server tool). */
const FRONTEND_TOOL_NAMES = new Set(FRONTEND_TOOLS.map((tool) => tool.name));

/**
 * The bridge's shared-state tool (`--shared-state`, on in `agui-bridge demo`): an edit that
 * applies shows as the state cards it changes, not as a tool card; one that fails or is declined
 * gets its tool card, so the reason stays on the page.
 */
const STATE_TOOL = "update_state";

/** Tool rounds per user turn: a model that keeps calling tools is stopped here. */
const MAX_TOOL_ROUNDS = 8;

/** How a run ended for the loop: frontend calls to answer, interrupts to put to the person. */
interface RunEnd {
  pending: string[];
  interrupts: Interrupt[];
  /** The bridge refused the request (an HTTP 4xx): no run took place. */
  refused?: boolean;
}

/** What the page around the conversation shows; main.ts implements it. */
export interface ChatHooks {
  /** The model picked, sent as `forwardedProps.model`; undefined leaves it to the server. */
  model(): string | undefined;
  running(on: boolean): void;
  runStarted(label: string): void;
  event(event: BaseEvent): void;
  error(message: string, code: string): void;
  usage(usage: TokenUsage[] | undefined): void;
  /** The turn waits for the person to answer approval cards. */
  awaitingApproval(on: boolean): void;
  /** A short line for screen readers (a polite live region). */
  announce(text: string): void;
}

export class Chat {
  private agent: HttpAgent;
  private stopRequested = false;
  /** The user turn in progress, until it has settled. */
  private turn: Promise<void> | undefined;
  /** The approval cards waiting for the person, while a turn waits for them. */
  private stopWaiting: (() => void) | undefined;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly view: ConversationView,
    private readonly hooks: ChatHooks,
  ) {
    this.agent = this.newAgent();
  }

  get running(): boolean {
    return this.turn !== undefined;
  }

  /** Sends the user's message (its text and attachments) and runs until the model has answered. */
  send(text: string, attachments: readonly Attachment[] = []): Promise<void> {
    this.turn ??= this.converse(text, attachments).finally(() => {
      this.turn = undefined;
      this.hooks.running(false);
    });
    return this.turn;
  }

  /** Aborts the run in progress; what streamed so far stays on the page. */
  stop(): void {
    if (!this.turn) return;
    this.stopRequested = true;
    this.agent.abortRun();
    this.stopWaiting?.();
  }

  /** Forgets the conversation (after stopping what runs): a new thread. */
  async reset(): Promise<void> {
    this.stop();
    await this.turn;
    this.agent = this.newAgent();
  }

  private async converse(text: string, attachments: readonly Attachment[]): Promise<void> {
    this.stopRequested = false;
    this.hooks.running(true);
    const turn = this.view.startTurn(text, attachments);
    // The state's cards show in the turn that changed them, compared with the state sent now.
    const before = readState(this.agent.state);
    // With attachments, the content is parts (the text first, when there is some), as
    // CopilotKit's chat sends it; without, the text alone.
    const content = attachments.length
      ? [...(text ? [{ type: "text" as const, text }] : []), ...attachments.map(toPart)]
      : text;
    const userMessageId = randomUUID();
    this.agent.addMessage({ id: userMessageId, role: "user", content });
    try {
      let resume: ResumeEntry[] | undefined;
      for (let round = 0; ; round += 1) {
        const { pending, interrupts, refused } = await this.runOnce(turn, before, resume);
        resume = undefined;
        if (refused && round === 0) {
          // Kept, it would go again with every later message and be refused again (a file
          // over the bridge's limit, say): the conversation goes on without it.
          this.forget(userMessageId);
          turn.note("Not kept in the conversation: the next message is sent without it.", "error");
          break;
        }
        if ((pending.length === 0 && interrupts.length === 0) || this.stopRequested) break;
        if (round === MAX_TOOL_ROUNDS) {
          turn.note(`Stopped after ${MAX_TOOL_ROUNDS} rounds of tool calls.`, "stopped");
          break;
        }
        // A round may hold both: the page runs its tools, and the next run brings their
        // results together with the person's answers.
        if (pending.length > 0) this.answerToolCalls(turn, pending);
        if (interrupts.length > 0) {
          resume = await this.askApproval(turn, interrupts);
          if (!resume) break;
        }
      }
    } finally {
      if (this.stopRequested) {
        turn.note("Stopped.", "stopped");
        this.hooks.announce("Stopped.");
      }
      turn.finish();
      this.dropUnansweredToolCalls();
      // Interrupts left unanswered (the turn was stopped) went with their calls.
      this.agent.pendingInterrupts = [];
    }
  }

  private newAgent(): HttpAgent {
    return new HttpAgent({ url: this.url, headers: this.headers, threadId: randomUUID() });
  }

  /**
   * Puts each interrupt to the person as an approval card; the resume entries once every one
   * is answered, or undefined when the turn was stopped first.
   */
  private async askApproval(
    turn: TurnView,
    interrupts: Interrupt[],
  ): Promise<ResumeEntry[] | undefined> {
    const calls = new Map(this.toolCalls().map((call) => [call.id, call]));
    const cards = interrupts.map((interrupt) => {
      const call = interrupt.toolCallId ? calls.get(interrupt.toolCallId) : undefined;
      return turn.approvalCard({
        interruptId: interrupt.id,
        toolCallId: interrupt.toolCallId ?? "",
        toolName: call?.function.name ?? "tool",
        args: call?.function.arguments ?? "{}",
        message: interrupt.message,
        expiresAt: interrupt.expiresAt,
      });
    });
    cards[0]?.focus();
    const needs = cards.length === 1 ? "A tool call needs" : `${cards.length} tool calls need`;
    this.hooks.announce(`${needs} your approval.`);
    this.hooks.awaitingApproval(true);
    const stopped = new Promise<undefined>((resolve) => {
      this.stopWaiting = () => resolve(undefined);
    });
    try {
      const decisions = Promise.all(cards.map((card) => card.decision));
      const answers = await Promise.race([decisions, stopped]);
      if (!answers || this.stopRequested) {
        for (const card of cards) card.abandon();
        return undefined;
      }
      for (const interrupt of interrupts) {
        if (interrupt.toolCallId) turn.findToolCard(interrupt.toolCallId)?.approvalGiven();
      }
      return interrupts.map((interrupt, index) => ({
        interruptId: interrupt.id,
        status: "resolved",
        payload: answers[index],
      }));
    } finally {
      this.stopWaiting = undefined;
      this.hooks.awaitingApproval(false);
    }
  }

  /** One run: the tool calls it left for the page to answer, and its interrupts. */
  private async runOnce(
    turn: TurnView,
    before: StateParts,
    resume?: ResumeEntry[],
  ): Promise<RunEnd> {
    const model = this.hooks.model();
    this.hooks.runStarted(model ?? "server default");
    turn.waiting(true);
    let pending: string[] = [];
    let interrupts: Interrupt[] = [];
    // Frontend calls this run started and nothing answered: what an interrupted run leaves
    // for the page (its RUN_FINISHED names no pending calls).
    const started: string[] = [];
    const answered = new Set<string>();
    const subscriber: AgentSubscriber = {
      onEvent: ({ event }) => {
        this.hooks.event(event);
      },
      onReasoningMessageStartEvent: ({ event }) => {
        turn.thinkingBlock(event.messageId);
        this.hooks.announce("Thinking…");
      },
      onReasoningMessageContentEvent: ({ event }) => {
        turn.thinkingBlock(event.messageId).append(event.delta);
      },
      onReasoningMessageEndEvent: ({ event }) => {
        turn.thinkingBlock(event.messageId).end();
      },
      onTextMessageStartEvent: ({ event }) => {
        turn.collapseThinking();
        turn.textBlock(event.messageId);
      },
      onTextMessageContentEvent: ({ event }) => {
        turn.textBlock(event.messageId).append(event.delta);
      },
      onTextMessageEndEvent: ({ event, textMessageBuffer }) => {
        turn.textBlock(event.messageId).end();
        this.hooks.announce(textMessageBuffer);
      },
      onToolCallStartEvent: ({ event }) => {
        turn.collapseThinking();
        if (event.toolCallName === STATE_TOOL) {
          this.hooks.announce("Updating the state.");
          return;
        }
        const card = turn.toolCard(event.toolCallId, event.toolCallName);
        if (!FRONTEND_TOOL_NAMES.has(event.toolCallName)) card.runsOnServer();
        else started.push(event.toolCallId);
        this.hooks.announce(`Calling ${event.toolCallName}.`);
      },
      // An update_state call has no card (yet) to follow.
      onToolCallArgsEvent: ({ event }) => {
        turn.findToolCard(event.toolCallId)?.appendArgs(event.delta);
      },
      onToolCallEndEvent: ({ event }) => {
        turn.findToolCard(event.toolCallId)?.endArgs();
      },
      // A server tool's result, run by the bridge: the card completes; the page runs nothing
      // (the call is not among RUN_FINISHED's pending ones). The bridge words a failure as
      // "Error: …".
      onToolCallResultEvent: ({ event, messages }) => {
        const content =
          typeof event.content === "string" ? event.content : JSON.stringify(event.content);
        answered.add(event.toolCallId);
        // A call with no card is an update_state, perhaps of an earlier run (an approval's).
        let card = turn.findToolCard(event.toolCallId);
        if (!card) {
          if (content.startsWith("State updated")) return;
          card = this.stateEditCard(turn, event.toolCallId, messages);
        }
        // A call a person declined: the bridge tells the model so, and ran nothing.
        if (content.startsWith("The user declined")) card.setDeclined(content);
        else card.setResult(content, content.startsWith("Error:"));
        this.hooks.announce("A server tool ran.");
      },
      // A STATE_DELTA or STATE_SNAPSHOT applied to the agent's state, which the next run sends.
      onStateChanged: ({ state }) => {
        const said = turn.showState(readState(state), before);
        if (said.length) this.hooks.announce(said.join(" "));
      },
      // An MCP App's tool ran on the server: a card, with the widget one click away.
      onActivitySnapshotEvent: ({ event }) => {
        if (event.activityType !== MCP_APPS_ACTIVITY) return;
        const app = readActivity(event.content);
        if (!app) return;
        const data = {
          serverId: app.serverId,
          resourceUri: app.resourceUri,
          input: JSON.stringify(app.toolInput, null, 2),
          result: resultText(app.result),
        };
        turn.appCard(event.messageId, data, () => this.widgetHtml(app));
        this.hooks.announce("An MCP App's widget is ready to open.");
      },
      onRunErrorEvent: ({ event }) => {
        // The client reports its own abort as RUN_ERROR "abort": that is the Stop button.
        if (this.stopRequested && event.code === "abort") return;
        this.hooks.error(event.message, event.code ?? "run_error");
        this.hooks.usage(event.usage);
        turn.note("The run failed.", "error");
      },
      onRunFinishedEvent: (finished) => {
        this.hooks.usage(finished.event.usage);
        if (finished.outcome === "success") pending = finished.pendingToolCallIds;
        if (finished.outcome === "interrupt") {
          interrupts = finished.interrupts;
          const held = new Set(interrupts.map((interrupt) => interrupt.toolCallId));
          pending = started.filter((id) => !answered.has(id) && !held.has(id));
        }
        const result: unknown = finished.event.result;
        if (isRecord(result) && result.truncated === true) {
          const message =
            typeof result.message === "string" ? result.message : "The answer was cut short.";
          turn.note(message, "truncated");
        }
      },
    };
    try {
      await this.agent.runAgent(
        {
          tools: FRONTEND_TOOLS,
          forwardedProps: model ? { model } : {},
          ...(resume && { resume }),
        },
        subscriber,
      );
    } catch (error) {
      // The client throws for what never became a run: an HTTP error answer, a dropped
      // connection, a stream it rejects. An abort is not thrown; the stop flag covers a race.
      if (!this.stopRequested) {
        const { message, code } = describeFailure(error);
        this.hooks.error(message, code);
        turn.note("The run failed.", "error");
      }
      return { pending: [], interrupts: [], refused: isRefusal(error) };
    } finally {
      turn.waiting(false);
    }
    return this.stopRequested ? { pending: [], interrupts: [] } : { pending, interrupts };
  }

  /** The tool card of an update_state call that changed nothing, with its arguments. */
  private stateEditCard(turn: TurnView, id: string, messages: readonly Message[]): ToolCard {
    const call = toolCallsOf(messages).find((known) => known.id === id);
    const card = turn.toolCard(id, call?.function.name ?? STATE_TOOL);
    card.runsOnServer();
    card.appendArgs(call?.function.arguments ?? "");
    card.endArgs();
    return card;
  }

  /** An MCP App's widget HTML, read through a proxied run on this conversation's thread. */
  private widgetHtml(app: McpAppActivity): Promise<string> {
    this.hooks.runStarted(`widget: resources/read ${app.resourceUri}`);
    const target = {
      url: this.url,
      headers: this.headers,
      threadId: this.agent.threadId,
      subscriber: { onEvent: ({ event }: { event: BaseEvent }) => this.hooks.event(event) },
    };
    return readWidgetHtml(target, app);
  }

  /** Runs the pending tool calls here in the page and adds their results to the conversation. */
  private answerToolCalls(turn: TurnView, ids: string[]): void {
    const calls = new Map(this.toolCalls().map((call) => [call.id, call]));
    const results: Message[] = ids.map((id) => {
      const call = calls.get(id);
      const outcome = call
        ? runTool(call.function.name, call.function.arguments)
        : {
            content: JSON.stringify({ ok: false, error: "unknown tool call" }),
            error: "unknown tool call",
          };
      turn
        .toolCard(id, call?.function.name)
        .setResult(outcome.content, outcome.error !== undefined);
      this.hooks.announce(
        `${call?.function.name ?? "A tool"} ${outcome.error ? "failed" : "ran"}.`,
      );
      return {
        id: randomUUID(),
        role: "tool",
        toolCallId: id,
        content: outcome.content,
        ...(outcome.error !== undefined && { error: outcome.error }),
      };
    });
    this.agent.addMessages(results);
  }

  /**
   * After a stop or a failure, tool calls may be left without results (some with half their
   * arguments). Servers reject a history like that, so they go; what the model said stays.
   */
  private dropUnansweredToolCalls(): void {
    const answered = new Set(
      this.agent.messages.flatMap((message) =>
        message.role === "tool" ? [message.toolCallId] : [],
      ),
    );
    let changed = false;
    const kept = this.agent.messages.flatMap((message): Message[] => {
      if (message.role !== "assistant" || !message.toolCalls?.length) return [message];
      const toolCalls = message.toolCalls.filter((call) => answered.has(call.id));
      if (toolCalls.length === message.toolCalls.length) return [message];
      changed = true;
      if (toolCalls.length > 0) return [{ ...message, toolCalls }];
      const { toolCalls: _dropped, ...rest } = message;
      return rest.content ? [rest] : [];
    });
    if (changed) this.agent.setMessages(kept);
  }

  private forget(messageId: string): void {
    this.agent.setMessages(this.agent.messages.filter((message) => message.id !== messageId));
  }

  private toolCalls(): ToolCall[] {
    return toolCallsOf(this.agent.messages);
  }
}

function toolCallsOf(messages: readonly Message[]): ToolCall[] {
  return messages.flatMap((message) =>
    message.role === "assistant" ? (message.toolCalls ?? []) : [],
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Whether the client threw for a request the bridge refused (HTTP 4xx, not 401/403/408/429:
 * those would pass another time, unchanged). */
function isRefusal(error: unknown): boolean {
  const status = (error as { status?: unknown } | undefined)?.status;
  if (typeof status !== "number") return false;
  return status >= 400 && status < 500 && ![401, 403, 408, 429].includes(status);
}

/** A readable message and a machine code for an error the client threw. */
function describeFailure(error: unknown): { message: string; code: string } {
  if (!(error instanceof Error)) return { message: String(error), code: "client_error" };
  const { status, payload } = error as Error & { status?: number; payload?: unknown };
  if (typeof status === "number") return describeHttpError(status, payload);
  return { message: error.message || "The connection to the agent failed.", code: "client_error" };
}

/** The bridge answers what it refuses as {"error": {"code", "message"}}. */
export function describeHttpError(
  status: number,
  body: unknown,
): { message: string; code: string } {
  const detail = isRecord(body) && isRecord(body.error) ? body.error : {};
  let message = typeof detail.message === "string" ? detail.message : `HTTP ${status}`;
  if (status === 401) message += ". Open this page as /#token=<the bridge's token>.";
  return { message, code: typeof detail.code === "string" ? detail.code : `http_${status}` };
}
