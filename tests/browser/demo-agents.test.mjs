// The demo page with several agents (issue 43, "done when") in Debian's Chromium, driven by
// playwright-core: `agui-bridge serve --config bridge.toml --web-demo` serves two agents of the
// file's [agents.NAME] tables; the page lists them (GET /agents) in a picker, talks to the first,
// and, once the other is picked, to that one: its question (ask_user, on in its table only) shown
// as a form and answered.
//
// Driven by tests/test_browser.py::test_demo_page_talks_to_either_agent_in_chromium, which starts:
//   AGENTS_URL  the bridge serving the agents "sales" and "support" and the page
//
// Every page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { launchChromium, problemsOf } from "./chromium.mjs";

const AGENTS_URL = process.env.AGENTS_URL;
if (!AGENTS_URL) throw new Error("set AGENTS_URL (see the comment at the top of this file)");

let browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

const idle = (page) =>
  page.waitForFunction(
    () => document.querySelector("[data-testid=run-status]").dataset.state === "idle",
    null,
    { timeout: 20_000 },
  );

const loaded = (page) =>
  page.waitForFunction(() => document.querySelector("[data-testid=model-picker]").value !== "");

async function send(page, text) {
  await page.getByTestId("prompt").fill(text);
  await page.getByTestId("prompt").press("Enter");
}

test("two agents: the picker lists them, each run goes to the one picked, its question answered", async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const posted = [];
  const problems = problemsOf(page);
  page.on("request", (request) => {
    if (request.method() === "POST") posted.push(new URL(request.url()).pathname);
  });
  try {
    await page.goto(AGENTS_URL);
    await loaded(page);
    const picker = page.getByTestId("agent-picker");
    assert.equal(await picker.isVisible(), true);
    assert.deepEqual(await picker.locator("option").allTextContents(), ["sales", "support"]);
    assert.equal(await picker.inputValue(), "sales");

    await send(page, "Hi");
    await idle(page);
    assert.deepEqual(posted, ["/sales"]);
    assert.notEqual(await page.getByTestId("assistant-text").last().textContent(), "");

    // The other agent: the page opens again on it.
    await Promise.all([page.waitForURL(/\?agent=support$/), picker.selectOption("support")]);
    await loaded(page);
    assert.equal(await page.getByTestId("agent-picker").inputValue(), "support");
    await send(page, "Book a table for us, please.");
    const card = page.locator("[data-testid=question-card][data-state=waiting]");
    await card.waitFor({ timeout: 20_000 });
    await card.getByTestId("question-field-date").fill("2026-12-24");
    await card.getByTestId("question-field-time").selectOption({ label: "20:30" });
    await card.getByTestId("question-field-seats").fill("4");
    await card.getByTestId("question-send").click();
    await idle(page);
    assert.match(await page.getByTestId("assistant-text").last().textContent(), /2026-12-24/);
    assert.deepEqual(posted, ["/sales", "/support", "/support"]);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});
