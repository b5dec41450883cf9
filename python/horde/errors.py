"""The errors Horde raises, each with the exit code the CLI ends with.

A failed request is never an exception (it is counted as an error kind in the metrics); these
are for bad input and setup faults. Every error carries a message a user can act on and, where
one helps, a hint. The CLI prints them as ``error: ...`` / ``hint: ...`` lines.

>>> err = StoreUnavailable("cannot open sqlite:///nowhere/x.sqlite", hint="check the path")
>>> int(err.exit_code), str(err)
(3, 'cannot open sqlite:///nowhere/x.sqlite')
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """The documented exit codes of the ``horde`` command (README, "Exit codes")."""

    OK = 0
    INTERNAL = 1
    INVALID_INPUT = 2
    STORE_UNAVAILABLE = 3
    #: The run ended, and one or more of its thresholds failed (or had no data to pass on).
    THRESHOLDS_FAILED = 4
    #: `horde retarget`: the running run did not answer in time (its process is busy or gone).
    RUN_UNRESPONSIVE = 5
    #: `horde run --cluster`: the cluster could not be reached, or its generators could not start.
    CLUSTER_UNAVAILABLE = 6
    #: The target never answered: the run opened not one connection to it (refused, DNS, TLS,
    #: connect timeout, a database login refused...), or its connections opened and not one
    #: request got a response (a stalled target: timed out or cut at the end), or a message
    #: target sent back not one message (a closed port, a silent peer). It measured nothing of
    #: the target.
    NO_CONNECTION = 7
    #: `horde try`: a step or a check of the iteration failed (each exchange shows which and why).
    TRY_FAILED = 8
    # Autostop ended the run early: one code per reason, so a CI job can tell what went wrong
    # without parsing the output.
    #: Autostop: a latency condition held over its window (p95 > 500ms).
    AUTOSTOP_LATENCY = 10
    #: Autostop: an error share held over its window (errors > 5%, errors.timeout > 1%).
    AUTOSTOP_ERRORS = 11
    #: Autostop: not one successful response over the window.
    AUTOSTOP_NO_SUCCESS = 12
    #: Autostop: the generator was saturated every second of the window (figures untrustworthy).
    AUTOSTOP_GENERATOR = 13
    #: Autostop: dropped arrivals passed their share over the window (the open model's VUs ran out).
    AUTOSTOP_DROPPED = 14
    #: A run over several generators lost one, and its plan says `generators.on_lost: stop`.
    GENERATOR_LOST = 15
    #: Autostop: a monitor's condition held over its window (monitor.db.cpu.busy_percent > 95 for 10s).
    AUTOSTOP_MONITOR = 16
    #: `horde link`: the emulated link could not be built: not root (it needs CAP_NET_ADMIN and
    #: CAP_SYS_ADMIN), or /dev/net/tun or the `ip` command is missing.
    LINK_UNAVAILABLE = 17
    #: `horde compare --fail-on METRIC:MARGIN`: a step of the candidate is significantly worse
    #: than the baseline's by more than the margin (a CI job gates a build on it).
    REGRESSION = 18
    #: `horde import`: the plan was written, and some of the source could not be converted (each
    #: such part is a NOT CONVERTED comment in the plan and a row of the printed table).
    IMPORT_INCOMPLETE = 19
    INTERRUPTED = 130
    #: The run was stopped by SIGHUP (a closed terminal): drained, finalised, stored as interrupted.
    HUNG_UP = 129
    #: The run was stopped by SIGTERM (a CI cancellation, Kubernetes, `timeout`): the same.
    TERMINATED = 143


class HordeError(Exception):
    """Base of every error Horde raises on purpose."""

    exit_code: int = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InvalidInput(HordeError):
    """A bad flag, argument or value given by the user."""

    exit_code = ExitCode.INVALID_INPUT


@dataclass(frozen=True)
class Problem:
    """One problem in a plan: where it is, what is wrong, and what to do about it.

    ``location`` is ``file:line: path`` for YAML files, or just the attribute path such as
    ``scenarios[0].steps[1].path`` for plans built in code.
    """

    location: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class PlanInvalid(InvalidInput):
    """A plan with one or more problems; all of them are listed, not just the first."""

    def __init__(self, problems: list[Problem], *, source: str | None = None) -> None:
        where = f" in {source}" if source else ""
        count = len(problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            f"the plan{where} has {count} {noun}",
            hint="fix every listed problem; `horde schema` prints the plan's JSON Schema",
        )
        self.problems = problems
        self.source = source


class StoreUnavailable(HordeError):
    """The results store cannot be opened or written."""

    exit_code = ExitCode.STORE_UNAVAILABLE


class StoreTooNew(StoreUnavailable):
    """The store was written by a newer Horde (a schema revision this one does not know): it is
    left untouched rather than read wrongly or written in an older shape."""


class RunNotFound(InvalidInput):
    """No stored run matches the given id."""


class EngineFault(HordeError):
    """The engine could not start or failed outside any request (a setup fault)."""


class ClusterUnavailable(HordeError):
    """The cluster could not be reached, or its generators could not be placed or started."""

    exit_code = ExitCode.CLUSTER_UNAVAILABLE


class LinkUnavailable(HordeError):
    """The emulated link (``horde link``) could not be built: not root, no TUN, no ``ip``."""

    exit_code = ExitCode.LINK_UNAVAILABLE


class RunUnresponsive(HordeError):
    """A running run did not answer a request sent through the store in time."""

    exit_code = ExitCode.RUN_UNRESPONSIVE
