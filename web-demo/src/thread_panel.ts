// The thread list, shown when the bridge keeps threads (`--threads`): the owner's threads,
// newest first, the open one marked, a run going on in one said; a click opens one, × forgets
// one, New thread starts one. A sidebar on a wide screen, a drawer over the page on a narrow one
// (the top bar's Threads button opens it; Esc or a choice closes it).

import { h } from "./dom";
import { type Threads, type ThreadSummary, ThreadsError } from "./threads";

/** Wide enough for the list beside the conversation; below, it is a drawer. */
const SIDEBAR_QUERY = "(min-width: 1100px)";
/** While a listed thread has a run going on, the list is read again this often, so its
 * "answering…" goes when the run ends (in this tab, another, or with no client at all); and
 * while the page runs in a thread not listed yet (the bridge saves a new one as its run
 * begins, perhaps after the page heard of the run). */
const RUNNING_POLL_MS = 1500;

export interface ThreadPanelElements {
  panel: HTMLElement;
  list: HTMLOListElement;
  empty: HTMLElement;
  toggle: HTMLButtonElement;
  close: HTMLButtonElement;
  newThread: HTMLButtonElement;
}

/** What a choice in the list does; main.ts implements it. */
export interface ThreadPanelHooks {
  /** Opens a thread of the list; undefined: a new, empty one. */
  open(threadId: string | undefined): void;
  error(message: string, code: string, title: string): void;
}

export class ThreadPanel {
  private current = "";
  private threads: ThreadSummary[] = [];
  /** Answers of GET /threads may cross: only the latest asked is shown. */
  private asked = 0;
  private poll: number | undefined;
  /** A turn is in progress in the thread shown. */
  busy = false;
  private readonly wide = window.matchMedia(SIDEBAR_QUERY);

  constructor(
    private readonly source: Threads,
    private readonly elements: ThreadPanelElements,
    private readonly hooks: ThreadPanelHooks,
  ) {
    const { panel, toggle, close, newThread } = elements;
    toggle.addEventListener("click", () =>
      this.setOpen(toggle.getAttribute("aria-expanded") !== "true", true),
    );
    close.addEventListener("click", () => {
      this.setOpen(false);
      toggle.focus();
    });
    newThread.addEventListener("click", () => this.choose(undefined));
    // Esc closes the drawer (and does not reach the page's Esc, which stops a run).
    panel.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || this.wide.matches) return;
      event.stopPropagation();
      this.setOpen(false);
      toggle.focus();
    });
  }

  /** The bridge keeps threads: the list shows (open on a wide screen), `current` marked. */
  start(current: string): void {
    this.elements.toggle.hidden = false;
    this.setOpen(this.wide.matches);
    // A sidebar when there is room for one; a drawer, closed, when the window narrows.
    this.wide.addEventListener("change", () => this.setOpen(this.wide.matches));
    this.mark(current);
  }

  /** The thread the page shows now. */
  mark(threadId: string): void {
    this.current = threadId;
    this.render();
  }

  /** Lists the threads again (a run began or ended, one was forgotten). */
  async refresh(): Promise<void> {
    const asked = (this.asked += 1);
    window.clearTimeout(this.poll);
    try {
      const threads = await this.source.list();
      if (asked !== this.asked) return;
      this.threads = threads;
      this.render();
    } catch (error) {
      this.fail(error, "Could not list the threads.");
      return;
    }
    const unlisted = !this.threads.some((thread) => thread.id === this.current);
    if (this.threads.some((thread) => thread.running) || (this.busy && unlisted)) {
      this.poll = window.setTimeout(() => void this.refresh(), RUNNING_POLL_MS);
    }
  }

  private render(): void {
    const { list, empty } = this.elements;
    list.replaceChildren(...this.threads.map((thread) => this.item(thread)));
    empty.hidden = this.threads.length > 0;
  }

  private item(thread: ThreadSummary): HTMLElement {
    const title = thread.title.trim() || "Untitled thread";
    const current = thread.id === this.current;
    const updated = new Date(thread.updatedAt);
    const meta = h(
      "span",
      { class: "thread-meta" },
      h("time", { text: when(updated), attrs: { datetime: thread.updatedAt } }),
    );
    if (thread.running) {
      const running = { class: "thread-running", testid: "thread-running", text: "answering…" };
      meta.append(h("span", running));
    }
    const open = h(
      "button",
      {
        class: "thread-open",
        testid: "thread-open",
        attrs: { type: "button", ...(current && { "aria-current": "true" }) },
      },
      h("span", { class: "thread-title", testid: "thread-title", text: title }),
      meta,
    );
    open.addEventListener("click", () => this.choose(thread.id));
    const remove = h("button", {
      class: "thread-delete",
      testid: "thread-delete",
      text: "×",
      attrs: { type: "button", "aria-label": `Delete the thread “${title}”`, title: "Delete" },
    });
    remove.addEventListener("click", () => void this.forget(thread.id));
    return h(
      "li",
      {
        class: "thread",
        testid: "thread",
        attrs: { "data-thread-id": thread.id, ...(current && { "data-current": "" }) },
      },
      open,
      remove,
    );
  }

  private choose(threadId: string | undefined): void {
    if (!this.wide.matches) this.setOpen(false);
    this.hooks.open(threadId);
  }

  private async forget(threadId: string): Promise<void> {
    // The keyboard stays in the list: on the next thread, or New thread when none is left.
    const index = this.threads.findIndex((thread) => thread.id === threadId);
    try {
      await this.source.forget(threadId);
    } catch (error) {
      // Already gone (another tab forgot it): the list catches up below.
      if (!(error instanceof ThreadsError && error.status === 404)) {
        this.fail(error, "Could not delete the thread.");
        return;
      }
    }
    if (threadId === this.current) this.hooks.open(undefined);
    await this.refresh();
    const buttons = this.elements.list.querySelectorAll<HTMLButtonElement>(".thread-open");
    (buttons[Math.min(index, buttons.length - 1)] ?? this.elements.newThread).focus();
  }

  private setOpen(open: boolean, focus = false): void {
    const { panel, toggle } = this.elements;
    panel.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    document.body.classList.toggle("threads-open", open);
    if (open && focus) {
      const target =
        panel.querySelector<HTMLButtonElement>(".thread-open[aria-current]") ??
        panel.querySelector<HTMLButtonElement>(".thread-open") ??
        this.elements.newThread;
      target.focus();
    }
  }

  private fail(error: unknown, title: string): void {
    if (error instanceof ThreadsError) this.hooks.error(error.message, error.code, title);
    else this.hooks.error((error as Error).message, "client_error", title);
  }
}

/** The time of day for today's threads, the date for older ones. */
function when(date: Date): string {
  if (Number.isNaN(date.getTime())) return "";
  const today = new Date().toDateString() === date.toDateString();
  return today
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" });
}
