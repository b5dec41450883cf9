"""What every report page shares: the templates, inlined plotly.js, exact number formatting.

A report is one HTML file that works from disk with no network: plotly.js's basic bundle
(vendored in ``horde/report/vendor/``, see its README) and the figures' JSON are written into the
page gzip-compressed and base64-encoded (:func:`packed`: the 1.19 MB script takes 527 KB), and
unpacked by the browser's own ``DecompressionStream``, so that a report stays under 1 MB.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import pkgutil
from functools import lru_cache
from typing import Any, Final

import jinja2
from markupsafe import Markup

from horde.errors import HordeError


class ReportUnavailable(HordeError):
    """The report cannot be produced on this installation (its vendored plotly.js is missing)."""


#: plotly.js's basic bundle, vendored beside this module (``vendor/README.md`` says which and why).
PLOTLY_JS: Final = "vendor/plotly-basic.min.js"


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js's basic bundle as shipped in Horde (read once per process): what the dashboard
    serves as ``/static/plotly-basic.min.js``."""
    data = pkgutil.get_data("horde.report", PLOTLY_JS)
    if data is None:
        raise ReportUnavailable(
            f"horde.report has no {PLOTLY_JS}", hint="reinstall Horde (pip install --force-reinstall horde)"
        )
    return data.decode("utf-8")


@lru_cache(maxsize=1)
def plotly_js_gzip() -> bytes:
    """The bundle gzip-compressed, for the dashboard's ``Content-Encoding: gzip`` answer."""
    return _gzip(plotly_js().encode("utf-8"))


@lru_cache(maxsize=1)
def plotly_js_packed() -> str:
    """The bundle as a page carries it: see :func:`packed` (1.19 MB as a plain script, 527 KB so;
    it unpacks in the browser in milliseconds)."""
    return base64.b64encode(plotly_js_gzip()).decode("ascii")


def _gzip(data: bytes) -> bytes:
    # Level 9, no timestamp: the same page for the same run, whenever it is made.
    return gzip.compress(data, compresslevel=9, mtime=0)


def packed(text: str) -> Markup:
    """``text`` gzip-compressed then base64-encoded: how a report carries its large parts (the
    chart code, the figures' JSON; a 30-minute run's figures are about 0.5 MB of JSON, a fifth
    of that packed), unpacked by the page's ``HordeUnpack`` with the browser's own
    ``DecompressionStream``. Base64 holds no "<", so it is safe inside <script>."""
    return Markup(base64.b64encode(_gzip(text.encode("utf-8"))).decode("ascii"))


def packed_json(value: Any) -> Markup:
    """``value`` as compact JSON, packed (:func:`packed`)."""
    return packed(json.dumps(value, separators=(",", ":")))


@lru_cache(maxsize=1)
def linked_axes_js() -> str:
    """The script that zooms the charts over the run's time axis together (``linked_axes.js``,
    shipped in this package; the dashboard serves the same file)."""
    data = pkgutil.get_data("horde.report", "linked_axes.js")
    if data is None:
        raise ReportUnavailable("horde.report has no linked_axes.js", hint="reinstall Horde")
    return data.decode("utf-8").replace("</script", "<\\/script")


def script_json(value: Any) -> Markup:
    """``value`` as JSON that is safe inside a <script> element."""
    return Markup(json.dumps(value, separators=(",", ":")).replace("</", "<\\/"))


def exact(value: Any) -> str:
    """A number written so that it reads back to exactly the value (no rounding, no
    separators): the report's tables carry the summary's numbers to the digit.

    >>> exact(20.095), exact(1234), exact(None), exact(True)
    ('20.095', '1234', '', 'yes')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value == int(value) else repr(value)
    return str(value)


def signed_percent(value: float | None) -> str:
    """A relative change as a signed percentage.

    >>> signed_percent(0.5), signed_percent(-0.0123), signed_percent(None)
    ('+50.0 %', '-1.2 %', 'n/a')
    """
    return "n/a" if value is None else f"{value * 100:+.1f} %"


def plain(value: Any) -> str:
    """Any value of a summary section as text: numbers exactly, containers as JSON."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=False)
    return exact(value)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("horde.report", "templates"),
        # Step, scenario and plan names and tags are the user's text: always escaped.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["exact"] = exact
    env.filters["signed_percent"] = signed_percent
    env.filters["plain"] = plain
    env.filters["script_json"] = script_json
    env.filters["packed_json"] = packed_json
    return env


def render(template: str, **context: Any) -> str:
    return (
        environment()
        .get_template(template)
        .render(plotly_js_packed=Markup(plotly_js_packed()), linked_axes_js=Markup(linked_axes_js()), **context)
    )
