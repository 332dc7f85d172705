"""The bridge's settings: one frozen, keyword-only dataclass, validated at construction.

The CLI and environment variables only map onto it; nothing deeper reads ``os.environ``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from bridge.core.translate import TranslateOptions
from bridge.core.upstream_url import shown_url

#: An MCP server's name: the prefix of its tools' names (``NAME__tool``).
_MCP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,30}$")

#: In ``models``: every model the upstream lists.
ANY_UPSTREAM_MODEL = "*"
#: What ``approval_store`` may name (``bridge.serve.tools.claims`` makes each).
APPROVAL_STORE_SCHEMES = ("memory", "redis", "rediss", "unix", "valkey", "valkeys", "file")

#: The longest duration a setting may name: a week. Longer is a slip (``1e9`` for ``1e3``), and
#: infinity overflows the timers and clocks it reaches (an interrupt's expiresAt).
MAX_SECONDS = 7 * 24 * 3600

#: The settings that are durations, the flag that sets each (``None``: none does), and whether
#: 0 is allowed (no wait) or not (every timeout and interval must be able to pass).
_DURATIONS: dict[str, tuple[str | None, bool]] = {
    "connect_timeout": ("--connect-timeout", False),
    "idle_timeout": ("--idle-timeout", False),
    "keepalive_interval": ("--keepalive-interval", False),
    "tool_timeout": ("--tool-timeout", False),
    "approval_timeout": ("--approval-timeout", False),
    "thread_ttl": ("--thread-ttl", False),
    "run_grace": ("--run-grace", False),
    "run_timeout": ("--run-timeout", False),
    "retry_backoff": (None, True),
    "retry_after_cap": ("--retry-after-cap", True),
}

ReasoningHistoryPolicy = Literal["auto", "field", "tags", "drop"]
ReasoningScopePolicy = Literal["auto", "current-turn", "all", "last"]
UnsupportedPartsPolicy = Literal["error", "note"]
UpstreamApi = Literal["chat", "responses"]
AguiProtocolSetting = Literal["auto", "1.0", "0.0"]
UpstreamTransport = Literal["aiohttp", "httpx"]
LogFormat = Literal["text", "json"]
ClientSystemPolicy = Literal["follow", "refuse"]
#: ``--provider``: whose rules the requests follow (``bridge.serve.run.profiles``).
PROVIDERS = (
    "auto", "generic", "gemini", "groq", "cerebras", "mistral", "deepseek", "kimi", "vllm",
    "ollama", "openrouter", "perplexity", "llama-cpp-python",
)  # fmt: skip

#: The longest operator's instructions (their UTF-8 bytes): a system prompt, not a document.
MAX_INSTRUCTIONS_BYTES = 256 * 1024
#: The most bytes of the operator's own request fields (``upstream_body``, as JSON).
MAX_UPSTREAM_BODY_BYTES = 64 * 1024
#: The request fields the bridge makes itself: ``upstream_body`` may not set them.
OWNED_BODY_KEYS = frozenset(
    {"model", "messages", "input", "stream", "stream_options", "tools", "include", "store"}
)


@dataclass(frozen=True, kw_only=True)
class BridgeConfig:
    """Everything that decides where and how the bridge talks to its upstream."""

    upstream_url: str
    """Base URL of the OpenAI-compatible API, up to and including ``/v1``
    (``http://127.0.0.1:8080/v1``); requests go to ``{upstream_url}/chat/completions``."""

    model: str
    """The model asked for when the client names none."""

    instructions: str | None = None
    """The operator's system message: the first message of every request upstream (a
    ``system`` input item for the Responses API), the same bytes in every run, so the model
    server's prompt cache keeps the prefix. No client can remove or edit it: it is not in the
    client's messages, and the client's own system and developer messages follow it (or are
    refused: ``client_system``). At most ``MAX_INSTRUCTIONS_BYTES``."""

    client_system: ClientSystemPolicy = "follow"
    """The client's own system and developer messages: ``follow`` sends them after
    ``instructions``, where they are; ``refuse`` answers a run that carries one with HTTP 400
    ``client_system_refused`` (only the operator speaks as the system)."""

    models: tuple[str, ...] = ()
    """Further models a client may choose with ``forwardedProps.model``; ``*`` admits every
    model the upstream lists at ``GET /v1/models``."""

    api_key: str | None = field(default=None, repr=False)
    """Sent as ``Authorization: Bearer …``; never shown in logs or errors."""

    connect_timeout: float = 10.0
    """Seconds to wait for the upstream's TCP/TLS connection."""

    idle_timeout: float = 300.0
    """Seconds of silence allowed from the upstream (before the first byte and between
    chunks): prompt processing of a long context can take minutes on small machines."""

    translate: TranslateOptions = field(default_factory=TranslateOptions)
    """How to read unparsed model output (reasoning tags, implicit open tag)."""

    translate_overrides: Mapping[str, TranslateOptions] = field(default_factory=dict)
    """``translate`` options for particular models (a template that opens the tag, say)."""

    reasoning_history: ReasoningHistoryPolicy = "auto"
    """How earlier reasoning goes back upstream: ``field`` (``reasoning_content``), ``tags``
    (``<think>…</think>`` in content), ``drop``; ``auto`` is ``field``, which DeepSeek, Kimi and
    llama.cpp accept (llama.cpp's ``/props`` says whether its template uses it)."""

    reasoning_scope: ReasoningScopePolicy = "auto"
    """Which assistant messages get their reasoning back: ``current-turn``, those after the
    last user message (the tool loop in progress); ``all``; only the ``last``; or ``auto``,
    which asks the server: llama.cpp's ``/props`` tells whether its chat template renders
    earlier turns' reasoning (``chat_template_caps.supports_preserve_reasoning``). A template
    that keeps it (GLM-4.7's preserved thinking) expects it back, so ``true`` is ``all``; one
    that drops it would throw it away anyway, so ``false`` is ``current-turn``, as is any
    server without ``/props``: there ``auto`` is exactly ``current-turn``. Read per model,
    cached for half a minute (``bridge.serve.run.props``)."""

    unsupported_parts: UnsupportedPartsPolicy = "error"
    """What becomes of a user's attachment (an image, audio, video or document part) the
    upstream says it cannot take (llama.cpp's ``/props`` ``modalities``: ``vision: false``
    without an ``--mmproj``): ``error`` ends the run with RUN_ERROR ``unsupported_part``, naming
    the part, its file name, type and size, and what would take it; ``note`` sends the model a
    short note in its place (``[report.pdf, application/pdf, 120 KB: this model cannot read
    it]``), so the chat goes on. Parts of earlier user messages are noted either way
    (``bridge.serve.run.modalities``). A server that does not say what it takes is sent every
    part, and its own refusal is the run's error."""

    include_state: bool = False
    """Send the run's ``state`` to the model as a system message."""

    shared_state: bool = False
    """The model edits the run's ``state`` (a JSON object): it is shown the state and offered the
    ``update_state`` tool, whose JSON Patch the bridge applies and sends as ``STATE_DELTA``; a
    run that changed it ends with a ``STATE_SNAPSHOT`` (README "Shared state"; the ``state``
    extra)."""

    state_schema: Mapping[str, Any] | None = None
    """A JSON Schema every state the model makes must keep to (shown to the model too)."""

    max_state_bytes: int = 1_000_000
    """The largest state (its JSON, in bytes) a patch may make."""

    predict_state: tuple[tuple[str, str, str], ...] = ()
    """``(state_key, tool, tool_argument)``: every run begins with a ``CUSTOM`` ``PredictState``
    event naming them, so the frontend streams that tool argument into that state key while the
    model writes it (CopilotKit's predictive state updates)."""

    include_usage: bool = True
    """Ask for ``stream_options.include_usage`` (retried without it if the server refuses)."""

    upstream_api: UpstreamApi = "chat"
    """The upstream's API: ``chat`` (``/chat/completions``) or ``responses`` (``/responses``:
    reasoning summaries, encrypted reasoning carried across turns)."""

    responses_store: bool = False
    """With ``upstream_api="responses"``: let the upstream store responses (``store``). Off by
    default: stateless, the encrypted reasoning goes back with the history instead."""

    provider: str = "auto"
    """Whose rules the requests follow (README "Provider profiles"): what reasoning goes back
    and in which field, what is left out, the signature stand-in; ``auto`` by the upstream
    URL's host, else ``generic``."""

    upstream_body: Mapping[str, Any] = field(default_factory=dict)
    """The operator's own fields, merged into every request upstream (a provider's switches:
    ``{"enable_thinking": true}``, ``{"extra_body": {"google": {"thinking_config": …}}}``);
    the fields the bridge makes (``OWNED_BODY_KEYS``) refused, a client's allowed
    ``forwardedProps`` over them."""

    upstream_transport: UpstreamTransport = "aiohttp"
    """The HTTP client under httpx's API: ``aiohttp`` (``httpx-aiohttp``: about a third of the
    CPU per upstream read, see README "Performance") or ``httpx`` (httpx's own transport)."""

    upstream_stream: bool = True
    """Ask the upstream to stream. Off for servers whose streaming breaks with tools: the whole
    answer then goes through the same decoder, filters and emitter as one big chunk."""

    retries: int = 2
    """Retries of a request that failed before the answer began: connection errors, HTTP 429,
    502, 503, 504. Never once streaming began, so nothing is ever sent twice."""

    retry_backoff: float = 0.5
    """First retry delay in seconds; doubled each time, with jitter."""

    retry_after_cap: float = 10.0
    """Longest ``Retry-After`` the bridge waits out; a longer one fails the run at once, saying
    when to retry (a browser should not hang)."""

    keepalive_interval: float = 15.0
    """Seconds of silence after which an SSE comment is sent, so proxies keep the connection
    (prompt processing of a long context can be silent for minutes)."""

    max_line_bytes: int = 4 * 1024 * 1024
    """Longest upstream SSE line accepted; a longer one is a protocol error, not a memory hog."""

    max_body_bytes: int = 16 * 1024 * 1024
    """Largest request body accepted (HTTP 413 beyond); attachments arrive inline as base64."""

    max_attachment_bytes: int = 10 * 1024 * 1024
    """Largest attachment (a content part's inline bytes, decoded) accepted (HTTP 413 beyond):
    read from its base64's length, before anything is decoded."""

    max_request_attachment_bytes: int = 12 * 1024 * 1024
    """Most inline attachment bytes (decoded) in one request, every message's together (HTTP 413
    beyond): a client sends earlier messages' attachments again with every run."""

    max_messages: int = 5000
    """Most messages accepted in one run's history (HTTP 413 beyond)."""

    max_concurrent_runs: int = 512
    """Runs served at once by this process; more are refused with HTTP 503 and Retry-After."""

    cors_origins: tuple[str, ...] = ()
    """Browser origins allowed to call the bridge from another origin (CORS is closed by
    default; ``*`` allows any)."""

    auth_token: str | None = field(default=None, repr=False)
    """If set, every request must carry ``Authorization: Bearer <token>``."""

    agui_protocol: AguiProtocolSetting = "auto"
    """The AG-UI line the events are shaped for: ``auto`` reads each run's ``protocolVersion``
    (``@ag-ui/client`` 1.x sends ``"1.0"``; the 0.0.x clients, CopilotKit's among them, send
    none); ``1.0`` or ``0.0`` pins it for clients that announce nothing useful."""

    mcp_servers: Mapping[str, str] = field(default_factory=dict)
    """MCP servers whose tools the bridge runs itself, by name: a streamable HTTP URL
    (``http://127.0.0.1:9000/mcp``) or a command line that speaks MCP on stdio
    (``python examples/mcp_server.py``). Their tools are listed at start and offered to the
    model as ``NAME__tool``. Needs the ``mcp`` extra (``pip install 'agui-bridge[mcp]'``)."""

    tool_timeout: float = 30.0
    """Seconds a server tool (a Python function or an MCP server's) may take; after that the
    model is told it timed out."""

    max_tool_rounds: int = 16
    """Rounds of server tool calls in one run; a model still calling them after that ends
    the run with RUN_ERROR ``tool_rounds_exceeded``."""

    max_parallel_tools: int = 16
    """Server tool calls of one run that run at once; the model's further calls wait their
    turn (each one's ``tool_timeout`` counts from its start)."""

    tool_threads: int = 8
    """Threads that run sync Python tools, shared by the app's runs (a sync tool cannot be
    cancelled: one that hangs holds its thread until it returns)."""

    mcp_optional: tuple[str, ...] = ()
    """MCP servers (by name) the bridge may serve without: one of these that cannot be
    reached at start is logged and offers no tools, and ``/health`` says ``degraded``. Any
    other that cannot be reached stops the start."""

    approve: tuple[str, ...] = ()
    """Server tools that wait for a person's approval before they run, by shell-style
    patterns on the name they are offered under (``files__write_*``, ``mail__*``, ``*``): a
    call to one ends the run with an AG-UI interrupt, and the next run's ``resume`` answers it
    (README "Approving tools"). Frontend tools never wait."""

    secret: str | None = field(default=None, repr=False)
    """The key that signs interrupts (HMAC-SHA256), at least 16 bytes: bridges that share it
    accept each other's interrupts. ``None``: the app makes one per process, and interrupts
    then do not survive a restart or span processes. Never shown in logs or events."""

    ask_user: bool = False
    """Offer the model the built-in ``ask_user`` server tool: a call asks the person a question
    (with, optionally, a JSON Schema for the answer) and its answer is the call's result
    (README "Asking the user")."""

    approval_timeout: float = 900.0
    """Seconds a person has to answer an interrupt (its ``expiresAt``)."""

    approval_store: str = field(default="memory", repr=False)
    """Where the interrupts already used are kept, so that an approval runs its call once
    (README "Approving tools"): ``memory`` (this process's own), ``redis://HOST:PORT/DB`` or
    ``valkey://…`` (one store for replicas and workers; the ``redis`` extra), or
    ``file:///FOLDER`` (the processes of one machine). Its password is a secret."""

    threads: str | None = field(default=None, repr=False)
    """Keep threads (README "Threads"): ``memory`` (this process's own), ``file:///FOLDER``
    (the processes of one machine) or ``redis://HOST:PORT/DB`` (``valkey://…``; replicas and
    workers; the ``redis`` extra). ``None``: nothing is kept between runs. Its password is a
    secret."""

    thread_ttl: float = float(MAX_SECONDS)
    """Seconds a thread is kept after its last run."""

    max_thread_bytes: int = 16 * 1024 * 1024
    """The largest thread kept (its messages and state as JSON, in bytes): a run past it goes on
    without being kept (a ``CUSTOM`` ``agui_bridge.thread_not_kept`` event says so)."""

    thread_store_bytes: int = 256 * 1024 * 1024
    """The bytes the thread store (``memory`` or ``file://``) holds in all, across every owner:
    past it the owner holding the most gives way first, and an owner's one thread last (README
    "Threads"). Redis holds to its own ``maxmemory``."""

    run_grace: float = 30.0
    """Seconds a run goes on with no client following it (with threads: a reload comes back to
    it); then its upstream request is cancelled."""

    run_timeout: float = 1800.0
    """The longest a run may go on with threads (it outlives its connection); then it ends with
    RUN_ERROR ``run_timeout``."""

    thread_owner_header: str | None = None
    """The request header that names a thread's owner (set by the app's proxy after its login),
    in place of the bearer token's digest."""

    record_dir: str | None = None
    """If set, every run is recorded to a file in this folder: the upstream request (without the
    key), its status, headers and raw bytes as they arrived, and the events sent
    (``bridge.serve.upstream.record``; ``agui-bridge replay`` serves them again)."""

    metrics: bool = False
    """Serve Prometheus metrics at ``GET /metrics`` (README "Observability")."""

    metrics_public: bool = False
    """Serve ``/metrics`` without ``auth_token`` (a scraper inside the network)."""

    otel: bool = False
    """Trace runs with OpenTelemetry (the ``otel`` extra): the exporter follows the SDK's
    ``OTEL_*`` environment variables; a tracer provider the host app set is used as it is."""

    otel_content: bool = False
    """Put message content (the request's messages, the answer, tool arguments and results)
    on the spans. Off by default: traces often go where conversations should not."""

    log_format: LogFormat = "text"
    """The run line's form (one per run on the ``agui_bridge.runs`` logger): ``text``
    (``key=value``) or ``json`` (one object)."""

    def __post_init__(self) -> None:
        url = urlsplit(self.upstream_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ValueError(f"upstream_url must be an http(s) URL, got {self.upstream_url!r}")
        object.__setattr__(self, "upstream_url", self.upstream_url.rstrip("/"))
        if not self.model:
            raise ValueError("model must be named")
        _check_upstream_body(self.upstream_body)
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}: {self.provider!r}")
        if self.instructions is not None:
            if not self.instructions.strip():
                raise ValueError("instructions (--instructions) are empty")
            if len(self.instructions.encode("utf-8", "surrogatepass")) > MAX_INSTRUCTIONS_BYTES:
                raise ValueError(
                    f"instructions (--instructions) are over {MAX_INSTRUCTIONS_BYTES} bytes"
                )
        if self.client_system not in ("follow", "refuse"):
            raise ValueError(f"client_system must be follow or refuse, not {self.client_system!r}")
        for name, (flag, zero) in _DURATIONS.items():
            problem = seconds_problem(getattr(self, name), zero=zero)
            if problem is not None:
                raise ValueError(f"{name} ({flag}) {problem}" if flag else f"{name} {problem}")
        if self.retries < 0:
            raise ValueError("retries cannot be negative")
        sizes = (self.max_line_bytes, self.max_body_bytes, self.max_messages)
        if min(*sizes, self.max_attachment_bytes, self.max_request_attachment_bytes) < 1:
            raise ValueError("size limits must be at least 1")
        if self.max_concurrent_runs < 1:
            raise ValueError("max_concurrent_runs must be at least 1")
        if self.reasoning_history not in ("auto", "field", "tags", "drop"):
            raise ValueError(
                f"reasoning_history must be auto, field, tags or drop: {self.reasoning_history!r}"
            )
        if self.unsupported_parts not in ("error", "note"):
            raise ValueError(
                f"unsupported_parts must be error or note, not {self.unsupported_parts!r}"
            )
        if self.upstream_transport not in ("aiohttp", "httpx"):
            raise ValueError(
                f"upstream_transport must be aiohttp or httpx, not {self.upstream_transport!r}"
            )
        if self.upstream_api not in ("chat", "responses"):
            raise ValueError(f"upstream_api must be chat or responses, not {self.upstream_api!r}")
        if self.agui_protocol not in ("auto", "1.0", "0.0"):
            raise ValueError(f"agui_protocol must be auto, 1.0 or 0.0, not {self.agui_protocol!r}")
        if self.max_tool_rounds < 1:
            raise ValueError("max_tool_rounds must be at least 1")
        if self.max_parallel_tools < 1 or self.tool_threads < 1:
            raise ValueError("max_parallel_tools and tool_threads must be at least 1")
        _check_store("approval_store", "--approval-store", self.approval_store)
        if self.threads is not None:
            _check_store("threads", "--threads", self.threads)
        if self.max_thread_bytes < 1:
            raise ValueError("max_thread_bytes must be at least 1")
        if self.thread_store_bytes < 1:
            raise ValueError("thread_store_bytes must be at least 1")
        header = self.thread_owner_header
        if header is not None and not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", header):
            raise ValueError(
                f"thread_owner_header (--thread-owner-header) must be a header's name (letters, "
                f"digits and !#$%&'*+-.^_`|~), not {header[:80]!r}"
            )
        # 16 bytes: bridge.serve.tools.approvals.MIN_SECRET_BYTES (the config cannot import serve).
        if self.secret is not None and len(self.secret.encode()) < 16:
            raise ValueError("the interrupt secret must be at least 16 bytes long")
        object.__setattr__(self, "approve", tuple(dict.fromkeys(self.approve)))
        object.__setattr__(self, "mcp_optional", tuple(dict.fromkeys(self.mcp_optional)))
        unknown_optional = set(self.mcp_optional) - set(self.mcp_servers)
        if unknown_optional:
            raise ValueError(
                f"optional MCP servers that are not configured: {sorted(unknown_optional)}"
            )
        if self.log_format not in ("text", "json"):
            raise ValueError(f"log_format must be text or json, not {self.log_format!r}")
        if self.otel and not importable("opentelemetry.sdk"):
            raise ValueError(
                "OpenTelemetry tracing (--otel, OTEL_EXPORTER_OTLP_ENDPOINT) needs the "
                "OpenTelemetry SDK, which is not installed: pip install 'agui-bridge[otel]'"
            )
        if self.state_schema is not None:
            if not importable("jsonschema"):
                raise ValueError(
                    "a state schema (--state-schema) needs jsonschema, which is not installed: "
                    "pip install 'agui-bridge[state]'"
                )
            import jsonschema

            try:
                jsonschema.Draft202012Validator.check_schema(self.state_schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"the state schema is not a JSON Schema: {exc.message}") from None
        if self.max_state_bytes < 2:
            raise ValueError("max_state_bytes must be at least 2 (the JSON of {})")
        for entry in self.predict_state:
            if len(entry) != 3 or not all(isinstance(part, str) and part for part in entry):
                raise ValueError(
                    f"predict_state entries are (state_key, tool, tool_argument): {entry!r}"
                )
        object.__setattr__(self, "predict_state", tuple(tuple(e) for e in self.predict_state))
        if self.mcp_servers and importlib.util.find_spec("mcp") is None:
            raise ValueError(
                "MCP servers (--mcp) need the MCP SDK, which is not installed: "
                "pip install 'agui-bridge[mcp]'"
            )
        for name, target in self.mcp_servers.items():
            if not _MCP_NAME.match(name) or "__" in name:
                raise ValueError(
                    f"MCP server name {name!r}: use letters, digits, '-' and single '_' "
                    "(its tools are offered as NAME__tool)"
                )
            if not target.strip():
                raise ValueError(f"MCP server {name!r}: give a URL or a command")
        if self.reasoning_scope not in ("auto", "current-turn", "all", "last"):
            raise ValueError(
                "reasoning_scope must be auto, current-turn, all or last, "
                f"not {self.reasoning_scope!r}"
            )
        object.__setattr__(self, "models", tuple(dict.fromkeys((self.model, *self.models))))
        unknown = set(self.translate_overrides) - set(self.models)
        if ANY_UPSTREAM_MODEL in self.models:
            unknown.clear()
        if unknown:
            raise ValueError(f"options given for models that are not served: {sorted(unknown)}")

    def translate_for(self, model: str) -> TranslateOptions:
        """The translator options for one model."""
        return self.translate_overrides.get(model, self.translate)


def _check_store(name: str, flag: str, url: str) -> None:
    """A store's URL (the approvals', the threads'): one of the schemes, the client it needs."""
    store = url.strip()
    scheme = urlsplit(store).scheme.lower() if "://" in store else store.lower()
    if scheme not in APPROVAL_STORE_SCHEMES:
        raise ValueError(
            f"{name} ({flag}) must be memory, redis://HOST:PORT/DB, valkey://HOST:PORT/DB "
            f"or file:///FOLDER, not {shown_url(store)!r}"
        )
    if scheme not in ("memory", "file") and not importable("redis"):
        raise ValueError(
            f"a Redis or Valkey store ({flag}) needs the redis client, "
            "which is not installed: pip install 'agui-bridge[redis]'"
        )


def seconds_problem(value: object, *, zero: bool = False) -> str | None:
    """What is wrong with ``value`` as a setting's number of seconds (``None``: nothing): it
    must be finite, above 0 (or 0 itself, with ``zero``) and at most a week. NaN is false in
    every comparison: it passed a ``<= 0`` test, and then cut every run."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= MAX_SECONDS  # false for NaN and the infinities
        and (zero or value > 0)
    ):
        return None
    lowest = "from 0" if zero else "above 0"
    return f"must be a number of seconds {lowest} up to {MAX_SECONDS} (a week), not {value!r}"


def importable(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it, but for its parents)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


def _check_upstream_body(body: Mapping[str, Any]) -> None:
    """``upstream_body`` is a JSON object of at most ``MAX_UPSTREAM_BODY_BYTES`` that sets none
    of the bridge's own fields."""
    if not isinstance(body, Mapping):
        raise ValueError("upstream_body (--upstream-body) must be a JSON object")
    owned = sorted(OWNED_BODY_KEYS.intersection(body))
    if owned:
        raise ValueError(
            f"upstream_body (--upstream-body) sets {', '.join(owned)}: the bridge makes "
            f"{'that field' if len(owned) == 1 else 'those fields'} itself"
        )
    try:
        size = len(json.dumps(body, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"upstream_body (--upstream-body) is not JSON: {exc}") from None
    if size > MAX_UPSTREAM_BODY_BYTES:
        raise ValueError(f"upstream_body (--upstream-body) is over {MAX_UPSTREAM_BODY_BYTES} bytes")
