"""``horde try``: one VU through one iteration (setup, steps, teardown) of each scenario, every
exchange recorded — the first thing a plan author runs.

Each scenario runs on its own, as a plan of that scenario alone with one VU of a closed model
(an open scenario too), no thresholds, autostop, steering or monitors, on one engine worker in
single-iteration mode (the engine stops the run once the VU's teardown ends). Nothing is stored.
The stages last :data:`TRIAL_LIMIT_S` at most: an iteration still going then is stopped as a
run is (the plan's grace period).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from horde.engine.run import Run, checked_plan_json
from horde.engine.snapshot import Exchange, Snapshot
from horde.errors import ExitCode, InvalidInput
from horde.plan import Plan, plan_from_dict

#: The longest one scenario's iteration may take, in seconds.
TRIAL_LIMIT_S = 120.0
#: The most exchanges recorded per step (a loop runs a step more than once per iteration).
EXCHANGES_PER_STEP = 50
#: Connect failures: the target could not be reached at all (``sql_login_failed``: PostgreSQL
#: refused the login).
_CONNECT_KINDS = frozenset(
    {"refused", "dns", "tls", "connect", "timeout", "sql_connection_failure", "sql_login_failed"}
)


@dataclass
class TrialResult:
    """What one scenario's iteration did."""

    scenario: str
    #: Requests (and SQL steps) sent or attempted, and those that failed, from the snapshots:
    #: they count every exchange, also past the recorded ones.
    requests: int = 0
    failures: int = 0
    connections_opened: int = 0
    setup_failed: bool = False
    #: The failures by error kind.
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.failures == 0 and not self.setup_failed

    @property
    def could_not_connect(self) -> bool:
        return self.requests > 0 and self.connections_opened == 0 and set(self.errors) <= _CONNECT_KINDS


def trial_plan(plan: Plan, scenario: str) -> Plan:
    """The plan of scenario ``scenario`` alone, run by one VU (see the module)."""
    data = plan.model_dump(mode="json", by_alias=True, exclude_none=True)
    chosen = next(s for s in data["scenarios"] if s["name"] == scenario)
    chosen["workload"] = {"type": "closed", "start_vus": 1, "stages": [{"duration_s": TRIAL_LIMIT_S, "vus": 1}]}
    chosen.pop("pacing_s", None)
    chosen["weight"] = 1
    data["scenarios"] = [chosen]
    for key in ("thresholds", "autostop", "steer", "monitors", "generators"):
        data.pop(key, None)
    return plan_from_dict(data, source=f"scenario '{scenario}' for horde try")


def chosen_scenarios(plan: Plan, names: Sequence[str]) -> list[str]:
    """The scenarios to try: those named (each must exist), else all of them."""
    known = [scenario.name for scenario in plan.scenarios]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InvalidInput(
            f"--scenario: no scenario is named {', '.join(map(repr, unknown))}", hint="name one of: " + ", ".join(known)
        )
    return [name for name in known if name in names] if names else known


def try_scenario(plan: Plan, scenario: str, on_exchanges: Callable[[list[Exchange]], None]) -> TrialResult:
    """Runs one iteration of ``scenario`` and tells ``on_exchanges`` each exchange as it comes."""
    one = trial_plan(plan, scenario)
    plan_json = checked_plan_json(one)
    result = TrialResult(scenario=scenario)
    snapshots: list[Snapshot] = []
    with Run.start(
        one,
        workers=1,
        plan_json=plan_json,
        record_exchanges=EXCHANGES_PER_STEP,
        single_iteration=True,
        on_exchanges=on_exchanges,
    ) as run:
        snapshots.extend(run)
    for snapshot in snapshots:
        result.connections_opened += snapshot["connections_opened"]
        result.setup_failed = result.setup_failed or bool(snapshot.get("setup_failures"))
        for step in snapshot["steps"]:
            if step["kind"] == "group":
                continue  # a group's failure is its steps' failure, counted there
            result.requests += step["requests"]
            result.failures += step["requests"] - step["ok"]
            for kind, count in step["errors"].items():
                result.errors[kind] = result.errors.get(kind, 0) + count
    return result


def trial_exit_code(results: Sequence[TrialResult]) -> ExitCode:
    """0 when every step and check passed; 7 when no scenario could connect to the target; else
    8 (a step or a check failed)."""
    if all(result.passed for result in results):
        return ExitCode.OK
    if all(result.could_not_connect for result in results if not result.passed):
        return ExitCode.NO_CONNECTION
    return ExitCode.TRY_FAILED


def describe(result: TrialResult) -> str:
    """One line about a scenario's iteration.

    >>> describe(TrialResult("player", requests=4, failures=1, connections_opened=1, errors={"check_failed": 1}))
    'player: 4 exchange(s), 1 failed (check_failed 1)'
    """
    if result.passed:
        return f"{result.scenario}: {result.requests} exchange(s), every step and check passed"
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(result.errors.items()))
    setup = "; its setup failed" if result.setup_failed else ""
    return f"{result.scenario}: {result.requests} exchange(s), {result.failures} failed ({kinds}){setup}"
