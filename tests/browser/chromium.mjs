// Chromium, launched headless the same way by every browser test here: the one pytest found
// (tests/node_tools.py sets CHROMIUM: $CHROMIUM, then PATH, then Playwright's own).
import { chromium } from "playwright-core";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
];

/** A headless Chromium (the caller closes it). */
export function launchChromium() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** Two clicks on a button, as a person makes them (real mouse input: a click on the button
 * once disabled reaches no handler). */
export const TWO_CLICKS = {
  "a double click": (button) => button.dblclick(),
  "two fast clicks": async (button) => {
    const box = await button.boundingBox();
    const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
    await button.page().mouse.click(x, y);
    await button.page().mouse.click(x, y);
  },
};

/** What the page logs as an error or a warning, and its uncaught exceptions, as they come: every
 * page under test must run without any. */
export function problemsOf(page) {
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") {
      problems.push(`console.${message.type()}: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.stack ?? error}`));
  return problems;
}
