// The demo page's attachments in Debian's Chromium, driven by playwright-core, against
// `agui-bridge demo`: files picked with the paperclip become chips, then AG-UI 1.0 parts of the
// user message (as CopilotKit 1.74 sends them), and the scripted model says what it received.
//
// Driven by tests/test_browser.py, which starts the servers and sets:
//   DEMO_URL       `agui-bridge demo` with a fast pace
//   SMALL_URL      the same with `--max-attachment-bytes SMALL_LIMIT`: the bridge refuses a
//                  file the page takes, and the person reads why
//   SMALL_LIMIT    that limit, in bytes (between the test image's size and the PDF's)
//
// Every page must run without a console error, warning or uncaught exception.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { AUDIO, base64, humanSize, IMAGE, PDF, TEXT } from "./attachments.mjs";
import { launchChromium, problemsOf } from "./chromium.mjs";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};
const DEMO_URL = env("DEMO_URL");
const SMALL_URL = env("SMALL_URL");
const SMALL_LIMIT = Number(env("SMALL_LIMIT"));

const PROMPT = "What did I send?";
const MB = 1024 * 1024;

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

/** A fresh page whose console problems and agent POSTs (their bodies) are collected. */
async function openPage(url = DEMO_URL) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const problems = problemsOf(page);
  const posted = [];
  page.on("request", (request) => {
    if (request.method() === "POST" && new URL(request.url()).pathname === "/agent") {
      posted.push(request.postDataJSON());
    }
  });
  await page.goto(url);
  await page.waitForFunction(() => document.querySelector("[data-testid=model-picker]").value);
  return { page, problems, posted, close: () => context.close() };
}

/** Picks `files` as a person does: the paperclip, then the file chooser. */
async function attach(page, files) {
  const [chooser] = await Promise.all([
    page.waitForEvent("filechooser"),
    page.getByTestId("attach-button").click(),
  ]);
  assert.equal(chooser.isMultiple(), true);
  await chooser.setFiles(files);
}

/** The chips of the tray (or of a sent message, `within`), as {name, type, size, text}. */
const chips = (page, within = "[data-testid=attachment-tray]") =>
  page.$$eval(`${within} [data-testid=attachment-chip]`, (all) =>
    all.map((chip) => ({
      name: chip.dataset.name,
      type: chip.dataset.type,
      size: Number(chip.dataset.size),
      text: chip.innerText.replace(/\s+/g, " ").trim(),
    })),
  );

const waitForChips = (page, count) =>
  page.waitForFunction(
    (n) =>
      document.querySelectorAll("[data-testid=attachment-tray] [data-testid=attachment-chip]")
        .length === n,
    count,
  );

/** Waits for the turn's answer; the banner's error, if the run failed instead. */
async function answer(page) {
  await page.waitForFunction(
    () =>
      document.querySelector("[data-testid=assistant-text][data-state=done]") ||
      !document.querySelector("[data-testid=error-banner]").hidden,
    null,
    { timeout: 20_000 },
  );
  await page.waitForFunction(
    () => document.querySelector("[data-testid=run-status]").dataset.state === "idle",
  );
  const banner = page.getByTestId("error-banner");
  if (await banner.isVisible()) assert.fail(`the run failed: ${await banner.innerText()}`);
  return page.getByTestId("assistant-text").last().innerText();
}

/** The part a file goes as: AG-UI 1.0, as CopilotKit 1.74's chat builds it. */
const part = (type, file) => ({
  type,
  source: { type: "data", value: base64(file), mimeType: file.mimeType },
  metadata: { filename: file.name },
});

const said = (file, label = file.name) =>
  `${label} (${file.mimeType}, ${humanSize(file.buffer.length)})`;

test("an image alone: a chip, the image part, and the model names it", async () => {
  const { page, problems, posted, close } = await openPage();
  try {
    await attach(page, [IMAGE]);
    await waitForChips(page, 1);
    const [shown] = await chips(page);
    assert.deepEqual(shown, {
      name: IMAGE.name,
      type: "image/png",
      size: IMAGE.buffer.length,
      text: `${IMAGE.name} ${humanSize(IMAGE.buffer.length)} ×`,
    });
    // An image's chip shows the image itself.
    const thumb = page.locator("[data-testid=attachment-tray] img");
    assert.ok(await thumb.evaluate((img) => img.complete && img.naturalWidth === 40));

    // No text: the attachment alone is a message.
    await page.getByTestId("send-button").click();
    const text = await answer(page);
    assert.ok(text.startsWith(`I received ${said(IMAGE, "an image")}.`), text);

    const sent = posted[0].messages.at(-1);
    assert.equal(sent.role, "user");
    assert.deepEqual(sent.content, [part("image", IMAGE)]);
    assert.deepEqual(
      (await chips(page, "[data-testid=user-message]")).map((chip) => chip.name),
      [IMAGE.name],
    );
    assert.equal(await page.locator("[data-testid=user-message] .bubble").count(), 0);
    assert.equal(await page.getByTestId("attachment-tray").isHidden(), true, "the tray emptied");
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("an image, a PDF, a text file and audio: limits said, chips, parts, all named", async () => {
  const { page, problems, posted, close } = await openPage();
  try {
    await attach(page, [IMAGE, PDF, TEXT, AUDIO]);
    await waitForChips(page, 4);

    // Too big, or not a kind the page attaches: not attached, and the page says why.
    const huge = { name: "huge.png", mimeType: "image/png", buffer: Buffer.alloc(6 * MB) };
    const zip = { name: "archive.zip", mimeType: "application/zip", buffer: Buffer.from("PK") };
    await attach(page, [huge, zip]);
    const problem = page.getByTestId("attach-problem");
    await problem.waitFor();
    assert.equal(
      await problem.innerText(),
      "huge.png is 6.0 MB: files may be up to 5.0 MB each. " +
        "archive.zip: the demo attaches images, PDFs, text files and audio.",
    );
    // A file that fits, then taken off again with its ×.
    const extra = { name: "extra.md", mimeType: "", buffer: Buffer.from("# Extra\n") };
    await attach(page, [extra]);
    await waitForChips(page, 5);
    assert.equal(await problem.isHidden(), true, "the next good pick clears the message");
    await page.getByRole("button", { name: "Remove extra.md" }).click();
    await waitForChips(page, 4);

    const files = [IMAGE, PDF, TEXT, AUDIO];
    assert.deepEqual(
      (await chips(page)).map(({ name, type, size }) => ({ name, type, size })),
      files.map((file) => ({ name: file.name, type: file.mimeType, size: file.buffer.length })),
    );

    await page.getByTestId("prompt").fill(PROMPT);
    await page.getByTestId("prompt").press("Enter");
    const text = await answer(page);

    // The user message: the text first, then each file as the part its MIME type says.
    assert.deepEqual(posted[0].messages.at(-1).content, [
      { type: "text", text: PROMPT },
      part("image", IMAGE),
      part("document", PDF),
      part("document", TEXT),
      part("audio", AUDIO),
    ]);
    // The model received each in the form its server takes: the image as image_url (no name),
    // the PDF as a file with its name, the text file as text with its name, the audio clip as
    // input_audio (no name).
    for (const expected of [
      said(IMAGE, "an image"),
      said(PDF),
      said(TEXT),
      said(AUDIO, "an audio clip"),
    ]) {
      assert.ok(text.includes(expected), `${expected} is not in the answer: ${text}`);
    }
    // The sent message keeps its chips and its text.
    assert.deepEqual(
      (await chips(page, "[data-testid=user-message]")).map((chip) => chip.name),
      files.map((file) => file.name),
    );
    assert.equal(await page.locator("[data-testid=user-message] .bubble").innerText(), PROMPT);
    assert.deepEqual(problems, []);
  } finally {
    await close();
  }
});

test("a file the bridge refuses: the banner says which and why, and the chat goes on", async () => {
  assert.ok(IMAGE.buffer.length <= SMALL_LIMIT && PDF.buffer.length > SMALL_LIMIT);
  const { page, problems, posted, close } = await openPage(SMALL_URL);
  try {
    await attach(page, [PDF]);
    await waitForChips(page, 1);
    await page.getByTestId("prompt").fill(PROMPT);
    await page.getByTestId("prompt").press("Enter");
    const banner = page.getByTestId("error-banner");
    await banner.waitFor();
    assert.equal(await page.getByTestId("error-code").innerText(), "attachment_too_large");
    const message = await page.getByTestId("error-message").innerText();
    assert.ok(
      message.includes("report.pdf") &&
        message.includes(`larger than ${SMALL_LIMIT}`) &&
        message.includes("--max-attachment-bytes"),
      message,
    );
    assert.deepEqual(await page.getByTestId("turn-note").allInnerTexts(), [
      "The run failed.",
      "Not kept in the conversation: the next message is sent without it.",
    ]);

    // The next message goes without the refused one: a file the bridge takes.
    await attach(page, [IMAGE]);
    await waitForChips(page, 1);
    await page.getByTestId("send-button").click();
    assert.ok((await answer(page)).startsWith(`I received ${said(IMAGE, "an image")}.`));
    const users = posted.at(-1).messages.filter((message) => message.role === "user");
    assert.deepEqual(users.map((message) => message.content), [[part("image", IMAGE)]]);
    // The browser and the client log the one refusal; nothing else went wrong.
    assert.deepEqual(
      problems.filter((line) => !line.includes("413")),
      [],
      JSON.stringify(problems, null, 1),
    );
  } finally {
    await close();
  }
});
