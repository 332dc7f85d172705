// The event inspector: every AG-UI event as the client hands it over, with the time since its
// run started. A row opens to show the event's JSON.

import type { BaseEvent } from "@ag-ui/client";

import { h, stickToBottom } from "./dom";

/** Rows kept: the oldest go first, so a long session cannot slow the page down. */
const MAX_ROWS = 3000;

export class EventInspector {
  private runStarted = 0;
  private runs = 0;
  private count = 0;

  constructor(
    private readonly list: HTMLElement,
    private readonly counter: HTMLElement,
  ) {}

  /** A new run: a heading row, and the clock restarts. */
  startRun(label: string): void {
    this.runs += 1;
    this.runStarted = performance.now();
    this.add(h("li", { class: "run-heading", text: `Run ${this.runs} · ${label}` }));
  }

  record(event: BaseEvent): void {
    const at = performance.now() - this.runStarted;
    const row = h(
      "li",
      { testid: "inspector-event", attrs: { "data-type": event.type } },
      h(
        "details",
        {},
        h(
          "summary",
          {},
          h("time", { text: `+${(at / 1000).toFixed(3)}s` }),
          h("span", { class: "event-type", text: event.type }),
          h("span", { class: "event-summary", text: summarize(event) }),
        ),
      ),
    );
    const details = row.firstElementChild as HTMLDetailsElement;
    details.addEventListener(
      "toggle",
      () => details.append(h("pre", { text: JSON.stringify(event, null, 2) })),
      { once: true },
    );
    this.count += 1;
    this.counter.textContent = String(this.count);
    this.add(row);
  }

  clear(): void {
    this.list.replaceChildren();
    this.runs = 0;
    this.count = 0;
    this.counter.textContent = "0";
  }

  private add(row: HTMLElement): void {
    stickToBottom(this.list, () => {
      this.list.append(row);
      while (this.list.childElementCount > MAX_ROWS) this.list.firstElementChild?.remove();
    });
  }
}

/** The one thing worth seeing in a row without opening it. */
function summarize(event: BaseEvent): string {
  const fields = event as unknown as Record<string, unknown>;
  if (typeof fields.delta === "string") return JSON.stringify(fields.delta);
  // STATE_DELTA: its JSON Patch operations; STATE_SNAPSHOT: the state, cut to what a row shows.
  if (Array.isArray(fields.delta)) return fields.delta.map(operation).join(", ");
  if (fields.snapshot !== undefined) return JSON.stringify(fields.snapshot).slice(0, 200);
  if (typeof fields.toolCallName === "string") return fields.toolCallName;
  if (typeof fields.message === "string") {
    return `${typeof fields.code === "string" ? `${fields.code}: ` : ""}${fields.message}`;
  }
  if (fields.outcome && typeof fields.outcome === "object") {
    const outcome = fields.outcome as Record<string, unknown>;
    const pending = Array.isArray(outcome.pendingToolCallIds)
      ? outcome.pendingToolCallIds.length
      : 0;
    return pending
      ? `${pending} tool call${pending === 1 ? "" : "s"} pending`
      : String(outcome.type);
  }
  return "";
}

/** "replace /steps/0/status" for an RFC 6902 operation. */
function operation(op: unknown): string {
  if (typeof op !== "object" || op === null) return String(op);
  const { op: name, path } = op as Record<string, unknown>;
  return `${String(name)} ${String(path)}`;
}
