// The CopilotKit example (examples/copilotkit/) in Debian's Chromium, driven by playwright-core:
// a CopilotKit v2 chat whose agent is the bridge, through CopilotRuntime and directly.
//
// Driven by tests/test_copilotkit.py, which starts the servers and sets:
//   APP_URL        the example's server (page + CopilotRuntime); its agent is a scripted stack
//   MODELS         comma-separated scripted models to run, each in both wirings
//   MIXED_MODELS   comma-separated models among them that also run the mixed turn, in both
//                  wirings: the bridge's server tool get_time (which returns "12:00") beside the
//                  page's change_background
//   REASONING_FREE comma-separated models among them that stream no reasoning
//   INTERLEAVED_MODELS comma-separated models that also run, in both wirings, a turn of
//                  interleaved thinking (reasoning, text, reasoning again, text again)
//   APPROVAL_MODELS comma-separated models that also run, in both wirings, a conversation with
//                  the bridge's send_email (which waits for approval): approved with a click on
//                  the approval card, then another one denied with a reason, then a third turn.
//                  The first of them also runs, in both wirings, an email whose Approve is
//                  clicked twice (a double click, two fast clicks): test_copilotkit.py counts
//                  the emails the bridge sent (its GET /metrics) and what reached the model
//   ARTIFACTS_DIR  where the screenshots go (copilotkit.png, copilotkit-approval.png)
//
// Every page must run without a console error or warning, an uncaught exception, or an error
// reported to CopilotKit's onError.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";

import { TWO_CLICKS } from "./chromium.mjs";
import { answered, desktopBrowser, env, openPage as openAppPage, RUN_TIMEOUT, send, transcript } from "./copilotkit_page.mjs";

const openPage = (wiring, model) => openAppPage(chromium.context, APP_URL, wiring, model);

const APP_URL = env("APP_URL");
const MODELS = env("MODELS").split(",").filter(Boolean);
const MIXED_MODELS = env("MIXED_MODELS").split(",").filter(Boolean);
const REASONING_FREE = new Set(env("REASONING_FREE").split(",").filter(Boolean));
const INTERLEAVED_MODELS = env("INTERLEAVED_MODELS").split(",").filter(Boolean);
const APPROVAL_MODELS = (process.env.APPROVAL_MODELS ?? "").split(",").filter(Boolean);
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");
const WIRINGS = ["runtime", "direct"];
/** The mixed case whose page is photographed after its tool run (docs/copilotkit.png). */
const SCREENSHOT_CASE = { wiring: "runtime", model: MIXED_MODELS[0] };

const TOOLS_PROMPT = "What's the weather in Paris? And make the background lightblue.";
const LIGHTBLUE = "rgb(173, 216, 230)";
/** A turn mixing the bridge's server tool (get_time) and a frontend tool (change_background). */
const MIXED_PROMPT = "What time is it? And make the background lightblue.";
/** get_time's result as the bridge sends it in TOOL_CALL_RESULT: the string, not JSON text. */
const SERVER_TIME = "12:00";
/** Asked to interleave, the scripted model reasons, writes, reasons again and writes again. */
const INTERLEAVE_PROMPT = "Please interleave your thinking.";
const INTERLEAVED = [
  { kind: "reasoning", text: "First I look at the question." },
  { kind: "assistant", text: "Here is a first thought." },
  { kind: "reasoning", text: "Now I reconsider." },
  { kind: "assistant", text: "And here is the answer." },
];
/** Asked this, the scripted model calls send_email, which the bridge holds for approval. */
const EMAIL_PROMPT = "Email alice@example.com that the demo works.";
const EMAIL_ARGS = { to: "alice@example.com", subject: "The demo works", body: "The demo works." };
/** send_email's result, as the bridge sends it once approved. */
const EMAIL_SENT = 'Sent to alice@example.com: "The demo works"';
const DENIED_PROMPT = "Email bob@example.com that the demo is late.";
const DENIED_ARGS = { to: "bob@example.com", subject: "The demo is late", body: "The demo is late." };
const DENY_REASON = "not to Bob";
/** What the bridge tells the model (and the page) when a person denies a call with a reason. */
const DECLINED = `The user declined: ${DENY_REASON}`;
/** Asked this, the model emails Carol; the card's arguments are edited to Dave before approving. */
const EDIT_PROMPT = "Email carol@example.com that the plan changed.";
const EDIT_ARGS = { to: "carol@example.com", subject: "The plan changed", body: "The plan changed." };
const EDITED_ARGS = { ...EDIT_ARGS, to: "dave@example.com" };
const EDITED_SENT = 'Sent to dave@example.com: "The plan changed"';
/** Asked this, the model emails Erin; the card's Approve is clicked twice. */
const TWICE_PROMPT = "Email erin@example.com that Approve was clicked twice.";
const TWICE_ARGS = {
  to: "erin@example.com",
  subject: "Approve was clicked twice",
  body: "Approve was clicked twice.",
};
const TWICE_SENT = 'Sent to erin@example.com: "Approve was clicked twice"';
/** The approval case whose card is photographed (docs/copilotkit-approval.png). */
const APPROVAL_SCREENSHOT_CASE = { wiring: "runtime", model: APPROVAL_MODELS[0] };

/** The second user turn; it names its wiring so the upstream's log can tell the cases apart. */
const thanks = (wiring) => `Thanks, that is all from ${wiring}`;

const chromium = desktopBrowser();

/** The shapes a transcript must have: reasoning blocks only where the model reasons. */
function expectedKinds(model, turns) {
  const reasoning = REASONING_FREE.has(model) ? [] : ["reasoning"];
  const toolTurn = ["user", ...reasoning, "assistant", ...reasoning, "assistant"];
  const chatTurn = ["user", ...reasoning, "assistant"];
  return turns === 1 ? toolTurn : [...toolTurn, ...chatTurn];
}

async function checkClean(page, problems) {
  assert.deepEqual(await page.evaluate(() => window.copilotErrors), [], "CopilotKit onError");
  assert.deepEqual(await page.getByTestId("error").allInnerTexts(), [], "error banners");
  assert.deepEqual(problems, [], "console errors, warnings and uncaught exceptions");
}

async function saveScreenshot(page) {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  // Open the first thinking block, to show what it holds.
  const firstThought = page
    .locator("[data-message-id] button", { hasText: /^Thought for/ })
    .first();
  await firstThought.click();
  assert.equal(await firstThought.getAttribute("aria-expanded"), "true");
  await page.waitForTimeout(400); // the block's opening transition
  await page.screenshot({ path: join(ARTIFACTS_DIR, "copilotkit.png") });
  await firstThought.click();
}

/** Waits for the approval card of a send_email call and checks what it shows. */
async function approvalCard(page, problems, args) {
  const card = page.getByTestId("approval-card");
  await card.waitFor({ timeout: RUN_TIMEOUT }).catch(async (error) => {
    const shown = await transcript(page).catch(() => "(none)");
    throw new Error(
      `no approval card: ${error.message}\npage problems: ${JSON.stringify(problems, null, 1)}\n` +
        `CopilotKit errors: ${JSON.stringify(await page.evaluate(() => window.copilotErrors))}\n` +
        `transcript: ${JSON.stringify(shown, null, 1)}`,
    );
  });
  assert.equal(await card.count(), 1, "one card for the one call");
  assert.equal(await card.getAttribute("data-tool-name"), "send_email");
  assert.equal(await page.getByTestId("approval-tool").innerText(), "send_email");
  assert.deepEqual(JSON.parse(await page.getByTestId("approval-args").inputValue()), args);
  const message = await page.getByTestId("approval-message").innerText();
  assert.ok(message.startsWith("Run send_email("), message);
  assert.ok(message.includes(args.to), message);
  assert.match(await page.getByTestId("approval-expiry").innerText(), /^until /);
  // The run is over (interrupted): the call's card waits, with no result, and nothing ran here.
  await page.waitForSelector("[data-testid=run-status][data-state=idle]");
  const waiting = emailCard(await transcript(page), args.to);
  assert.deepEqual(
    { status: waiting.status, runsOn: waiting.runsOn, args: waiting.args, result: waiting.result },
    { status: "awaitingApproval", runsOn: "server", args, result: undefined },
  );
  assert.deepEqual(await page.evaluate(() => window.toolCalls), []);
  return card;
}

/** The server card of the send_email call to `to`, as the transcript shows it. */
function emailCard(entries, to) {
  const cards = entries
    .filter((entry) => entry.kind === "assistant")
    .flatMap((entry) => entry.tools)
    .filter((tool) => tool.name === "send_email" && tool.args.to === to);
  assert.equal(cards.length, 1, JSON.stringify(entries, null, 1));
  return cards[0];
}

/** The resume answers a request body carries, at any depth (CopilotRuntime's envelope, or the
 * RunAgentInput the direct wiring sends the bridge). */
function resumesIn(value) {
  if (!value || typeof value !== "object") return [];
  if (Array.isArray(value.resume) && value.resume.length > 0) return [value.resume];
  return Object.values(value).flatMap(resumesIn);
}

async function saveApprovalScreenshot(page) {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  await page.getByTestId("approval-card").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS_DIR, "copilotkit-approval.png") });
}

for (const wiring of WIRINGS) {
  describe(`CopilotKit through ${wiring === "runtime" ? "CopilotRuntime" : "no runtime (direct)"}`, () => {
    for (const model of MODELS) {
      test(`${model}: reasoning, two frontend tools, the answer, a second turn`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          assert.match(
            await page.getByTestId("wiring").innerText(),
            new RegExp(`wiring ${wiring} · model ${model}`),
          );

          // Turn 1: the model reasons, calls both tools at once; the page runs them and
          // CopilotKit's follow-up run brings the answer quoting their results.
          await send(page, TOOLS_PROMPT);
          await answered(page, problems, "Here is what the tools returned");

          const calls = await page.evaluate(() => window.toolCalls);
          assert.deepEqual(calls, [
            { name: "get_weather", args: { city: "Paris" } },
            { name: "change_background", args: { color: "lightblue" } },
          ]);
          assert.equal(
            await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
            LIGHTBLUE,
          );

          const first = await transcript(page);
          assert.deepEqual(
            first.map((entry) => entry.kind),
            expectedKinds(model, 1),
            JSON.stringify(first, null, 1),
          );
          assert.equal(first[0].text, TOOLS_PROMPT);
          for (const entry of first.filter((e) => e.kind === "reasoning")) {
            assert.match(entry.header, /^Thought for /);
          }
          const [toolMessage, answer] = first.filter((entry) => entry.kind === "assistant");
          assert.equal(toolMessage.text, "", "the tool-calling message has no text of its own");
          assert.deepEqual(
            toolMessage.tools.map(({ name, status, args }) => ({ name, status, args })),
            [
              { name: "get_weather", status: "complete", args: { city: "Paris" } },
              { name: "change_background", status: "complete", args: { color: "lightblue" } },
            ],
          );
          const [weather, background] = toolMessage.tools.map((tool) => JSON.parse(tool.result));
          assert.deepEqual(Object.keys(weather), ["city", "temperature", "conditions"]);
          assert.equal(weather.city, "Paris");
          assert.deepEqual(background, { background: "lightblue" });
          assert.deepEqual(answer.tools, []);
          for (const tool of toolMessage.tools) {
            assert.ok(
              answer.text.includes(`${tool.name}: “${tool.result}”`),
              `the answer quotes ${tool.name}'s result: ${answer.text}`,
            );
          }

          if (!REASONING_FREE.has(model)) {
            // The reasoning text itself, in the first (folded) block once opened.
            const block = page
              .locator("[data-message-id]", {
                has: page.locator("button", { hasText: /^Thought for/ }),
              })
              .first();
            await block.locator("button").click();
            await assert.doesNotReject(
              block
                .getByText(
                  "I will call get_weather (city Paris) and change_background (color lightblue)",
                )
                .waitFor({ timeout: 5_000 }),
            );
            await block.locator("button").click();
          }

          // Turn 2: the whole history (reasoning, tool calls and results) goes back; the scripted
          // model, asked nothing a tool does, answers in text. test_copilotkit.py checks what the
          // upstream received.
          await send(page, thanks(wiring));
          await answered(page, problems, `You asked about ${thanks(wiring)}`);
          const second = await transcript(page);
          assert.deepEqual(
            second.map((entry) => entry.kind),
            expectedKinds(model, 2),
            JSON.stringify(second, null, 1),
          );
          assert.deepEqual(second.slice(0, first.length), first, "the first turn stays as it was");
          assert.equal(
            (await page.evaluate(() => window.toolCalls)).length,
            2,
            "no tool ran again",
          );

          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }

    for (const model of MIXED_MODELS) {
      test(`${model}: a server tool (run by the bridge) and a frontend tool in one turn`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          // The model calls change_background and get_time at once; the bridge runs get_time and
          // sends its TOOL_CALL_RESULT, the run ends with change_background pending, the page
          // runs it, and CopilotKit's follow-up run brings the answer quoting both results.
          await send(page, MIXED_PROMPT);
          await answered(page, problems, "Here is what the tools returned");

          assert.deepEqual(
            await page.evaluate(() => window.toolCalls),
            [{ name: "change_background", args: { color: "lightblue" } }],
            "only the frontend tool ran in the browser",
          );
          assert.equal(
            await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
            LIGHTBLUE,
          );

          const turn = await transcript(page);
          assert.deepEqual(
            turn.map((entry) => entry.kind),
            expectedKinds(model, 1),
            JSON.stringify(turn, null, 1),
          );
          assert.equal(turn[0].text, MIXED_PROMPT);
          const [toolMessage, answer] = turn.filter((entry) => entry.kind === "assistant");
          assert.equal(toolMessage.text, "", "the tool-calling message has no text of its own");
          assert.deepEqual(
            toolMessage.tools.map(({ name, status, runsOn, args }) => ({
              name,
              status,
              runsOn,
              args,
            })),
            [
              {
                name: "change_background",
                status: "complete",
                runsOn: "browser",
                args: { color: "lightblue" },
              },
              { name: "get_time", status: "complete", runsOn: "server", args: {} },
            ],
          );
          const results = Object.fromEntries(
            toolMessage.tools.map((tool) => [tool.name, tool.result]),
          );
          // As the bridge sent it: no quotes around it.
          assert.equal(results.get_time, SERVER_TIME, "get_time's card shows the bridge's result");
          assert.deepEqual(JSON.parse(results.change_background), { background: "lightblue" });
          assert.deepEqual(answer.tools, []);
          for (const tool of toolMessage.tools) {
            assert.ok(
              answer.text.includes(`${tool.name}: “${tool.result}”`),
              `the answer quotes ${tool.name}'s result: ${answer.text}`,
            );
          }
          if (wiring === SCREENSHOT_CASE.wiring && model === SCREENSHOT_CASE.model)
            await saveScreenshot(page);

          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }

    for (const model of APPROVAL_MODELS) {
      test(`${model}: send_email waits for approval: approved, then denied, then a third turn`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          // Turn 1: the model calls send_email; the bridge ends the run with an interrupt and
          // useInterrupt shows the card. Approve resumes the run: the bridge runs the tool, its
          // result completes the server card, and the answer quotes it.
          await send(page, EMAIL_PROMPT);
          await approvalCard(page, problems, EMAIL_ARGS);
          if (wiring === APPROVAL_SCREENSHOT_CASE.wiring && model === APPROVAL_SCREENSHOT_CASE.model)
            await saveApprovalScreenshot(page);
          await page.getByTestId("approval-approve").click();
          await answered(page, problems, "Done: ");
          assert.equal(await page.getByTestId("approval-card").count(), 0, "the card is gone");
          const first = await transcript(page);
          const sent = emailCard(first, EMAIL_ARGS.to);
          assert.deepEqual(
            { status: sent.status, runsOn: sent.runsOn, args: sent.args, result: sent.result },
            { status: "complete", runsOn: "server", args: EMAIL_ARGS, result: EMAIL_SENT },
          );
          const answer = first.filter((entry) => entry.kind === "assistant").at(-1);
          assert.ok(answer.text.includes(`Done: “${EMAIL_SENT}”`), answer.text);

          // Turn 2: another email, denied with a reason: nothing runs, the model is told so.
          await send(page, DENIED_PROMPT);
          await approvalCard(page, problems, DENIED_ARGS);
          await page.getByTestId("approval-reason").fill(DENY_REASON);
          await page.getByTestId("approval-deny").click();
          await answered(page, problems, "OK, I did not send it");
          const second = await transcript(page);
          const denied = emailCard(second, DENIED_ARGS.to);
          assert.deepEqual(
            { status: denied.status, result: denied.result },
            { status: "complete", result: DECLINED },
          );
          const refusal = second.filter((entry) => entry.kind === "assistant").at(-1);
          assert.ok(refusal.text.includes(`OK, I did not send it: “${DECLINED}”`), refusal.text);
          // The first card still shows what the bridge sent.
          assert.equal(emailCard(second, EMAIL_ARGS.to).result, EMAIL_SENT);

          // Turn 3: the whole history goes back (test_copilotkit.py checks each call has its
          // answer upstream); the model answers in text.
          await send(page, thanks(wiring));
          await answered(page, problems, `You asked about ${thanks(wiring)}`);
          assert.deepEqual(await page.evaluate(() => window.approvals), [
            { approved: true },
            { approved: false, reason: DENY_REASON },
          ]);
          assert.deepEqual(await page.evaluate(() => window.toolCalls), [], "nothing ran here");

          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }

    for (const model of APPROVAL_MODELS) {
      test(`${model}: send_email approved with edited arguments`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          await send(page, EDIT_PROMPT);
          await approvalCard(page, problems, EDIT_ARGS);
          const args = page.getByTestId("approval-args");
          const approve = page.getByTestId("approval-approve");
          // Not JSON: the card says so and sends nothing.
          await args.fill("{to: dave}");
          await approve.click();
          assert.match(await page.getByTestId("approval-problem").innerText(), /not JSON/);
          assert.deepEqual(await page.evaluate(() => window.approvals), []);
          await args.fill(JSON.stringify(EDITED_ARGS));
          assert.equal(await approve.innerText(), "Approve with edits");
          await approve.click();
          await answered(page, problems, "Done: ");
          assert.deepEqual(await page.evaluate(() => window.approvals), [
            { approved: true, editedArgs: EDITED_ARGS },
          ]);
          // The card keeps the call as the model made it; the result is the edited call's.
          const turn = await transcript(page);
          const card = emailCard(turn, EDIT_ARGS.to);
          assert.deepEqual(
            { status: card.status, result: card.result },
            { status: "complete", result: EDITED_SENT },
          );
          const answer = turn.filter((entry) => entry.kind === "assistant").at(-1);
          assert.ok(answer.text.includes(`Done: “${EDITED_SENT}”`), answer.text);
          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }

    for (const [how, clickTwice] of Object.entries(TWO_CLICKS)) {
      const model = APPROVAL_MODELS[0];
      test(`${model}: Approve clicked twice (${how}): one email, one result`, async (t) => {
        const { page, problems } = await openPage(wiring, model);
        const resumes = [];
        page.on("request", (request) => {
          if (request.method() === "POST") resumes.push(...resumesIn(request.postDataJSON()));
        });
        try {
          await send(page, TWICE_PROMPT);
          await approvalCard(page, problems, TWICE_ARGS);
          await clickTwice(page.getByTestId("approval-approve"));
          await answered(page, problems, "Done: ");
          const approvals = await page.evaluate(() => window.approvals);
          t.diagnostic(
            `the page answered ${JSON.stringify(approvals)}, sent ${resumes.length} resume(s)`,
          );
          assert.ok(resumes.length >= 1, "the page sent the approval");

          // Whatever the page sent, the card shows one result: the email's.
          assert.equal(await page.getByTestId("approval-card").count(), 0, "the card is gone");
          const turn = await transcript(page);
          const sent = emailCard(turn, TWICE_ARGS.to);
          assert.deepEqual(
            { status: sent.status, result: sent.result },
            { status: "complete", result: TWICE_SENT },
          );
          const answers = turn.filter((entry) => entry.kind === "assistant" && entry.text);
          assert.deepEqual(
            answers.map((entry) => entry.text),
            [`Done: “${TWICE_SENT}”`],
            JSON.stringify(turn, null, 1),
          );
          assert.deepEqual(await page.evaluate(() => window.toolCalls), [], "nothing ran here");
          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }

    for (const model of INTERLEAVED_MODELS) {
      test(`${model}: interleaved thinking, shown in the order produced`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          await send(page, INTERLEAVE_PROMPT);
          await answered(page, problems, "And here is the answer.");

          const turn = await transcript(page);
          assert.deepEqual(
            turn.map((entry) => entry.kind),
            ["user", ...INTERLEAVED.map((entry) => entry.kind)],
            JSON.stringify(turn, null, 1),
          );
          assert.equal(turn[0].text, INTERLEAVE_PROMPT);
          for (const entry of turn.filter((e) => e.kind === "reasoning")) {
            assert.match(entry.header, /^Thought for /);
          }
          // Each reasoning block holds its own part (read by opening it), in page order.
          const thoughts = INTERLEAVED.filter((e) => e.kind === "reasoning").map((e) => e.text);
          const blocks = await page
            .locator("[data-message-id]", {
              has: page.locator("button", { hasText: /^Thought for/ }),
            })
            .all();
          assert.equal(blocks.length, thoughts.length);
          for (const [index, block] of blocks.entries()) {
            await block.locator("button").click();
            await block
              .getByText(thoughts[index])
              .waitFor({ timeout: 5_000 })
              .catch(async () => {
                const shown = JSON.stringify(await block.innerText());
                assert.fail(`thinking block ${index} shows ${shown}, not ${thoughts[index]}`);
              });
            await block.locator("button").click();
          }
          // The assistant messages' texts, in page order; no tool cards.
          assert.deepEqual(
            turn.filter((e) => e.kind === "assistant").map(({ text, tools }) => ({ text, tools })),
            INTERLEAVED.filter((e) => e.kind === "assistant").map(({ text }) => ({
              text,
              tools: [],
            })),
          );

          await checkClean(page, problems);
        } finally {
          await page.close();
        }
      });
    }
  });
}
