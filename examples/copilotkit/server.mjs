// The CopilotKit app's server: CopilotRuntime at /api/copilotkit, its one agent an HttpAgent
// pointed at agui-bridge, and the bundled page (dist/, `npm run build`) at /.
//
//   AGUI_BRIDGE_URL  the bridge's agent endpoint (default http://127.0.0.1:8000/agent)
//   HOST, PORT       where this server listens (default 127.0.0.1:3000; PORT=0 picks a free port)
//   COPILOTKIT_TELEMETRY_DISABLED  CopilotKit's usage telemetry: off here unless set to false
import "./telemetry-off.mjs"; // first, before the runtime loads

import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";

import { EventType, HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { concatMap } from "rxjs";

const BRIDGE_URL = process.env.AGUI_BRIDGE_URL || "http://127.0.0.1:8000/agent";
const HOST = process.env.HOST || "127.0.0.1";
const PORT = Number(process.env.PORT ?? 3000);
const RUNTIME_PATH = "/api/copilotkit";
/** The pages, all index.html: the chat, and the shared-state page (the bundle reads the path). */
const PAGES = new Set(["/", "/state"]);
const DIST = fileURLToPath(new URL("./dist/", import.meta.url));
const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
};

/**
 * A middleware that puts the run's input state, as a STATE_SNAPSHOT, before a run's first
 * STATE_DELTA when no snapshot came before it. The bridge's deltas (`--shared-state`) apply to the
 * state the run was given, as AG-UI says; but when a run ends, CopilotRuntime 1.75's in-memory
 * runner folds the run's state events starting from `{}` (`compactEvents`), so a delta such as
 * `add /todos/-` fails there, and the failure, thrown from a promise nobody awaits, ends this
 * server. The page already holds that state: the snapshot changes nothing for it.
 */
function snapshotBeforeDelta(input, next) {
  let based = false;
  return next.run(input).pipe(
    concatMap((event) => {
      if (event.type === EventType.STATE_SNAPSHOT) based = true;
      if (event.type !== EventType.STATE_DELTA || based) return [event];
      based = true;
      return [{ type: EventType.STATE_SNAPSHOT, snapshot: input.state }, event];
    }),
  );
}

// A plain runtime: given its own `mcpApps.servers`, CopilotRuntime would answer the MCP Apps
// widgets' requests (runs with forwardedProps.__proxiedMCPRequest) itself, not the bridge.
const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url: BRIDGE_URL }).use(snapshotBeforeDelta) },
});
const copilotRuntime = createCopilotNodeListener({ runtime, basePath: RUNTIME_PATH });

/** The pages and their bundle, from dist/ only; index.html learns the bridge's URL. */
async function serveStatic(request, response) {
  const path = new URL(request.url, "http://page").pathname;
  const file = normalize(join(DIST, PAGES.has(path) ? "index.html" : path));
  if (!file.startsWith(DIST) || file.endsWith(sep)) return notFound(response);
  let body;
  try {
    body = await readFile(file);
  } catch {
    return notFound(response);
  }
  if (file === join(DIST, "index.html")) {
    body = body.toString().replace("%AGUI_BRIDGE_URL%", escapeAttribute(BRIDGE_URL));
  }
  response.writeHead(200, {
    "content-type": TYPES[extname(file)] ?? "application/octet-stream",
    "cache-control": "no-cache",
  });
  response.end(body);
}

function notFound(response) {
  response.writeHead(404, { "content-type": "text/plain" });
  response.end("not found\n");
}

const escapeAttribute = (text) =>
  text.replace(/[&"<>]/g, (c) => ({ "&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;" })[c]);

const server = createServer((request, response) => {
  const path = new URL(request.url, "http://page").pathname;
  if (path === RUNTIME_PATH || path.startsWith(`${RUNTIME_PATH}/`)) {
    return copilotRuntime(request, response);
  }
  if (request.method !== "GET" && request.method !== "HEAD") {
    response.writeHead(405, { allow: "GET, HEAD" });
    return response.end();
  }
  serveStatic(request, response).catch((error) => {
    console.error(error);
    if (!response.headersSent) response.writeHead(500);
    response.end();
  });
});

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  const page = `http://${HOST}:${port}/`;
  console.log(`CopilotKit example on ${page} (agent: ${BRIDGE_URL})`);
  console.log(`  through the runtime: ${page}?wiring=runtime   direct: ${page}?wiring=direct`);
  console.log(`  shared state: ${page}state?wiring=runtime (the bridge with --shared-state)`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => server.close(() => process.exit(0)).closeAllConnections());
}
