"""Running a plan: the only module that drives the native engine.

A run is a handle: start it, iterate its snapshots (one a second), stop it when you like::

    with Run.start(plan) as run:
        for snapshot in run:
            print(snapshot["second"], sum(step["requests"] for step in snapshot["steps"]))

Iteration ends after the final snapshot. Leaving the ``with`` block early stops the run
gracefully (no new iterations, in-flight requests get the plan's ``graceful_stop_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from horde import _engine
from horde.errors import EngineFault, InvalidInput, PlanInvalid, Problem
from horde.plan import ConnectionPool, Plan, peak_vus, plan_to_json
from horde.plan.engine_rules import engine_check
from horde.plan.overrides import spread_rate, spread_vus
from horde.engine.snapshot import Exchange, Snapshot

#: How long one wait for a snapshot may block; short, so Ctrl-C is handled promptly.
POLL_INTERVAL_S = 0.2


def engine_problems(plan_json: str) -> list[Problem]:
    """The engine's check of a plan's JSON (a plan unchanged since the engine found nothing in it
    on its way in is not checked again: ``plan.engine_rules.engine_check``)."""
    return [Problem(location=path, message=message, hint=hint) for path, message, hint in engine_check(plan_json)]


#: Open files a generator keeps for itself besides its connections to the target (the store,
#: the target's listener when built in, logs, Python's own files).
RESERVED_FILES = 64


def connections_needed(plan: Plan) -> int:
    """The most connections the plan's generator may hold at once: one per VU at the peak
    (``connections: per_vu``), or the pool's size (``connections: {pool: N}``).

    >>> from horde.plan import plan_from_dict
    >>> data = {"version": 1, "target": {"base_url": "http://127.0.0.1:8080"},
    ...         "scenarios": [{"name": "s", "steps": [{"name": "get", "method": "GET", "path": "/"}],
    ...                        "workload": {"type": "closed", "stages": [{"duration_s": 60, "vus": 150_000}]}}]}
    >>> connections_needed(plan_from_dict(data))
    150000
    >>> data["target"]["connections"] = {"pool": 100}
    >>> connections_needed(plan_from_dict(data))
    100
    """
    if isinstance(plan.target.connections, ConnectionPool):
        return plan.target.connections.pool
    return sum(peak_vus(scenario.workload) for scenario in plan.scenarios)


def check_open_files(plan: Plan, *, limit: int | None = None) -> None:
    """Refuses, before any load is sent, a plan that could hold more connections at once than
    this process may open (its hard RLIMIT_NOFILE: the engine raises the soft limit to it at
    start), with the numbers and the way out."""
    import resource

    if limit is None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard == resource.RLIM_INFINITY:
            return
        limit = int(hard)
    needed = connections_needed(plan)
    if needed + RESERVED_FILES <= limit:
        return
    room = max(1, limit - RESERVED_FILES)
    files = f"this process may open at most {limit:,} files ({RESERVED_FILES} of them kept for itself)"
    more_processes = "split the load over several generator processes (each holds its own connections)"
    if isinstance(plan.target.connections, ConnectionPool):
        raise InvalidInput(
            f"the plan's pool holds up to {needed:,} connections, but {files}",
            hint=f"use a smaller pool (connections: {{pool: N}} with N at most {room:,}), or {more_processes}",
        )
    raise InvalidInput(
        f"the plan may hold {needed:,} connections at once (one per VU at its peak), but {files}",
        hint=f"let the VUs share connections: add connections: {{pool: N}} to the target (N at most {room:,}; "
        f"a VU then waits its turn for a connection), or {more_processes}, or lower the VUs (an open "
        "model's max_vus); a higher hard limit (ulimit -Hn, systemd LimitNOFILE) also works where allowed",
    )


def checked_plan_json(
    plan: Plan, *, locate: Callable[[list[Problem]], list[Problem]] | None = None, source: str = "the engine's check"
) -> str:
    """The plan's JSON once the engine has accepted it too; PlanInvalid otherwise. ``locate``
    places the engine's problems on the lines of the file the plan came from.

    This is the control plane's one check of a plan's JSON before it runs: the caller hands the
    JSON on (:meth:`Run.start`, ``conduct``), and the engine checks it once more only where it
    decodes it, at ``start_run``."""
    plan_json = plan_to_json(plan)
    problems = engine_problems(plan_json)
    if problems:
        raise PlanInvalid(locate(problems) if locate is not None else problems, source=source)
    return plan_json


def load_levels(
    plan: Plan,
    *,
    vus: int | None,
    rate_per_s: float | None,
    scenarios: list[str] | None,
) -> list[tuple[int, str, float]]:
    """Each re-targeted scenario's index, name and new level (see :meth:`Run.set_level`)."""

    if (vus is None) == (rate_per_s is None):
        raise InvalidInput("give either vus or rate_per_s", hint="vus for closed scenarios, rate_per_s for open ones")
    model = "closed" if vus is not None else "open"
    unknown = sorted(set(scenarios or []) - {s.name for s in plan.scenarios})
    if unknown:
        raise InvalidInput(
            f"no scenario is named {', '.join(map(repr, unknown))}",
            hint="name one of: " + ", ".join(s.name for s in plan.scenarios),
        )
    chosen = [
        (index, scenario)
        for index, scenario in enumerate(plan.scenarios)
        if scenario.workload.type == model and (not scenarios or scenario.name in scenarios)
    ]
    if not chosen:
        other = "--rate / rate_per_s" if model == "closed" else "--vus / vus"
        raise InvalidInput(
            f"no {model} scenario to set {'VUs' if vus is not None else 'a rate'} on",
            hint=f"this run's scenarios are {'open' if model == 'closed' else 'closed'}: use {other}",
        )
    weights = [scenario.weight for _, scenario in chosen]
    if vus is not None:
        if vus < 0:
            raise InvalidInput(f"vus must be 0 or more (got {vus})")
        levels: list[float] = [float(share) for share in spread_vus(int(vus), weights)]
    else:
        assert rate_per_s is not None
        if not rate_per_s >= 0:
            raise InvalidInput(f"rate_per_s must be 0 or more (got {rate_per_s})")
        levels = spread_rate(float(rate_per_s), weights)
    return [(index, scenario.name, level) for (index, scenario), level in zip(chosen, levels)]


def paced_scenarios(plan: Plan, scenarios: list[str] | None) -> list[tuple[int, str]]:
    """Each scenario a new pace applies to, by index and name: all of them, or those named (see
    :meth:`Run.set_pace`)."""

    known = [scenario.name for scenario in plan.scenarios]
    unknown = sorted(set(scenarios or []) - set(known))
    if unknown:
        raise InvalidInput(
            f"no scenario is named {', '.join(map(repr, unknown))}", hint="name one of: " + ", ".join(known)
        )
    return [(index, name) for index, name in enumerate(known) if not scenarios or name in scenarios]


def start_handle(
    plan_json: str,
    workers: int | None = None,
    *,
    first_slot: int | None = None,
    slots: int | None = None,
    start_at: float | None = None,
) -> _engine.RunHandle:
    """The engine's own handle on a run of checked plan JSON, for a cluster's generator: its share
    of the run (slots ``first_slot`` .. ``first_slot + workers`` of ``slots``) starts at
    ``start_at`` (this node's clock). The generator's coordinator checks the plan and merges the
    seconds; a run on this machine alone goes through :class:`Run`."""
    return _engine.start_run(plan_json, workers, first_slot, slots, start_at)


class Run:
    """A plan running in the engine."""

    def __init__(
        self, handle: Any, plan: Plan, plan_json: str, on_exchanges: Callable[[list[Exchange]], None] | None = None
    ) -> None:
        self._handle = handle
        self.plan = plan
        self.plan_json = plan_json
        #: Told the exchanges each snapshot brings (a run started with ``record_exchanges``).
        self.on_exchanges = on_exchanges
        self.stop_requested = False
        #: What the run noticed for the live view (a cluster run's suspect and lost generators;
        #: one process has none). The conductor shows and clears them.
        self.notes: list[str] = []
        #: Whether the run stopped because a part of it was lost (a cluster run only).
        self.stopped_for_loss = False

    def close(self) -> None:
        """Nothing to release: the engine's threads end with the run (a cluster run kills its
        generators here)."""

    def spread_block(self) -> None:
        """The summary's block about how the run was spread (a cluster run's); None here."""
        return None

    @classmethod
    def start(
        cls,
        plan: Plan,
        *,
        workers: int | None = None,
        plan_json: str | None = None,
        record_exchanges: int = 0,
        single_iteration: bool = False,
        on_exchanges: Callable[[list[Exchange]], None] | None = None,
    ) -> Run:
        """Starts the plan; returns at once. ``plan_json`` is the plan's JSON as
        :func:`checked_plan_json` gave it to the caller (checked here when not given).

        ``record_exchanges``: the engine records the first N exchanges of each step in full
        (redacted, bounded) and ``on_exchanges`` is told them as their snapshots come; 0 records
        nothing, at no cost. ``single_iteration``: each VU runs one iteration (setup, steps,
        teardown), then the run stops (``horde try``)."""
        if record_exchanges < 0:
            raise InvalidInput(f"the exchanges to record must be 0 or more (got {record_exchanges})")
        if plan_json is None:
            plan_json = checked_plan_json(plan)
        check_open_files(plan)
        try:
            handle = _engine.start_run(
                plan_json, workers, record_exchanges=record_exchanges, single_iteration=single_iteration
            )
        except ValueError as error:
            raise PlanInvalid([Problem(location="", message=str(error))]) from error
        except RuntimeError as error:
            raise EngineFault(f"the engine could not start: {error}") from error
        return cls(handle, plan, plan_json, on_exchanges)

    @property
    def planned_duration_s(self) -> float:
        """When the stages end, in seconds from the start (the grace period comes after)."""
        return float(self._handle.planned_duration_s)

    @property
    def finished(self) -> bool:
        return bool(self._handle.finished)

    def poll(self, timeout_s: float = POLL_INTERVAL_S) -> Snapshot | None:
        """The next snapshot, or None if none came within ``timeout_s``."""
        snapshot: Snapshot | None = self._handle.poll(timeout_s)
        if snapshot is not None and "exchanges" in snapshot:
            # Off the snapshot before the store or a sink sees it: exchanges are shown, never kept.
            exchanges = snapshot.pop("exchanges")
            if self.on_exchanges is not None:
                self.on_exchanges(exchanges)
        return snapshot

    def stop(self) -> None:
        """Stops new iterations; in-flight requests get the plan's grace period."""
        self.stop_requested = True
        self._handle.stop()

    def set_level(
        self,
        *,
        vus: int | None = None,
        rate_per_s: float | None = None,
        scenarios: list[str] | None = None,
        ramp_s: float = 0.0,
    ) -> dict[str, float]:
        """Re-targets the running load: ``vus`` for closed scenarios, ``rate_per_s`` for open
        ones, spread over them by ``weight`` as ``--vus``/``--rate`` are (all scenarios of that
        model, or those named). The new level is reached over ``ramp_s`` seconds (at once when
        0) and held until the stages end. Returns each scenario's new level.

        Raises :class:`~horde.errors.InvalidInput` when no scenario of that model is running or
        the level is out of range.
        """
        chosen = load_levels(self.plan, vus=vus, rate_per_s=rate_per_s, scenarios=scenarios)
        for index, _, level in chosen:
            try:
                self._handle.retarget(index, level, max(0.0, float(ramp_s)))
            except ValueError as error:
                raise InvalidInput(str(error)) from None
        return {name: level for _, name, level in chosen}

    def set_pace(self, factor: float, *, scenarios: list[str] | None = None) -> dict[str, float]:
        """Re-paces the running load: the same VUs, with their connections and logins, go
        ``factor`` times as fast. Each pause a VU of the chosen scenarios (all, or those named)
        starts from now on, its think times and the pacing between its iteration starts, is the
        plan's divided by ``factor``: 2.0 halves them, 0.5 doubles them, 1.0 is the plan's pace
        again. Pauses already waiting keep their end. The VU count stays as it is, and so does an
        open scenario's arrival rate (only its VUs' think times move). Returns each scenario's
        new factor.

        Raises :class:`~horde.errors.InvalidInput` when no scenario has a name given, or when
        ``factor`` is not a number between 0.001 and 1000.
        """
        chosen = paced_scenarios(self.plan, scenarios)
        factor = float(factor)
        for index, _ in chosen:
            try:
                self._handle.repace(index, factor)
            except ValueError as error:
                # The engine refuses a bad factor at the first scenario, before any has moved.
                raise InvalidInput(str(error)) from None
        return {name: factor for _, name in chosen}

    def __iter__(self) -> Iterator[Snapshot]:
        while not self.finished:
            snapshot = self.poll()
            if snapshot is not None:
                yield snapshot

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self.finished:
            self.stop()
