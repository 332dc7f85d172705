// The demo page's threads (issue 42, point 7) in Debian's Chromium, driven by playwright-core.
//
// Driven by tests/test_browser.py::test_demo_page_threads_in_chromium, which starts the servers:
//   DEMO_URL       `agui-bridge demo` (threads kept in memory) with a fast pace
//   SLOW_DEMO_URL  the same with a slow pace: an answer takes some 8 s, time to reload or stop it
//   PLAIN_URL      `agui-bridge serve --web-demo` (no --threads) before a scripted upstream
//
// Every page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { launchChromium, problemsOf } from "./chromium.mjs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};
const DEMO_URL = env("DEMO_URL");
const SLOW_DEMO_URL = env("SLOW_DEMO_URL");
const PLAIN_URL = env("PLAIN_URL");

const DESKTOP = { width: 1280, height: 860 };
/** The scripted model's answer to it: reasoning, then a Markdown text, the same every time. */
const HELLO = "Hello! What can you do?";

let browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

/** A fresh context (no shared storage) and a page whose console problems and requests (method
 * and URL) are collected. */
async function openPage(url) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  const requests = [];
  page.on("request", (request) => requests.push(`${request.method()} ${request.url()}`));
  const problems = problemsOf(page);
  await page.goto(url);
  await ready(page);
  return { page, problems, requests, close: () => context.close() };
}

/** The picker is filled from GET /agent/capabilities, which says whether threads are kept. */
const ready = (page) =>
  page.waitForFunction(() => document.querySelector("[data-testid=model-picker]").value !== "");

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

/** The thread the address names (`#thread=…`). */
const threadOf = (page) => new URLSearchParams(new URL(page.url()).hash.slice(1)).get("thread");

/** The list's threads as the page shows them: [title, current]. */
const listed = (page) =>
  page.$$eval("[data-testid=thread]", (items) =>
    items.map((item) => [
      item.querySelector("[data-testid=thread-title]").textContent,
      item.hasAttribute("data-current"),
    ]),
  );

/** What the conversation shows: the user messages and the answers' texts. */
const shown = async (page) => ({
  users: await page.getByTestId("user-message").allTextContents(),
  answers: await page.getByTestId("assistant-text").allTextContents(),
});

/** The bridge's own list (GET /agent/threads; the demos want no token). */
async function bridgeThreads(url) {
  const response = await fetch(new URL("/agent/threads", url));
  assert.equal(response.status, 200);
  return (await response.json()).threads;
}

/** The answer to a prompt in a new thread, run to its end (what a reload must give back), as
 * the page shows it and as the thread keeps it. */
async function answerOf(url, prompt) {
  const { page, problems, close } = await openPage(url);
  try {
    await send(page, prompt);
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    assert.deepEqual(problems, []);
    return { answers: (await shown(page)).answers, kept: await keptAnswer(url, threadOf(page)) };
  } finally {
    await close();
  }
}

/** The text of the thread's last assistant message, as a hydrate (a run with no messages)
 * answers it: what the bridge keeps. */
async function keptAnswer(url, threadId) {
  const response = await fetch(new URL("/agent", url), {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({
      threadId,
      runId: `hydrate-${Date.now()}`,
      messages: [],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
    }),
  });
  assert.equal(response.status, 200);
  const events = (await response.text())
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => JSON.parse(line.slice(6)));
  const snapshot = events.find((event) => event.type === "MESSAGES_SNAPSHOT");
  return snapshot.messages.filter((message) => message.role === "assistant").at(-1)?.content;
}

/** Until `check` answers something true (polled), which it returns; fails after `timeout`. */
async function until(check, what, timeout = 10_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Until the address names another thread than `before`. */
const threadChanged = (page, before) =>
  page.waitForFunction((old) => !location.hash.includes(old), before);

/** The types of the events the inspector holds, in order (the inspector opened to read them). */
async function inspected(page) {
  await page.getByTestId("inspector-toggle").click();
  const rows = await page.$$eval("[data-testid=inspector-event]", (all) =>
    all.map((row) => row.dataset.type),
  );
  await page.getByTestId("inspector-toggle").click();
  return rows;
}

test("two threads: each listed with its title, newest first; switching shows each", async () => {
  const { page, problems, close } = await openPage(DEMO_URL);
  try {
    assert.equal(await page.getByTestId("thread-panel").isVisible(), true);
    const first = threadOf(page);
    assert.ok(first, "the address names the thread shown");
    await send(page, HELLO);
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    const one = await shown(page);

    await page.getByTestId("new-thread").click();
    await threadChanged(page, first);
    assert.equal(await page.getByTestId("user-message").count(), 0, "a new thread is empty");
    const second = threadOf(page);
    assert.notEqual(second, first);
    await send(page, "Tell me about threads");
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    const two = await shown(page);
    assert.deepEqual(two.users, ["Tell me about threads"]);

    await page.waitForFunction(
      () => document.querySelectorAll("[data-testid=thread][data-current]").length === 1,
    );
    assert.deepEqual(await listed(page), [
      ["Tell me about threads", true],
      [HELLO, false],
    ]);
    const kept = await bridgeThreads(DEMO_URL);
    assert.deepEqual(
      kept.map((thread) => thread.id),
      [second, first],
    );

    // The first, opened from the keyboard: its conversation, each message once.
    await page.locator("[data-testid=thread-open]").nth(1).focus();
    await page.keyboard.press("Enter");
    await page.waitForFunction(
      (text) => document.querySelector("[data-testid=user-message]")?.textContent === text,
      HELLO,
    );
    await idle(page);
    assert.deepEqual(await shown(page), one);
    assert.equal(threadOf(page), first);
    assert.deepEqual(await listed(page), [
      ["Tell me about threads", false],
      [HELLO, true],
    ]);

    // And the second again, by a click.
    await page.locator("[data-testid=thread-open]").first().click();
    await page.waitForFunction(
      () =>
        document.querySelector("[data-testid=user-message]")?.textContent ===
        "Tell me about threads",
    );
    await idle(page);
    assert.deepEqual(await shown(page), two);

    // Forgetting the thread shown: it leaves the list and the bridge, the page starts anew.
    await page.locator("[data-testid=thread-delete]").first().click();
    await threadChanged(page, second);
    await page.waitForFunction(
      () => document.querySelectorAll("[data-testid=thread]").length === 1,
    );
    assert.deepEqual(await listed(page), [[HELLO, false]]);
    assert.equal(await page.getByTestId("user-message").count(), 0);
    assert.deepEqual(
      (await bridgeThreads(DEMO_URL)).map((thread) => thread.id),
      [first],
    );
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a reload mid-answer: the conversation, then the answer going on to its end, once", {
  timeout: 60_000,
}, async () => {
  const expected = (await answerOf(DEMO_URL, HELLO)).answers;
  const { page, problems, close } = await openPage(SLOW_DEMO_URL);
  try {
    await send(page, HELLO);
    // Reload while the model is still thinking: all of the answer is yet to come.
    await page.waitForFunction(
      () => document.querySelector("[data-testid=thinking-text]")?.textContent.length > 10,
    );
    const thread = threadOf(page);
    await page.reload();
    await ready(page);
    assert.equal(threadOf(page), thread, "the reload keeps the thread");
    await page.waitForFunction(
      (text) => document.querySelector("[data-testid=user-message]")?.textContent === text,
      HELLO,
    );
    assert.equal(
      await page.getByTestId("run-status").getAttribute("data-state"),
      "running",
      "the page follows the run going on",
    );
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]", {
      timeout: 30_000,
    });
    await idle(page);

    assert.deepEqual(await shown(page), { users: [HELLO], answers: expected });
    assert.equal(await page.getByTestId("thinking-block").count(), 1);
    // The hydrate followed the run: its events came after the thread's snapshot.
    const types = await inspected(page);
    assert.equal(types[0], "RUN_STARTED");
    assert.equal(types[1], "MESSAGES_SNAPSHOT");
    assert.ok(types.includes("TEXT_MESSAGE_CONTENT"), types.join(" "));
    assert.equal(types.at(-1), "RUN_FINISHED");

    // Once over, a reload gives the same conversation, from the thread alone.
    await page.reload();
    await ready(page);
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    assert.deepEqual(await shown(page), { users: [HELLO], answers: expected });
    assert.deepEqual(await listed(page), [[HELLO, true]]);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("Stop cancels the run in the bridge; the partial answer stays, after a reload too", {
  timeout: 60_000,
}, async () => {
  const { kept: whole } = await answerOf(DEMO_URL, HELLO);
  const { page, problems, requests, close } = await openPage(SLOW_DEMO_URL);
  try {
    await send(page, HELLO);
    await page.waitForFunction(
      () => document.querySelector("[data-testid=assistant-text]")?.textContent.length > 10,
      null,
      { timeout: 30_000 },
    );
    await page.getByTestId("stop-button").click();
    await idle(page, 5_000);
    const cancels = requests.filter((request) => /\/agent\/runs\/[^/]+\/cancel$/.test(request));
    assert.equal(cancels.length, 1, requests.join("\n"));
    assert.match(cancels[0], /^POST /);
    assert.deepEqual(await page.getByTestId("turn-note").allTextContents(), ["Stopped."]);
    assert.equal(await page.getByTestId("error-banner").isVisible(), false, "Stop is no error");
    const partial = await shown(page);
    assert.equal(partial.answers.length, 1);

    // The stream ended with the bridge's RUN_FINISHED (outcome cancelled), not the client's abort.
    const types = await inspected(page);
    assert.equal(types.at(-1), "RUN_FINISHED");
    assert.ok(!types.includes("RUN_ERROR"), types.join(" "));
    await page.getByTestId("inspector-toggle").click();
    await page.locator("[data-testid=inspector-event]").last().locator("summary").click();
    const finished = JSON.parse(
      await page.locator("[data-testid=inspector-event]").last().locator("pre").textContent(),
    );
    assert.deepEqual(finished.outcome, { type: "cancelled" });
    await page.getByTestId("inspector-toggle").click();

    // The bridge's run is over: the thread has none going on, and keeps the start of the
    // answer the page showed.
    // (The list reads the thread as the bridge saved it once the run had ended: polled.)
    const thread = threadOf(page);
    await until(
      async () =>
        (await bridgeThreads(SLOW_DEMO_URL)).find((each) => each.id === thread)?.running === null,
      "GET /threads lists the thread with no run going on",
    );
    const kept = await keptAnswer(SLOW_DEMO_URL, thread);
    assert.ok(kept.length > 10 && kept.length < whole.length, `${kept} of ${whole}`);
    assert.ok(whole.startsWith(kept), `${kept} of ${whole}`);

    // And the thread holds what the page showed.
    await page.reload();
    await ready(page);
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    assert.deepEqual(await shown(page), partial);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a bridge without --threads: no thread list, no thread requests, the page as before", async () => {
  const { page, problems, requests, close } = await openPage(PLAIN_URL);
  try {
    assert.equal(await page.getByTestId("thread-panel").isVisible(), false);
    assert.equal(await page.getByTestId("threads-toggle").isVisible(), false);
    await send(page, HELLO);
    await page.waitForSelector("[data-testid=assistant-text][data-state=done]");
    await idle(page);
    assert.equal((await shown(page)).answers.length, 1);
    await page.getByTestId("new-chat").click();
    assert.equal(await page.getByTestId("user-message").count(), 0);
    assert.equal(new URL(page.url()).hash, "", "no thread in the address");
    assert.deepEqual(
      requests.filter((request) => /\/agent\/(threads|runs)/.test(request)),
      [],
    );
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});
