// The shared state's cards (agentic generative UI): the plan the model keeps in `state.steps`
// and the to-dos in `state.todos`, redrawn from the agent's state as each STATE_DELTA or
// STATE_SNAPSHOT arrives. No protocol here: chat.ts hands them the state.

import { h, page, stickToBottom } from "./dom";

/** One step of the plan, as the bridge's scripted model writes it: {description, status}. */
export interface Step {
  description: string;
  status: string;
}

/** One to-do, as the scripted model writes it: {text, done}. */
export interface Todo {
  text: string;
  done: boolean;
}

/** What the page shows of the state; a part the state lacks (or holds as no list) is absent. */
export interface StateParts {
  steps?: Step[];
  todos?: Todo[];
}

/** The plan and the to-dos of a state, read leniently: the model writes what it likes. */
export function readState(state: unknown): StateParts {
  if (!isRecord(state)) return {};
  const parts: StateParts = {};
  if (Array.isArray(state.steps)) {
    parts.steps = state.steps.map((item) =>
      isRecord(item)
        ? { description: text(item.description ?? item.text), status: text(item.status) }
        : { description: text(item), status: "" },
    );
  }
  if (Array.isArray(state.todos)) {
    parts.todos = state.todos.map((item) =>
      isRecord(item)
        ? { text: text(item.text ?? item.description), done: item.done === true }
        : { text: text(item), done: false },
    );
  }
  return parts;
}

const COMPLETED = new Set(["completed", "complete", "done"]);

/** The plan: each step with a mark for its status, and how many are done. */
export class StepsCard {
  readonly element: HTMLElement;
  private readonly progress: HTMLElement;
  private readonly list: HTMLOListElement;

  constructor() {
    this.progress = h("span", { class: "tool-status", testid: "steps-progress" });
    this.list = h("ol", { class: "state-list steps-list" });
    this.element = h(
      "article",
      { class: "tool-card state-card", testid: "steps-card", attrs: { "aria-label": "Plan" } },
      h(
        "header",
        {},
        h("span", { class: "state-icon steps-icon", attrs: { "aria-hidden": "true" } }),
        h("span", { class: "state-title", text: "Plan" }),
        this.progress,
      ),
      this.list,
    );
  }

  /** Shows these steps; returns a line for screen readers. */
  show(steps: Step[]): string {
    const done = steps.filter((step) => COMPLETED.has(step.status)).length;
    const summary = steps.length ? `${done} of ${steps.length} done` : "No steps";
    stickToBottom(page(), () => {
      this.list.replaceChildren(...steps.map(stepItem));
      this.progress.textContent = summary;
      this.element.dataset.state = steps.length && done === steps.length ? "done" : "called";
    });
    return `Plan: ${summary}.`;
  }
}

function stepItem(step: Step): HTMLLIElement {
  const completed = COMPLETED.has(step.status);
  const status = step.status || "pending";
  return h(
    "li",
    { testid: "step", attrs: { "data-status": completed ? "completed" : status } },
    h("span", {
      class: "state-mark",
      text: completed ? "✓" : "",
      attrs: { "aria-hidden": "true" },
    }),
    h("span", { class: "state-text", testid: "step-description", text: step.description }),
    h("span", { class: "state-tag", testid: "step-status", text: status }),
  );
}

/** The to-do list: each item, ticked when done. */
export class TodoCard {
  readonly element: HTMLElement;
  private readonly progress: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly empty: HTMLElement;

  constructor() {
    this.progress = h("span", { class: "tool-status", testid: "todos-progress" });
    this.list = h("ul", { class: "state-list todo-list" });
    this.empty = h("p", { class: "state-empty", text: "Nothing to do." });
    this.element = h(
      "article",
      {
        class: "tool-card state-card",
        testid: "todo-card",
        attrs: { "aria-label": "To-do list" },
      },
      h(
        "header",
        {},
        h("span", { class: "state-icon todo-icon", attrs: { "aria-hidden": "true" } }),
        h("span", { class: "state-title", text: "To-do list" }),
        this.progress,
      ),
      this.list,
      this.empty,
    );
  }

  /** Shows these to-dos; returns a line for screen readers. */
  show(todos: Todo[]): string {
    const done = todos.filter((todo) => todo.done).length;
    const summary = `${done} of ${todos.length} done`;
    stickToBottom(page(), () => {
      this.list.replaceChildren(...todos.map(todoItem));
      this.list.hidden = todos.length === 0;
      this.empty.hidden = todos.length > 0;
      this.progress.textContent = summary;
      this.element.dataset.state = todos.length && done === todos.length ? "done" : "called";
    });
    return `To-do list: ${todos.length} item${todos.length === 1 ? "" : "s"}, ${summary}.`;
  }
}

function todoItem(todo: Todo): HTMLLIElement {
  return h(
    "li",
    { testid: "todo", attrs: { "data-status": todo.done ? "completed" : "pending" } },
    h("span", {
      class: "state-mark",
      text: todo.done ? "✓" : "",
      attrs: { "aria-hidden": "true" },
    }),
    h("span", { class: "state-text", testid: "todo-text", text: todo.text }),
    // The mark is drawn; a screen reader hears the word.
    h("span", { class: "sr-only", text: todo.done ? "(done)" : "(to do)" }),
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string {
  return typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
}
