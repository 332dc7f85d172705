// The page: wires the composer, the model picker, the banner, the usage line, the event
// inspector and (when the bridge keeps threads) the thread list to one Chat. The agent is one
// the server that served this page lists at /agents (`agui-bridge serve --config` with
// [agents.NAME] tables serves several: a picker shows, and the address's ?agent=NAME says which),
// or /agent.

import type { TokenUsage } from "@ag-ui/client";

import { ACCEPT, AttachmentTray, humanSize, MAX_FILE_BYTES } from "./attachments";
import { Chat } from "./chat";
import { byId } from "./dom";
import { describeHttpError, isRecord } from "./http_errors";
import { EventInspector } from "./inspector";
import { ThreadPanel } from "./thread_panel";
import { Threads } from "./threads";
import { resetBackground } from "./tools";
import { ConversationView } from "./view";

const TOKEN_KEY = "agui-bridge-token";
/** The URL's fragment: `token=…` (taken out at once) and `thread=…` (the thread shown). */
const FRAGMENT = new URLSearchParams(location.hash.slice(1));

/**
 * A bridge started with --auth-token wants it on every request. The page takes it from its URL's
 * fragment (/#token=…), which never reaches a server or its logs, keeps it for the tab's session
 * and takes it out of the address bar.
 */
function authHeaders(): Record<string, string> {
  const given = FRAGMENT.get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    FRAGMENT.delete("token");
    showFragment();
  }
  const token = given ?? sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function showFragment(): void {
  const fragment = FRAGMENT.toString();
  const address = location.pathname + location.search + (fragment && `#${fragment}`);
  history.replaceState(null, "", address);
}
const AUTH_HEADERS = authHeaders();

interface Agent {
  name: string;
  path: string;
}
/** The one agent of a bridge that lists none (an older one): at /agent. */
const ONLY_AGENT: Agent = { name: "agent", path: "/agent" };

/** The agents the server lists (GET /agents), or /agent alone when it lists none. */
async function listAgents(): Promise<Agent[]> {
  try {
    const response = await fetch(new URL("/agents", location.href), {
      headers: { Accept: "application/json", ...AUTH_HEADERS },
    });
    const body: unknown = await response.json().catch(() => undefined);
    const listed = response.ok && isRecord(body) && Array.isArray(body.agents) ? body.agents : [];
    const agents = listed.filter(
      (agent): agent is Agent =>
        isRecord(agent) && typeof agent.name === "string" && typeof agent.path === "string",
    );
    return agents.length ? agents : [ONLY_AGENT];
  } catch {
    return [ONLY_AGENT];
  }
}

const AGENTS = await listAgents();
const ASKED_AGENT = new URLSearchParams(location.search).get("agent");
const AGENT = AGENTS.find((agent) => agent.name === ASKED_AGENT) ?? AGENTS[0] ?? ONLY_AGENT;
const AGENT_URL = new URL(AGENT.path, location.href);
const CAPABILITIES_URL = new URL(`${AGENT.path}/capabilities`, location.href);
/** The thread the address names (a reload): opened once the bridge says it keeps threads. */
const GIVEN_THREAD = FRAGMENT.get("thread") ?? undefined;

const conversation = byId("conversation", HTMLElement);
const prompt = byId("prompt", HTMLTextAreaElement);
const composer = byId("composer", HTMLFormElement);
const sendButton = byId("send", HTMLButtonElement);
const stopButton = byId("stop", HTMLButtonElement);
const modelPicker = byId("model", HTMLSelectElement);
const agentPicker = byId("agent", HTMLSelectElement);
const banner = byId("banner", HTMLElement);
const runStatus = byId("run-status", HTMLElement);
const usageLine = byId("usage", HTMLElement);
const announcer = byId("announcer", HTMLElement);
const inspectorPanel = byId("inspector", HTMLElement);
const inspectorToggle = byId("inspector-toggle", HTMLButtonElement);
const attachButton = byId("attach", HTMLButtonElement);
const attachInput = byId("attach-input", HTMLInputElement);

const inspectorList = byId("inspector-list", HTMLOListElement);
const inspector = new EventInspector(inspectorList, byId("inspector-count", HTMLElement));
const view = new ConversationView(conversation, byId("empty-state", HTMLElement));

const tray = new AttachmentTray(
  byId("attachments", HTMLUListElement),
  byId("attach-problem", HTMLElement),
  (text) => {
    announcer.textContent = text;
  },
);

const threads = new Threads(AGENT_URL.href, AUTH_HEADERS);
/** Set once the bridge's capabilities say it keeps threads. */
let keepsThreads = false;
const threadPanel = new ThreadPanel(
  threads,
  {
    panel: byId("threads", HTMLElement),
    list: byId("thread-list", HTMLOListElement),
    empty: byId("threads-empty", HTMLElement),
    toggle: byId("threads-toggle", HTMLButtonElement),
    close: byId("threads-close", HTMLButtonElement),
    newThread: byId("new-thread", HTMLButtonElement),
  },
  { open: (threadId) => void openThread(threadId), error: showError },
);

const chat = new Chat(
  AGENT_URL.href,
  AUTH_HEADERS,
  view,
  {
    model: () => modelPicker.value || undefined,
    running: (on) => {
      conversation.setAttribute("aria-busy", String(on));
      sendButton.hidden = on;
      stopButton.hidden = !on;
      runStatus.dataset.state = on ? "running" : "idle";
      runStatus.textContent = on ? "Running… (Esc stops)" : "Ready";
      modelPicker.disabled = on;
      agentPicker.disabled = on;
      threadPanel.busy = on;
      if (!on && document.activeElement === document.body) prompt.focus();
    },
    awaitingApproval: (on, asks = false) => {
      runStatus.dataset.state = on ? "approval" : "running";
      const waiting = asks ? "Waiting for your answer…" : "Waiting for your approval…";
      runStatus.textContent = on ? waiting : "Running… (Esc stops)";
    },
    runStarted: (label) => inspector.startRun(label),
    event: (event) => inspector.record(event),
    error: showError,
    usage: showUsage,
    announce: (text) => {
      announcer.textContent = text;
    },
    threadChanged: () => {
      if (keepsThreads) void threadPanel.refresh();
    },
  },
  GIVEN_THREAD,
);

/** Set while a message's attachments are still being read: Enter again does not send twice. */
let sending = false;

async function send(text: string): Promise<void> {
  const message = text.trim();
  if ((!message && tray.empty) || chat.running || sending) return;
  hideError();
  prompt.value = "";
  fitPrompt();
  sending = true;
  try {
    const attachments = await tray.take();
    void chat.send(message, attachments);
  } finally {
    sending = false;
  }
}

function showError(message: string, code: string, title = "The run failed."): void {
  byId("banner-title", HTMLElement).textContent = title;
  byId("banner-message", HTMLElement).textContent = message;
  byId("banner-code", HTMLElement).textContent = code;
  banner.hidden = false;
}

function hideError(): void {
  banner.hidden = true;
}

function showUsage(usage: TokenUsage[] | undefined): void {
  if (!usage?.length) return;
  const sum = (pick: (entry: TokenUsage) => number | undefined): number | undefined =>
    usage.some((entry) => pick(entry) !== undefined)
      ? usage.reduce((total, entry) => total + (pick(entry) ?? 0), 0)
      : undefined;
  const input = sum((entry) => entry.inputTokens);
  const output = sum((entry) => entry.outputTokens);
  const reasoning = sum((entry) => entry.reasoningTokens);
  const total = sum((entry) => entry.totalTokens);
  const parts = [
    input !== undefined && `${input} in`,
    output !== undefined && `${output} out${reasoning ? ` (${reasoning} reasoning)` : ""}`,
    total !== undefined && `${total} total`,
  ].filter(Boolean);
  usageLine.textContent = `Last run: ${parts.join(" · ")} tokens`;
  usageLine.hidden = false;
}

/** The textarea grows with its text, up to the height CSS allows. */
function fitPrompt(): void {
  prompt.style.height = "auto";
  prompt.style.height = `${prompt.scrollHeight}px`;
}

const NO_CAPABILITIES = "Could not read the agent's capabilities.";

/** Fills the model picker from the agent's capabilities; returns whether it keeps threads
 * (`custom.threads`: without them, GET /threads would answer 404). */
async function loadCapabilities(): Promise<boolean> {
  let custom: Record<string, unknown> = {};
  try {
    const response = await fetch(CAPABILITIES_URL, {
      headers: { Accept: "application/json", ...AUTH_HEADERS },
    });
    const body: unknown = await response.json().catch(() => undefined);
    if (!response.ok) {
      const { message, code } = describeHttpError(response.status, body);
      showError(message, code, NO_CAPABILITIES);
    } else if (isRecord(body) && isRecord(body.custom)) {
      custom = body.custom;
    }
  } catch (error) {
    showError((error as Error).message, "client_error", NO_CAPABILITIES);
  }
  const models = Array.isArray(custom.models)
    ? custom.models.filter((name): name is string => typeof name === "string")
    : [];
  // The first model is the server's default.
  modelPicker.replaceChildren(
    ...(models.length ? models : [""]).map((name) => new Option(name || "Server default", name)),
  );
  return custom.threads === true;
}

/** The bridge keeps threads: the list shows, and the thread the address names is hydrated. */
function startThreads(): void {
  keepsThreads = true;
  chat.threads = threads;
  threadPanel.start(chat.threadId);
  void threadPanel.refresh();
  if (GIVEN_THREAD !== undefined && !chat.running) void chat.open(GIVEN_THREAD);
  showThreadInAddress();
}

/** The thread shown goes in the address (`#thread=…`): a reload opens it again. */
function showThreadInAddress(): void {
  FRAGMENT.set("thread", chat.threadId);
  showFragment();
  threadPanel.mark(chat.threadId);
}

/** Leaves the conversation shown (a run going on goes on in the bridge, with threads) and opens
 * another: a thread of the list, hydrated, or (undefined) a new, empty one. */
async function openThread(threadId: string | undefined): Promise<void> {
  await chat.leave();
  view.clear();
  tray.clear();
  inspector.clear();
  resetBackground();
  hideError();
  usageLine.hidden = true;
  await chat.open(threadId);
  if (keepsThreads) showThreadInAddress();
  prompt.focus();
}

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  void send(prompt.value);
});
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    void send(prompt.value);
  }
});
attachInput.accept = ACCEPT;
attachButton.title += ` (up to ${humanSize(MAX_FILE_BYTES)} each)`;
attachButton.addEventListener("click", () => attachInput.click());
attachInput.addEventListener("change", () => {
  void tray.add(Array.from(attachInput.files ?? []));
  attachInput.value = ""; // the same file may be picked again
  prompt.focus();
});
// Files dropped on the composer or pasted into the message box are attached too.
composer.addEventListener("dragover", (event) => {
  if (event.dataTransfer?.types.includes("Files")) event.preventDefault();
});
composer.addEventListener("drop", (event) => {
  const files = Array.from(event.dataTransfer?.files ?? []);
  if (!files.length) return;
  event.preventDefault();
  void tray.add(files);
});
prompt.addEventListener("paste", (event) => {
  const files = Array.from(event.clipboardData?.files ?? []);
  if (!files.length) return;
  event.preventDefault();
  void tray.add(files);
});
prompt.addEventListener("input", fitPrompt);
stopButton.addEventListener("click", () => chat.stop());
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && chat.running) chat.stop();
});
for (const suggestion of document.querySelectorAll<HTMLButtonElement>(".suggestion")) {
  suggestion.addEventListener("click", () => void send(suggestion.dataset.prompt ?? ""));
}
byId("banner-close", HTMLButtonElement).addEventListener("click", hideError);
byId("new-chat", HTMLButtonElement).addEventListener("click", () => void openThread(undefined));

function setInspector(open: boolean): void {
  inspectorPanel.hidden = !open;
  inspectorToggle.setAttribute("aria-expanded", String(open));
  document.body.classList.toggle("inspector-open", open);
  // Opens on the latest events, as a log does.
  if (open) inspectorList.scrollTop = inspectorList.scrollHeight;
}
inspectorToggle.addEventListener("click", () =>
  setInspector(inspectorToggle.getAttribute("aria-expanded") !== "true"),
);
byId("inspector-close", HTMLButtonElement).addEventListener("click", () => {
  setInspector(false);
  inspectorToggle.focus();
});
byId("inspector-clear", HTMLButtonElement).addEventListener("click", () => inspector.clear());

void loadCapabilities().then((kept) => {
  if (kept) startThreads();
});
prompt.focus();

/** Several agents: a picker, which opens the page again on the one chosen (its own threads,
 * models and capabilities; the thread shown is this agent's, so it is not carried over). */
if (AGENTS.length > 1) {
  agentPicker.replaceChildren(...AGENTS.map((agent) => new Option(agent.name, agent.name)));
  agentPicker.value = AGENT.name;
  byId("agent-picker-label", HTMLElement).hidden = false;
  agentPicker.addEventListener("change", () => {
    location.assign(`${location.pathname}?agent=${encodeURIComponent(agentPicker.value)}`);
  });
}
