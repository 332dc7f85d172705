// One conversation with the agent through the official client (@ag-ui/client's HttpAgent): a
// user turn is a run, plus one follow-up run per round of frontend tool calls, until the model
// answers without calling a tool, the user stops it, or the run fails.
//
// With a bridge that keeps threads (threads.ts), a thread is opened by a hydrate: a run with no
// messages, answered with the thread (MESSAGES_SNAPSHOT, drawn by thread_view.ts) and, when a
// run is going on in it, that run's events from its start and then live, which go through the
// same handlers as any run's. So a reload mid-answer shows the answer going on, each piece once.
// Stop asks the bridge to cancel the run, and reads its stream to the end it then gets.

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
import { describeHttpError, isRecord } from "./http_errors";
import { readWidgetHtml, type McpAppActivity } from "./mcp_apps";
import { readState, type StateParts } from "./state_cards";
import { showActivity, showThread, showToolResult, textOf, toolCallsOf } from "./thread_view";
import type { Threads } from "./threads";
import { FRONTEND_TOOL_NAMES, FRONTEND_TOOLS, runTool, STATE_TOOL } from "./tools";
import type { ConversationView, TurnView } from "./view";

/** Tool rounds per user turn: a model that keeps calling tools is stopped here. */
const MAX_TOOL_ROUNDS = 8;

/** How long Stop waits for the run the bridge cancels to end before the client lets go. */
const CANCEL_WAIT_MS = 3000;

/** How a run ended for the loop: frontend calls to answer, interrupts to put to the person. */
interface RunEnd {
  pending: string[];
  interrupts: Interrupt[];
  /** The bridge refused the request (an HTTP 4xx): no run took place. */
  refused?: boolean;
  /** The bridge refused an answer to a question (answer_invalid): why; its interrupt stands. */
  answerRefused?: string;
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
  /** The turn waits for the person to answer approval cards (`asks`: a question among them). */
  awaitingApproval(on: boolean, asks?: boolean): void;
  /** A short line for screen readers (a polite live region). */
  announce(text: string): void;
  /** A run began or ended: the bridge's thread changed (the thread list is due). */
  threadChanged(): void;
}

export class Chat {
  private agent: HttpAgent;
  /** Why the turn in progress ends early: the person stopped it, or left its thread. */
  private ending: "stop" | "leave" | undefined;
  /** The user turn in progress, until it has settled. */
  private turn: Promise<void> | undefined;
  /** The approval cards waiting for the person, while a turn waits for them. */
  private stopWaiting: (() => void) | undefined;
  /** The turn the events go to: the one the person began, or a restored thread's last. */
  private shown: TurnView | undefined;
  /** The run in flight: the id sent, then RUN_STARTED's (a hydrate follows another run). */
  private runId: string | undefined;
  /** The bridge's threads, when it keeps them: a thread can be opened, and Stop cancels there. */
  threads: Threads | undefined;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly view: ConversationView,
    private readonly hooks: ChatHooks,
    threadId: string = randomUUID(),
  ) {
    this.agent = this.newAgent(threadId);
  }

  get running(): boolean {
    return this.turn !== undefined;
  }

  get threadId(): string {
    return this.agent.threadId;
  }

  /** Sends the user's message (its text and attachments) and runs until the model has answered. */
  send(text: string, attachments: readonly Attachment[] = []): Promise<void> {
    return this.begin(() => this.converse(text, attachments));
  }

  /**
   * Stops the turn in progress; what streamed so far stays on the page. A bridge that keeps
   * threads is asked to cancel the run, whose stream then ends (RUN_FINISHED, outcome
   * cancelled) with what the thread keeps; otherwise, or if that end does not come, the client
   * lets go of the stream (and the bridge cancels a run whose client left).
   */
  stop(): void {
    if (!this.turn) return;
    this.ending = "stop";
    this.stopWaiting?.();
    const runId = this.runId;
    if (runId === undefined) return;
    if (!this.threads) {
      this.agent.abortRun();
      return;
    }
    const letGo = (): void => {
      if (this.runId === runId) this.agent.abortRun();
    };
    window.setTimeout(letGo, CANCEL_WAIT_MS);
    this.threads.cancel(runId).then((taken) => {
      if (!taken) letGo();
    }, letGo);
  }

  /**
   * Lets go of the conversation shown, as when the page closes: with threads kept, a run going
   * on goes on in the bridge, and the thread can be opened again to follow it.
   */
  async leave(): Promise<void> {
    if (!this.turn) return;
    this.ending = "leave";
    this.stopWaiting?.();
    this.agent.abortRun();
    await this.turn;
  }

  /** Opens a thread (after leaving the one shown): a new, empty one, or (`threadId`, with a
   * bridge that keeps threads) one of the bridge's, hydrated, a run going on in it followed. */
  async open(threadId?: string): Promise<void> {
    await this.leave();
    this.agent = this.newAgent(threadId ?? randomUUID());
    this.shown = undefined;
    if (threadId !== undefined && this.threads) void this.begin(() => this.restore());
  }

  private begin(work: () => Promise<void>): Promise<void> {
    this.turn ??= work().finally(() => {
      this.turn = undefined;
      this.hooks.running(false);
    });
    return this.turn;
  }

  private start(): void {
    this.ending = undefined;
    this.hooks.running(true);
  }

  private async converse(text: string, attachments: readonly Attachment[]): Promise<void> {
    this.start();
    const turn = this.view.startTurn(text, attachments);
    this.shown = turn;
    // The state's cards show in the turn that changed them, compared with the state sent now.
    const before = readState(this.agent.state);
    // With attachments, the content is parts (the text first, when there is some), as
    // CopilotKit's chat sends it; without, the text alone.
    const content = attachments.length
      ? [...(text ? [{ type: "text" as const, text }] : []), ...attachments.map(toPart)]
      : text;
    const userMessageId = randomUUID();
    this.agent.addMessage({ id: userMessageId, role: "user", content });
    await this.rounds(before, () => {
      // Kept, it would go again with every later message and be refused again (a file over
      // the bridge's limit, say): the conversation goes on without it.
      this.forget(userMessageId);
      turn.note("Not kept in the conversation: the next message is sent without it.", "error");
    });
  }

  /**
   * Opens the thread with a hydrate: the thread shown as it stands, and a run going on in it
   * followed to its end, its frontend tool calls answered and its interrupts put to the person
   * as in any turn. The state shows as cards in the last turn.
   */
  private async restore(): Promise<void> {
    this.start();
    await this.rounds({}, undefined, true);
  }

  /**
   * A turn's runs: the first (a hydrate's, with `hydrate`), then one per round of frontend tool
   * calls and a resumed one once the person has answered the interrupts, until the model has
   * answered. `refused`: what to do when the bridge refuses the first run's request.
   */
  private async rounds(before: StateParts, refused?: () => void, hydrate = false): Promise<void> {
    try {
      let resume: ResumeEntry[] | undefined;
      let asked: Interrupt[] = [];
      for (let round = 0; ; round += 1) {
        const end = await this.runOnce(before, resume, hydrate && round === 0);
        resume = undefined;
        if (end.answerRefused !== undefined && asked.length > 0) {
          // The same interrupts, asked again with the bridge's reason: none was used up.
          resume = await this.askApproval(this.current(), asked, end.answerRefused);
          if (!resume) break;
          continue;
        }
        if (end.refused && round === 0 && refused) {
          refused();
          break;
        }
        const { pending, interrupts } = end;
        if ((pending.length === 0 && interrupts.length === 0) || this.ending) break;
        if (round === MAX_TOOL_ROUNDS) {
          this.current().note(`Stopped after ${MAX_TOOL_ROUNDS} rounds of tool calls.`, "stopped");
          break;
        }
        // A round may hold both: the page runs its tools, and the next run brings their
        // results together with the person's answers.
        if (pending.length > 0) this.answerToolCalls(this.current(), pending);
        if (interrupts.length > 0) {
          asked = interrupts;
          resume = await this.askApproval(this.current(), interrupts);
          if (!resume) break;
        }
      }
    } finally {
      if (this.ending === "stop") {
        this.shown?.note("Stopped.", "stopped");
        this.hooks.announce("Stopped.");
      }
      this.shown?.finish();
      this.dropUnansweredToolCalls();
      // Interrupts left unanswered (the turn was stopped) went with their calls.
      this.agent.pendingInterrupts = [];
    }
  }

  /** The turn the events go to; a thread whose first message is no user's gets one. */
  private current(): TurnView {
    this.shown ??= this.view.startTurn("");
    return this.shown;
  }

  private newAgent(threadId: string): HttpAgent {
    return new HttpAgent({ url: this.url, headers: this.headers, threadId });
  }

  /**
   * Puts each interrupt to the person: an approval card, or a question card (with `refusal`,
   * why the bridge refused the last answer); the resume entries once every one is answered, or
   * undefined when the turn was stopped first.
   */
  private async askApproval(
    turn: TurnView,
    interrupts: Interrupt[],
    refusal?: string,
  ): Promise<ResumeEntry[] | undefined> {
    const calls = new Map(this.toolCalls().map((call) => [call.id, call]));
    const cards = interrupts.map((interrupt) => {
      if (interrupt.reason === "input_required") {
        const card = turn.questionCard({
          interruptId: interrupt.id,
          toolCallId: interrupt.toolCallId ?? "",
          message: interrupt.message,
          responseSchema: interrupt.responseSchema,
          refusal,
        });
        return { card, decision: card.answer };
      }
      const call = interrupt.toolCallId ? calls.get(interrupt.toolCallId) : undefined;
      const card = turn.approvalCard({
        interruptId: interrupt.id,
        toolCallId: interrupt.toolCallId ?? "",
        toolName: call?.function.name ?? "tool",
        args: call?.function.arguments ?? "{}",
        message: interrupt.message,
        expiresAt: interrupt.expiresAt,
      });
      return { card, decision: card.decision as Promise<unknown> };
    });
    cards[0]?.card.focus();
    const needs = cards.length === 1 ? "A tool call needs" : `${cards.length} tool calls need`;
    const asks = interrupts.some((interrupt) => interrupt.reason === "input_required");
    this.hooks.announce(`${needs} your ${asks ? "answer" : "approval"}.`);
    this.hooks.awaitingApproval(true, asks);
    const stopped = new Promise<undefined>((resolve) => {
      this.stopWaiting = () => resolve(undefined);
    });
    try {
      const decisions = Promise.all(cards.map((card) => card.decision));
      const answers = await Promise.race([decisions, stopped]);
      if (!answers || this.ending) {
        for (const { card } of cards) card.abandon();
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

  /**
   * One run: the tool calls it left for the page to answer, and its interrupts. A hydrate
   * (`hydrate`) sends no messages; its MESSAGES_SNAPSHOT replaces the conversation shown, and
   * the events after it (a run going on) go to the snapshot's last turn.
   */
  private async runOnce(
    before: StateParts,
    resume?: ResumeEntry[],
    hydrate = false,
  ): Promise<RunEnd> {
    const model = this.hooks.model();
    const runId = randomUUID();
    this.runId = runId;
    this.hooks.runStarted(hydrate ? "thread restored (hydrate)" : (model ?? "server default"));
    this.shown?.waiting(true);
    let pending: string[] = [];
    let interrupts: Interrupt[] = [];
    let answerRefused: string | undefined;
    // Frontend calls this run started and nothing answered: what an interrupted run leaves
    // for the page (its RUN_FINISHED names no pending calls).
    const started: string[] = [];
    const answered = new Set<string>();
    /** A hydrate whose RUN_STARTED names another run: it follows that run, going on. */
    let following = false;
    const turn = (): TurnView => this.current();
    const subscriber: AgentSubscriber = {
      onEvent: ({ event }) => {
        this.hooks.event(event);
      },
      onRunStartedEvent: ({ event }) => {
        this.runId = event.runId;
        following = hydrate && event.runId !== runId;
        if (!hydrate) this.hooks.threadChanged();
      },
      // The bridge sends one to a hydrate only: the thread, before the run it may follow.
      onMessagesSnapshotEvent: ({ event }) => {
        if (!hydrate) return;
        this.shown = showThread(this.view, event.messages, (app) => this.widgetHtml(app));
        if (following) this.shown?.waiting(true);
      },
      onReasoningMessageStartEvent: ({ event }) => {
        turn().thinkingBlock(event.messageId);
        this.hooks.announce("Thinking…");
      },
      onReasoningMessageContentEvent: ({ event }) => {
        turn().thinkingBlock(event.messageId).append(event.delta);
      },
      onReasoningMessageEndEvent: ({ event }) => {
        turn().thinkingBlock(event.messageId).end();
      },
      onTextMessageStartEvent: ({ event }) => {
        turn().collapseThinking();
        turn().textBlock(event.messageId);
      },
      onTextMessageContentEvent: ({ event }) => {
        turn().textBlock(event.messageId).append(event.delta);
      },
      onTextMessageEndEvent: ({ event, textMessageBuffer }) => {
        turn().textBlock(event.messageId).end();
        this.hooks.announce(textMessageBuffer);
      },
      onToolCallStartEvent: ({ event }) => {
        turn().collapseThinking();
        if (event.toolCallName === STATE_TOOL) {
          this.hooks.announce("Updating the state.");
          return;
        }
        const card = turn().toolCard(event.toolCallId, event.toolCallName);
        if (!FRONTEND_TOOL_NAMES.has(event.toolCallName)) card.runsOnServer();
        else started.push(event.toolCallId);
        this.hooks.announce(`Calling ${event.toolCallName}.`);
      },
      // An update_state call has no card (yet) to follow.
      onToolCallArgsEvent: ({ event }) => {
        turn().findToolCard(event.toolCallId)?.appendArgs(event.delta);
      },
      onToolCallEndEvent: ({ event }) => {
        turn().findToolCard(event.toolCallId)?.endArgs();
      },
      // A server tool's result, run by the bridge: the card completes; the page runs nothing
      // (the call is not among RUN_FINISHED's pending ones).
      onToolCallResultEvent: ({ event, messages }) => {
        answered.add(event.toolCallId);
        if (showToolResult(turn(), event.toolCallId, textOf(event.content), messages)) {
          this.hooks.announce("A server tool ran.");
        }
      },
      // A STATE_DELTA or STATE_SNAPSHOT applied to the agent's state, which the next run sends.
      onStateChanged: ({ state }) => {
        const said = turn().showState(readState(state), before);
        if (said.length) this.hooks.announce(said.join(" "));
      },
      // An MCP App's tool ran on the server: a card, with the widget one click away.
      onActivitySnapshotEvent: ({ event }) => {
        const open = (app: McpAppActivity): Promise<string> => this.widgetHtml(app);
        if (showActivity(turn(), event.messageId, event.activityType, event.content, open)) {
          this.hooks.announce("An MCP App's widget is ready to open.");
        }
      },
      onRunErrorEvent: ({ event }) => {
        // The client reports its own abort as RUN_ERROR "abort": that is Stop, or leaving.
        if (this.ending && event.code === "abort") return;
        if (event.code === "answer_invalid") {
          answerRefused = event.message; // shown on the question, asked again
          return;
        }
        this.hooks.error(event.message, event.code ?? "run_error");
        this.hooks.usage(event.usage);
        turn().note("The run failed.", "error");
      },
      onRunFinishedEvent: (finished) => {
        this.hooks.usage(finished.event.usage);
        // Stopped: by this page, or (a run followed) by another page of the thread's owner.
        if (finished.outcome === "cancelled") this.ending ??= "stop";
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
          turn().note(message, "truncated");
        }
      },
    };
    try {
      await this.agent.runAgent(
        {
          runId,
          tools: FRONTEND_TOOLS,
          forwardedProps: model ? { model } : {},
          ...(resume && { resume }),
        },
        subscriber,
      );
    } catch (error) {
      // The client throws for what never became a run: an HTTP error answer, a dropped
      // connection, a stream it rejects. An abort is not thrown; the stop flag covers a race.
      if (!this.ending) {
        const { message, code } = describeFailure(error);
        this.hooks.error(message, code);
        this.shown?.note("The run failed.", "error");
      }
      return { pending: [], interrupts: [], refused: isRefusal(error) };
    } finally {
      this.runId = undefined;
      this.shown?.waiting(false);
      this.hooks.threadChanged();
    }
    if (this.ending) return { pending: [], interrupts: [] };
    return answerRefused === undefined
      ? { pending, interrupts }
      : { pending: [], interrupts: [], answerRefused };
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

