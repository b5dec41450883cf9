"""Conducting a run from start to verdict: the store record, the engine run, the live view,
steering, autostop, Ctrl-C, and at the end the summary with its thresholds, autostop and
capacity blocks and the exit code they call for.

``horde run``, ``horde sight`` and ``horde scale`` all go through :func:`conduct`, so a run
looks and is stored the same whichever command started it. The order at the end is fixed:
the summary is recomputed from what the store holds (so ``horde show`` prints the same
numbers), then thresholds are judged on those stored seconds, then the run is closed.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from horde.cluster.coordinator import ClusterOptions, ClusterRun, worker_count
from horde.control.autostop import Firing
from horde.control.capacity import CapacityQuestion
from horde.control.observers import (
    Autostop,
    Capacity,
    ControlQueue,
    Ending,
    EngineRun,
    Monitors,
    QuietSink,
    RunObserver,
    RunState,
    Sink,
    Sinks,
    Spread,
    StoreWriter,
    Thresholds,
)
from horde.control.steering import Steering, steering_for
from horde.control.thresholds import Verdict
from horde.control.watching import RunMonitors
from horde.engine.run import Run, check_open_files, checked_plan_json
from horde.engine.snapshot import Exchange
from horde.errors import ExitCode, HordeError, InvalidInput, PlanInvalid, Problem
from horde.plan import Plan
from horde.plan.redaction import redact_plan, redact_run_parameters, redact_values, secret_names, secret_values
from horde.results.summary import (
    CPU_SATURATION_PERCENT_PER_WORKER,
    Summary,
    SummaryBlocks,
    fold_blocks,
    never_answered,
    summarise,
)
from horde.store import Store

__all__ = [
    "Outcome",
    "Sink",
    "Sinks",
    "conduct",
    "cpu_limit_percent",
    "exit_code_for",
    "planned_duration_s",
]


@dataclass
class Outcome:
    """How a conducted run ended."""

    run_id: str
    status: str
    summary: Summary
    exit_code: int
    verdicts: list[Verdict] = field(default_factory=list)
    firing: Firing | None = None


#: The signals that end a run the way Ctrl-C does (drained, summarised, stored), and the exit
#: code each gives: 128 + the signal's number, as a shell reports it. SIGTERM is what CI
#: cancellations, Kubernetes and `timeout` send; SIGHUP a closed terminal.
STOP_SIGNALS: dict[signal.Signals, ExitCode] = {
    signal.SIGINT: ExitCode.INTERRUPTED,
    signal.SIGTERM: ExitCode.TERMINATED,
    signal.SIGHUP: ExitCode.HUNG_UP,
}


class _Interrupts:
    """Counts stop signals (Ctrl-C, SIGTERM, SIGHUP) instead of raising wherever the program
    happens to be (in the middle of a store write, a snapshot would be lost); remembers the
    first, whose exit code the run ends with. A SIGHUP already ignored (``nohup``) stays so."""

    def __init__(self) -> None:
        self.count = 0
        self.first: signal.Signals | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                    continue
                self._previous[sig] = signal.signal(sig, self._count)
        return self

    def _count(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.first is None:
            self.first = signal.Signals(signum)

    @property
    def exit_code(self) -> int:
        return int(STOP_SIGNALS.get(self.first, ExitCode.INTERRUPTED)) if self.first else int(ExitCode.INTERRUPTED)

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def planned_duration_s(plan: Plan) -> float:
    """How long the run lasts at most (before the grace period): the steering's budget, or the
    longest scenario's stages."""
    steering = steering_for(plan)
    if steering is not None:
        return steering.planned_length_s
    return max(sum(stage.duration_s for stage in scenario.workload.stages) for scenario in plan.scenarios)


def cpu_limit_percent(workers: int | None) -> float:
    return CPU_SATURATION_PERCENT_PER_WORKER * (workers or os.cpu_count() or 1)


def conduct(
    plan: Plan,
    store: Store,
    *,
    parameters: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    workers: int | None = None,
    sink: Sink | None = None,
    question: CapacityQuestion | None = None,
    annotate: Callable[[Summary], SummaryBlocks] | None = None,
    on_recorded: Callable[[str], None] | None = None,
    cluster: ClusterOptions | None = None,
    plan_json: str | None = None,
    record_exchanges: int = 0,
    on_exchanges: Callable[[list[Exchange]], None] | None = None,
) -> Outcome:
    """Runs ``plan`` to its end (or its autostop, or Ctrl-C) and stores it; returns the outcome.

    ``on_recorded`` is told the run's id once it is recorded, before any load (an exporter labels
    its series with it). ``annotate`` adds keys of its own to the summary before it is stored (the sighting shot's
    report). A plan with ``steer`` runs the steering's prepared plan (each steered scenario holding the
    starting level); that plan is what is stored, with the ``steer`` block saying how it moved.
    With ``cluster`` the run is spread over that cluster's generators and merged back into one
    (``horde.cluster``); the summary gets a ``cluster`` block. ``plan_json`` is the plan's JSON
    as the caller checked it with :func:`~horde.engine.run.checked_plan_json` (``horde run``
    does, before it opens the store, to place problems on the plan file's lines); a plan the
    steering prepares, or one given without it, is checked here. ``record_exchanges`` (``--debug
    N``): the first N exchanges of each step are handed to ``on_exchanges`` as they come, and
    never stored.
    """
    if record_exchanges and cluster is not None:
        raise InvalidInput(
            "--debug shows exchanges of a run on this machine only",
            hint="drop --cluster to see exchanges (a few VUs show every kind of exchange)",
        )
    sink = sink or QuietSink()
    steering = steering_for(plan)
    engine_plan = steering.prepared_plan() if steering is not None else plan
    # The store is opened by the caller before any load is sent; the run is recorded before
    # the engine starts, so that load never goes unrecorded.
    if plan_json is None or engine_plan is not plan:
        plan_json = checked_plan_json(engine_plan)
    if cluster is None:
        check_open_files(engine_plan)  # a cluster's provisioning checks each generator's files
    # Secrets never reach the store (and through it exports, reports, the dashboard): found by
    # name and by where their values came from, replaced wherever they appear.
    plan_data = json.loads(plan_json)
    secrets = secret_values(plan_data)
    named = secret_names(plan_data, secrets)
    if named:
        raise PlanInvalid(
            [
                Problem(
                    location=where,
                    message="a name holds a secret value",
                    hint="names are written as they are to the terminal, the store and "
                    "Prometheus: name it without the secret",
                )
                for where, _ in named
            ]
        )
    run_id = store.create_run(
        plan=redact_plan(plan_data, secrets=secrets),
        plan_name=plan.name,
        parameters=redact_run_parameters(parameters or {}, secrets),
        tags=redact_values(tags or {}, secrets),
    )
    if on_recorded is not None:
        on_recorded(run_id)
    monitors = RunMonitors.open(plan, sink)
    engine_run: EngineRun
    try:
        if cluster is not None:
            sink.note(f"joining the cluster at {cluster.address} and starting its generators")
            engine_run = ClusterRun.start(engine_plan, plan_json, cluster)
            workers = worker_count(engine_run)
            sink.note(f"cluster: {engine_run.provision.describe()}")
        else:
            engine_run = Run.start(
                engine_plan,
                workers=workers,
                plan_json=plan_json,
                record_exchanges=record_exchanges,
                on_exchanges=on_exchanges,
            )
    except HordeError:
        monitors.close()
        store.finish_run(run_id, status="failed", summary=None)
        raise
    monitors.begin()  # the monitors' second N is the snapshots' second N
    try:
        state = RunState(
            engine_run=engine_run, store=store, run_id=run_id, sink=sink, cpu_limit_percent=cpu_limit_percent(workers)
        )
        thresholds = Thresholds(plan)
        observers: list[RunObserver] = [
            StoreWriter(secrets),
            ControlQueue(steered=steering is not None),
            thresholds,
            Autostop(plan, state.cpu_limit_percent),
            Capacity(steering, question),
            Monitors(monitors, steered=steering is not None),
            Spread(engine_run),
        ]
        interrupts = _drive(state, observers)
        monitors.close(store, run_id)
        return _verdict(state, observers, thresholds, monitors, interrupts, workers=workers, annotate=annotate)
    finally:
        monitors.close()
        engine_run.close()


def _drive(state: RunState, observers: list[RunObserver]) -> _Interrupts:
    """The run's seconds, each passed through the observers in order (see
    :mod:`horde.control.observers`) until the engine ends, or a second stop signal stops the
    wait for its drain; the stop signals counted."""
    engine_run, sink = state.engine_run, state.sink
    with _Interrupts() as interrupts:
        while not engine_run.finished:
            if interrupts.count >= 2:
                break  # second Ctrl-C: keep what is stored, stop waiting for the drain
            if interrupts.count == 1 and not engine_run.stop_requested:
                engine_run.stop()
                sink.note_stopping()
            snapshot = engine_run.poll()  # waits at most POLL_INTERVAL_S, so Ctrl-C is seen soon
            for message in engine_run.notes:
                sink.note(message)
            engine_run.notes.clear()
            for observer in observers:
                observer.poll(state)
            if snapshot is None:
                continue
            for observer in observers:
                observer.observe(snapshot, state)
            shown = snapshot
            for observer in observers:
                shown = observer.shown(shown)
            sink.update(shown)
    return interrupts


def _verdict(
    state: RunState,
    observers: list[RunObserver],
    thresholds: Thresholds,
    monitors: RunMonitors,
    interrupts: _Interrupts,
    *,
    workers: int | None,
    annotate: Callable[[Summary], SummaryBlocks] | None,
) -> Outcome:
    """The ended run's status, its summary made again from the store with each observer's block
    folded in (then ``annotate``'s), stored with the run; and the exit code."""
    store, run_id = state.store, state.run_id
    status = (
        "interrupted"
        if interrupts.count or state.stop_asked
        else "autostopped"
        if state.firing is not None
        else "aborted"
        if state.engine_run.stopped_for_loss
        else "finished"
    )
    stored = store.snapshots(run_id)
    summary = summarise(
        stored, run_id=run_id, status=status, workers=workers or os.cpu_count() or 1, plan=store.get_run(run_id).plan
    )
    ending = Ending(
        status=status,
        stored=stored,
        monitor_samples=monitors.samples(store, run_id),
        firing=state.firing,
        stopped_by_steering=state.stopped_by_steering,
    )
    for observer in observers:
        fold_blocks(summary, observer.blocks(summary, ending))
    if annotate is not None:
        fold_blocks(summary, annotate(summary))
    store.finish_run(run_id, status=status, summary=summary)
    exit_code = (
        interrupts.exit_code if interrupts.count else exit_code_for(status, state.firing, thresholds.verdicts, summary)
    )
    return Outcome(
        run_id=run_id,
        status=status,
        summary=summary,
        exit_code=exit_code,
        verdicts=thresholds.verdicts,
        firing=state.firing,
    )


def exit_code_for(
    status: str, firing: Firing | None, verdicts: list[Verdict], summary: Mapping[str, Any] | None = None
) -> int:
    """Ctrl-C wins, then autostop's own code, then a lost generator that stopped the run, then
    a run the target never answered (no connection, or not one response), then failed
    thresholds."""
    if status == "interrupted":
        return ExitCode.INTERRUPTED
    if firing is not None:
        return int(firing.exit_code)
    if status == "aborted":
        return ExitCode.GENERATOR_LOST
    if summary is not None and never_answered(summary):
        return ExitCode.NO_CONNECTION
    if any(not verdict.passed for verdict in verdicts):
        return ExitCode.THRESHOLDS_FAILED
    return ExitCode.OK
