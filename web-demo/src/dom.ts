// A tiny element builder: text always goes in as text nodes, never as HTML.

export interface ElementProps {
  class?: string;
  /** The stable `data-testid` the browser tests select by. */
  testid?: string;
  text?: string;
  attrs?: Record<string, string>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: ElementProps = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (props.class) element.className = props.class;
  if (props.testid) element.dataset.testid = props.testid;
  for (const [name, value] of Object.entries(props.attrs ?? {})) element.setAttribute(name, value);
  if (props.text !== undefined) element.textContent = props.text;
  element.append(...children);
  return element;
}

/** The element with this id, or an error naming it: index.html and the code must agree. */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const element = document.getElementById(id);
  if (!(element instanceof type)) throw new Error(`index.html has no <${type.name}> #${id}`);
  return element;
}

/** Seconds, as the thinking counter and the inspector show them. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The document's scroller: the page itself scrolls, so a full-page screenshot shows it all. */
export const page = (): HTMLElement => document.scrollingElement as HTMLElement;

/** Keeps a scrollable element pinned to its bottom while new content arrives, unless the
 * reader scrolled up to read something. */
export function stickToBottom(scroller: HTMLElement, change: () => void): void {
  const pinned = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
  change();
  if (pinned) scroller.scrollTop = scroller.scrollHeight;
}
