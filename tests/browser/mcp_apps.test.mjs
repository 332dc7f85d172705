// The demo page's MCP Apps card (web-demo/src/app_card.ts) in Debian's Chromium, driven by
// playwright-core, against `agui-bridge demo --mcp ui=<tests/mcp_ui_server.py>`.
//
// Driven by tests/test_browser.py (test_demo_page_shows_an_mcp_app_in_chromium), which starts
// the bridge and sets:
//   DEMO_URL       the demo, whose MCP server "ui" has the UI tool board (offered as ui__board)
//   WIDGET_HTML    the HTML of its resource ui://board/app.html
//   ARTIFACTS_DIR  where the screenshot goes (demo-mcp-app.png)
//
// The page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { launchChromium, problemsOf } from "./chromium.mjs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};
const DEMO_URL = env("DEMO_URL");
const WIDGET_HTML = env("WIDGET_HTML");
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");

const RESOURCE = "ui://board/app.html";

let browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

test("an MCP App's tool shows a card, and Open widget shows its HTML sandboxed", async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  try {
    const page = await context.newPage();
    const problems = problemsOf(page);
    const agentRuns = [];
    page.on("request", (request) => {
      if (request.method() === "POST" && new URL(request.url()).pathname === "/agent") {
        agentRuns.push(request.postDataJSON());
      }
    });
    await page.goto(DEMO_URL);
    await page.waitForFunction(
      () => document.querySelector("[data-testid=model-picker]").value !== "",
    );

    await page.getByTestId("prompt").fill("Please show ui__board");
    await page.getByTestId("prompt").press("Enter");
    await page.waitForFunction(
      () => document.querySelector("[data-testid=run-status]").dataset.state === "idle",
      null,
      { timeout: 30_000 },
    );

    // The tool's card, then the app's card, then the answer.
    const parts = await page.$$eval(".assistant-body > [data-testid]", (elements) =>
      elements.map((element) => element.dataset.testid).filter((id) => id !== "thinking-block"),
    );
    assert.deepEqual(parts, ["tool-card", "app-card", "assistant-text"]);
    const toolCard = page.getByTestId("tool-card");
    assert.equal(await toolCard.getAttribute("data-tool-name"), "ui__board");
    assert.equal(await toolCard.getAttribute("data-state"), "done");
    const toolResult = (await toolCard.getByTestId("tool-result").textContent()).trim();

    const card = page.getByTestId("app-card");
    assert.equal(await card.getAttribute("data-server-id"), "ui");
    assert.equal(await card.getByTestId("app-server").textContent(), "ui");
    assert.equal(await card.getByTestId("app-resource").textContent(), RESOURCE);
    const toolArgs = JSON.parse(await toolCard.getByTestId("tool-args").textContent());
    assert.deepEqual(JSON.parse(await card.getByTestId("app-input").textContent()), toolArgs);
    assert.equal(await card.getByTestId("app-result").textContent(), toolResult);
    assert.match(toolResult, /: \d+ \(with apps\)$/);
    assert.match(await card.getByTestId("app-note").textContent(), /CopilotKit/);
    assert.equal(await card.getAttribute("data-widget"), "closed");
    assert.equal(await card.locator("iframe").count(), 0, "no widget before the click");

    const runsBefore = agentRuns.length;
    const open = card.getByTestId("app-open");
    assert.equal(await open.textContent(), "Open widget");
    await open.click();
    await page.waitForFunction(
      () => document.querySelector("[data-testid=app-card]").dataset.widget !== "opening",
    );
    assert.equal(
      await card.getAttribute("data-widget"),
      "open",
      await card.getByTestId("app-problem").textContent(),
    );

    // One proxied run read the resource: the chat's thread, no model, no conversation.
    assert.equal(agentRuns.length, runsBefore + 1);
    const proxied = agentRuns.at(-1);
    assert.equal(proxied.threadId, agentRuns[0].threadId);
    assert.deepEqual(proxied.messages, []);
    assert.equal(proxied.forwardedProps.__proxiedMCPRequest.method, "resources/read");
    assert.deepEqual(proxied.forwardedProps.__proxiedMCPRequest.params, { uri: RESOURCE });
    assert.equal(proxied.forwardedProps.__proxiedMCPRequest.serverId, "ui");

    // The widget's own HTML, in a sandbox: scripts, an opaque origin, none of the page's.
    const frameElement = card.getByTestId("app-frame");
    assert.equal(await frameElement.getAttribute("sandbox"), "allow-scripts");
    assert.equal(await frameElement.getAttribute("srcdoc"), WIDGET_HTML);
    const frame = await (await frameElement.elementHandle()).contentFrame();
    await frame.waitForSelector("#n");
    assert.equal(await frame.title(), "board");
    assert.match(await frame.locator("#n").textContent(), /^\d+$/);
    assert.equal(await frame.evaluate(() => self.origin), "null");
    assert.equal(await open.textContent(), "Close widget");

    await mkdir(ARTIFACTS_DIR, { recursive: true });
    // Tall enough that nothing scrolls: the sticky top bar then covers none of the card.
    await page.setViewportSize({ width: 1280, height: 1600 });
    await card.screenshot({ path: join(ARTIFACTS_DIR, "demo-mcp-app.png") });

    await open.click();
    assert.equal(await card.getAttribute("data-widget"), "closed");
    assert.equal(await card.locator("iframe").count(), 0);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});
