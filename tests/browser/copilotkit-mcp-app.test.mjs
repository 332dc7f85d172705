// The CopilotKit example (examples/copilotkit/) showing an MCP App in Chromium: the bridge runs
// examples/mcp_app_server.py (`--mcp app=…`); the scripted model calls app__counter, CopilotKit's
// built-in MCPAppsActivityRenderer shows the counter widget, and a click on its "+1" goes from the
// widget through CopilotKit to the bridge (a run with forwardedProps.__proxiedMCPRequest, answered
// without the model) to the MCP server's increment, whose result the widget shows.
//
// Driven by tests/test_copilotkit.py, which starts the servers and sets:
//   APP_URL         the example's server (page + CopilotRuntime); its agent is a scripted stack
//                   whose bridge runs the MCP Apps example as "app"
//   MCP_APP_MODELS  comma-separated scripted models to run, each in both wirings
//   ARTIFACTS_DIR   where the screenshot goes (copilotkit-mcp-app.png)
//
// Every page must run without a console error or warning (but the one Chromium logs for
// CopilotKit's own sandbox, see SANDBOX_WARNING), an uncaught exception, or an error reported to
// CopilotKit's onError.

import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";

import { answered, desktopBrowser, env, openPage as openAppPage, RUN_TIMEOUT, send } from "./copilotkit_page.mjs";

const openPage = (wiring, model) =>
  openAppPage(chromium.context, APP_URL, wiring, model, new Set([SANDBOX_WARNING]));

const APP_URL = env("APP_URL");
const MODELS = env("MCP_APP_MODELS").split(",").filter(Boolean);
const ARTIFACTS_DIR = env("ARTIFACTS_DIR");
const WIRINGS = ["runtime", "direct"];
/** The case whose page is photographed with the widget (docs/copilotkit-mcp-app.png). */
const SCREENSHOT_CASE = { wiring: "runtime", model: MODELS[0] };

/** The scripted model calls a tool whose name the user's text holds; it fills `start` with 1. */
const PROMPT = "Show me the app__counter, please.";
const COUNTER_TEXT = "The counter shows 1. Click +1 in the widget to add one.";
/** Chromium says this of every iframe sandboxed with both flags; CopilotKit's renderer sets them. */
const SANDBOX_WARNING =
  "An iframe which has both allow-scripts and allow-same-origin for its sandbox attribute can escape its sandboxing.";

const thanks = (wiring) => `Thanks, that is all from ${wiring}`;

const chromium = desktopBrowser();

/** The widget's document: CopilotKit's sandbox iframe holds the MCP App's own iframe. */
const widget = (page) => page.frameLocator("[data-testid=mcp-app-iframe]").frameLocator("iframe");

/** Waits for the widget to show `count`, with `status` under it. */
async function widgetShows(page, problems, count, status) {
  const shown = widget(page);
  try {
    await shown.getByTestId("count").filter({ hasText: new RegExp(`^${count}$`) }).waitFor({
      timeout: RUN_TIMEOUT,
    });
  } catch (error) {
    const now = await shown
      .locator("main")
      .innerText({ timeout: 1_000 })
      .catch(() => "(no widget)");
    throw new Error(
      `the widget does not show ${count}: ${error.message}\nit shows ${JSON.stringify(now)}\n` +
        `page problems: ${JSON.stringify(problems, null, 1)}`,
    );
  }
  assert.equal(await shown.locator("#status").innerText(), status);
}

async function saveScreenshot(page) {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  await page.locator("[data-testid=mcp-app-iframe]").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS_DIR, "copilotkit-mcp-app.png") });
}

for (const wiring of WIRINGS) {
  describe(`CopilotKit with an MCP App through ${wiring === "runtime" ? "CopilotRuntime" : "no runtime (direct)"}`, () => {
    for (const model of MODELS) {
      test(`${model}: the counter widget shows, and its +1 runs increment on the MCP server`, async () => {
        const { page, problems } = await openPage(wiring, model);
        try {
          // The model calls app__counter; the bridge runs it, sends its text and the mcp-apps
          // activity, and the model's answer quotes the text.
          await send(page, PROMPT);
          await answered(page, problems, `app__counter: “${COUNTER_TEXT}”`);
          const card = page.locator("[data-testid=tool-card][data-tool-name=app__counter]");
          assert.equal(await card.getAttribute("data-status"), "complete");
          assert.equal(await card.getAttribute("data-runs-on"), "server");
          assert.deepEqual(JSON.parse(await card.getByTestId("tool-args").innerText()), {
            start: 1,
          });
          assert.equal(await card.getByTestId("tool-result").innerText(), COUNTER_TEXT);

          // Once the run is over, the renderer reads the widget through the bridge (a proxied
          // resources/read), loads it in its sandbox and hands it the call's arguments and result.
          await widgetShows(page, problems, 1, "Counter");

          // Each click: tools/call from the widget, through CopilotKit and the bridge, to the
          // server's increment; the widget shows what it answered.
          await widget(page).getByTestId("increment").click();
          await widgetShows(page, problems, 2, "Added by the server");
          await widget(page).getByTestId("increment").click();
          await widgetShows(page, problems, 3, "Added by the server");
          if (wiring === SCREENSHOT_CASE.wiring && model === SCREENSHOT_CASE.model)
            await saveScreenshot(page);

          // The next turn sends the history back (the activity among it); the widget stays.
          await send(page, thanks(wiring));
          await answered(page, problems, `You asked about ${thanks(wiring)}`);
          assert.equal(await page.locator("[data-testid=mcp-app-iframe]").count(), 1);
          assert.equal(await widget(page).getByTestId("count").innerText(), "3");

          assert.deepEqual(await page.evaluate(() => window.toolCalls), [], "nothing ran here");
          assert.deepEqual(await page.evaluate(() => window.copilotErrors), [], "onError");
          assert.deepEqual(problems, [], "console errors, warnings and uncaught exceptions");
        } finally {
          await page.close();
        }
      });
    }
  });
}
