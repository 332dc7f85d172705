// The CopilotKit example's shared-state page (examples/copilotkit/, `/state`) in Chromium: a
// to-do list and a document rendered from the agent's state, which the bridge edits
// (`--shared-state`: update_state, STATE_DELTA) and predicts (`--predict-state
// document=write_document.document`: the page's write_document call streams into the state).
//
// Driven by tests/test_copilotkit_state.py, which starts the servers and sets:
//   APP_URL        the example's shared-state page (`…/state`); its agent is a scripted stack
//                  whose upstream paces its chunks, so a stream takes many browser tasks
//   MODEL          the scripted model
//   WIRINGS        comma-separated wirings to run: runtime (CopilotRuntime), direct
//   ARTIFACTS_DIR  where the screenshot goes (copilotkit-state.png)
//
// Every page must run without a console error or warning, an uncaught exception, or an error
// reported to CopilotKit.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";

import { answered, desktopBrowser, env, openPage, send } from "./copilotkit_page.mjs";

const APP_URL = env("APP_URL");
const MODEL = env("MODEL");
const WIRINGS = env("WIRINGS").split(",").filter(Boolean);
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");

const ADD_PROMPT = "Add a to-do: water the plants";
const DONE_PROMPT = "Mark water the plants done";
/** What the scripted model answers once its update_state call ran. */
const TODOS_UPDATED = "The to-do list is updated";
const DOCUMENT_PROMPT = "Please write_document about the cake";
/** What the scripted model writes as write_document's `document` (the prompt, for any string). */
const DOCUMENT = DOCUMENT_PROMPT;
/** What the scripted model answers once the page ran write_document. */
const TOOLS_ANSWERED = "Here is what the tools returned";

const chromium = desktopBrowser();

/**
 * Records, in the page, what the state panels show after every change of the page, whether the
 * agent was running then, and how many answers said the to-dos were updated: window.shown, one
 * entry per change of these.
 */
function recordPanels(page) {
  return page.evaluate((updated) => {
    const read = () => ({
      todos: [...document.querySelectorAll("[data-testid=todo]")].map((item) => ({
        text: item.innerText.trim(),
        done: item.dataset.done === "true",
        checked: item.querySelector("input").checked,
      })),
      document: document.querySelector("[data-testid=document]")?.textContent ?? "",
      running: document.querySelector("[data-testid=run-status]").dataset.state === "running",
      said: [...document.querySelectorAll("[data-testid=copilot-assistant-message]")].filter(
        (answer) => answer.innerText.includes(updated),
      ).length,
    });
    window.shown = [read()];
    new MutationObserver(() => {
      const now = read();
      if (JSON.stringify(now) !== JSON.stringify(window.shown.at(-1))) window.shown.push(now);
    }).observe(document.body, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true,
    });
  }, TODOS_UPDATED);
}

const shown = (page) => page.evaluate(() => window.shown);

async function checkClean(page, problems) {
  assert.deepEqual(await page.evaluate(() => window.copilotErrors), [], "CopilotKit errors");
  assert.deepEqual(await page.getByTestId("error").allInnerTexts(), [], "error banners");
  assert.deepEqual(problems, [], "console errors, warnings and uncaught exceptions");
}

const THROUGH = { runtime: "CopilotRuntime", direct: "no runtime (direct)" };

for (const wiring of WIRINGS) {
  describe(`shared state through ${THROUGH[wiring]}`, () => {
    test("to-dos edited by the bridge, a document predicted as the model writes it", async (t) => {
      const { page, problems } = await openPage(chromium.context, APP_URL, wiring, MODEL);
      try {
        await recordPanels(page);

        // The bridge's update_state adds the to-do: its STATE_DELTA, mid-run, before the model
        // answers (not the STATE_SNAPSHOT that ends the run), and the list shows it.
        await send(page, ADD_PROMPT);
        await answered(page, problems, TODOS_UPDATED);
        const added = { text: "water the plants", done: false, checked: false };
        const afterAdd = await shown(page);
        assert.deepEqual(afterAdd.at(-1).todos, [added], JSON.stringify(afterAdd));
        assert.ok(
          afterAdd.some((entry) => entry.running && entry.todos.length === 1 && entry.said === 0),
          `the to-do showed before the answer: ${JSON.stringify(afterAdd)}`,
        );

        // Ticked: the model read the list from the state the page sent with the second run.
        await send(page, DONE_PROMPT);
        await answered(page, problems, TODOS_UPDATED);
        const ticked = { text: "water the plants", done: true, checked: true };
        const afterTick = await shown(page);
        assert.deepEqual(afterTick.at(-1).todos, [ticked]);
        assert.equal(afterTick.at(-1).said, 2, "both answers said the to-dos were updated");
        assert.ok(
          afterTick.some((entry) => entry.todos[0]?.done && entry.said === 1),
          `ticked before the answer: ${JSON.stringify(afterTick)}`,
        );

        // write_document: the argument streams into state.document (PredictState) while the
        // model writes the call, then the page's handler sets the whole of it.
        const before = (await shown(page)).length;
        await send(page, DOCUMENT_PROMPT);
        await answered(page, problems, TOOLS_ANSWERED);
        const timeline = (await shown(page)).slice(before);
        const documents = timeline.map((entry) => entry.document).filter(Boolean);
        const distinct = documents.filter((text, index) => text !== documents[index - 1]);
        assert.equal(distinct.at(-1), DOCUMENT, JSON.stringify(timeline));
        for (const text of distinct) assert.ok(DOCUMENT.startsWith(text), JSON.stringify(distinct));
        const partial = distinct.filter((text) => text !== DOCUMENT);
        assert.ok(
          partial.length >= 2,
          `the panel grew through partial documents before the whole: ${JSON.stringify(distinct)}`,
        );
        assert.ok(
          timeline.every((entry) => !partial.includes(entry.document) || entry.running),
          `the partial documents showed while the call streamed: ${JSON.stringify(timeline)}`,
        );
        assert.deepEqual(timeline.at(-1).todos, [ticked], "the to-dos are kept");
        const card = page.locator("[data-testid=tool-card][data-tool-name=write_document]");
        assert.equal(await card.count(), 1, "one card for the one call");
        assert.equal(await card.getAttribute("data-status"), "complete");
        assert.match(await card.innerText(), new RegExp(`Written: ${DOCUMENT.length} characters`));
        t.diagnostic(`the document panel showed, in order: ${JSON.stringify(distinct)}`);

        if (wiring === WIRINGS[0]) {
          await mkdir(ARTIFACTS_DIR, { recursive: true });
          await page.screenshot({ path: join(ARTIFACTS_DIR, "copilotkit-state.png") });
        }
        await checkClean(page, problems);
      } finally {
        await page.close();
      }
    });
  });
}
