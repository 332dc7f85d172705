// A question from one of the bridge's server tools (`agui-bridge … --ask-user`, or a Python
// tool's `@asks_user`): an AG-UI interrupt of reason "input_required", with the question as its
// message and a JSON Schema for the answer. `useInterrupt` shows a form made from the schema;
// Send resolves the interrupt with the answer, and CopilotKit resumes the run, in which the
// answer is the tool call's result. The bridge holds the answer to the schema again.
import { type Interrupt, type InterruptResolveFn, useInterrupt } from "@copilotkit/react-core/v2";
import { type FormEvent, useState } from "react";

type Schema = Record<string, unknown>;

declare global {
  interface Window {
    /** Every answer a question card gave (resolve's payload), in order (read by the tests). */
    answers: unknown[];
  }
}
window.answers = [];

const isSchema = (value: unknown): value is Schema =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** One field's value as JSON: a number for a number, the choice itself for an enum. */
function read(schema: Schema, text: string | boolean): unknown {
  if (typeof text === "boolean") return text;
  if (Array.isArray(schema.enum)) return text === "" ? undefined : schema.enum[Number(text)];
  if (schema.type === "integer" || schema.type === "number") {
    return text === "" ? undefined : Number(text);
  }
  return text;
}

/** A form field for one schema: a choice for an enum, a checkbox, a number, a date, text. */
function SchemaField({
  name,
  schema,
  required,
  disabled,
  onChange,
}: {
  name: string;
  schema: Schema;
  required: boolean;
  disabled: boolean;
  onChange: (value: string | boolean) => void;
}) {
  const label = typeof schema.title === "string" ? schema.title : name;
  const testid = `question-field-${name}`;
  let input;
  if (Array.isArray(schema.enum)) {
    input = (
      <select
        data-testid={testid}
        required={required}
        disabled={disabled}
        defaultValue=""
        onChange={(event) => onChange(event.target.value)}
      >
        <option value="">Choose…</option>
        {schema.enum.map((choice, index) => (
          <option key={index} value={String(index)}>
            {String(choice)}
          </option>
        ))}
      </select>
    );
  } else if (schema.type === "boolean") {
    input = (
      <input
        data-testid={testid}
        type="checkbox"
        disabled={disabled}
        onChange={(event) => onChange(event.target.checked)}
      />
    );
  } else {
    const numeric = schema.type === "integer" || schema.type === "number";
    const type = numeric ? "number" : schema.format === "date" ? "date" : "text";
    input = (
      <input
        data-testid={testid}
        type={type}
        required={required}
        disabled={disabled}
        step={schema.type === "integer" ? 1 : undefined}
        min={typeof schema.minimum === "number" ? schema.minimum : undefined}
        max={typeof schema.maximum === "number" ? schema.maximum : undefined}
        onChange={(event) => onChange(event.target.value)}
      />
    );
  }
  return (
    <label className="approval-label">
      {label}
      {input}
    </label>
  );
}

/** The card for one "input_required" interrupt: its question and the form its schema makes. */
function QuestionCard({ interrupt, resolve }: { interrupt: Interrupt; resolve: InterruptResolveFn }) {
  const schema: Schema = isSchema(interrupt.responseSchema)
    ? interrupt.responseSchema
    : { type: "string" };
  const properties =
    schema.type === "object" && isSchema(schema.properties)
      ? Object.entries(schema.properties).filter((entry): entry is [string, Schema] =>
          isSchema(entry[1]),
        )
      : undefined;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [sent, setSent] = useState(false);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    let answer: unknown;
    if (properties) {
      const object: Record<string, unknown> = {};
      for (const [name, field] of properties) {
        const value = name in values ? read(field, values[name]!) : undefined;
        if (value !== undefined) object[name] = value;
      }
      answer = object;
    } else {
      answer = read(schema, values.answer ?? "");
    }
    window.answers.push(answer);
    setSent(true);
    void resolve(answer, interrupt.id);
  };
  const set = (name: string) => (value: string | boolean) =>
    setValues((seen) => ({ ...seen, [name]: value }));

  return (
    <form
      className="approval-card"
      data-testid="question-card"
      data-state={sent ? "answered" : "waiting"}
      data-tool-call-id={interrupt.toolCallId ?? ""}
      onSubmit={submit}
    >
      <div className="approval-head">
        <span className="approval-title" data-testid="question-message">
          {interrupt.message ?? "The agent asks"}
        </span>
      </div>
      {(properties ?? [["answer", schema] as [string, Schema]]).map(([name, field]) => (
        <SchemaField
          key={name}
          name={name}
          schema={field}
          required={!properties || required.has(name)}
          disabled={sent}
          onChange={set(name)}
        />
      ))}
      <div className="approval-actions">
        <button type="submit" className="approval-approve" data-testid="question-send" disabled={sent}>
          Send
        </button>
      </div>
    </form>
  );
}

/** Shows a question card, in the chat, for each question a server tool asks. */
export function Questions() {
  useInterrupt({
    enabled: ({ value }) => (value as Interrupt | undefined)?.reason === "input_required",
    render: ({ interrupt, interrupts, resolve }) => (
      <div className="approvals">
        {(interrupts.length > 0 ? interrupts : interrupt ? [interrupt] : []).map((open) => (
          <QuestionCard key={open.id} interrupt={open} resolve={resolve} />
        ))}
      </div>
    ),
  });
  return null;
}
