// The CopilotKit example answers a server tool's question (issue 43, point 4): asked to book a
// table, the scripted model calls the bridge's ask_user, the run ends with an "input_required"
// interrupt, and useInterrupt shows a form made from its schema (src/question_card.tsx); Send
// resumes the run and the model quotes the answer.
//
// Driven by tests/test_copilotkit_ask.py, which starts the servers and sets:
//   APP_URL        the example's chat page; its agent is a scripted stack with --ask-user
//   WIRINGS        comma-separated wirings to run: runtime (CopilotRuntime), direct
//   ARTIFACTS_DIR  where the screenshot goes (copilotkit-question.png)
//
// Every page must run without a console error or warning, an uncaught exception, or an error
// reported to CopilotKit.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";

import { answered, desktopBrowser, env, openPage, send } from "./copilotkit_page.mjs";

const APP_URL = env("APP_URL");
const WIRINGS = env("WIRINGS").split(",").filter(Boolean);
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");
const MODEL = "scripted-reasoning-content";

const chromium = desktopBrowser();

for (const wiring of WIRINGS) {
  test(`${wiring}: the question's form, and the answer resumes the run`, async () => {
    const { page, problems } = await openPage(chromium.context, APP_URL, wiring, MODEL);
    try {
      await send(page, "Book a table for us, please.");
      const card = page.locator("[data-testid=question-card][data-state=waiting]");
      await card.waitFor({ timeout: 20_000 });
      assert.equal(
        await card.getByTestId("question-message").innerText(),
        "Which day, what time, and for how many?",
      );
      const date = card.getByTestId("question-field-date");
      assert.equal(await date.getAttribute("type"), "date");
      assert.equal(await card.getByTestId("question-field-seats").getAttribute("max"), "8");
      // Incomplete: the browser holds the form back, nothing is resolved.
      await card.getByTestId("question-send").click();
      assert.deepEqual(await page.evaluate(() => window.answers), []);

      await date.fill("2026-12-01");
      await card.getByTestId("question-field-time").selectOption({ label: "19:00" });
      await card.getByTestId("question-field-seats").fill("2");
      if (wiring === WIRINGS[0]) {
        await mkdir(ARTIFACTS_DIR, { recursive: true });
        await page.screenshot({ path: join(ARTIFACTS_DIR, "copilotkit-question.png") });
      }
      await card.getByTestId("question-send").click();
      await answered(page, problems, "2026-12-01");
      assert.deepEqual(await page.evaluate(() => window.answers), [
        { date: "2026-12-01", time: "19:00", seats: 2 },
      ]);
      assert.deepEqual(problems, []);
    } finally {
      await page.close();
    }
  });
}
