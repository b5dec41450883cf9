"""The sinks: consumers of a run's snapshots besides the store, fed by the conductor each second
and never blocking the engine. :mod:`~horde.sinks.live` is the terminal's live view,
:mod:`~horde.sinks.prometheus` the exporter Prometheus scrapes, :mod:`~horde.sinks.push` the
outputs that push to Prometheus remote write and OpenTelemetry (``--out``)."""

from horde.sinks.live import LiveView
from horde.sinks.prometheus import PrometheusEndpointUnavailable, PrometheusExporter

__all__ = ["LiveView", "PrometheusEndpointUnavailable", "PrometheusExporter"]
