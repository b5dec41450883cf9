"""What every report page shares: the templates, inlined plotly.js, exact number formatting.

A report is one HTML file that works from disk with no network: plotly.js is read from the
installed ``plotly`` Python package and written into the page, figures are JSON in the page.
"""

from __future__ import annotations

import json
import math
import pkgutil
from functools import lru_cache
from typing import Any

import jinja2
from markupsafe import Markup

from horde.errors import HordeError


class ReportUnavailable(HordeError):
    """The report cannot be produced on this installation (plotly's JavaScript is missing)."""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js as shipped inside the ``plotly`` package (read once per process)."""
    try:
        data = pkgutil.get_data("plotly", "package_data/plotly.min.js")
    except (ImportError, OSError) as error:
        raise ReportUnavailable(
            f"cannot read plotly.js from the plotly package: {error}",
            hint="install Horde's dependencies (pip install 'plotly>=5'); the report inlines plotly.js to work offline",
        ) from error
    if data is None:
        raise ReportUnavailable("the plotly package has no package_data/plotly.min.js",
                                hint="reinstall plotly (pip install --force-reinstall plotly)")
    # Inside <script>, only "</script" could end the element early; plotly.min.js has none,
    # and this keeps a future version from breaking the page silently.
    return data.decode("utf-8").replace("</script", "<\\/script")


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
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(plotly_js=Markup(plotly_js()),
                                                        linked_axes_js=Markup(linked_axes_js()), **context)
