"""The commands that send load: ``horde run``, ``try`` (one VU, one iteration), ``sight`` (the
sighting shot), ``scale`` (the scalability study), and ``retarget`` (a running run's level, asked
through the store); and what they share: the plan from a file or ``--url``, the ``--monitor``
flags, the files ``--summary-json`` and ``--junit`` write.

``register(app)`` adds them to the ``horde`` application. Each imports the layers it needs when it
runs, so that ``horde --help`` does not pay for the store, the conductor or the dashboard.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from horde.errors import ExitCode, InvalidInput, RunUnresponsive
from horde.cli.arguments import HordeCommand, parse_duration, parse_header, parse_params, parse_tag
from horde.cli.terminal import stdout

if TYPE_CHECKING:  # types only: the commands import their layers when they run
    from horde.results.summary_blocks import OutputBlock
    from horde.control.conductor import Outcome
    from horde.plan import Plan
    from horde.plan.loader import LoadedPlan


#: For the commands that take --duration: a word left over (``--duration 2 sec``) reaches the
#: command, which names it (:func:`_refuse_a_stray_argument`), rather than the parser's error.
_EXTRA_WORDS_NAMED: dict[str, Any] = {"allow_extra_args": True}


def register(app: typer.Typer) -> None:
    """Add ``run``, ``try``, ``sight``, ``scale`` and ``retarget`` to ``app``."""
    app.command(
        "run",
        cls=HordeCommand,
        context_settings=_EXTRA_WORDS_NAMED,
        epilog="Examples:\n\n  horde run examples/quickstart\n\n  horde run plan.yaml --vus 50 --duration 2m --tag build=1234\n\n  horde run --url http://127.0.0.1:8080/ --rate 500 --duration 30s\n\n  horde run --url http://127.0.0.1:8080/ --find-max --summary-json max.json\n\n  horde run plan.yaml -p vus=200 --junit junit.xml --prometheus 9464\n\n  horde run plan.yaml --out prometheus-rw=http://127.0.0.1:9090/api/v1/write",
    )(run)
    app.command(
        "try",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde try examples/game\n\n  horde try plan.yaml --scenario player -p city=paris\n\n  horde try --url http://127.0.0.1:8080/",
    )(try_)
    app.command(
        "sight",
        cls=HordeCommand,
        context_settings=_EXTRA_WORDS_NAMED,
        epilog="Examples:\n\n  horde sight plan.yaml\n\n  horde sight --url http://127.0.0.1:8080/ --duration 10s",
    )(sight)
    app.command(
        "scale",
        cls=HordeCommand,
        context_settings=_EXTRA_WORDS_NAMED,
        epilog="Examples:\n\n  horde scale plan.yaml --instances 4\n\n  horde scale --url http://127.0.0.1:8080/ --instances 3 --find-max\n\n  horde scale --url http://127.0.0.1:8080/ --instances 3 --target-response-ms 50 --duration 2m\n\n  horde scale --url http://127.0.0.1:8080/ --instances 4 --find-max --peak-rps 19500 --report study.html\n\n  horde scale --from-study 20261128-140209-c352 --peak-rps 19500 --headroom 20\n\n  horde scale --from-study players-1 --per-user-rate 2.5",
    )(scale)
    app.command(
        "retarget",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde retarget last --vus 300\n\n  horde retarget 20261123 --rate 800 --ramp 30s",
    )(retarget)


#: A duration's unit written apart from its number (``--duration 2 sec``), by the suffix it takes.
_UNIT_WORDS = {
    "ms": "ms",
    "msec": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "m": "m",
    "min": "m",
    "mins": "m",
    "minute": "m",
    "minutes": "m",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
}


def _refuse_a_stray_argument(
    plan_path: Path | None, url: str | None, durations: dict[str, str | None], extra: list[str] | None = None
) -> None:
    """A word the command line left over: say what it is.

    ``--duration 2 sec`` leaves ``sec`` over. Beside ``--url`` the parser takes it for PLAN (no
    such file), and the user would otherwise read "a plan file or --url, not both" about a plan
    never meant; beside a plan file it is an extra argument (``extra``: the commands that take
    ``--duration`` accept extra arguments so that they are named here, with the parser's word
    "unexpected" replaced by what the word most likely was).
    """
    taken_for_plan = plan_path is not None and not plan_path.exists()
    words = [*([str(plan_path)] if taken_for_plan else []), *(extra or [])]
    for word in words:
        unit = _UNIT_WORDS.get(word.lower())
        if unit is None:
            continue
        # The flags given a bare number: the word followed one of them (the parser keeps no order).
        bare = [f"{flag} {value}" for flag, value in durations.items() if value is not None and _is_number(value)]
        after = f" after {' or '.join(bare)}" if bare else ""
        taken = ", taken for the plan file" if taken_for_plan and word == str(plan_path) else ""
        example = " or ".join(f"{given}{unit}" for given in bare) or f"--duration 2{unit}"
        raise InvalidInput(
            f"'{word}'{after} is a stray argument{taken}: a duration is one word",
            hint=f"write {example} (durations are written 2s, 500ms, 1m, 1h30m)",
        )
    if extra:
        raise InvalidInput(
            f"'{extra[0]}' is a stray argument: the command takes one plan ({plan_path})",
            hint="quote a value that holds spaces; each flag takes one word",
        )
    if taken_for_plan and url is not None:
        raise InvalidInput(
            f"'{plan_path}' is a stray argument beside --url, taken for a plan file (there is no such file)",
            hint="--url needs no plan file: drop the word, or quote a value that holds spaces",
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _load(
    plan_path: Path | None,
    url: str | None,
    method: str,
    headers: list[str],
    body: str | None,
    params: dict[str, str],
    durations: dict[str, str | None] | None = None,
    extra: list[str] | None = None,
) -> tuple[Plan, LoadedPlan | None]:
    from horde.plan import plan_from_dict
    from horde.plan.loader import load_plan_file
    from horde.plan.overrides import url_plan

    _refuse_a_stray_argument(plan_path, url, durations or {}, extra)
    if plan_path is not None and url is not None:
        raise InvalidInput(
            "give either a plan file or --url, not both", hint="--url builds a one-step plan for quick checks"
        )
    if plan_path is not None:
        loaded = load_plan_file(plan_path, params)
        return loaded.plan, loaded
    if url is not None and params:
        raise InvalidInput(
            "-p sets a plan file's parameters; --url has none", hint="use -p with a plan file that declares parameters"
        )
    if url is not None:
        data = url_plan(url, method=method, headers=[parse_header(h) for h in headers], body=body)
        return plan_from_dict(data, source="--url"), None
    raise InvalidInput(
        "no plan given", hint="horde run PLAN (a .yaml/.json/.py file or a folder), or horde run --url URL"
    )


def _seconds(text: str | None, flag: str) -> float | None:
    return parse_duration(text, flag=flag) if text is not None else None


def run(
    ctx: typer.Context,
    plan_path: Annotated[
        Optional[Path],
        typer.Argument(metavar="PLAN", help="plan file (.yaml, .json, .py) or a folder holding plan.yaml"),
    ] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="quick check of one URL instead of a plan file")] = None,
    method: Annotated[str, typer.Option("--method", "-X", help="HTTP method for --url")] = "GET",
    header: Annotated[
        Optional[list[str]], typer.Option("--header", "-H", help="'Name: value' header for --url (repeatable)")
    ] = None,
    body: Annotated[Optional[str], typer.Option("--body", help="request body for --url")] = None,
    vus: Annotated[
        Optional[int], typer.Option("--vus", help="closed model with this many VUs (every scenario)")
    ] = None,
    rate: Annotated[
        Optional[float], typer.Option("--rate", help="open model at this many arrivals/s (every scenario)")
    ] = None,
    max_vus: Annotated[
        Optional[int],
        typer.Option("--max-vus", help="open model: most VUs busy at once; arrivals beyond are dropped and counted"),
    ] = None,
    duration: Annotated[
        Optional[str], typer.Option("--duration", help="total length of each scenario's stages: 30s, 5m...")
    ] = None,
    ramp_up: Annotated[
        Optional[str], typer.Option("--ramp-up", help="first part of --duration, a linear ramp from 0")
    ] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="override target.base_url")] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="turn TLS certificate verification off (self-signed test servers)")
    ] = False,
    tag: Annotated[
        Optional[list[str]], typer.Option("--tag", help="key=value stored with the run (repeatable)")
    ] = None,
    store_url: Annotated[
        Optional[str],
        typer.Option("--store", help="store path or URL (default: $HORDE_STORE or ~/.local/share/horde/runs.sqlite)"),
    ] = None,
    summary_json: Annotated[
        Optional[Path], typer.Option("--summary-json", help="write the summary as JSON to this file")
    ] = None,
    workers: Annotated[
        Optional[int], typer.Option("--workers", help="engine worker threads (default: one per core)")
    ] = None,
    param: Annotated[
        Optional[list[str]],
        typer.Option(
            "--param",
            "-p",
            metavar="NAME=VALUE",
            help="set a plan parameter (repeatable); else $HORDE_PARAM_NAME, else its default",
        ),
    ] = None,
    find_max: Annotated[
        bool,
        typer.Option(
            "--find-max",
            help="find the knee: a sighting shot, a geometric climb, then bisection (a stepped ramp with --step)",
            rich_help_panel="Steering",
        ),
    ] = False,
    target_response_ms: Annotated[
        Optional[float],
        typer.Option(
            "--target-response-ms",
            help="find the highest load whose percentile holds this response time, and keep it there",
            rich_help_panel="Steering",
        ),
    ] = None,
    percentile: Annotated[
        float,
        typer.Option(
            "--percentile", help="the latency percentile steering and find-max judge", rich_help_panel="Steering"
        ),
    ] = 95.0,
    steer_by: Annotated[
        Optional[str],
        typer.Option(
            "--steer-by",
            metavar="level|pace",
            help="target response time: move the level (VUs or rate; default) or keep the plan's VUs and move their pace (think times and pacing)",
            rich_help_panel="Steering",
        ),
    ] = None,
    start: Annotated[
        Optional[float],
        typer.Option(
            "--start",
            help="steering's first level: arrivals/s (open), VUs (closed) or a pace; default: a sighting shot (find-max), 1 VU, 10/s or pace 1 (target response time)",
            rich_help_panel="Steering",
        ),
    ] = None,
    step: Annotated[
        Optional[float],
        typer.Option(
            "--step",
            help="find-max as a stepped ramp: what each step adds (default: search)",
            rich_help_panel="Steering",
        ),
    ] = None,
    step_duration: Annotated[
        Optional[str],
        typer.Option(
            "--step-duration",
            help="find-max: how long each step holds (5s searching, 30s stepped)",
            rich_help_panel="Steering",
        ),
    ] = None,
    precision: Annotated[
        Optional[float],
        typer.Option(
            "--precision",
            help="find-max's search: stop once the knee is bracketed within this percent (3)",
            rich_help_panel="Steering",
        ),
    ] = None,
    limit: Annotated[
        Optional[float], typer.Option("--limit", help="steering: never go above this level", rich_help_panel="Steering")
    ] = None,
    latency_limit_ms: Annotated[
        Optional[float],
        typer.Option(
            "--latency-limit-ms", help="find-max: saturated once the percentile passes this", rich_help_panel="Steering"
        ),
    ] = None,
    per_user_rate: Annotated[
        Optional[float],
        typer.Option(
            "--per-user-rate",
            help="requests/s one user makes (against a tcp://, udp:// or kcp:// target: messages/s, sent and received): capacity in users",
            rich_help_panel="Capacity",
        ),
    ] = None,
    peak_rps: Annotated[
        Optional[float],
        typer.Option("--peak-rps", help="the peak to serve, req/s: instances needed", rich_help_panel="Capacity"),
    ] = None,
    peak_users: Annotated[
        Optional[float],
        typer.Option(
            "--peak-users", help="the peak to serve, users (with --per-user-rate)", rich_help_panel="Capacity"
        ),
    ] = None,
    headroom: Annotated[
        float,
        typer.Option("--headroom", help="percent of each instance kept free at the peak", rich_help_panel="Capacity"),
    ] = 20.0,
    junit: Annotated[
        Optional[Path], typer.Option("--junit", help="write thresholds and autostop as JUnit XML to this file")
    ] = None,
    prometheus: Annotated[
        Optional[int],
        typer.Option(
            "--prometheus",
            metavar="PORT",
            help="serve live metrics for Prometheus at 127.0.0.1:PORT/metrics (0: any free port)",
        ),
    ] = None,
    out: Annotated[
        Optional[list[str]],
        typer.Option(
            "--out",
            metavar="KIND=URL",
            help="push each second's metrics as the run goes: prometheus-rw=URL (Prometheus remote write) or otlp=URL (OpenTelemetry, OTLP/HTTP) (repeatable)",
        ),
    ] = None,
    ui: Annotated[
        bool, typer.Option("--ui", help="serve the web dashboard during the run", rich_help_panel="Dashboard")
    ] = False,
    ui_host: Annotated[
        str,
        typer.Option(
            "--ui-host", help="the dashboard's address (beyond loopback it needs a token)", rich_help_panel="Dashboard"
        ),
    ] = "127.0.0.1",
    ui_port: Annotated[
        int, typer.Option("--ui-port", help="the dashboard's port (0: any free port)", rich_help_panel="Dashboard")
    ] = 8089,
    ui_token: Annotated[
        Optional[str],
        typer.Option(
            "--ui-token",
            help="the dashboard's access token (generated when the host is not loopback)",
            rich_help_panel="Dashboard",
        ),
    ] = None,
    cluster: Annotated[
        Optional[str],
        typer.Option(
            "--cluster",
            metavar="ADDRESS",
            help="spread the run over a Ray cluster's generators: HOST:PORT of its head, ray://HOST:PORT, auto ($RAY_ADDRESS), or local (several generator processes on this machine)",
            rich_help_panel="Cluster",
        ),
    ] = None,
    generators: Annotated[
        Optional[int],
        typer.Option(
            "--generators", help="how many generators (default: as many as the plan needs)", rich_help_panel="Cluster"
        ),
    ] = None,
    monitor: Annotated[
        Optional[list[str]],
        typer.Option(
            "--monitor",
            metavar="NAME=SOURCE",
            help="watch the target's side each second, beside the plan's monitors: NAME=host (this machine), NAME=http://HOST:9100/metrics (a node_exporter), NAME=postgresql://USER@HOST/DB (repeatable)",
            rich_help_panel="Monitors",
        ),
    ] = None,
    debug: Annotated[
        Optional[int],
        typer.Option(
            "--debug",
            "--http-debug",
            metavar="N",
            help="print the first N exchanges of each step in full (request, response, timing, checks; secrets redacted)",
        ),
    ] = None,
) -> int:
    """Run a plan against its target, live, and store the run."""
    from horde.cli.console import render_judgement, render_summary
    from horde.cluster.coordinator import ClusterOptions
    from horde.control.capacity import CapacityQuestion
    from horde.control.conductor import Sinks, conduct, cpu_limit_percent, planned_duration_s
    from horde.engine.run import checked_plan_json
    from horde.plan.control import FindMax
    from horde.plan.overrides import SteerFlags, apply_overrides, apply_steer_flags
    from horde.sinks.live import LiveView
    from horde.sinks.prometheus import PrometheusExporter
    from horde.sinks.push import PushSink, parse_out
    from horde.store import Store
    from horde.web import DashboardServer

    params = parse_params(param or [])
    push_targets = [parse_out(text) for text in out or []]
    tags = dict(parse_tag(t) for t in tag or [])
    duration_s = parse_duration(duration, flag="--duration") if duration is not None else None
    ramp_up_s = parse_duration(ramp_up, flag="--ramp-up") if ramp_up is not None else None
    if workers is not None and workers < 1:
        raise InvalidInput(f"--workers must be at least 1 (got {workers})")
    _check_debug(debug)
    if debug and cluster is not None:
        raise InvalidInput("--debug shows exchanges of a run on this machine only", hint="drop --cluster (or --debug)")
    if generators is not None and (generators < 1 or cluster is None):
        raise InvalidInput(
            f"--generators must be at least 1 (got {generators})" if generators < 1 else "--generators needs --cluster",
            hint="e.g. --cluster 10.0.0.1:6379 --generators 4",
        )
    cluster_options = (
        ClusterOptions(address=cluster, count=generators, workers=workers) if cluster is not None else None
    )
    for path, flag in ((summary_json, "--summary-json"), (junit, "--junit")):
        if path is not None and path.is_dir():
            raise InvalidInput(
                f"{flag}: {path} is a directory",
                hint=f"give a file path, e.g. {flag} out.{'json' if flag == '--summary-json' else 'xml'}",
            )
    question = CapacityQuestion(
        per_user_rate=per_user_rate, peak_rps=peak_rps, peak_users=peak_users, headroom_percent=headroom
    )
    plan, loaded = _load(
        plan_path,
        url,
        method,
        header or [],
        body,
        params,
        {"--duration": duration, "--ramp-up": ramp_up, "--step-duration": step_duration},
        ctx.args,
    )
    # A quick --url plan that is steered becomes an open model (unless --vus): --max-vus caps it.
    steered_quick = url is not None and vus is None and (find_max or target_response_ms is not None)
    plan = apply_overrides(
        plan,
        vus=vus,
        rate=rate,
        max_vus=None if steered_quick else max_vus,
        duration_s=duration_s,
        ramp_up_s=ramp_up_s,
        base_url=base_url,
        insecure=insecure,
    )
    steer_flags = SteerFlags(
        find_max=find_max,
        target_response_ms=target_response_ms,
        percentile=percentile,
        start=start,
        step=step,
        step_duration_s=_seconds(step_duration, "--step-duration"),
        limit=limit,
        latency_limit_ms=latency_limit_ms,
        duration_s=duration_s,
        precision_percent=precision,
        max_vus=max_vus if steered_quick else None,
        steer_by=steer_by,
    )
    plan = apply_steer_flags(plan, steer_flags, quick=url is not None, vus_given=vus is not None)
    plan = _with_monitor_flags(plan, monitor or [])
    # The engine's own check of the plan, before the store is touched; a file's plan has its
    # problems placed on the file's lines.
    plan_json = checked_plan_json(
        plan, locate=loaded.located if loaded else None, source=loaded.label if loaded else "the engine's check"
    )
    parameters = {
        name: value
        for name, value in (
            ("vus", vus),
            ("rate", rate),
            ("max_vus", max_vus),
            ("duration_s", duration_s),
            ("ramp_up_s", ramp_up_s),
            ("base_url", base_url),
            ("workers", workers),
            ("params", params or None),
        )
        if value is not None
    }
    with Store.open(store_url) as store, ExitStack() as served:
        store.refuse_read_only("record a run")
        exporter: PrometheusExporter | None = None
        if prometheus is not None:
            if not 0 <= prometheus <= 65535:
                raise InvalidInput(f"--prometheus: {prometheus} is not a port", hint="0 to 65535; 0 picks a free one")
            # Started before any load: a port in use stops the command here.
            exporter = PrometheusExporter(
                "", plan.name, cpu_limit_percent=cpu_limit_percent(workers), port=prometheus, tags=tags
            )
            exporter.start()
            served.callback(exporter.stop)
            stdout.print(f"Prometheus metrics at {exporter.url}", markup=False, highlight=False)
        if ui:
            dashboard = DashboardServer(store.url, host=ui_host, port=ui_port, token=ui_token).start()
            served.callback(dashboard.stop)
            # /runs/last opens the newest run: this one, once it is recorded (before any load).
            stdout.print(f"dashboard at {dashboard.run_url('last')}", markup=False, highlight=False, soft_wrap=True)
        title = f"horde · {plan.name}"
        printer = _exchange_printer(plan_json) if debug else None
        with LiveView(
            stdout,
            title=title,
            planned_duration_s=planned_duration_s(plan),
            cpu_limit_percent=cpu_limit_percent(workers),
            open_ended=isinstance(plan.steer, FindMax),
        ) as live:
            # On a cluster these sinks see the coordinator's merged seconds: the run is pushed once.
            pushes = [
                PushSink(
                    target, plan.name, cpu_limit_percent=cpu_limit_percent(workers), tags=tags, on_warning=live.note
                )
                for target in push_targets
            ]
            labelled: list[PrometheusExporter | PushSink] = [*([exporter] if exporter is not None else []), *pushes]

            def recorded(run_id: str) -> None:
                for one in labelled:
                    one.set_run_id(run_id)

            sink = live if not labelled else Sinks(live, *labelled)
            try:
                outcome = conduct(
                    plan,
                    store,
                    parameters=parameters,
                    tags=tags,
                    workers=workers,
                    sink=sink,
                    question=question,
                    plan_json=plan_json,
                    on_recorded=recorded,
                    cluster=cluster_options,
                    record_exchanges=debug or 0,
                    on_exchanges=printer,
                )
            finally:
                pushed = [push.close() for push in pushes]
        render_summary(stdout, outcome.summary, store_url=store.display_url)
        if pushed:
            _render_pushed(pushed)
            # In --summary-json only: what reached the targets is this command's doing, not the run's.
            outcome.summary["outputs"] = pushed
        render_judgement(stdout, outcome.summary)
    _write_outputs(outcome, summary_json, junit, plan.name)
    return outcome.exit_code


MAX_DEBUG_EXCHANGES = 1000


def _check_debug(debug: int | None) -> None:
    if debug is not None and not 1 <= debug <= MAX_DEBUG_EXCHANGES:
        raise InvalidInput(
            f"--debug takes how many exchanges of each step to print: 1 to {MAX_DEBUG_EXCHANGES} (got {debug})",
            hint="for example --debug 2 (the first two exchanges of every step)",
        )


def _exchange_printer(plan_json: str) -> Any:
    """Prints recorded exchanges on stdout, redacted with the plan's secret values."""
    from horde.cli.exchanges import ExchangePrinter
    from horde.plan.redaction import secret_values

    return ExchangePrinter(stdout, secret_values(json.loads(plan_json)))


def try_(
    plan_path: Annotated[
        Optional[Path],
        typer.Argument(metavar="PLAN", help="plan file (.yaml, .json, .py) or a folder holding plan.yaml"),
    ] = None,
    scenario: Annotated[
        Optional[list[str]],
        typer.Option("--scenario", metavar="NAME", help="try this scenario only (repeatable; default: every scenario)"),
    ] = None,
    param: Annotated[
        Optional[list[str]],
        typer.Option(
            "--param",
            "-p",
            metavar="NAME=VALUE",
            help="set a plan parameter (repeatable); else $HORDE_PARAM_NAME, else its default",
        ),
    ] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="override target.base_url")] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="turn TLS certificate verification off (self-signed test servers)")
    ] = False,
    url: Annotated[Optional[str], typer.Option("--url", help="try one URL instead of a plan file")] = None,
    method: Annotated[str, typer.Option("--method", "-X", help="HTTP method for --url")] = "GET",
    header: Annotated[
        Optional[list[str]], typer.Option("--header", "-H", help="'Name: value' header for --url (repeatable)")
    ] = None,
    body: Annotated[Optional[str], typer.Option("--body", help="request body for --url")] = None,
) -> int:
    """Run one VU through one iteration (setup, steps, teardown) of each scenario and show every
    exchange, the variables each step sets and each check; nothing is stored."""
    from horde.control.trial import chosen_scenarios, describe, trial_exit_code, try_scenario
    from horde.engine.run import checked_plan_json
    from horde.plan.overrides import apply_overrides

    plan, loaded = _load(plan_path, url, method, header or [], body, parse_params(param or []))
    plan = apply_overrides(plan, base_url=base_url, insecure=insecure)
    # The whole plan is checked as `horde validate` checks it, its problems on the file's lines.
    plan_json = checked_plan_json(
        plan, locate=loaded.located if loaded else None, source=loaded.label if loaded else "the engine's check"
    )
    names = chosen_scenarios(plan, scenario or [])
    printer = _exchange_printer(plan_json)
    results = []
    for name in names:
        stdout.print(f"scenario {name}: one VU, one iteration", markup=False, highlight=False)
        results.append(try_scenario(plan, name, printer))
    stdout.print("", markup=False)
    for result in results:
        stdout.print(
            ("✓ " if result.passed else "✗ ") + describe(result), markup=False, highlight=False, soft_wrap=True
        )
    return trial_exit_code(results)


def _with_monitor_flags(plan: Plan, flags: list[str]) -> Plan:
    """The plan with the monitors given by ``--monitor`` added to its own."""
    from horde.plan.monitors import MONITOR_FLAG_HINT, monitor_from_flag

    added = []
    names = {existing.name for existing in plan.monitors}
    for flag in flags:
        try:
            monitor = monitor_from_flag(flag)
        except ValueError as error:
            raise InvalidInput(f"--monitor: {error}", hint=MONITOR_FLAG_HINT) from None
        if monitor.name in names:
            raise InvalidInput(
                f"--monitor: a monitor is already named '{monitor.name}'", hint="give each monitor its own name"
            )
        names.add(monitor.name)
        added.append(monitor)
    return plan.model_copy(update={"monitors": [*plan.monitors, *added]}) if added else plan


def _render_pushed(reports: list[OutputBlock]) -> None:
    for report in reports:
        if report["failed"]:
            stdout.print(
                f"warning: --out {report['kind']} {report['url']}: {report['failed']} of "
                f"{report['pushed'] + report['failed']} seconds not sent ({report['series_not_sent']} series); "
                f"last error: {report['last_error']}",
                style="yellow",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        else:
            stdout.print(
                f"pushed {report['pushed']} seconds to {report['kind']} {report['url']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def _write_outputs(outcome: Outcome, summary_json: Path | None, junit: Path | None, plan_name: str) -> None:
    from horde.cli.junit import junit_xml

    outputs: list[tuple[Path | None, Callable[[], str], str]] = [
        (summary_json, lambda: json.dumps(outcome.summary, indent=2) + "\n", "--summary-json"),
        (
            junit,
            lambda: junit_xml(outcome.verdicts, outcome.firing, run_id=outcome.run_id, plan_name=plan_name),
            "--junit",
        ),
    ]
    for path, text, what in outputs:
        if path is not None:
            _write_output(
                path, text(), what, hint=f"the run is stored: `horde show {outcome.run_id} --json` prints the summary"
            )


def _write_output(path: Path, text: str, flag: str, *, hint: str) -> None:
    """Writes a file a flag asked for; a path that cannot be written is bad input, after the fact."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as error:
        raise InvalidInput(f"cannot write {flag} {path}: {error.strerror or error}", hint=hint) from error


def sight(
    ctx: typer.Context,
    plan_path: Annotated[
        Optional[Path],
        typer.Argument(metavar="PLAN", help="plan file (.yaml, .json, .py) or a folder holding plan.yaml"),
    ] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="one URL instead of a plan file")] = None,
    duration: Annotated[str, typer.Option("--duration", help="how long the single VU runs")] = "30s",
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="override target.base_url")] = None,
    param: Annotated[
        Optional[list[str]],
        typer.Option("--param", "-p", metavar="NAME=VALUE", help="set a plan parameter (repeatable)"),
    ] = None,
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the sighting as JSON")] = False,
) -> int:
    """Sighting shot: one VU per scenario for a short time; each step's median and p95, the rate
    one VU gets, and a suggested find-max ramp."""
    from horde.cli.console import render_sight
    from horde.control.conductor import conduct, cpu_limit_percent
    from horde.control.sight import sight_block, sight_plan
    from horde.plan.overrides import apply_overrides
    from horde.sinks.live import LiveView
    from horde.store import Store

    duration_s = parse_duration(duration, flag="--duration")
    if duration_s < 1:
        raise InvalidInput(
            f"--duration must be at least 1 s (got {duration})", hint="30s is usual; the payment team's was 1m"
        )
    plan, loaded = _load(plan_path, url, "GET", [], None, parse_params(param or []), {"--duration": duration}, ctx.args)
    plan = apply_overrides(plan, base_url=base_url)
    shot = sight_plan(plan, duration_s)
    with Store.open(store_url) as store:
        store.refuse_read_only("record a sighting shot")
        with LiveView(
            stdout if not as_json else Console(stderr=True),
            title=f"horde sight · {plan.name}",
            planned_duration_s=duration_s,
            cpu_limit_percent=cpu_limit_percent(None),
        ) as view:
            label = str(plan_path) if plan_path is not None else f"--url {url}"
            outcome = conduct(
                shot,
                store,
                parameters={"sight_duration_s": duration_s},
                tags={"kind": "sight"},
                sink=view,
                annotate=lambda summary: {"sight": sight_block(plan, summary, label, quick=url is not None)},
            )
    report = outcome.summary["sight"]
    if as_json:
        print(json.dumps({"run_id": outcome.run_id, **report}, indent=2))
    else:
        render_sight(stdout, report)
    return outcome.exit_code


def scale(
    ctx: typer.Context,
    plan_path: Annotated[
        Optional[Path],
        typer.Argument(metavar="PLAN", help="plan file (.yaml, .json, .py) or a folder holding plan.yaml"),
    ] = None,
    url: Annotated[
        Optional[str],
        typer.Option("--url", help="one URL instead of a plan file (its path is requested from each instance)"),
    ] = None,
    instance: Annotated[
        Optional[list[str]],
        typer.Option("--instance", help="base URL of one instance of the target (repeatable, in order)"),
    ] = None,
    instances: Annotated[
        Optional[int], typer.Option("--instances", help="start this many built-in targets instead")
    ] = None,
    target_workers: Annotated[
        Optional[int], typer.Option("--target-workers", help="built-in targets: requests each serves at once")
    ] = None,
    target_service_ms: Annotated[
        Optional[float], typer.Option("--target-service-ms", help="built-in targets: service time of each request, ms")
    ] = None,
    target_shared_serial_ms: Annotated[
        Optional[float],
        typer.Option(
            "--target-shared-serial-ms",
            help="built-in targets share a resource each request holds this long, ms (horde target --shared-serial-ms)",
        ),
    ] = None,
    target_crosstalk_ms: Annotated[
        Optional[float],
        typer.Option(
            "--target-crosstalk-ms",
            help="built-in targets: the shared resource's hold grows this much per other active instance, ms",
        ),
    ] = None,
    vus: Annotated[Optional[int], typer.Option("--vus", help="closed model with this many VUs per instance")] = None,
    rate: Annotated[
        Optional[float], typer.Option("--rate", help="open model at this many arrivals/s per instance")
    ] = None,
    max_vus: Annotated[
        Optional[int], typer.Option("--max-vus", help="open model: most VUs busy at once, per instance")
    ] = None,
    duration: Annotated[
        Optional[str], typer.Option("--duration", help="length of each run (without --find-max)")
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            help="runs of each instance count, the counts in turn: the model tells noise from misfit and "
            "forecasts further (3 is a good start)",
        ),
    ] = 1,
    find_max: Annotated[
        bool,
        typer.Option(
            "--find-max",
            help="find each instance count's knee (the ramp scales with the count)",
            rich_help_panel="Steering",
        ),
    ] = False,
    target_response_ms: Annotated[
        Optional[float],
        typer.Option(
            "--target-response-ms",
            help="for each instance count, the highest load whose percentile holds this response time",
            rich_help_panel="Steering",
        ),
    ] = None,
    percentile: Annotated[
        float,
        typer.Option(
            "--percentile",
            help="the latency percentile find-max and target response time judge",
            rich_help_panel="Steering",
        ),
    ] = 95.0,
    start: Annotated[
        Optional[float],
        typer.Option("--start", help="find-max's first level for one instance", rich_help_panel="Steering"),
    ] = None,
    step: Annotated[
        Optional[float], typer.Option("--step", help="find-max's step for one instance", rich_help_panel="Steering")
    ] = None,
    step_duration: Annotated[
        Optional[str],
        typer.Option("--step-duration", help="find-max: how long each step holds", rich_help_panel="Steering"),
    ] = None,
    latency_limit_ms: Annotated[
        Optional[float],
        typer.Option(
            "--latency-limit-ms", help="find-max: saturated once the percentile passes this", rich_help_panel="Steering"
        ),
    ] = None,
    tag: Annotated[
        Optional[list[str]], typer.Option("--tag", help="key=value stored with every run (repeatable)")
    ] = None,
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    summary_json: Annotated[
        Optional[Path], typer.Option("--summary-json", help="write the study as JSON to this file")
    ] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="engine worker threads")] = None,
    param: Annotated[
        Optional[list[str]],
        typer.Option("--param", "-p", metavar="NAME=VALUE", help="set a plan parameter (repeatable)"),
    ] = None,
    peak_rps: Annotated[
        Optional[float],
        typer.Option(
            "--peak-rps",
            help="the peak to serve, req/s: instances needed, from the scalability model fitted to the study",
            rich_help_panel="Forecast",
        ),
    ] = None,
    headroom: Annotated[
        float,
        typer.Option("--headroom", help="percent of each instance kept free at the peak", rich_help_panel="Forecast"),
    ] = 20.0,
    per_user_rate: Annotated[
        Optional[float],
        typer.Option(
            "--per-user-rate",
            help="a users study (--from-study, runs tagged users=N): users supported at this many req/s each",
            rich_help_panel="Forecast",
        ),
    ] = None,
    from_study: Annotated[
        Optional[str],
        typer.Option(
            "--from-study",
            metavar="STUDY_ID",
            help="fit a stored study's runs (tagged scale_study=STUDY_ID) again, without sending load",
            rich_help_panel="Forecast",
        ),
    ] = None,
    report_path: Annotated[
        Optional[Path],
        typer.Option(
            "--report",
            metavar="FILE",
            help="write the study as a self-contained HTML page: the model's curve, its band, the peak",
            rich_help_panel="Forecast",
        ),
    ] = None,
) -> int:
    """Scalability study: the same plan against 1..N instances of a target; throughput per
    instance count, scaling efficiency, and the scalability model's forecast (with --peak-rps:
    instances for that peak). With --from-study, a stored study is fitted again: horde scale's
    (runs tagged instances=K) or a users study (one plan's runs at several user counts, tagged
    users=N; with --per-user-rate: the users supported at that rate each)."""
    from horde.control.capacity import CapacityQuestion
    from horde.control.conductor import conduct, cpu_limit_percent, planned_duration_s
    from horde.cli.target import shared_costs
    from horde.control.scale import builtin_instances, run_study, stored_study
    from horde.plan import Plan
    from horde.plan.control import FindMax
    from horde.plan.overrides import SteerFlags, apply_overrides, apply_steer_flags
    from horde.sinks.live import LiveView
    from horde.report.study_view import HEADROOM_TAG, PEAK_TAG
    from horde.store import Store, new_run_id

    # Checked before any load is sent: a bad --peak-rps or --headroom is known at once.
    CapacityQuestion(peak_rps=peak_rps, headroom_percent=headroom)
    if per_user_rate is not None and not 0 < per_user_rate < float("inf"):
        raise InvalidInput(
            f"--per-user-rate must be a number of requests/s above 0 (got {per_user_rate:g})",
            hint="e.g. --per-user-rate 2.5: each user asks 2.5 requests a second",
        )
    if from_study is not None:
        starters = (("PLAN", plan_path), ("--url", url), ("--instance", instance), ("--instances", instances))
        given = [flag for flag, value in starters if value] + (["--repeats"] if repeats != 1 else [])
        if given:
            raise InvalidInput(
                f"--from-study re-reads a stored study; {', '.join(given)} would start a new one",
                hint=f"horde scale --from-study {from_study} --peak-rps 19500",
            )
        with Store.open(store_url) as store:
            study = stored_study(store, from_study)
        _refuse_other_unit(study, peak_rps=peak_rps, per_user_rate=per_user_rate)
        return _finish_study(study, peak_rps, headroom, summary_json, report_path, per_user_rate)
    if per_user_rate is not None:
        raise InvalidInput(
            "--per-user-rate answers a users study, and horde scale runs an instances study",
            hint="give --peak-rps for instances; for users, tag one plan's runs scale_study=ID and users=N, "
            "then horde scale --from-study ID --per-user-rate R",
        )
    if (instance is None) == (instances is None):
        raise InvalidInput(
            "give the instances: --instance URL (repeatable) or --instances N (built-in targets)",
            hint="e.g. --instances 4 --target-workers 10 --target-service-ms 20",
        )
    if instance is not None and not all(
        knob is None for knob in (target_workers, target_service_ms, target_shared_serial_ms, target_crosstalk_ms)
    ):
        raise InvalidInput("the --target-... options shape built-in targets; they go with --instances")
    if (target_workers is None) != (target_service_ms is None):
        raise InvalidInput("--target-workers and --target-service-ms go together")
    duration_s = parse_duration(duration, flag="--duration") if duration is not None else None
    tags = dict(parse_tag(t) for t in tag or [])
    # With --url only its path and query matter: each run's base URL is that of its instances.
    plan, _ = _load(
        plan_path,
        url,
        "GET",
        [],
        None,
        parse_params(param or []),
        {"--duration": duration, "--step-duration": step_duration},
        ctx.args,
    )
    steered_quick = url is not None and vus is None and (find_max or target_response_ms is not None)
    plan = apply_overrides(plan, vus=vus, rate=rate, max_vus=None if steered_quick else max_vus, duration_s=duration_s)
    plan = apply_steer_flags(
        plan,
        SteerFlags(
            find_max=find_max,
            target_response_ms=target_response_ms,
            duration_s=duration_s if target_response_ms is not None else None,
            percentile=percentile,
            start=start,
            step=step,
            step_duration_s=_seconds(step_duration, "--step-duration"),
            latency_limit_ms=latency_limit_ms,
            max_vus=max_vus if steered_quick else None,
        ),
        quick=url is not None,
        vus_given=vus is not None,
    )
    study_id = new_run_id()
    # The asked peak is kept with the study's runs: the dashboard's view of a run answers it.
    asked = {PEAK_TAG: f"{peak_rps:g}", HEADROOM_TAG: f"{headroom:g}"} if peak_rps is not None else {}

    runs_of: dict[int, int] = {}

    def run_one(instance_plan: Plan, k: int) -> tuple[str, str, Mapping[str, Any]]:
        runs_of[k] = runs_of.get(k, 0) + 1
        which = f" (run {runs_of[k]} of {repeats})" if repeats > 1 else ""
        stdout.print(
            f"— {k} instance(s){which}: {', '.join([instance_plan.target.base_url, *instance_plan.target.instances])}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        with LiveView(
            stdout,
            title=f"horde scale · {plan.name} · {k} instance(s)",
            planned_duration_s=planned_duration_s(instance_plan),
            cpu_limit_percent=cpu_limit_percent(workers),
            open_ended=isinstance(instance_plan.steer, FindMax),
        ) as view:
            outcome = conduct(
                instance_plan,
                store,
                parameters={"instances": k, "workers": workers} if workers else {"instances": k},
                tags={**tags, **asked, "scale_study": study_id, "instances": str(k)},
                workers=workers,
                sink=view,
            )
        return outcome.run_id, outcome.status, outcome.summary

    with Store.open(store_url) as store:
        store.refuse_read_only("record a scaling study")
        if instances is not None:
            shared = shared_costs(
                target_shared_serial_ms,
                target_crosstalk_ms,
                capacity=target_workers is not None,
                flags=("--target-workers", "--target-service-ms"),
            )
            with builtin_instances(
                instances, workers=target_workers, service_ms=target_service_ms, shared=shared
            ) as urls:
                report = run_study(plan, urls, run_one, repeats=repeats)
        else:
            report = run_study(plan, list(instance or []), run_one, repeats=repeats)
    return _finish_study({"study_id": study_id, **report}, peak_rps, headroom, summary_json, report_path)


def _refuse_other_unit(study: dict[str, Any], *, peak_rps: float | None, per_user_rate: float | None) -> None:
    """The question must fit what the study counts: a peak for instances, a per-user rate for users."""
    if study["unit"] == "users" and peak_rps is not None:
        raise InvalidInput(
            f"study {study['study_id']} counts users: --peak-rps asks for instances",
            hint=f"ask the users supported at each user's rate: horde scale --from-study {study['study_id']} "
            "--per-user-rate 2.5",
        )
    if study["unit"] == "instances" and per_user_rate is not None:
        raise InvalidInput(
            f"study {study['study_id']} counts instances (its runs are tagged instances=K): --per-user-rate "
            "answers a users study",
            hint=f"ask the instances for a peak: horde scale --from-study {study['study_id']} --peak-rps 19500",
        )


def _finish_study(
    report: dict[str, Any],
    peak_rps: float | None,
    headroom: float,
    summary_json: Path | None,
    page: Path | None,
    per_user_rate: float | None = None,
) -> int:
    """A study's forecast added, printed and written: the same for a study just run and one
    read back from the store."""
    from horde.cli.console import render_scale
    from horde.control.scale import forecast_block
    from horde.report.study_view import render_study_report

    report["forecast"] = forecast_block(
        report, peak_rps=peak_rps, headroom_percent=headroom, per_user_rate=per_user_rate
    )
    render_scale(stdout, report)
    if summary_json is not None:
        _write_output(
            summary_json,
            json.dumps(report, indent=2) + "\n",
            "--summary-json",
            hint=f"the study's runs are stored, tagged scale_study={report['study_id']}: `horde runs` lists them",
        )
    if page is not None:
        _write_output(
            page,
            render_study_report(report),
            "--report",
            hint=f"`horde scale --from-study {report['study_id']} --report FILE` writes it again",
        )
    interrupted = any(row["status"] == "interrupted" for row in report["rows"])
    return ExitCode.INTERRUPTED if interrupted else ExitCode.OK


def retarget(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="a running run: its id, a unique prefix, or 'last'")],
    vus: Annotated[Optional[int], typer.Option("--vus", help="new VU count of the closed scenarios")] = None,
    rate: Annotated[
        Optional[float], typer.Option("--rate", help="new arrival rate of the open scenarios, per second")
    ] = None,
    scenario: Annotated[
        Optional[list[str]],
        typer.Option("--scenario", help="only this scenario (repeatable); default: all of that model"),
    ] = None,
    ramp: Annotated[str, typer.Option("--ramp", help="reach the new level over this long (0: at once)")] = "0",
    wait: Annotated[str, typer.Option("--wait", help="how long to wait for the run's answer")] = "10s",
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
) -> int:
    """Change the VUs or the rate of a running run (from another terminal, or another machine
    sharing a PostgreSQL store). The level is spread over scenarios by weight, as --vus/--rate."""
    from horde.store import Store

    if (vus is None) == (rate is None):
        raise InvalidInput("give either --vus or --rate", hint="e.g. horde retarget last --vus 200 --ramp 30s")
    if vus is not None and vus < 0 or rate is not None and not rate >= 0:
        raise InvalidInput("--vus and --rate must be 0 or more")
    ramp_s = parse_duration(ramp, flag="--ramp")
    wait_s = parse_duration(wait, flag="--wait")
    request: dict[str, Any] = {"vus": vus} if vus is not None else {"rate_per_s": rate}
    request.update({"ramp_s": ramp_s, **({"scenarios": scenario} if scenario else {})})
    with Store.open(store_url) as store:
        store.refuse_read_only("ask a run to re-target")
        record = store.get_run(run_ref)
        if record.status != "running":
            raise InvalidInput(
                f"run {record.run_id} is not running (it is {record.status})",
                hint="`horde runs` lists runs; only a running run can be re-targeted",
            )
        request_id = store.request_control(record.run_id, request)
        deadline = time.monotonic() + wait_s
        answer = store.control_answer(request_id)
        while answer is None and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = store.control_answer(request_id)
    if answer is None:
        raise RunUnresponsive(
            f"run {record.run_id} did not answer within {wait_s:g} s",
            hint=f"its process (pid {record.pid} on {record.host}) answers once a second while it runs; "
            "the request stays queued until it does",
        )
    stdout.print(f"run {record.run_id}: {answer}", markup=False, highlight=False)
    return ExitCode.OK if answer.startswith("applied") else ExitCode.INVALID_INPUT
