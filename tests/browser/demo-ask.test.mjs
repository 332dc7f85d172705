// The demo page's question card (issue 43, point 4) in Debian's Chromium, driven by
// playwright-core: the scripted model's ask_user call ("Book a table") ends its run with an
// "input_required" interrupt, the page shows a form made from its responseSchema, and the answer
// resumes the run; the model then quotes it.
//
// Driven by tests/test_browser.py::test_demo_page_asks_the_user_in_chromium, which starts:
//   DEMO_URL       `agui-bridge demo` (its scripted model asks with ask_user) with a fast pace
//   ARTIFACTS_DIR  where the screenshot goes (demo-question.png)
//
// Every page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { launchChromium, problemsOf } from "./chromium.mjs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};
const DEMO_URL = env("DEMO_URL");
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");
const DESKTOP = { width: 1280, height: 860 };

let browser;

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
});

async function openPage(url) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  const resumes = [];
  const problems = problemsOf(page);
  page.on("request", (request) => {
    const body = request.method() === "POST" ? request.postDataJSON?.() : undefined;
    if (body?.resume) resumes.push(body.resume);
  });
  await page.goto(url);
  await page.waitForFunction(
    () => document.querySelector("[data-testid=model-picker]").value !== "",
  );
  return { page, problems, resumes, close: () => context.close() };
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

test("ask_user: a form from the schema; the answer resumes the run and the model quotes it", async () => {
  const { page, problems, resumes, close } = await openPage(DEMO_URL);
  try {
    await send(page, "Book a table for us, please.");
    const card = page.locator("[data-testid=question-card][data-state=waiting]");
    await card.waitFor({ timeout: 20_000 });
    assert.equal(
      await card.getByTestId("question-message").textContent(),
      "Which day, what time, and for how many?",
    );
    // The form the schema makes: a date, a choice of three times, a number from 1 to 8.
    const date = card.getByTestId("question-field-date");
    const time = card.getByTestId("question-field-time");
    const seats = card.getByTestId("question-field-seats");
    assert.equal(await date.getAttribute("type"), "date");
    assert.deepEqual(await time.locator("option").allTextContents(), [
      "Choose…",
      "12:00",
      "19:00",
      "20:30",
    ]);
    assert.equal(await seats.getAttribute("type"), "number");
    assert.equal(await seats.getAttribute("max"), "8");

    assert.equal(await page.getByTestId("run-status").textContent(), "Waiting for your answer…");
    // Nothing missing goes: the browser holds the form back, no resume is sent.
    await card.getByTestId("question-send").click();
    assert.equal(await card.getAttribute("data-state"), "waiting");
    assert.deepEqual(resumes, []);

    await date.fill("2026-12-01");
    await time.selectOption({ label: "19:00" });
    await seats.fill("2");
    await page.screenshot({ path: join(ARTIFACTS_DIR, "demo-question.png") });
    await card.getByTestId("question-send").click();
    await idle(page);

    assert.equal(resumes.length, 1);
    assert.equal(resumes[0].length, 1);
    assert.equal(resumes[0][0].status, "resolved");
    assert.deepEqual(resumes[0][0].payload, { date: "2026-12-01", time: "19:00", seats: 2 });
    const done = page.locator("[data-testid=question-card]");
    assert.equal(await done.getAttribute("data-state"), "approved");
    assert.equal(await done.getByTestId("question-verdict").textContent(), "Answer sent.");
    const answer = await page.getByTestId("assistant-text").last().textContent();
    assert.match(answer, /ask_user/);
    assert.match(answer, /2026-12-01/);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("ask_user: an answer the bridge refuses shows its reason on the form, asked again", async () => {
  const { page, problems, resumes, close } = await openPage(DEMO_URL);
  try {
    // The first resume goes with seats 99 in place of what the form says: the bridge refuses
    // it (answer_invalid) and the interrupt stands.
    let altered = 0;
    await page.route("**/*", async (route) => {
      const request = route.request();
      const body = request.method() === "POST" ? request.postDataJSON?.() : undefined;
      if (!body?.resume || altered > 0) return route.continue();
      altered += 1;
      body.resume[0].payload.seats = 99;
      return route.continue({ postData: JSON.stringify(body) });
    });
    await send(page, "Book a table for us, please.");
    const waiting = page.locator("[data-testid=question-card][data-state=waiting]");
    await waiting.waitFor({ timeout: 20_000 });
    const fill = async (card) => {
      await card.getByTestId("question-field-date").fill("2026-12-01");
      await card.getByTestId("question-field-time").selectOption({ label: "12:00" });
      await card.getByTestId("question-field-seats").fill("3");
      await card.getByTestId("question-send").click();
    };
    await fill(waiting);
    // Asked again, the same interrupt, with the bridge's reason.
    const again = page.locator("[data-testid=question-card][data-state=waiting]");
    await again.waitFor({ timeout: 20_000 });
    const problem = again.getByTestId("question-problem");
    assert.equal(await problem.isVisible(), true);
    assert.match(await problem.textContent(), /seats: 99 is greater than the maximum of 8/);
    await fill(again);
    await idle(page);

    assert.equal(altered, 1);
    assert.equal(resumes.length, 2);
    assert.equal(resumes[0][0].interruptId, resumes[1][0].interruptId);
    assert.deepEqual(resumes[1][0].payload, { date: "2026-12-01", time: "12:00", seats: 3 });
    const answer = await page.getByTestId("assistant-text").last().textContent();
    assert.match(answer, /"seats":3/);
    // The refusal is the form's to show: no error banner, no console problem.
    assert.equal(await page.getByTestId("error-banner").isVisible(), false);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});
