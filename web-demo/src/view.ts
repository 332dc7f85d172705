// The conversation on the page: user messages, and per turn the assistant's thinking blocks,
// answer text and tool cards in the order they arrive. No protocol here: chat.ts drives it.

import { QuestionCard, type QuestionRequest } from "./question_card";
import { AppCard, type AppCardData } from "./app_card";
import { chip, type Attachment } from "./attachments";
import { h, page, seconds, stickToBottom } from "./dom";
import { renderMarkdown } from "./markdown";
import { StepsCard, TodoCard, type StateParts } from "./state_cards";

export class ConversationView {
  constructor(
    private readonly list: HTMLElement,
    private readonly emptyState: HTMLElement,
  ) {}

  /** Adds the user's message (its attachments as chips) and an (empty) assistant turn. A
   * restored thread that begins with no user message has a turn without one. */
  startTurn(userText: string, attachments: readonly Attachment[] = []): TurnView {
    this.emptyState.hidden = true;
    const user = h("div", { class: "msg msg-user", testid: "user-message" });
    if (attachments.length) {
      const chips = attachments.map((attachment) => chip(attachment));
      user.append(h("ul", { class: "chips sent", testid: "sent-attachments" }, ...chips));
    }
    if (userText) user.append(h("div", { class: "bubble", text: userText }));
    if (!user.firstChild) user.hidden = true;
    const body = h("div", { class: "assistant-body" });
    const assistant = h(
      "div",
      { class: "msg msg-assistant", testid: "assistant-turn" },
      h("div", { class: "avatar", attrs: { "aria-hidden": "true" } }),
      body,
    );
    stickToBottom(page(), () => this.list.append(h("section", { class: "turn" }, user, assistant)));
    return new TurnView(body);
  }

  clear(): void {
    for (const turn of this.list.querySelectorAll(".turn")) turn.remove();
    this.emptyState.hidden = false;
  }
}

/** One assistant turn: every run of a tool loop adds to the same turn. */
export class TurnView {
  private readonly thinking = new Map<string, ThinkingBlock>();
  private readonly texts = new Map<string, TextBlock>();
  private readonly tools = new Map<string, ToolCard>();
  private readonly apps = new Map<string, AppCard>();
  private steps: StepsCard | undefined;
  private todos: TodoCard | undefined;
  private readonly pending: HTMLElement;

  constructor(private readonly body: HTMLElement) {
    this.pending = h(
      "div",
      { class: "pending", testid: "pending" },
      h("span", { class: "dots", attrs: { "aria-hidden": "true" } }, h("i"), h("i"), h("i")),
      h("span", { class: "sr-only", text: "Waiting for the model" }),
    );
  }

  thinkingBlock(id: string): ThinkingBlock {
    return this.getOrAdd(this.thinking, id, () => new ThinkingBlock());
  }

  /** Thinking of a restored thread: its text, folded, with no time (it was not watched). */
  restoredThinking(id: string, text: string): void {
    const block = this.thinkingBlock(id);
    block.append(text);
    block.restored();
  }

  textBlock(id: string): TextBlock {
    return this.getOrAdd(this.texts, id, () => new TextBlock());
  }

  toolCard(id: string, name = "tool"): ToolCard {
    return this.getOrAdd(this.tools, id, () => new ToolCard(id, name));
  }

  /** The tool card of this call, if it has one (none is made). */
  findToolCard(id: string): ToolCard | undefined {
    return this.tools.get(id);
  }

  /**
   * The shared state's plan and to-dos, as cards in the turn that changed them (`before`: the
   * state when the turn began); each card follows the state until the turn ends. Returns lines
   * for screen readers, one per card that changed.
   */
  showState(now: StateParts, before: StateParts): string[] {
    const said: string[] = [];
    if (this.steps || (now.steps && !same(now.steps, before.steps))) {
      this.steps ??= this.add(new StepsCard());
      said.push(this.steps.show(now.steps ?? []));
    }
    if (this.todos || (now.todos && !same(now.todos, before.todos))) {
      this.todos ??= this.add(new TodoCard());
      said.push(this.todos.show(now.todos ?? []));
    }
    return said;
  }

  /** An MCP App's card (an `mcp-apps` activity): added once per id, shown anew on a repeat. */
  appCard(id: string, data: AppCardData, open: () => Promise<string>): AppCard {
    const card = this.getOrAdd(this.apps, id, () => new AppCard(data, open));
    card.show(data);
    return card;
  }

  /** A card asking the person to approve a server tool's call (an AG-UI interrupt). */
  approvalCard(request: ApprovalRequest): ApprovalCard {
    const card = new ApprovalCard(request);
    this.tools.get(request.toolCallId)?.waitForApproval();
    this.hidePending();
    this.append(card.element);
    return card;
  }

  /** A card asking the person a server tool's question (an "input_required" interrupt). */
  questionCard(request: QuestionRequest): QuestionCard {
    const card = new QuestionCard(request);
    this.hidePending();
    this.append(card.element);
    return card;
  }

  /** Folds away the thinking shown so far: the answer (text or a tool call) has started. */
  collapseThinking(): void {
    for (const block of this.thinking.values()) block.collapse();
  }

  /** A line under the turn: why it stopped, or that the answer was cut. */
  note(text: string, kind: "stopped" | "truncated" | "error"): void {
    this.hidePending();
    this.append(h("p", { class: `turn-note ${kind}`, testid: "turn-note", text }));
  }

  /** Dots while a run has shown nothing yet, so a slow upstream does not look like a dead page. */
  waiting(on: boolean): void {
    if (on) this.append(this.pending);
    else this.hidePending();
  }

  /** The turn is over (finished, stopped or failed): nothing is live any more. */
  finish(): void {
    this.hidePending();
    for (const block of this.thinking.values()) block.end();
    for (const block of this.texts.values()) block.end();
    for (const card of this.tools.values()) card.cancelIfUnanswered();
  }

  private add<T extends { element: HTMLElement }>(item: T): T {
    this.hidePending();
    this.append(item.element);
    return item;
  }

  private getOrAdd<T extends { element: HTMLElement }>(
    map: Map<string, T>,
    id: string,
    create: () => T,
  ): T {
    let item = map.get(id);
    if (!item) {
      item = this.add(create());
      map.set(id, item);
    }
    return item;
  }

  private append(element: HTMLElement): void {
    stickToBottom(page(), () => this.body.append(element));
  }

  private hidePending(): void {
    this.pending.remove();
  }
}

/** A "Thinking…" block: live text and an elapsed-time counter, folded when the answer starts. */
export class ThinkingBlock {
  readonly element: HTMLDetailsElement;
  private readonly label: HTMLElement;
  private readonly elapsed: HTMLElement;
  private readonly text: HTMLElement;
  private readonly started = performance.now();
  private timer: number | undefined;
  private collapsed = false;

  constructor() {
    this.label = h("span", { class: "thinking-label", text: "Thinking…" });
    this.elapsed = h("span", { class: "elapsed", testid: "thinking-elapsed", text: seconds(0) });
    this.text = h("div", { class: "thinking-text", testid: "thinking-text" });
    this.element = h(
      "details",
      {
        class: "thinking",
        testid: "thinking-block",
        attrs: { open: "", "data-state": "streaming" },
      },
      h(
        "summary",
        {},
        h("span", { class: "thinking-icon", attrs: { "aria-hidden": "true" } }),
        this.label,
        this.elapsed,
        h("span", { class: "chevron", attrs: { "aria-hidden": "true" } }),
      ),
      this.text,
    );
    this.timer = window.setInterval(() => this.tick(), 100);
  }

  append(delta: string): void {
    // Tag dialects leave the newlines that stood next to <think> and </think>.
    const text = this.text.firstChild ? delta : delta.trimStart();
    if (text) stickToBottom(page(), () => this.text.append(text));
  }

  /** The reasoning message ended: the counter stops at its final time. */
  end(): void {
    if (this.timer === undefined) return;
    window.clearInterval(this.timer);
    this.timer = undefined;
    this.text.textContent = this.text.textContent?.trimEnd() ?? "";
    this.tick();
    this.label.textContent = "Thought for";
    this.element.dataset.state = "done";
  }

  /** Ended and folded, labelled without a time: the block of a restored thread. */
  restored(): void {
    this.collapse();
    this.label.textContent = "Thought";
    this.elapsed.hidden = true;
  }

  /** Closes the block once; after that it stays as the reader leaves it. */
  collapse(): void {
    if (this.collapsed) return;
    this.collapsed = true;
    this.end();
    this.element.open = false;
  }

  private tick(): void {
    this.elapsed.textContent = seconds(performance.now() - this.started);
  }
}

/** The answer's text, re-rendered as Markdown at most once per frame while it streams. */
export class TextBlock {
  readonly element = h("div", {
    class: "answer markdown",
    testid: "assistant-text",
    attrs: { "data-state": "streaming" },
  });
  private source = "";
  private frame: number | undefined;

  append(delta: string): void {
    this.source += delta;
    this.frame ??= requestAnimationFrame(() => this.render());
  }

  end(): void {
    if (this.frame !== undefined) cancelAnimationFrame(this.frame);
    this.render();
    this.element.dataset.state = "done";
  }

  private render(): void {
    this.frame = undefined;
    stickToBottom(page(), () => renderMarkdown(this.element, this.source));
  }
}

type ToolState = "streaming" | "called" | "waiting" | "done" | "error" | "cancelled";

const TOOL_STATUS: Record<ToolState, string> = {
  streaming: "Writing arguments…",
  called: "Running in your browser…",
  waiting: "Waiting for your approval",
  done: "Done",
  error: "Failed",
  cancelled: "Not run",
};

/** Where a server tool's card differs: the bridge runs it, and sends its result in the run. */
const SERVER_TOOL_STATUS: Partial<Record<ToolState, string>> = {
  called: "Running on the server…",
  done: "Done on the server",
};

/** A tool call: its name, its arguments as they stream, then pretty-printed, then its result. */
export class ToolCard {
  readonly element: HTMLElement;
  private readonly status: HTMLElement;
  private readonly args: HTMLElement;
  private readonly result: HTMLElement;
  private readonly resultSection: HTMLElement;
  private argsText = "";
  private onServer = false;

  constructor(id: string, name: string) {
    this.status = h("span", { class: "tool-status", testid: "tool-status" });
    this.args = h("pre", { class: "tool-args", testid: "tool-args" });
    this.result = h("pre", { class: "tool-result", testid: "tool-result" });
    this.resultSection = h(
      "div",
      { class: "tool-section" },
      h("div", { class: "tool-label", text: "Result" }),
      this.result,
    );
    this.resultSection.hidden = true;
    this.element = h(
      "article",
      {
        class: "tool-card",
        testid: "tool-card",
        attrs: {
          "data-tool-name": name,
          "data-tool-call-id": id,
          "aria-label": `Tool call ${name}`,
        },
      },
      h(
        "header",
        {},
        h("span", { class: "tool-icon", attrs: { "aria-hidden": "true" } }),
        h("code", { class: "tool-name", testid: "tool-name", text: name }),
        this.status,
      ),
      h(
        "div",
        { class: "tool-sections" },
        h(
          "div",
          { class: "tool-section" },
          h("div", { class: "tool-label", text: "Arguments" }),
          this.args,
        ),
        this.resultSection,
      ),
    );
    this.setState("streaming");
  }

  appendArgs(delta: string): void {
    this.argsText += delta;
    stickToBottom(page(), () => (this.args.textContent = this.argsText));
  }

  /** The arguments are complete: shown pretty-printed when they are JSON, as sent otherwise. */
  endArgs(): void {
    this.args.textContent = prettyJson(this.argsText);
    this.setState("called");
  }

  setResult(content: string, failed: boolean): void {
    this.result.textContent = prettyJson(content);
    stickToBottom(page(), () => (this.resultSection.hidden = false));
    this.setState(failed ? "error" : "done");
  }

  /** A person declined the call: not run, and what the model was told instead. */
  setDeclined(content: string): void {
    this.setResult(content, false);
    this.setState("cancelled");
  }

  /** The bridge runs this tool (it is not one of the page's): its result comes in the run. */
  runsOnServer(): void {
    this.onServer = true;
    this.element.dataset.runsOn = "server";
    this.setState(this.element.dataset.state as ToolState);
  }

  /** The bridge holds this call until a person approves it. */
  waitForApproval(): void {
    this.setState("waiting");
  }

  /** Approved or declined: the bridge runs it (or tells the model it may not) in the next run. */
  approvalGiven(): void {
    if (this.element.dataset.state === "waiting") this.setState("called");
  }

  cancelIfUnanswered(): void {
    const state = this.element.dataset.state;
    if (state === "streaming" || state === "called" || state === "waiting")
      this.setState("cancelled");
  }

  private setState(state: ToolState): void {
    this.element.dataset.state = state;
    this.status.textContent =
      (this.onServer ? SERVER_TOOL_STATUS[state] : undefined) ?? TOOL_STATUS[state];
  }
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** What an approval card shows: one interrupt of reason "tool_call". */
export interface ApprovalRequest {
  interruptId: string;
  toolCallId: string;
  toolName: string;
  /** The call's arguments as the model wrote them (JSON text). */
  args: string;
  message?: string;
  /** ISO 8601, from the interrupt. */
  expiresAt?: string;
}

/** The person's answer: approve (perhaps with edited arguments) or deny (perhaps with a reason). */
export type ApprovalDecision =
  | { approved: true; editedArgs?: Record<string, unknown> }
  | { approved: false; reason?: string };

let approvalCount = 0;

/**
 * An approval card: the tool, its arguments (editable JSON), the bridge's question, when it
 * expires, and Approve / Deny (with an optional reason). `decision` settles on a click.
 */
export class ApprovalCard {
  readonly element: HTMLElement;
  readonly decision: Promise<ApprovalDecision>;
  private readonly argsBox: HTMLTextAreaElement;
  private readonly reasonBox: HTMLInputElement;
  private readonly problem: HTMLElement;
  private readonly verdict: HTMLElement;
  private readonly buttons: HTMLButtonElement[];
  private readonly original: string;
  private settle: (decision: ApprovalDecision) => void = () => undefined;

  constructor(request: ApprovalRequest) {
    const n = (approvalCount += 1);
    const ids = {
      title: `approval-${n}-title`,
      args: `approval-${n}-args`,
      why: `approval-${n}-why`,
    };
    this.original = prettyJson(request.args || "{}");
    this.argsBox = h("textarea", {
      class: "approval-args",
      testid: "approval-args",
      attrs: {
        id: ids.args,
        spellcheck: "false",
        autocomplete: "off",
        rows: String(Math.min(12, this.original.split("\n").length)),
      },
    });
    this.argsBox.value = this.original;
    this.reasonBox = h("input", {
      class: "approval-reason",
      testid: "approval-reason",
      attrs: {
        id: ids.why,
        type: "text",
        placeholder: "e.g. not this address",
        autocomplete: "off",
      },
    });
    this.problem = h("p", {
      class: "approval-problem",
      testid: "approval-problem",
      attrs: { role: "alert" },
    });
    this.problem.hidden = true;
    this.verdict = h("p", { class: "approval-verdict", testid: "approval-verdict" });
    this.verdict.hidden = true;
    const approve = h("button", {
      class: "button approve",
      testid: "approve-button",
      text: "Approve",
      attrs: { type: "button" },
    });
    const deny = h("button", {
      class: "button deny",
      testid: "deny-button",
      text: "Deny",
      attrs: { type: "button" },
    });
    this.buttons = [approve, deny];
    approve.addEventListener("click", () => this.approve());
    deny.addEventListener("click", () => this.deny());
    this.reasonBox.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        this.deny();
      }
    });

    const expiry = request.expiresAt ? new Date(request.expiresAt) : undefined;
    const expiryLine =
      expiry && !Number.isNaN(expiry.getTime())
        ? h(
            "p",
            { class: "approval-expiry", testid: "approval-expiry" },
            "Expires at ",
            h("time", {
              text: expiry.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
              attrs: { datetime: expiry.toISOString() },
            }),
            ` (in ${minutesUntil(expiry)})`,
          )
        : h("span");

    this.element = h(
      "section",
      {
        class: "approval-card",
        testid: "approval-card",
        attrs: {
          "aria-labelledby": ids.title,
          "data-state": "waiting",
          "data-tool-call-id": request.toolCallId,
          "data-interrupt-id": request.interruptId,
          tabindex: "-1",
        },
      },
      h(
        "header",
        {},
        h("span", { class: "approval-icon", text: "!", attrs: { "aria-hidden": "true" } }),
        h(
          "h3",
          { attrs: { id: ids.title } },
          "Approve ",
          h("code", { testid: "approval-tool", text: request.toolName }),
          "?",
        ),
      ),
      h("p", {
        class: "approval-message",
        testid: "approval-message",
        text: request.message ?? `Run ${request.toolName}?`,
      }),
      h("label", {
        class: "tool-label",
        text: "Arguments (JSON, editable)",
        attrs: { for: ids.args },
      }),
      this.argsBox,
      this.problem,
      h(
        "label",
        { class: "tool-label", text: "Reason if you deny (optional)", attrs: { for: ids.why } },
      ),
      this.reasonBox,
      h("div", { class: "approval-actions" }, approve, deny, expiryLine),
      this.verdict,
    );
    this.decision = new Promise((resolve) => (this.settle = resolve));
  }

  /** Moves the keyboard to the card, so Tab reaches its fields and buttons next. */
  focus(): void {
    this.element.focus({ preventScroll: true });
  }

  /** No answer will be given (the person stopped the turn). */
  abandon(): void {
    if (this.element.dataset.state !== "waiting") return;
    this.close("abandoned", "Not answered: the turn was stopped.");
  }

  private approve(): void {
    let edited: unknown;
    try {
      edited = JSON.parse(this.argsBox.value || "{}");
    } catch (error) {
      this.complain(`The arguments are not JSON: ${(error as Error).message}`);
      return;
    }
    if (typeof edited !== "object" || edited === null || Array.isArray(edited)) {
      this.complain("The arguments must be a JSON object.");
      return;
    }
    const changed = JSON.stringify(edited) !== canonical(this.original);
    this.close("approved", changed ? "Approved with your edits." : "Approved.");
    this.settle(
      changed
        ? { approved: true, editedArgs: edited as Record<string, unknown> }
        : { approved: true },
    );
  }

  private deny(): void {
    const reason = this.reasonBox.value.trim();
    this.close("declined", reason ? `Declined: ${reason}` : "Declined.");
    this.settle(reason ? { approved: false, reason } : { approved: false });
  }

  private complain(text: string): void {
    this.problem.textContent = text;
    this.problem.hidden = false;
    this.argsBox.setAttribute("aria-invalid", "true");
    this.argsBox.focus();
  }

  private close(state: string, text: string): void {
    this.element.dataset.state = state;
    this.problem.hidden = true;
    this.argsBox.removeAttribute("aria-invalid");
    this.argsBox.readOnly = true;
    this.reasonBox.readOnly = true;
    for (const button of this.buttons) button.disabled = true;
    this.verdict.textContent = text;
    this.verdict.hidden = false;
  }
}

/** JSON text as one line, to compare edits with; the text itself when it is not JSON. */
function canonical(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}

function minutesUntil(when: Date): string {
  const minutes = Math.max(0, Math.round((when.getTime() - Date.now()) / 60000));
  return minutes === 1 ? "1 minute" : `${minutes} minutes`;
}
