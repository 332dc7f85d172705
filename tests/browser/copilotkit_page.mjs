// What the CopilotKit example's browser scripts share: opening a page of the example with its
// console watched, sending a message, waiting for the answer, reading the conversation.

import assert from "node:assert/strict";
import { after, before } from "node:test";

import { launchChromium } from "./chromium.mjs";

/** The window the example's pages are opened in. */
const DESKTOP = { width: 1100, height: 900 };

/**
 * One Chromium and one desktop-sized context for a test file: made before its tests, closed after
 * them. Its `context` is there once the tests run.
 */
export function desktopBrowser() {
  const held = { browser: undefined, context: undefined };
  before(async () => {
    held.browser = await launchChromium();
    held.context = await held.browser.newContext({ viewport: DESKTOP });
  });
  after(async () => {
    await held.browser?.close();
  });
  return held;
}

/** How long one run may take in the page. */
export const RUN_TIMEOUT = 20_000;

/** A required environment variable (each script's header lists its own). */
export const env = (name) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`set ${name} (see the comment at the top of this file)`);
  return value;
};

/**
 * A page of the example at `appUrl` in a shared browser `context`, whose console problems are
 * collected (but the console lines `ignored` holds).
 */
export async function openPage(context, appUrl, wiring, model, ignored = new Set()) {
  const page = await context.newPage();
  const problems = [];
  page.on("console", (message) => {
    const kind = message.type();
    if ((kind === "error" || kind === "warning") && !ignored.has(message.text())) {
      problems.push(`console.${kind}: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.stack ?? error}`));
  const url = new URL(appUrl);
  url.search = new URLSearchParams({ wiring, model }).toString();
  await page.goto(url.href);
  await page.getByTestId("copilot-chat-textarea").waitFor();
  return { page, problems };
}

/** Types a message and sends it once CopilotChat takes it (through the runtime, the agent is
 * known only when the runtime's /info has answered: until then the send button stays disabled
 * and Enter does nothing). */
export async function send(page, text) {
  const input = page.getByTestId("copilot-chat-textarea");
  await input.fill(text);
  await page.waitForSelector("[data-testid=copilot-send-button]:not([disabled])");
  await input.press("Enter");
}

/**
 * Waits until the last assistant message holds `text` and the agent, follow-ups included, is idle;
 * fails at once, saying why, when CopilotKit reports an error or the page logs a problem.
 */
export async function answered(page, problems, text) {
  let outcome;
  try {
    outcome = await page.waitForFunction(
      (expected) => {
        if (window.copilotErrors.length > 0) return { errors: window.copilotErrors };
        const answers = document.querySelectorAll("[data-testid=copilot-assistant-message]");
        const last = answers[answers.length - 1];
        const idle = document.querySelector("[data-testid=run-status]").dataset.state === "idle";
        return idle && last?.innerText.includes(expected) && { errors: [] };
      },
      text,
      { timeout: RUN_TIMEOUT },
    );
  } catch (error) {
    const shown = await transcript(page).catch(() => "(none)");
    throw new Error(
      `no answer holding ${JSON.stringify(text)}: ${error.message}\n` +
        `page problems: ${JSON.stringify(problems, null, 1)}\n` +
        `transcript: ${JSON.stringify(shown, null, 1)}`,
    );
  }
  const { errors } = await outcome.jsonValue();
  assert.deepEqual(
    errors,
    [],
    `CopilotKit onError; page problems: ${JSON.stringify(problems, null, 1)}`,
  );
}

/**
 * The conversation as CopilotChat shows it, one entry per message in page order: a user message,
 * a reasoning block (its header), or an assistant message (its tool cards and its text).
 */
export const transcript = (page) =>
  page.$eval("[data-testid=copilot-message-list]", (list) =>
    [
      ...list.querySelectorAll(
        "[data-testid=copilot-user-message], [data-message-id], [data-testid=copilot-assistant-message]",
      ),
    ]
      .filter(
        (element) =>
          !element.parentElement.closest(
            "[data-message-id], [data-testid=copilot-assistant-message]",
          ),
      )
      .map((element) => {
        if (element.dataset.testid === "copilot-user-message") {
          return { kind: "user", text: element.innerText.trim() };
        }
        if (element.dataset.testid === "copilot-assistant-message") {
          const tools = [...element.querySelectorAll("[data-testid=tool-card]")].map((card) => ({
            name: card.dataset.toolName,
            status: card.dataset.status,
            runsOn: card.dataset.runsOn,
            args: JSON.parse(card.querySelector("[data-testid=tool-args]").textContent),
            result: card.querySelector("[data-testid=tool-result]")?.textContent,
          }));
          const copy = element.cloneNode(true);
          for (const part of copy.querySelectorAll(
            "[data-testid=tool-card], [data-testid=copilot-assistant-toolbar]",
          )) {
            part.remove();
          }
          return { kind: "assistant", tools, text: copy.textContent.trim() };
        }
        return { kind: "reasoning", header: element.querySelector("button")?.innerText.trim() };
      }),
  );
