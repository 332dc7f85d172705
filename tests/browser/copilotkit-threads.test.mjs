// The CopilotKit example's thread surviving a reload, in Chromium, wired directly: the page keeps
// its thread in the URL (`&thread=…`) and its agent (ThreadAgent, examples/copilotkit/src/shell.tsx)
// answers CopilotKit's connect() with the bridge's hydrate.
//
// Driven by tests/hostile/test_hostile_copilotkit_threads.py, which starts the servers (the bridge
// keeping threads in memory, its scripted model paced) and sets:
//   APP_URL  the example's server
//   MODEL    the scripted model
//
// Every page must run without a console error or warning, an uncaught exception, or an error
// reported to CopilotKit's onError.

import assert from "node:assert/strict";
import { test } from "node:test";

import { answered, desktopBrowser, env, openPage, send, transcript } from "./copilotkit_page.mjs";

const APP_URL = env("APP_URL");
const MODEL = env("MODEL");
/** A question the scripted model answers with text only (no tool is asked for). */
const PROMPT = "Please say hello from a thread.";
/** How the scripted model's answer ends. */
const ENDING = "to see tool calls.";

const chromium = desktopBrowser();
/** The conversation of the first test, before its reload: what the same prompt gets. */
let reference;

/** The messages shown: the user's, the reasoning block (not its header, which says how long the
 * thinking took), the answer. */
const conversation = async (page) =>
  (await transcript(page)).map((entry) =>
    entry.kind === "reasoning" ? { kind: "reasoning" } : entry,
  );
const threadOf = (page) => new URL(page.url()).searchParams.get("thread");

test("a conversation that had ended is shown again after a reload", async () => {
  const { page, problems } = await openPage(chromium.context, APP_URL, "direct", MODEL);
  const thread = threadOf(page);
  assert.ok(thread, `no thread in the URL: ${page.url()}`);
  await send(page, PROMPT);
  await answered(page, problems, ENDING);
  reference = await conversation(page);
  assert.deepEqual(
    reference.map((entry) => entry.kind),
    ["user", "reasoning", "assistant"],
  );

  await page.reload();
  await answered(page, problems, ENDING);
  assert.equal(threadOf(page), thread);
  assert.deepEqual(await conversation(page), reference);
  assert.deepEqual(problems, []);
  await page.close();
});

test("a reload in the middle of an answer shows it going on to its end, once", async () => {
  assert.ok(reference, "the first test gives the answer to compare with");
  const { page, problems } = await openPage(chromium.context, APP_URL, "direct", MODEL);
  const thread = threadOf(page);
  await send(page, PROMPT);
  // The answer's first words are shown, and the run goes on.
  const partial = await page.waitForFunction(
    () => {
      const answers = document.querySelectorAll("[data-testid=copilot-assistant-message]");
      const text = answers[answers.length - 1]?.innerText.trim();
      const running = document.querySelector("[data-testid=run-status]").dataset.state;
      return running === "running" && text ? text : false;
    },
    null,
    { timeout: 20_000 },
  );
  const shown = await partial.jsonValue();
  await page.reload();
  assert.ok(!shown.includes(ENDING), `the answer had ended before the reload: ${shown}`);

  await answered(page, problems, ENDING);
  assert.equal(threadOf(page), thread);
  assert.deepEqual(await conversation(page), reference);
  assert.deepEqual(problems, []);
  await page.close();
});
