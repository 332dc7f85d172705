// The demo page (web-demo/) in Debian's Chromium, driven by playwright-core, against live servers.
//
// Driven by tests/test_browser.py, which starts the servers and sets:
//   DEMO_URL       `agui-bridge demo` with a fast pace: every scripted model, start to finish
//   SLOW_DEMO_URL  `agui-bridge demo` with a slow pace: live streaming, and the stop button
//   STATE_DEMO_URL `agui-bridge demo` with a pace between: a plan's steps tick off a second apart
//   DOWN_URL       `agui-bridge serve --web-demo` whose upstream is down: the error banner
//   DOWN_TOKEN     the --auth-token that server wants (AGUI_BRIDGE_AUTH_TOKEN)
//   ONCE_DEMO_URL  `agui-bridge demo --metrics --approve update_state` for the double-clicked
//                  approvals (its send_email runs are counted from GET /metrics) and for state
//                  edits that wait for a person
//   ARTIFACTS_DIR  where the screenshots go (demo.png, demo-phone.png, demo-approval.png,
//                  demo-state.png)
//
// Every page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { TWO_CLICKS, launchChromium, problemsOf } from "./chromium.mjs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};
const DEMO_URL = env("DEMO_URL");
const SLOW_DEMO_URL = env("SLOW_DEMO_URL");
const STATE_DEMO_URL = env("STATE_DEMO_URL");
const DOWN_URL = env("DOWN_URL");
const DOWN_TOKEN = env("DOWN_TOKEN");
const ONCE_DEMO_URL = env("ONCE_DEMO_URL");
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");

const DESKTOP = { width: 1280, height: 860 };
const PHONE = { width: 390, height: 844 };
const TOOLS_PROMPT = "What's the weather in Paris? And make the background lightblue.";
const LIGHTBLUE = "rgb(173, 216, 230)";
/** The model that streams no reasoning at all. */
const PLAIN_MODEL = "scripted-plain";
const SCRIPTED_MODELS = [
  "scripted-reasoning-content",
  "scripted-reasoning",
  "scripted-think-tags",
  "scripted-think-no-open",
  "scripted-deepseek-legacy",
  "scripted-openrouter",
  PLAIN_MODEL,
  "scripted-gemini",
  "scripted-hermes-text",
  "scripted-mistral-text",
  "scripted-llama-text",
  "scripted-pythonic-text",
  "scripted-qwen3-coder-text",
  "scripted-glm-text",
  "scripted-kimi-text",
  "scripted-deepseek-v3-text",
  "scripted-harmony-text",
];

const capabilities = await (await fetch(new URL("/agent/capabilities", DEMO_URL))).json();
const MODELS = capabilities.custom.models;

/**
 * Runs in the page before its own scripts: remembers, per thinking block, the most text it was
 * seen holding while open, so a test can tell "filled, then folded" from "arrived folded".
 */
function watchThinking() {
  const blocks = new Map();
  window.__thinkingSeenOpen = [];
  new MutationObserver(() => {
    for (const block of document.querySelectorAll("[data-testid=thinking-block]")) {
      if (!blocks.has(block)) blocks.set(block, window.__thinkingSeenOpen.push(0) - 1);
      const index = blocks.get(block);
      const length = block.querySelector("[data-testid=thinking-text]").textContent.length;
      if (block.open)
        window.__thinkingSeenOpen[index] = Math.max(window.__thinkingSeenOpen[index], length);
    }
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
}

/**
 * Runs in the page before its own scripts: every look of the steps card, in order (its steps'
 * statuses, joined), so a test can tell "ticked off one by one" from "arrived complete".
 */
function watchSteps() {
  window.__stepsSeen = [];
  new MutationObserver(() => {
    const steps = document.querySelectorAll("[data-testid=steps-card] [data-testid=step]");
    if (steps.length === 0) return;
    const look = [...steps].map((step) => step.dataset.status).join(",");
    if (window.__stepsSeen.at(-1) !== look) window.__stepsSeen.push(look);
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
}

let browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

/** A fresh context (no shared storage) and a page whose console problems are collected. */
async function openPage(url, { models = true } = {}) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  const problems = problemsOf(page);
  await page.addInitScript(watchThinking);
  await page.addInitScript(watchSteps);
  await page.goto(url);
  // The picker is filled from GET /agent/capabilities.
  if (models) {
    await page.waitForFunction(
      () => document.querySelector("[data-testid=model-picker]").value !== "",
    );
  }
  return { page, problems, close: () => context.close() };
}

const idle = (page, timeout = 20_000) =>
  page.waitForFunction(
    () => document.querySelector("[data-testid=run-status]").dataset.state === "idle",
    null,
    { timeout },
  );

async function send(page, text) {
  await page.getByTestId("prompt").fill(text);
  await page.getByTestId("prompt").press("Enter");
}

/** The parts of each assistant turn, in page order: thinking-block, tool-card, assistant-text. */
const turnParts = (page) =>
  page.$$eval("[data-testid=assistant-turn]", (turns) =>
    turns.map((turn) =>
      [...turn.querySelectorAll(".assistant-body > [data-testid]")]
        .map((part) => part.dataset.testid)
        .filter((id) => id !== "pending"),
    ),
  );

async function toolCards(page) {
  return page.$$eval("[data-testid=tool-card]", (cards) =>
    cards.map((card) => ({
      name: card.dataset.toolName,
      state: card.dataset.state,
      args: card.querySelector("[data-testid=tool-args]").textContent,
      result: card.querySelector("[data-testid=tool-result]").textContent,
    })),
  );
}

async function saveScreenshots(page) {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  // Re-open the first thinking block, to show it can be, and the event inspector.
  await page.getByTestId("thinking-block").first().locator("summary").click();
  assert.equal(await page.getByTestId("thinking-block").first().getAttribute("open"), "");
  await page.getByTestId("inspector-toggle").click();
  await wholePageShot(page, DESKTOP, "demo.png");

  await page.getByTestId("inspector-toggle").click();
  await page.setViewportSize(PHONE);
  const overflow = await page.evaluate(
    () => document.scrollingElement.scrollWidth - window.innerWidth,
  );
  assert.ok(overflow <= 0, `the phone layout scrolls sideways by ${overflow}px`);
  await wholePageShot(page, PHONE, "demo-phone.png");
}

/**
 * The whole page in one picture. The viewport is made as tall as the page first: a "full page"
 * screenshot would leave the sticky header and composer where the viewport was.
 */
async function wholePageShot(page, viewport, name) {
  await page.setViewportSize(viewport);
  await page.evaluate(() => window.scrollTo(0, 0));
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  await page.setViewportSize({ width: viewport.width, height });
  await page.screenshot({ path: join(ARTIFACTS_DIR, name) });
  await page.setViewportSize(viewport);
}

test("the page: the server's models in the picker, Shift+Enter for a new line", async () => {
  assert.deepEqual(
    [...MODELS].sort(),
    [...SCRIPTED_MODELS].sort(),
    "GET /agent/capabilities custom.models",
  );
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    const options = await page.$$eval("[data-testid=model-picker] option", (all) =>
      all.map((o) => o.value),
    );
    assert.deepEqual(options, MODELS);
    assert.equal(await page.getByTestId("model-picker").inputValue(), MODELS[0]);

    const prompt = page.getByTestId("prompt");
    assert.equal(await prompt.evaluate((element) => element === document.activeElement), true);
    await prompt.pressSequentially("one");
    await prompt.press("Shift+Enter");
    await prompt.pressSequentially("two");
    assert.equal(await prompt.inputValue(), "one\ntwo");
    assert.equal(await page.getByTestId("user-message").count(), 0, "Shift+Enter sent the message");
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

const MIXED_PROMPT = "What time is it? And make the background lightblue.";

test("a server tool and a frontend tool in one turn: both cards complete, then the answer", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    await page.locator(`[data-testid=suggestion][data-prompt="${MIXED_PROMPT}"]`).click();
    await page.waitForFunction(() =>
      document.querySelector("[data-testid=assistant-text][data-state=done]"),
    );
    await idle(page);

    const cards = await toolCards(page);
    const byName = Object.fromEntries(cards.map((card) => [card.name, card]));
    assert.deepEqual(Object.keys(byName).sort(), ["change_background", "get_time"]);
    for (const card of cards) assert.equal(card.state, "done", `${card.name}: ${card.state}`);
    // get_time ran in the bridge (the demo's server tool): its result came with the run, and
    // the page never ran it (it would have failed: the page has no such tool).
    const serverCard = page.locator("[data-testid=tool-card][data-tool-name=get_time]");
    assert.equal(await serverCard.getAttribute("data-runs-on"), "server");
    assert.equal(await serverCard.getByTestId("tool-status").textContent(), "Done on the server");
    // The bridge sends a string result as the string: the card shows it without quotes.
    const time = byName.get_time.result;
    assert.match(time, /^[^"].*\d\d:\d\d:\d\d.*[^"]$/, `get_time's result: ${time}`);
    assert.deepEqual(JSON.parse(byName.change_background.result), {
      ok: true,
      background: "lightblue",
    });
    const browserCard = page.locator("[data-testid=tool-card][data-tool-name=change_background]");
    assert.equal(await browserCard.getAttribute("data-runs-on"), null);
    await page
      .waitForFunction(
        (color) => getComputedStyle(document.body).backgroundColor === color,
        LIGHTBLUE,
        { timeout: 3_000 },
      )
      .catch(() => assert.fail("change_background did not repaint the page lightblue"));

    const answer = await page.getByTestId("assistant-text").textContent();
    assert.ok(
      answer.includes(`“${time}”`),
      `the answer does not quote get_time's result:\n${answer}`,
    );
    assert.ok(answer.includes("lightblue"), `the answer does not quote the page's result`);

    await page.getByTestId("inspector-toggle").click();
    const types = await page.$$eval("[data-testid=inspector-event]", (rows) =>
      rows.map((row) => row.dataset.type),
    );
    // Run 1: both calls, the server's result, RUN_FINISHED with the page's call pending;
    // run 2 (the page's result sent back): the answer.
    assert.equal(types.filter((type) => type === "RUN_STARTED").length, 2, "two runs");
    assert.equal(types.filter((type) => type === "TOOL_CALL_RESULT").length, 1);
    assert.ok(types.indexOf("TOOL_CALL_RESULT") < types.indexOf("RUN_FINISHED"));
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

// --- approvals: the demo's send_email waits for a person (an AG-UI interrupt) -------------------

const EMAIL_PROMPT = "Email alice@example.com that the demo works.";
const SENT_TO_ALICE = 'Sent to alice@example.com: "The demo works"';

/** Asks for the email and waits for its approval card; returns the card's locator. */
async function askForEmail(page) {
  await page.locator(`[data-testid=suggestion][data-prompt="${EMAIL_PROMPT}"]`).click();
  const card = page.locator("[data-testid=approval-card][data-state=waiting]");
  await card.waitFor({ timeout: 20_000 });
  await page.waitForFunction(
    () => document.querySelector("[data-testid=run-status]").dataset.state === "approval",
  );
  return card;
}

const emailCard = (page) => page.locator("[data-testid=tool-card][data-tool-name=send_email]");

/** The turn's last answer, once the resumed run has finished. */
async function finalAnswer(page) {
  await idle(page);
  return page.getByTestId("assistant-text").last().textContent();
}

test("approve: the email card waits, Approve runs it, the answer quotes it", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    const card = await askForEmail(page);
    assert.equal(await card.getByTestId("approval-tool").textContent(), "send_email");
    assert.deepEqual(JSON.parse(await card.getByTestId("approval-args").inputValue()), {
      to: "alice@example.com",
      subject: "The demo works",
      body: "The demo works.",
    });
    assert.match(
      await card.getByTestId("approval-message").textContent(),
      /^Run send_email\(.*alice@example\.com.*\)\?$/,
    );
    const expiry = card.locator("[data-testid=approval-expiry] time");
    assert.ok(Date.parse(await expiry.getAttribute("datetime")) > Date.now(), "expiresAt");
    assert.equal(await emailCard(page).getAttribute("data-state"), "waiting");
    assert.equal(
      await emailCard(page).getByTestId("tool-status").textContent(),
      "Waiting for your approval",
    );
    // The keyboard is on the card: Tab reaches the arguments, the reason, then the buttons.
    assert.equal(await card.evaluate((element) => element === document.activeElement), true);
    assert.equal(await page.getByTestId("stop-button").isVisible(), true);
    await page.mouse.move(0, 0);
    await wholePageShot(page, DESKTOP, "demo-approval.png");

    // On a phone the card fits the width.
    await page.setViewportSize(PHONE);
    const overflow = await page.evaluate(
      () => document.scrollingElement.scrollWidth - window.innerWidth,
    );
    assert.ok(overflow <= 0, `the phone layout scrolls sideways by ${overflow}px`);
    await page.setViewportSize(DESKTOP);

    await card.getByTestId("approve-button").focus();
    await page.keyboard.press("Enter");
    const answer = await finalAnswer(page);
    assert.equal(answer.trim(), `Done: “${SENT_TO_ALICE}”`);
    const done = page.locator("[data-testid=approval-card]");
    assert.equal(await done.getAttribute("data-state"), "approved");
    assert.equal(await done.getByTestId("approval-verdict").textContent(), "Approved.");
    assert.equal(await done.getByTestId("approve-button").isDisabled(), true);
    assert.equal(await emailCard(page).getAttribute("data-state"), "done");
    assert.equal(
      await emailCard(page).getByTestId("tool-status").textContent(),
      "Done on the server",
    );
    assert.equal(await emailCard(page).getByTestId("tool-result").textContent(), SENT_TO_ALICE);

    // The thread goes on: a later turn with the approved call in its history.
    await send(page, "Hello again");
    await idle(page);
    assert.equal(await page.getByTestId("assistant-text").count(), 2);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("deny with a reason: nothing is sent and the answer says it was declined", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    const card = await askForEmail(page);
    await card.getByTestId("approval-reason").fill("wrong person");
    await card.getByTestId("deny-button").click();
    const answer = await finalAnswer(page);
    assert.equal(answer.trim(), "OK, I did not send it: “The user declined: wrong person”");
    const done = page.locator("[data-testid=approval-card]");
    assert.equal(await done.getAttribute("data-state"), "declined");
    assert.equal(
      await done.getByTestId("approval-verdict").textContent(),
      "Declined: wrong person",
    );
    assert.equal(await emailCard(page).getAttribute("data-state"), "cancelled");
    assert.equal(
      await emailCard(page).getByTestId("tool-result").textContent(),
      "The user declined: wrong person",
    );
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("edit the arguments: invalid JSON is refused, the edited address is used", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    const card = await askForEmail(page);
    const args = card.getByTestId("approval-args");
    const original = await args.inputValue();
    await args.fill("{ not json");
    await card.getByTestId("approve-button").click();
    assert.equal(await card.getByTestId("approval-problem").isVisible(), true);
    assert.equal(await args.getAttribute("aria-invalid"), "true");
    assert.equal(await card.getAttribute("data-state"), "waiting");

    await args.fill(original.replace("alice@example.com", "bob@example.com"));
    await card.getByTestId("approve-button").click();
    const answer = await finalAnswer(page);
    const sent = 'Sent to bob@example.com: "The demo works"';
    assert.equal(answer.trim(), `Done: “${sent}”`);
    assert.equal(await emailCard(page).getByTestId("tool-result").textContent(), sent);
    assert.equal(
      await page.getByTestId("approval-verdict").textContent(),
      "Approved with your edits.",
    );
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a frontend tool in the interrupted round runs; its result goes with the resume", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    await send(page, "Email alice@example.com that the background is lightblue.");
    const card = page.locator("[data-testid=approval-card][data-state=waiting]");
    await card.waitFor({ timeout: 20_000 });
    const background = page.locator("[data-testid=tool-card][data-tool-name=change_background]");
    assert.equal(await background.getAttribute("data-state"), "done");
    await card.getByTestId("approve-button").click();
    const answer = await finalAnswer(page);
    assert.ok(answer.includes("Sent to alice@example.com"), answer);
    assert.ok(answer.includes("lightblue"), answer);
    assert.equal(await emailCard(page).getAttribute("data-state"), "done");
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("Stop while the card waits: the call is not run, and the next turn works", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    const card = await askForEmail(page);
    await page.keyboard.press("Escape");
    await idle(page);
    assert.equal(await card.count(), 0, "the card still waits");
    const left = page.locator("[data-testid=approval-card]");
    assert.equal(await left.getAttribute("data-state"), "abandoned");
    assert.equal(await left.getByTestId("approve-button").isDisabled(), true);
    assert.equal(await emailCard(page).getAttribute("data-state"), "cancelled");
    assert.equal(await page.getByTestId("turn-note").last().textContent(), "Stopped.");

    await send(page, "Hello again");
    await idle(page);
    assert.equal(await page.getByTestId("assistant-text").count(), 1);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

/** send_email's calls run by the bridge, by outcome (ok: it ran; already_run: a repeated
 * approval, not run again), from agui_bridge_tool_calls_total on GET /metrics. */
async function emailCalls(url) {
  const text = await (await fetch(new URL("/metrics", url))).text();
  const counts = { ok: 0, already_run: 0 };
  for (const [, labels, value] of text.matchAll(/^agui_bridge_tool_calls_total\{(.*)\} (\S+)$/gm)) {
    const pairs = [...labels.matchAll(/(\w+)="([^"]*)"/g)].map((match) => match.slice(1));
    const label = Object.fromEntries(pairs);
    if (label.tool === "send_email" && label.side === "server") {
      counts[label.outcome] = Number(value);
    }
  }
  return counts;
}

// Two clicks on Approve: a double click, and two single clicks in a burst (real mouse input
// both, at the button's centre: a click on a disabled button reaches no handler).
for (const [how, clickTwice] of Object.entries(TWO_CLICKS)) {
  test(`Approve clicked twice (${how}): one email sent, one result on the page`, async (t) => {
    const { page, problems, close } = await openPage(ONCE_DEMO_URL);
    const resumes = [];
    page.on("request", (request) => {
      if (request.method() !== "POST") return;
      const body = request.postDataJSON();
      if (body?.resume) resumes.push(body.resume);
    });
    try {
      const before = await emailCalls(ONCE_DEMO_URL);
      const card = await askForEmail(page);
      await clickTwice(card.getByTestId("approve-button"));
      const answer = await finalAnswer(page);
      const after = await emailCalls(ONCE_DEMO_URL);
      const answers = resumes.map((resume) => resume.map((entry) => entry.payload));
      t.diagnostic(`the page sent ${resumes.length} resume(s): ${JSON.stringify(answers)}`);

      assert.equal(after.ok - before.ok, 1, "send_email ran once");
      assert.ok(resumes.length >= 1, "the page sent the approval");
      assert.equal(
        after.already_run - before.already_run,
        resumes.length - 1,
        "every other resume was told the approval was used",
      );
      assert.equal(answer.trim(), `Done: “${SENT_TO_ALICE}”`);
      assert.equal(await page.getByTestId("assistant-text").count(), 1);
      const approvals = page.locator("[data-testid=approval-card]");
      assert.deepEqual(await approvals.evaluateAll((cards) => cards.map((c) => c.dataset.state)), [
        "approved",
      ]);
      assert.equal(await approvals.getByTestId("approval-verdict").textContent(), "Approved.");
      assert.deepEqual(
        (await toolCards(page)).map(({ name, state, result }) => [name, state, result]),
        [["send_email", "done", SENT_TO_ALICE]],
        "one email card, with one result",
      );
      assert.equal(await page.getByTestId("error-banner").isVisible(), false);
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });
}

describe("every scripted model: thinking, two frontend tools, the answer from their results", () => {
  for (const model of MODELS) {
    test(model, { timeout: 30_000 }, async () => {
      const { page, problems, close } = await openPage(DEMO_URL);
      try {
        await page.getByTestId("model-picker").selectOption(model);
        await send(page, TOOLS_PROMPT);
        await page.waitForFunction(() =>
          document.querySelector("[data-testid=assistant-text][data-state=done]"),
        );
        await idle(page);

        assert.deepEqual(await page.getByTestId("user-message").allTextContents(), [TOOLS_PROMPT]);
        // Run 1 thinks and calls both tools; run 2 (sent by the page with their results) thinks
        // again and answers.
        const reasoning = model === PLAIN_MODEL ? [] : ["thinking-block"];
        assert.deepEqual(await turnParts(page), [
          [...reasoning, "tool-card", "tool-card", ...reasoning, "assistant-text"],
        ]);

        const thinking = await page.$$eval("[data-testid=thinking-block]", (blocks) =>
          blocks.map((block) => ({
            open: block.open,
            state: block.dataset.state,
            text: block.querySelector("[data-testid=thinking-text]").textContent,
            elapsed: block.querySelector("[data-testid=thinking-elapsed]").textContent,
          })),
        );
        const seenOpen = await page.evaluate(() => window.__thinkingSeenOpen);
        thinking.forEach((block, index) => {
          assert.ok(
            block.text.length > 20,
            `thinking block ${index} is nearly empty: ${block.text}`,
          );
          assert.ok(seenOpen[index] > 0, `thinking block ${index} never showed text while open`);
          assert.equal(
            block.open,
            false,
            `thinking block ${index} did not fold when the answer started`,
          );
          assert.equal(block.state, "done");
          assert.match(block.elapsed, /^\d+\.\d s$/);
        });
        assert.ok(
          !thinking.some((block) => /<\/?think>/.test(block.text)),
          "reasoning tags reached the page",
        );

        const cards = await toolCards(page);
        const byName = Object.fromEntries(cards.map((card) => [card.name, card]));
        assert.deepEqual(Object.keys(byName).sort(), ["change_background", "get_weather"]);
        for (const card of cards) assert.equal(card.state, "done", `${card.name}: ${card.state}`);
        assert.deepEqual(JSON.parse(byName.get_weather.args), { city: "Paris" });
        assert.deepEqual(JSON.parse(byName.change_background.args), { color: "lightblue" });
        assert.match(
          byName.get_weather.args,
          /\n {2}"city": "Paris"\n/,
          "arguments are pretty-printed",
        );
        const weather = JSON.parse(byName.get_weather.result);
        assert.equal(weather.city, "Paris");
        assert.equal(typeof weather.temperatureC, "number");
        assert.equal(typeof weather.conditions, "string");
        assert.deepEqual(JSON.parse(byName.change_background.result), {
          ok: true,
          background: "lightblue",
        });

        // The page eases into its new colour.
        await page
          .waitForFunction(
            (color) => getComputedStyle(document.body).backgroundColor === color,
            LIGHTBLUE,
            {
              timeout: 3_000,
            },
          )
          .catch(() => assert.fail("change_background did not repaint the page lightblue"));

        const answer = page.getByTestId("assistant-text");
        assert.ok(
          (await answer.textContent()).includes(JSON.stringify(weather)),
          `the answer does not quote the weather result ${JSON.stringify(weather)}`,
        );
        assert.equal(
          await answer.locator("li strong").first().textContent(),
          "get_weather",
          "Markdown",
        );
        assert.match(
          await page.getByTestId("announcer").textContent(),
          /^Here is what the tools returned/,
          "the answer is announced to screen readers",
        );

        assert.match(
          await page.getByTestId("usage").textContent(),
          /^Last run: \d+ in · \d+ out.* · \d+ total tokens$/,
        );

        await page.getByTestId("inspector-toggle").click();
        assert.equal(await page.getByTestId("inspector").isVisible(), true);
        const types = await page.$$eval("[data-testid=inspector-event]", (rows) =>
          rows.map((row) => row.dataset.type),
        );
        assert.equal(types.filter((type) => type === "RUN_STARTED").length, 2, "two runs");
        assert.equal(types.filter((type) => type === "TOOL_CALL_START").length, 2);
        assert.equal(types.at(-1), "RUN_FINISHED");
        const times = await page.$$eval("[data-testid=inspector-event] time", (all) =>
          all.map((t) => t.textContent),
        );
        assert.ok(
          times.every((time) => /^\+\d+\.\d{3}s$/.test(time)),
          `timestamps: ${times.slice(0, 3)}`,
        );
        await page.getByTestId("inspector-toggle").click();

        if (model === MODELS[0]) await saveScreenshots(page);
        assert.deepEqual(problems, []);
      } finally {
        await close();
      }
    });
  }
});

/** The scripted model's interleaved thinking: it reasons, writes, reasons again, writes again. */
const INTERLEAVE_PROMPT = "Please interleave your thinking.";
const INTERLEAVED = [
  ["thinking-block", "First I look at the question."],
  ["assistant-text", "Here is a first thought."],
  ["thinking-block", "Now I reconsider."],
  ["assistant-text", "And here is the answer."],
];

describe("interleaved thinking: reasoning resumes after text, shown in the order produced", () => {
  // Reasoning in a field, and in <think> tags in the content.
  for (const model of ["scripted-reasoning-content", "scripted-think-tags"]) {
    test(model, { timeout: 20_000 }, async () => {
      const { page, problems, close } = await openPage(DEMO_URL);
      try {
        await page.getByTestId("model-picker").selectOption(model);
        await send(page, INTERLEAVE_PROMPT);
        await page.waitForFunction(() =>
          document.querySelector("[data-testid=assistant-text][data-state=done]"),
        );
        await idle(page);

        const shown = await page.$$eval(
          "[data-testid=assistant-turn] .assistant-body > [data-testid]",
          (parts) =>
            parts
              .filter((part) => part.dataset.testid !== "pending")
              .map((part) => [
                part.dataset.testid,
                (part.dataset.testid === "thinking-block"
                  ? part.querySelector("[data-testid=thinking-text]")
                  : part
                ).textContent.trim(),
              ]),
        );
        assert.deepEqual(shown, INTERLEAVED, JSON.stringify(shown));
        // Both blocks finished and folded once the text after each started.
        const blocks = await page.$$eval("[data-testid=thinking-block]", (all) =>
          all.map((block) => ({ open: block.open, state: block.dataset.state })),
        );
        assert.deepEqual(blocks, [
          { open: false, state: "done" },
          { open: false, state: "done" },
        ]);
        assert.deepEqual(problems, []);
      } finally {
        await close();
      }
    });
  }
});

test("model text cannot inject HTML; Markdown still renders", { timeout: 30_000 }, async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    // The scripted model repeats the first words of the message in bold in its answer.
    const attack = "<img src=x onerror=window.__injected=1> hello";
    await send(page, attack);
    await page.waitForFunction(() =>
      document.querySelector("[data-testid=assistant-text][data-state=done]"),
    );
    await idle(page);
    const answer = page.getByTestId("assistant-text");
    assert.ok((await answer.textContent()).includes("<img src=x onerror=window.__injected=1>"));
    assert.equal(await answer.locator("img").count(), 0);
    assert.equal(await page.locator("img").count(), 0);
    assert.ok((await answer.locator("strong").count()) > 0, "**bold** renders as <strong>");
    assert.equal(await page.evaluate(() => window.__injected), undefined);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a slow run streams live, and Stop ends it mid-stream", { timeout: 45_000 }, async () => {
  const { page, problems, close } = await openPage(SLOW_DEMO_URL);
  try {
    await page.getByTestId("prompt").fill(TOOLS_PROMPT);
    await page.getByTestId("send-button").click();
    assert.equal(await page.getByTestId("stop-button").isVisible(), true);
    assert.equal(await page.getByTestId("send-button").isVisible(), false);

    // Thinking fills while open, and its counter runs.
    const thinking = page.getByTestId("thinking-block").first();
    await page.waitForFunction(() => {
      const block = document.querySelector("[data-testid=thinking-block]");
      return (
        block?.open && block.querySelector("[data-testid=thinking-text]").textContent.length > 10
      );
    });
    const elapsed = thinking.getByTestId("thinking-elapsed");
    const firstReading = await elapsed.textContent();
    await page.waitForFunction(
      (reading) => document.querySelector("[data-testid=thinking-elapsed]").textContent !== reading,
      firstReading,
    );

    // Arguments grow on the card while the model writes them; Stop, while they still do.
    const args = page.getByTestId("tool-args").first();
    await page.waitForFunction(
      () => document.querySelector("[data-testid=tool-args]")?.textContent.length > 0,
      null,
      {
        timeout: 20_000,
      },
    );
    const partial = await args.textContent();
    await page.waitForFunction(
      (before) =>
        document.querySelector("[data-testid=tool-args]").textContent.length > before.length,
      partial,
    );
    assert.equal(
      await thinking.getAttribute("open"),
      null,
      "thinking folds when the tool calls start",
    );
    await page.getByTestId("stop-button").click();
    await idle(page, 5_000);

    assert.equal(await page.getByTestId("stop-button").isVisible(), false);
    assert.equal(await page.getByTestId("send-button").isVisible(), true);
    assert.deepEqual(await page.getByTestId("turn-note").allTextContents(), ["Stopped."]);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false, "Stop is not an error");
    const cards = await toolCards(page);
    assert.ok(cards.length > 0);
    for (const card of cards) assert.equal(card.state, "cancelled", `${card.name} after Stop`);
    const frozen = await args.textContent();
    await page.waitForTimeout(800);
    assert.equal(await args.textContent(), frozen, "the arguments kept growing after Stop");
    assert.notEqual(
      await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
      LIGHTBLUE,
    );

    // The page is idle again: a new message starts a new run, which streams.
    await send(page, "Hello again!");
    await page.waitForFunction(() => {
      const turns = document.querySelectorAll("[data-testid=assistant-turn]");
      return (
        turns.length === 2 &&
        turns[1].querySelector("[data-testid=thinking-text]")?.textContent.length > 0
      );
    });
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    await page.keyboard.press("Escape");
    await idle(page, 5_000);
    assert.deepEqual(await page.getByTestId("turn-note").allTextContents(), [
      "Stopped.",
      "Stopped.",
    ]);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

// --- shared state: the scripted model's plan and to-dos (agentic generative UI) -----------------

const PLAN_PROMPT = "Make a plan to bake a cake";
const PLAN = ["Get ready to bake a cake", "Bake a cake", "Check the result"];
const PLAN_DONE = "Done: the 3 steps of the plan are complete.";
/** The steps card's looks while the model ticks the plan off, one update_state a turn. */
const TICKED_OFF = [0, 1, 2, 3].map((done) =>
  PLAN.map((_, index) => (index < done ? "completed" : "pending")).join(","),
);

const stepsOf = (page) =>
  page.$$eval("[data-testid=steps-card] [data-testid=step]", (steps) =>
    steps.map((step) => [
      step.querySelector("[data-testid=step-description]").textContent,
      step.dataset.status,
      step.querySelector(".state-mark").textContent,
    ]),
  );

const todosOf = (page) =>
  page.$$eval("[data-testid=todo-card]", (cards) =>
    [...cards.at(-1).querySelectorAll("[data-testid=todo]")].map((todo) => [
      todo.querySelector("[data-testid=todo-text]").textContent,
      todo.dataset.status,
    ]),
  );

/** The inspector's event types, in order (the inspector opened to read them). */
async function inspectedTypes(page) {
  await page.getByTestId("inspector-toggle").click();
  const types = await page.$$eval("[data-testid=inspector-event]", (rows) =>
    rows.map((row) => row.dataset.type),
  );
  await page.getByTestId("inspector-toggle").click();
  return types;
}

test("a plan streams as a steps card, each step ticked off as its STATE_DELTA arrives", {
  timeout: 60_000,
}, async () => {
  const { page, problems, close } = await openPage(STATE_DEMO_URL);
  try {
    await page.locator(`[data-testid=suggestion][data-prompt="${PLAN_PROMPT}"]`).click();
    // Each look, seen while the run still streams: the plan written, then each tick.
    const card = page.getByTestId("steps-card");
    for (const [done, look] of TICKED_OFF.entries()) {
      await page.waitForFunction(
        (wanted) =>
          [...document.querySelectorAll("[data-testid=steps-card] [data-testid=step]")]
            .map((step) => step.dataset.status)
            .join(",") === wanted,
        look,
        { timeout: 20_000 },
      );
      assert.equal(await card.getByTestId("steps-progress").textContent(), `${done} of 3 done`);
      if (done < PLAN.length) {
        const status = await page.getByTestId("run-status").getAttribute("data-state");
        assert.equal(status, "running", `${done} of 3 done was shown only after the run`);
      }
    }
    await idle(page, 30_000);
    assert.deepEqual(await page.evaluate(() => window.__stepsSeen), TICKED_OFF);
    assert.deepEqual(
      await stepsOf(page),
      PLAN.map((description) => [description, "completed", "✓"]),
    );
    assert.equal(await card.getAttribute("data-state"), "done");
    assert.equal(await card.getAttribute("aria-label"), "Plan");
    assert.equal((await page.getByTestId("assistant-text").textContent()).trim(), PLAN_DONE);
    // The card is the edits' view: the update_state calls that applied get no tool card.
    assert.equal(await page.getByTestId("tool-card").count(), 0);
    // One run: a STATE_DELTA after each update_state result, the STATE_SNAPSHOT right before
    // RUN_FINISHED.
    const types = await inspectedTypes(page);
    assert.equal(types.filter((type) => type === "RUN_STARTED").length, 1, "one run");
    assert.equal(types.filter((type) => type === "TOOL_CALL_RESULT").length, 4);
    assert.equal(types.filter((type) => type === "STATE_DELTA").length, 4);
    assert.deepEqual(types.slice(-2), ["STATE_SNAPSHOT", "RUN_FINISHED"]);
    types.forEach((type, index) => {
      if (type === "STATE_DELTA") assert.equal(types[index - 1], "TOOL_CALL_RESULT");
    });
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("the state goes back with every run: the plan, then to-dos added and ticked", {
  timeout: 60_000,
}, async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  const sentStates = [];
  page.on("request", (request) => {
    if (request.method() === "POST" && new URL(request.url()).pathname === "/agent") {
      sentStates.push(request.postDataJSON().state);
    }
  });
  try {
    await send(page, PLAN_PROMPT);
    await idle(page);
    // Fast as the run was, the card went through every look.
    assert.deepEqual(await page.evaluate(() => window.__stepsSeen), TICKED_OFF);

    await send(page, "Add a to-do: water the plants");
    await idle(page);
    assert.deepEqual(await todosOf(page), [["water the plants", "pending"]]);
    // The run carried the plan the first one made; this turn changed no step, so it has no
    // steps card of its own.
    const completed = PLAN.map((description) => ({ description, status: "completed" }));
    assert.deepEqual(sentStates, [{}, { steps: completed }]);
    assert.equal(await page.getByTestId("steps-card").count(), 1);

    // The model adds to the list it was shown: a lost state would leave one item.
    await send(page, "Add a to-do: buy milk");
    await idle(page);
    await send(page, "Mark water the plants done");
    await idle(page);
    assert.deepEqual(await todosOf(page), [
      ["water the plants", "completed"],
      ["buy milk", "pending"],
    ]);
    assert.deepEqual(sentStates.at(-1), {
      steps: completed,
      todos: [
        { text: "water the plants", done: false },
        { text: "buy milk", done: false },
      ],
    });
    const todoCard = page.getByTestId("todo-card").last();
    assert.equal(await todoCard.getByTestId("todos-progress").textContent(), "1 of 2 done");
    assert.equal(await page.getByTestId("todo-card").count(), 3, "one card per turn that edits");
    assert.equal(await page.getByTestId("tool-card").count(), 0);

    // An edit that does not apply changes nothing and keeps its tool card, with the reason.
    await send(page, 'Apply this patch: [{"op": "remove", "path": "/nothing"}]');
    await idle(page);
    const failed = await toolCards(page);
    assert.deepEqual(
      failed.map(({ name, state }) => [name, state]),
      [["update_state", "error"]],
    );
    assert.match(failed[0].result, /^Error: update_state: the patch does not apply/);
    assert.deepEqual(JSON.parse(failed[0].args), {
      patch: [{ op: "remove", path: "/nothing" }],
    });
    assert.equal(await page.getByTestId("todo-card").count(), 3);
    assert.equal(await page.getByTestId("steps-card").count(), 1);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    await mkdir(ARTIFACTS_DIR, { recursive: true });
    await wholePageShot(page, DESKTOP, "demo-state.png");
    // On a phone the cards fit the width.
    await page.setViewportSize(PHONE);
    const overflow = await page.evaluate(
      () => document.scrollingElement.scrollWidth - window.innerWidth,
    );
    assert.ok(overflow <= 0, `the phone layout scrolls sideways by ${overflow}px`);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a state edit under approval: approved, the to-do card shows it; declined, its tool card", {
  timeout: 30_000,
}, async () => {
  const { page, problems, close } = await openPage(ONCE_DEMO_URL);
  try {
    await send(page, "Add a to-do: water the plants");
    const card = page.locator("[data-testid=approval-card][data-state=waiting]");
    await card.waitFor({ timeout: 20_000 });
    assert.equal(await card.getByTestId("approval-tool").textContent(), "update_state");
    assert.equal(await page.getByTestId("todo-card").count(), 0, "shown before it was approved");
    await card.getByTestId("approve-button").click();
    await idle(page);
    assert.deepEqual(await todosOf(page), [["water the plants", "pending"]]);
    assert.equal(await page.getByTestId("tool-card").count(), 0);

    await send(page, "Add a to-do: buy milk");
    await card.waitFor({ timeout: 20_000 });
    await card.getByTestId("deny-button").click();
    await idle(page);
    assert.deepEqual(
      (await toolCards(page)).map(({ name, state, result }) => [name, state, result]),
      [["update_state", "cancelled", "The user declined."]],
    );
    assert.equal(await page.getByTestId("todo-card").count(), 1, "a declined edit changed nothing");
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a bridge with --auth-token refuses the page until it has the token", async () => {
  const { page, problems, close } = await openPage(DOWN_URL, { models: false });
  try {
    await page.getByTestId("error-banner").waitFor({ state: "visible" });
    assert.equal(await page.getByTestId("error-code").textContent(), "unauthorized");
    assert.match(await page.getByTestId("error-message").textContent(), /#token=/);
    // The browser reports the refused request itself; nothing else may complain.
    assert.deepEqual(
      problems.filter((problem) => !/status of 401 \(Unauthorized\)/.test(problem)),
      [],
    );
  } finally {
    await close();
  }
});

test("an unreachable upstream shows the RUN_ERROR banner with its code", async () => {
  const { page, problems, close } = await openPage(`${DOWN_URL}#token=${DOWN_TOKEN}`);
  try {
    assert.equal(new URL(page.url()).hash, "", "the token stays in the address bar");
    assert.equal(await page.getByTestId("model-picker").inputValue(), "x");
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    await send(page, "Hello?");
    const banner = page.getByTestId("error-banner");
    await banner.waitFor({ state: "visible" });
    assert.equal(await banner.getAttribute("role"), "alert");
    assert.equal(await page.getByTestId("error-code").textContent(), "upstream_unreachable");
    assert.match(await page.getByTestId("error-message").textContent(), /upstream/i);
    await idle(page, 5_000);
    assert.equal(await page.getByTestId("turn-note").textContent(), "The run failed.");
    await banner.getByRole("button", { name: "Dismiss the error" }).click();
    assert.equal(await banner.isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});
