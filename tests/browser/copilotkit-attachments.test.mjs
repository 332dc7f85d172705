// Attachments in the CopilotKit example (examples/copilotkit/) in Debian's Chromium, driven by
// playwright-core, through CopilotRuntime and directly: files picked from CopilotChat's "+" menu
// go out as AG-UI parts of the user message (CopilotKit 1.74's own), the bridge maps them for
// the upstream, and the scripted model says what it received.
//
// Driven by tests/test_copilotkit.py, which starts the servers and sets:
//   APP_URL        the example's server (page + CopilotRuntime); its agent is a scripted stack
//   MODEL          the scripted model to ask
//
// test_copilotkit.py then checks the upstream's requests: image_url, file, the text file as text
// with its name, input_audio. Every page must run without a console error or warning, an
// uncaught exception, or an error reported to CopilotKit's onError.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { AUDIO, humanSize, IMAGE, PDF, TEXT } from "./attachments.mjs";
import { answered, desktopBrowser, env, openPage, send } from "./copilotkit_page.mjs";

const APP_URL = env("APP_URL");
const MODEL = env("MODEL");
const WIRINGS = ["runtime", "direct"];
/** The question of each wiring's turn: test_copilotkit.py tells the cases apart by it. */
const prompt = (wiring) => `What did I attach, from ${wiring}?`;

const chromium = desktopBrowser();

/** Picks `files` as a person does: "+", "Add attachments", then the file chooser. */
async function attach(page, files) {
  await page.getByTestId("copilot-add-menu-button").click();
  const [chooser] = await Promise.all([
    page.waitForEvent("filechooser"),
    page.getByRole("menuitem", { name: "Add attachments" }).click(),
  ]);
  await chooser.setFiles(files);
}

/** Waits until CopilotChat's queue holds `count` attachments, every one read (it sends none
 * while one is still uploading). */
const queued = (page, count) =>
  page.waitForFunction((n) => {
    const queue = document.querySelector("[data-testid=copilot-attachment-queue]");
    return (
      queue?.children.length === n && queue.querySelector("[class*=animate-spin]") === null
    );
  }, count);

const said = (file, label = file.name) =>
  `${label} (${file.mimeType}, ${humanSize(file.buffer.length)})`;

for (const wiring of WIRINGS) {
  describe(`CopilotKit attachments through ${wiring === "runtime" ? "CopilotRuntime" : "no runtime (direct)"}`, () => {
    test(`${MODEL}: an image, a PDF, a text file and an audio clip, each named by the model`, async () => {
      const { page, problems } = await openPage(chromium.context, APP_URL, wiring, MODEL);
      try {
        // A file over the example's 5 MB: CopilotKit refuses it and the page says why.
        const huge = {
          name: "huge.png",
          mimeType: "image/png",
          buffer: Buffer.alloc(6 * 1024 * 1024),
        };
        await attach(page, [huge]);
        const problem = page.getByTestId("attachment-problem");
        await problem.waitFor();
        assert.equal(
          await problem.innerText(),
          'File "huge.png" exceeds the maximum size of 5.0 MB',
        );

        await attach(page, [IMAGE, PDF, TEXT, AUDIO]);
        await queued(page, 4);
        await send(page, prompt(wiring));
        await answered(page, problems, "I received ");

        const answer = await page
          .locator("[data-testid=copilot-assistant-message]")
          .last()
          .innerText();
        // Each as its server took it: the image as image_url and the audio as input_audio (no
        // names there), the PDF as a file with its name, the text file as text with its name.
        for (const expected of [
          said(IMAGE, "an image"),
          said(PDF),
          said(TEXT),
          said(AUDIO, "an audio clip"),
        ]) {
          assert.ok(answer.includes(expected), `${expected} is not in the answer: ${answer}`);
        }
        // The sent message shows them: the image itself, the documents by name.
        const sent = page.getByTestId("copilot-user-message").last();
        assert.equal(await sent.locator("img").count(), 1);
        const shown = await sent.innerText();
        for (const file of [PDF, TEXT]) assert.ok(shown.includes(file.name), shown);
        assert.equal(
          await page.locator("[data-testid=copilot-attachment-queue]").count(),
          0,
          "the queue emptied",
        );

        assert.deepEqual(await page.evaluate(() => window.copilotErrors), [], "onError");
        assert.deepEqual(problems, [], "console errors, warnings and uncaught exceptions");
      } finally {
        await page.close();
      }
    });
  });
}
