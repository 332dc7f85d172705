// Model text as Markdown, safely: the model's own HTML is shown as text, never parsed, and the
// rendered HTML goes through DOMPurify before it reaches the page. Images are not loaded (a
// model's image URL is a classic way to leak a conversation); they become links.

import DOMPurify from "dompurify";
import { Marked } from "marked";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char] ?? char);
}

const marked = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node instanceof HTMLAnchorElement) {
    node.target = "_blank";
    node.rel = "noopener noreferrer";
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true as const,
  FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe"],
  FORBID_ATTR: ["style", "class", "id"],
};

/** Replaces `target`'s children with `text` rendered as Markdown. */
export function renderMarkdown(target: HTMLElement, text: string): void {
  const html = marked.parse(text) as string;
  target.replaceChildren(purifier.sanitize(html, PURIFY));
}
