"""A run's monitors as the report and the dashboard show them: each source's samples and gaps,
its headline figures (mean, peak, last), the warnings given at its start, and the diagnosis
sentences; their charts are :func:`horde.report.charts.monitor_charts`.

A finished run shows its summary's ``monitors`` block as stored (what ``horde show`` prints). A
run still going has none yet: :class:`MonitorsWatch` builds the same from its samples as they
come, feeding each to the diagnosis once, so a long run costs no more each second than a short
one (the figures' means are read off the charted series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from horde.monitors import Diagnosis
from horde.monitors.diagnosis import plan_monitors
from horde.monitors.summary import SHARES_OF, share_over_run
from horde.report.charts import charted_metrics
from horde.report.series import MonitorSeries, monitor_series
from horde.store import MonitorSample


def stored_findings(
    plan: Mapping[str, Any], summary: Mapping[str, Any], samples: Mapping[str, list[MonitorSample]]
) -> list[dict[str, Any]]:
    """The diagnosis of a stored run: its summary's, or (a run that stored none) its samples
    judged again by its plan's rules."""
    block = summary.get("monitors")
    if isinstance(block, Mapping) and isinstance(block.get("diagnosis"), list):
        return list(block["diagnosis"])
    return [finding.to_json() for finding in Diagnosis(plan_monitors(plan)).observe_all(dict(samples))]


def monitors_view(
    series: Mapping[str, MonitorSeries], findings: Sequence[Mapping[str, Any]], stored: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """What the pages print of the monitors: ``sources`` (a row each: monitor, type, samples,
    gaps, first gap), ``figures`` (a row per headline figure: monitor, figure, mean, max, last),
    ``diagnosis`` (the findings, in order of second) and ``warnings``. ``stored`` is the
    summary's block when the run stored one; else the rows come from ``series``. None when the
    run had no monitors."""
    if not series and not stored:
        return None
    sources: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    if stored:
        for name, source in stored.get("sources", {}).items():
            first_gap = source.get("first_gap") or {}
            sources.append(
                {
                    "monitor": name,
                    "type": source.get("type"),
                    "samples": source.get("samples"),
                    "gaps": source.get("gaps"),
                    "first gap": _gap_text(first_gap.get("second"), first_gap.get("reason")),
                }
            )
            figures += [
                {"monitor": name, "figure": metric, **entry} for metric, entry in source.get("figures", {}).items()
            ]
    else:
        for name, one in series.items():
            first = one.gaps[0] if one.gaps else (None, None)
            sources.append(
                {
                    "monitor": name,
                    "type": one.kind,
                    "samples": len(one.seconds) - len(one.gaps),
                    "gaps": len(one.gaps),
                    "first gap": _gap_text(*first),
                }
            )
            for metric in charted_metrics(one, []):
                values = [value for value in one.values[metric] if value is not None]
                if values:
                    mean = round(sum(values) / len(values), 3)
                    if metric in SHARES_OF:  # the run's share, as the stored summary gives it
                        rates = one.values.get(SHARES_OF[metric], [None] * len(one.seconds))
                        run_share = share_over_run(one.seconds, one.values[metric], rates)
                        mean = mean if run_share is None else run_share
                    figures.append(
                        {
                            "monitor": name,
                            "figure": metric,
                            "mean": mean,
                            "max": round(max(values), 3),
                            "last": round(values[-1], 3),
                        }
                    )
    return {
        "sources": sources,
        "figures": figures,
        "diagnosis": sorted(
            (dict(finding) for finding in findings), key=lambda finding: (finding["second"], finding["monitor"])
        ),
        "warnings": list((stored or {}).get("warnings") or []),
    }


def _gap_text(second: int | None, reason: str | None) -> str:
    return "" if second is None else f"second {second}: {reason}"


class MonitorsWatch:
    """A running run's monitors, extended by :meth:`add` as samples are stored: their series for
    the charts and their diagnosis so far."""

    def __init__(self, plan: Mapping[str, Any]) -> None:
        self.series = monitor_series(dict(plan), {})
        self._diagnosis = Diagnosis(plan_monitors(plan))
        #: The last second taken per monitor (samples of one second come from several threads,
        #: so they are read again a little behind and the ones already taken skipped).
        self.last_seconds: dict[str, int] = {}

    @property
    def watching(self) -> bool:
        return bool(self.series)

    def add(self, samples: Mapping[str, list[MonitorSample]]) -> None:
        for name, found in samples.items():
            into = self.series.setdefault(name, MonitorSeries(name, "prometheus"))
            for sample in found:
                if sample.second <= self.last_seconds.get(name, -1):
                    continue
                self.last_seconds[name] = sample.second
                into.add(sample)
                self._diagnosis.observe(sample)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [finding.to_json() for finding in self._diagnosis.findings]

    def view(self) -> dict[str, Any] | None:
        return monitors_view(self.series, self.findings)
