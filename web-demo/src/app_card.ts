// An MCP App's card: which server's widget, the tool's input and result, and "Open widget",
// which shows the widget's HTML in a sandboxed iframe. No protocol here: chat.ts hands it the
// data and how to fetch the HTML (mcp_apps.ts).

import { h, page, stickToBottom } from "./dom";

/** What the card shows of an `mcp-apps` activity. */
export interface AppCardData {
  serverId: string;
  resourceUri: string;
  /** The tool's arguments, as JSON text. */
  input: string;
  /** The text of the tool's result. */
  result: string;
}

type WidgetState = "closed" | "opening" | "open" | "error";

const NOTE =
  "A preview: the widget runs sandboxed (scripts only, no access to this page) and cannot call " +
  "its server's tools from here. Full MCP App hosting is CopilotKit's job.";

export class AppCard {
  readonly element: HTMLElement;
  private readonly server: HTMLElement;
  private readonly resource: HTMLElement;
  private readonly input: HTMLElement;
  private readonly result: HTMLElement;
  private readonly button: HTMLButtonElement;
  private readonly problem: HTMLElement;
  private readonly frameBox: HTMLElement;
  private data: AppCardData;

  /** `open`: the widget's HTML (it may throw; the card then shows why). */
  constructor(
    data: AppCardData,
    private readonly open: () => Promise<string>,
  ) {
    this.data = data;
    this.server = h("code", { class: "app-server", testid: "app-server" });
    this.resource = h("code", { class: "tool-name", testid: "app-resource" });
    this.input = h("pre", { testid: "app-input" });
    this.result = h("pre", { testid: "app-result" });
    this.button = h("button", {
      class: "button ghost small",
      testid: "app-open",
      attrs: { type: "button" },
    });
    this.button.addEventListener("click", () => void this.toggle());
    this.problem = h("p", {
      class: "app-problem",
      testid: "app-problem",
      attrs: { role: "alert" },
    });
    this.frameBox = h("div", { class: "app-frame-box" });
    this.element = h(
      "article",
      {
        class: "tool-card app-card",
        testid: "app-card",
        attrs: { "aria-label": `MCP App ${data.resourceUri}` },
      },
      h(
        "header",
        {},
        h("span", { class: "app-icon", attrs: { "aria-hidden": "true" } }),
        h("span", { class: "app-kind", text: "MCP App" }),
        this.resource,
        h("span", { class: "app-from" }, "from ", this.server),
        this.button,
      ),
      h(
        "div",
        { class: "tool-sections" },
        section("Tool input", this.input),
        section("Result", this.result),
      ),
      this.problem,
      this.frameBox,
      h("p", { class: "app-note", testid: "app-note", text: NOTE }),
    );
    this.show(data);
    this.setWidget("closed");
  }

  /** The activity again (a snapshot replaces it): the card shows the new data. */
  show(data: AppCardData): void {
    this.data = data;
    this.element.dataset.resourceUri = data.resourceUri;
    this.element.dataset.serverId = data.serverId;
    this.server.textContent = data.serverId;
    this.resource.textContent = data.resourceUri;
    this.input.textContent = data.input;
    this.result.textContent = data.result;
  }

  private async toggle(): Promise<void> {
    if (this.element.dataset.widget === "open") {
      this.frameBox.replaceChildren();
      this.setWidget("closed");
      return;
    }
    this.setWidget("opening");
    try {
      const html = await this.open();
      const frame = h("iframe", {
        class: "app-frame",
        testid: "app-frame",
        attrs: {
          // Scripts run, but in an opaque origin: no cookies, storage or DOM of this page.
          sandbox: "allow-scripts",
          referrerpolicy: "no-referrer",
          title: `Widget ${this.data.resourceUri}`,
          srcdoc: html,
        },
      });
      stickToBottom(page(), () => this.frameBox.replaceChildren(frame));
      this.setWidget("open");
    } catch (error) {
      this.problem.textContent = `Could not open the widget: ${(error as Error).message}`;
      this.setWidget("error");
    }
  }

  private setWidget(state: WidgetState): void {
    this.element.dataset.widget = state;
    this.problem.hidden = state !== "error";
    this.button.disabled = state === "opening";
    this.button.textContent =
      state === "open" ? "Close widget" : state === "opening" ? "Opening…" : "Open widget";
  }
}

function section(label: string, content: HTMLElement): HTMLElement {
  const title = h("div", { class: "tool-label", text: label });
  return h("div", { class: "tool-section" }, title, content);
}
