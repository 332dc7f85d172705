"""``POST /``: a run. Authorised and admitted, its ``RunAgentInput`` read, its tool loop
assembled (the server tools offered beside the frontend's, how each turn's request is built),
then its events streamed as frames for the client's protocol, recorded with ``--record``.

An MCP App widget's request comes the same way, as a run whose ``forwardedProps`` carries it:
it is answered by ``widgets``, without the model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from ag_ui.core import BaseEvent, Message, RunAgentInput
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from bridge.core.errors import InvalidRunInputError
from bridge.serve.http import hydrate, threads, widgets
from bridge.serve.http.admission import Slot
from bridge.serve.http.bridge import Bridge
from bridge.serve.http.frames import ClientProtocol, FrameWriter, client_protocol
from bridge.serve.http.run_input import MAX_DEPTH, read_run_input
from bridge.serve.http.stream import EventStreamResponse
from bridge.serve.observe.observation import RunObservation
from bridge.serve.run.loop import Prepare, RunIds, ToolLoop, run_agent
from bridge.serve.run.modalities import RunAttachments
from bridge.serve.run.output import RUN_ENDS, UnencodableEventError
from bridge.serve.run.request import build_chat_request, build_responses_request, configured_scope
from bridge.serve.run.resume import settle_approvals
from bridge.serve.tools.state import UPDATE_STATE, RunState, shares_state
from bridge.serve.upstream.record import recorded_input
from bridge.serve.upstream.recording import RunRecord

logger = logging.getLogger("agui_bridge")


async def run(bridge: Bridge, request: Request) -> Response:
    received = time.perf_counter()
    slot: Slot | None = None
    try:
        bridge.authorize(request)
        owner = bridge.threads.owner(request) if bridge.threads is not None else ""
        slot = bridge.admit()  # before the body is read: a flood of bodies is counted as it comes
        return await _admitted(bridge, request, slot, owner, received)
    except ClientDisconnect:
        bridge.telemetry.refused(400, "client_disconnected")
        return Response(status_code=400)  # gone while sending its body: nobody to answer
    except InvalidRunInputError as exc:
        return bridge.refused(exc)
    finally:
        if slot is not None and not slot.handed:  # refused, or failed, before its run began
            slot.release()


async def _admitted(
    bridge: Bridge, request: Request, slot: Slot, owner: str, received: float
) -> Response:
    """A run whose place is taken (``slot``, handed to what answers it): its body read, then
    a widget's request, a hydrate, or the model's run."""
    keeper = bridge.threads
    run_input = await read_run_input(request, bridge.config)
    await bridge.start_for_request()
    proxied = widgets.proxied_request_of(run_input)
    if proxied is not None:  # an MCP App's widget asks its server: no model, no turn
        return widgets.answer(bridge, run_input, proxied, received, slot)
    protocol = client_protocol(run_input.protocol_version, bridge.config.agui_protocol)
    if keeper is not None and not run_input.messages and not run_input.resume:
        writer = FrameWriter(bridge.redactor, protocol)
        return await hydrate.hydrate(bridge, keeper, run_input, owner, writer, slot)
    loop, prepare = _tool_loop(bridge, run_input, await bridge.upstream_models(), protocol)
    body = loop.build(run_input.messages)
    config = bridge.config
    observe = bridge.telemetry.run(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        model=str(body["model"]),
        protocol=protocol,
        received=received,
        headers=request.headers,
    )
    state = None
    if shares_state(run_input.state, config):
        state = RunState(
            run_input.state,
            schema=config.state_schema,
            max_bytes=config.max_state_bytes,
            max_depth=MAX_DEPTH - 1,  # the state sits one level inside the body
            told=observe.state_update,
        )
    writer = FrameWriter(bridge.redactor, protocol)
    recorder = bridge.recorder
    # What the run reads of its input: its ids and what it resumes, not the conversation
    # (validated, the biggest thing a stream would hold for its life; the upstream body has it
    # still), which only the tool loop, when there is one, reads. The closures below are let
    # go of once they made the run's coroutine (``EventStreamResponse``, ``LiveRun``): what
    # they hold (the tool loop, its request builders, ``prepare``) is the run's only while the
    # run holds it.
    ran = RunIds.of(run_input)

    def run_into(out: _Frames) -> Awaitable[None]:
        return run_agent(
            ran,
            body,
            bridge.upstream,
            config.translate_for(body["model"]),
            out,
            api=config.upstream_api,
            loop=loop if bridge.tools else None,
            observe=observe,
            prepare=prepare,
            state=state,
            predict_state=config.predict_state,
        )

    async def produce_recorded(sink: Sink) -> None:
        assert recorder is not None
        recorded = await recorded_input(run_input)
        with recorder.run(run_input, recorded) as record:  # its frames recorded as they go out
            await run_into(_Frames(sink, writer, observe, record))

    def produce(sink: Sink) -> Awaitable[None]:
        if recorder is None:
            return run_into(_Frames(sink, writer, observe))  # the run's coroutine, none around it
        return produce_recorded(sink)

    def ended(response: EventStreamResponse) -> None:
        observe.end(
            bytes_sent=response.bytes_sent,
            disconnected=response.client_gone,
            stopped=response.stopped,
        )
        bridge.upstream_props.run_ended(observe.code, observe.upstream_retries)

    if keeper is None:
        return bridge.event_stream(produce, slot, ended)
    declared = request.headers.get("content-length", "")
    live = keeper.begin(
        run_input, owner, int(declared) if declared.isascii() and declared.isdigit() else None
    )
    live.input = run_input
    live.slot = slot.hand_over()  # the run's until it ends, or gives way (give_way)
    ends = _Frames(live, writer, observe)

    def over(_: object) -> None:
        slot.release()
        observe.end(bytes_sent=live.size, disconnected=not live.followed, stopped=False)
        if not live.followed:  # ended with no client following it (the grace ran out, or not)
            kind = "abandoned" if live.cancel_reason == "abandoned" else "unfollowed"
            bridge.telemetry.thread(kind, run_input.thread_id, run_input.run_id)
        bridge.upstream_props.run_ended(observe.code, observe.upstream_retries)

    live.finished.add_done_callback(over)
    live.start(
        lambda: produce(live),
        timeout=config.run_timeout,
        end_with=ends.write,
        cancel_ends=lambda _: keeper.cancel_ends(live, run_input),
        timed_out=lambda: threads.timed_out(config.run_timeout),
    )
    return threads.carry_response(bridge, live)


class Sink(Protocol):
    """Where a run's frames go: the response's (``FrameSink``), or a kept run's (``LiveRun``),
    which its clients follow."""

    def add(self, frame: str) -> None: ...

    async def flush(self) -> None: ...


class _Frames:
    """A run's output (``bridge.serve.run.output``): each batch encoded for the client
    (redacted, shaped for its protocol), held in the response's sink until the run flushes,
    observed, recorded with ``--record``. A batch that cannot be encoded is not written
    (``UnencodableEventError``), and after it only the run's end is."""

    __slots__ = ("_add", "_failed", "_first", "_frames", "_record", "_run_id", "_sent", "flush")

    def __init__(
        self,
        sink: Sink,
        writer: FrameWriter,
        observe: RunObservation,
        record: RunRecord | None = None,
    ) -> None:
        self._add, self._frames, self._sent = sink.add, writer.frames, observe.sent
        self._run_id = observe.run_id
        self._record = record
        self._first = True
        self._failed = False
        self.flush = sink.flush

    def write(self, batch: Sequence[BaseEvent]) -> None:
        ends = bool(batch) and isinstance(batch[-1], RUN_ENDS)
        if self._failed and not ends:  # what a turn closes after the batch that failed
            return
        try:
            text = self._frames(batch)
            self._add(text)
        except Exception as exc:
            self._failed = True
            kinds = ", ".join(dict.fromkeys(str(event.type.value) for event in batch))
            error = UnencodableEventError(f"the bridge could not encode this run's {kinds}")
            logger.warning("run %s: %s", self._run_id, error.message, exc_info=exc)
            raise error from exc
        # The observation reads a run's first batch and its end (RunObservation.sent): the
        # batches between, most of them one token's, leave it untouched.
        if self._first or ends:
            self._first = False
            self._sent(batch)
        if self._record is not None:
            self._record.frames(text)


def _tool_loop(
    bridge: Bridge, run_input: RunAgentInput, upstream_models: list[str], protocol: ClientProtocol
) -> tuple[ToolLoop, Prepare | None]:
    """The run's server tools, offered beside the frontend's, and how to build each of its
    requests (the first from the client's messages, the next with the turns since); their
    results as content parts only for a client whose protocol has them (``protocol``); and what
    builds the first again once the run has begun, with what llama.cpp's ``/props`` says (read
    after RUN_STARTED, which goes before the upstream is asked anything): the reasoning scope
    under ``--reasoning-scope auto``, what becomes of the user's attachments when there are
    some (``bridge.serve.run.modalities``). The first build, which checks the input (its
    attachments as sent), sends back the turn in progress."""
    config, tools = bridge.config, bridge.tools
    frontend = run_input.tools or []
    taken = [tool.name for tool in frontend if tool.name in tools]
    if taken:
        raise InvalidRunInputError(
            f"the frontend's tool {taken[0]!r} has the name of a server tool of this bridge"
        )
    offered = run_input
    if tools:
        # update_state only where there is a state to edit: a JSON object.
        shared = shares_state(run_input.state, config)
        served = [d for d in tools.definitions() if shared or d.name != UPDATE_STATE]
        offered = run_input.model_copy(update={"tools": [*frontend, *served]})
    build_request = (
        build_responses_request if config.upstream_api == "responses" else build_chat_request
    )

    waits, asks = tools.waits, tools.asks
    scope = [configured_scope(config)]
    attachments = RunAttachments(run_input.messages, config)

    def build(messages: Sequence[Message]) -> dict[str, Any]:
        conversation = offered
        settled = attachments.admit(settle_approvals(messages, waits, asks))
        if settled is not run_input.messages:
            conversation = offered.model_copy(update={"messages": list(settled)})
        return build_request(conversation, config, upstream_models, scope=scope[0])

    async def prepare(body: dict[str, Any]) -> dict[str, Any]:
        model = str(body["model"])
        resolved = await bridge.upstream_props.reasoning_scope(model)
        if resolved == scope[0] and not attachments.pending:
            return body
        scope[0] = resolved
        if attachments.pending:
            attachments.told(await bridge.upstream_props.props(model))
        return build(run_input.messages)

    parts = protocol == "1.0"  # a 0.0.x client takes, and keeps, a tool's result as text
    loop = ToolLoop(tools, build, run_input, config.max_tool_rounds, bridge.approvals, parts)
    return loop, prepare if config.reasoning_scope == "auto" or attachments.pending else None
