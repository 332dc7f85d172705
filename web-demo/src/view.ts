// The conversation on the page: user messages, and per turn the assistant's thinking blocks,
// answer text and tool cards in the order they arrive. No protocol here: chat.ts drives it.

import { h, seconds, stickToBottom } from "./dom";
import { renderMarkdown } from "./markdown";

/** The document's scroller: the page itself scrolls, so a full-page screenshot shows it all. */
const page = (): HTMLElement => document.scrollingElement as HTMLElement;

export class ConversationView {
  constructor(
    private readonly list: HTMLElement,
    private readonly emptyState: HTMLElement,
  ) {}

  /** Adds the user's message and an (empty) assistant turn that answers it. */
  startTurn(userText: string): TurnView {
    this.emptyState.hidden = true;
    const user = h(
      "div",
      { class: "msg msg-user", testid: "user-message" },
      h("div", { class: "bubble", text: userText }),
    );
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

  textBlock(id: string): TextBlock {
    return this.getOrAdd(this.texts, id, () => new TextBlock());
  }

  toolCard(id: string, name = "tool"): ToolCard {
    return this.getOrAdd(this.tools, id, () => new ToolCard(id, name));
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

  private getOrAdd<T extends { element: HTMLElement }>(
    map: Map<string, T>,
    id: string,
    create: () => T,
  ): T {
    let item = map.get(id);
    if (!item) {
      item = create();
      map.set(id, item);
      this.hidePending();
      this.append(item.element);
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

type ToolState = "streaming" | "called" | "done" | "error" | "cancelled";

const TOOL_STATUS: Record<ToolState, string> = {
  streaming: "Writing arguments…",
  called: "Running in your browser…",
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

  /** The bridge runs this tool (it is not one of the page's): its result comes in the run. */
  runsOnServer(): void {
    this.onServer = true;
    this.element.dataset.runsOn = "server";
    this.setState(this.element.dataset.state as ToolState);
  }

  cancelIfUnanswered(): void {
    const state = this.element.dataset.state;
    if (state === "streaming" || state === "called") this.setState("cancelled");
  }

  private setState(state: ToolState): void {
    this.element.dataset.state = state;
    this.status.textContent =
      (this.onServer ? SERVER_TOOL_STATUS[state] : undefined) ?? TOOL_STATUS[state];
  }
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
