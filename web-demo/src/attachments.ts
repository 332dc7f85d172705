// Files attached to the next message: picked with the paperclip, read as base64, shown as chips
// until sent, and sent as AG-UI 1.0 content parts of the user message, in the shape CopilotKit
// 1.74's chat sends them: `{type, source: {type: "data", value, mimeType}, metadata: {filename}}`,
// the type (image, audio, video, document) following the MIME type.

import type { ContentPart } from "@ag-ui/client";

import { h } from "./dom";

/** Largest file the page attaches. */
export const MAX_FILE_BYTES = 5 * 1024 * 1024;
/**
 * Most bytes attached to one message. Base64 makes them a third bigger, and the history sends
 * them again every turn, so this stays well under the bridge's `--max-body-bytes` (16 MiB).
 */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** What the paperclip offers: images, PDFs, text files and audio. */
export const ACCEPT = "image/*,application/pdf,text/*,.md,.csv,.json,audio/*";
const TEXT_TYPES = new Set(["application/json", "application/xml", "application/x-ndjson"]);
/** Browsers leave `File.type` empty for some text files; their extension says what they are. */
const BY_EXTENSION: Record<string, string> = {
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  json: "application/json",
  txt: "text/plain",
  log: "text/plain",
};

export interface Attachment {
  readonly name: string;
  readonly mimeType: string;
  readonly size: number;
  /** The bytes, base64 (no `data:` prefix). */
  readonly data: string;
}

export type Modality = "image" | "audio" | "video" | "document";

/** The part's type for a MIME type, as CopilotKit's getModalityFromMimeType decides it. */
export function modalityOf(mimeType: string): Modality {
  if (mimeType.startsWith("image/")) return "image";
  if (mimeType.startsWith("audio/")) return "audio";
  if (mimeType.startsWith("video/")) return "video";
  return "document";
}

/** The AG-UI 1.0 part an attachment is sent as. */
export function toPart(attachment: Attachment): ContentPart {
  const { name, mimeType, data } = attachment;
  return {
    type: modalityOf(mimeType),
    source: { type: "data", value: data, mimeType },
    metadata: { filename: name },
  };
}

/** The attachment a part was sent as (a restored thread's user message); undefined for a text
 * part, or a part whose bytes the page does not hold (a URL, a provider's file). */
export function fromPart(part: ContentPart): Attachment | undefined {
  if (part.type === "text" || part.source.type !== "data") return undefined;
  const { value, mimeType } = part.source;
  const padding = value.endsWith("==") ? 2 : value.endsWith("=") ? 1 : 0;
  const metadata: unknown = part.metadata;
  const named = isRecord(metadata) && typeof metadata.filename === "string";
  return {
    name: named ? String(metadata.filename) : part.type,
    mimeType,
    size: Math.floor((value.length * 3) / 4) - padding,
    data: value,
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Bytes as the scripted model says them: `512 B`, `3 KB`, `2.5 MB` (1 KB = 1024 B). */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** The label a chip shows beside the name: what kind of file it is. */
function badge(mimeType: string): string {
  if (mimeType === "application/pdf") return "PDF";
  const modality = modalityOf(mimeType);
  if (modality !== "document") return modality.toUpperCase();
  return "TEXT";
}

/** The file's MIME type, or undefined when the page does not attach its kind. */
function mimeTypeOf(file: File): string | undefined {
  const extension = file.name.split(".").pop()?.toLowerCase() ?? "";
  const type = file.type || BY_EXTENSION[extension] || "";
  const attachable =
    type.startsWith("image/") ||
    type.startsWith("audio/") ||
    type.startsWith("text/") ||
    type === "application/pdf" ||
    TEXT_TYPES.has(type);
  return attachable ? type : undefined;
}

function readBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] ?? "");
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

/** A chip: the kind, the name and the size; for an image, a thumbnail of it. */
export function chip(attachment: Attachment, remove?: () => void): HTMLElement {
  const { name, mimeType, size } = attachment;
  const kind = modalityOf(mimeType);
  const preview =
    kind === "image"
      ? h("img", {
          class: "chip-thumb",
          attrs: { src: `data:${mimeType};base64,${attachment.data}`, alt: "" },
        })
      : h("span", { class: "chip-badge", text: badge(mimeType) });
  const element = h(
    "li",
    {
      class: "chip",
      testid: "attachment-chip",
      attrs: { "data-name": name, "data-type": mimeType, "data-size": String(size) },
    },
    preview,
    h("span", { class: "chip-name", testid: "attachment-name", text: name }),
    h("span", { class: "chip-size", text: humanSize(size) }),
  );
  if (remove) {
    const button = h("button", {
      class: "chip-remove",
      testid: "attachment-remove",
      text: "×",
      attrs: { type: "button", "aria-label": `Remove ${name}` },
    });
    button.addEventListener("click", remove);
    element.append(button);
  }
  return element;
}

/**
 * The files waiting for the next message: the chips under the composer, the line that says why
 * a file was not attached, and `take()` when the message is sent.
 */
export class AttachmentTray {
  private items: Attachment[] = [];
  /** Reads in progress: the message waits for them. */
  private reading: Promise<unknown> = Promise.resolve();
  /** Bytes accepted and still being read: they count towards the message's limit. */
  private pendingBytes = 0;

  constructor(
    private readonly list: HTMLElement,
    private readonly problem: HTMLElement,
    private readonly announce: (text: string) => void,
  ) {}

  get empty(): boolean {
    return this.items.length === 0;
  }

  /** Attaches what fits the limits and says why the rest was not. */
  add(files: Iterable<File>): Promise<void> {
    const refused: string[] = [];
    let total = this.items.reduce((sum, item) => sum + item.size, this.pendingBytes);
    const accepted: { file: File; mimeType: string }[] = [];
    for (const file of files) {
      const mimeType = mimeTypeOf(file);
      if (!mimeType) {
        refused.push(`${file.name}: the demo attaches images, PDFs, text files and audio.`);
      } else if (file.size > MAX_FILE_BYTES) {
        refused.push(
          `${file.name} is ${humanSize(file.size)}: files may be up to ` +
            `${humanSize(MAX_FILE_BYTES)} each.`,
        );
      } else if (total + file.size > MAX_MESSAGE_BYTES) {
        refused.push(
          `${file.name} (${humanSize(file.size)}) would take this message over ` +
            `${humanSize(MAX_MESSAGE_BYTES)} of attachments.`,
        );
      } else {
        total += file.size;
        accepted.push({ file, mimeType });
      }
    }
    this.say(refused);
    const reserved = accepted.reduce((sum, { file }) => sum + file.size, 0);
    this.pendingBytes += reserved;
    const read = Promise.all(
      accepted.map(async ({ file, mimeType }) => {
        const data = await readBase64(file);
        return { name: file.name, mimeType, size: file.size, data };
      }),
    ).then(
      (read) => {
        this.items.push(...read);
        this.render();
        if (read.length) this.announce(`Attached ${read.map((item) => item.name).join(", ")}.`);
      },
      (error: unknown) => this.say([`Could not read a file: ${(error as Error).message}`]),
    ).finally(() => {
      this.pendingBytes -= reserved;
    });
    this.reading = this.reading.then(() => read);
    return read;
  }

  /** The attachments for the message being sent (once every read is done); the tray empties. */
  async take(): Promise<Attachment[]> {
    await this.reading;
    const taken = this.items;
    this.clear();
    return taken;
  }

  clear(): void {
    this.items = [];
    this.say([]);
    this.render();
  }

  private remove(item: Attachment): void {
    this.items = this.items.filter((kept) => kept !== item);
    this.render();
    this.announce(`Removed ${item.name}.`);
  }

  private render(): void {
    this.list.replaceChildren(...this.items.map((item) => chip(item, () => this.remove(item))));
    this.list.hidden = this.items.length === 0;
  }

  private say(lines: string[]): void {
    this.problem.textContent = lines.join(" ");
    this.problem.hidden = lines.length === 0;
  }
}
