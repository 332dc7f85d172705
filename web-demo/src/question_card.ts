// A question from a server tool (an AG-UI interrupt of reason "input_required", the bridge's
// ask_user or a Python tool's @asks_user): the question, a form made from the interrupt's
// responseSchema, and Send. The answer is the resume's payload; the bridge holds it to the
// schema again and, when it does not fit, refuses it (answer_invalid) and the card asks anew.

import { h } from "./dom";
import { isRecord } from "./http_errors";

/** What a question card shows: one interrupt of reason "input_required". */
export interface QuestionRequest {
  interruptId: string;
  toolCallId: string;
  message?: string;
  responseSchema?: Record<string, unknown>;
  /** Why the bridge refused the last answer, when it did. */
  refusal?: string;
}

/** One field of the form: what it shows and how its value becomes JSON. */
interface Field {
  name: string;
  element: HTMLInputElement | HTMLSelectElement;
  read(): unknown;
}

let questionCount = 0;

/** A question card; `answer` settles when the person sends a value the form accepts. */
export class QuestionCard {
  readonly element: HTMLElement;
  readonly answer: Promise<unknown>;
  private readonly fields: Field[];
  private readonly whole: boolean;
  private readonly send: HTMLButtonElement;
  private readonly verdict: HTMLElement;
  private settle: (answer: unknown) => void = () => undefined;

  constructor(request: QuestionRequest) {
    const n = (questionCount += 1);
    const schema = request.responseSchema ?? { type: "string" };
    const properties = schema.type === "object" && isRecord(schema.properties);
    this.whole = !properties;
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    this.fields = properties
      ? Object.entries(schema.properties as Record<string, unknown>).map(([name, field]) =>
          makeField(`question-${n}-${name}`, name, isRecord(field) ? field : {}, required.has(name)),
        )
      : [makeField(`question-${n}-answer`, "answer", schema, true)];
    const problem = h("p", {
      class: "approval-problem",
      testid: "question-problem",
      text: request.refusal ?? "",
      attrs: { role: "alert" },
    });
    problem.hidden = !request.refusal;
    this.verdict = h("p", { class: "approval-verdict", testid: "question-verdict" });
    this.verdict.hidden = true;
    this.send = h("button", {
      class: "button approve",
      testid: "question-send",
      text: "Send",
      attrs: { type: "submit" },
    });
    const form = h(
      "form",
      { class: "question-form", testid: "question-form" },
      ...this.fields.map((field) =>
        h(
          "label",
          { class: "tool-label question-field" },
          h("span", { text: fieldTitle(field.name, schema) }),
          field.element,
        ),
      ),
      problem,
      h("div", { class: "approval-actions" }, this.send),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return; // the browser shows what is missing or wrong
      this.close();
      this.settle(this.value());
    });
    this.element = h(
      "section",
      {
        class: "approval-card question-card",
        testid: "question-card",
        attrs: {
          "data-state": "waiting",
          "data-tool-call-id": request.toolCallId,
          "data-interrupt-id": request.interruptId,
          tabindex: "-1",
        },
      },
      h(
        "header",
        {},
        h("span", { class: "approval-icon", text: "?", attrs: { "aria-hidden": "true" } }),
        h("h3", { testid: "question-message", text: request.message ?? "The agent asks" }),
      ),
      form,
      this.verdict,
    );
    this.answer = new Promise((resolve) => (this.settle = resolve));
  }

  /** Moves the keyboard to the card's first field. */
  focus(): void {
    this.fields[0]?.element.focus({ preventScroll: true });
  }

  /** No answer will be given (the person stopped the turn). */
  abandon(): void {
    if (this.element.dataset.state !== "waiting") return;
    this.close("Not answered: the turn was stopped.");
  }

  private value(): unknown {
    if (this.whole) return this.fields[0]?.read();
    const out: Record<string, unknown> = {};
    for (const field of this.fields) {
      const value = field.read();
      if (value !== undefined) out[field.name] = value;
    }
    return out;
  }

  private close(text = "Answer sent."): void {
    this.element.dataset.state = text === "Answer sent." ? "approved" : "abandoned";
    for (const field of this.fields) field.element.disabled = true;
    this.send.disabled = true;
    this.verdict.textContent = text;
    this.verdict.hidden = false;
  }
}

function fieldTitle(name: string, schema: Record<string, unknown>): string {
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const field = properties[name];
  if (isRecord(field) && typeof field.title === "string") return field.title;
  return name === "answer" ? "Your answer" : name;
}

/** A form field for one schema: a choice for an enum, a checkbox, a number, a date, text. */
function makeField(
  id: string,
  name: string,
  schema: Record<string, unknown>,
  required: boolean,
): Field {
  const testid = `question-field-${name}`;
  if (Array.isArray(schema.enum)) {
    const choices = schema.enum;
    const select = h("select", { testid, attrs: { id, name } });
    select.required = required;
    select.append(h("option", { text: "Choose…", attrs: { value: "" } }));
    choices.forEach((choice, index) =>
      select.append(h("option", { text: String(choice), attrs: { value: String(index) } })),
    );
    return {
      name,
      element: select,
      read: () => (select.value === "" ? undefined : choices[Number(select.value)]),
    };
  }
  const input = h("input", { testid, attrs: { id, name, autocomplete: "off" } });
  const kind = schema.type;
  if (kind === "boolean") {
    input.type = "checkbox";
    return { name, element: input, read: () => input.checked };
  }
  input.required = required;
  if (kind === "integer" || kind === "number") {
    input.type = "number";
    input.step = kind === "integer" ? "1" : "any";
    if (typeof schema.minimum === "number") input.min = String(schema.minimum);
    if (typeof schema.maximum === "number") input.max = String(schema.maximum);
    return {
      name,
      element: input,
      read: () => (input.value === "" ? undefined : Number(input.value)),
    };
  }
  input.type =
    schema.format === "date" ? "date" : schema.format === "email" ? "email" : "text";
  if (typeof schema.minLength === "number") input.minLength = schema.minLength;
  if (typeof schema.maxLength === "number") input.maxLength = schema.maxLength;
  return {
    name,
    element: input,
    read: () => (input.value === "" && !required ? undefined : input.value),
  };
}
