"""Who gets in: the places among the runs going on (``--max-concurrent-runs``). A request that
would run the model (or make a thread's snapshot, or ask a widget's server) takes a place
before its body is read, so a flood of big bodies is counted as it arrives, not once each has
been read; the place is given back once, however the request ends (refused after its body,
its client gone, the run over)."""

from __future__ import annotations

from collections.abc import Callable

from bridge.core.errors import InvalidRunInputError


class Slot:
    """A place taken (``Admission.take``): given back by ``release``, once. Whoever the
    request hands it to (its response, its run) says so (``hand_over``) and gives it back as
    it ends; one never handed over is given back as the request's handler returns."""

    __slots__ = ("_admission", "handed", "held")

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self.held = True
        self.handed = False

    def hand_over(self) -> Slot:
        self.handed = True
        return self

    def release(self) -> None:
        if self.held:
            self.held = False
            self._admission.taken -= 1


class Admission:
    """The places of one app: ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0

    def take(self, give_way: Callable[[], bool] | None = None) -> Slot:
        """A place, or 503 ``too_many_runs``. When every place is taken, ``give_way`` may
        free one (a run nobody follows ends, and gives its place back now): ``True`` if it
        did."""
        if self.taken >= self.limit and (give_way is None or not give_way()):
            raise InvalidRunInputError(
                "the bridge is serving as many runs as it may; retry in a moment",
                status=503,
                code="too_many_runs",
            )
        self.taken += 1
        return Slot(self)
