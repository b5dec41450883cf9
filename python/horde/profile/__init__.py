"""The production profile: access logs read into what production does, and the plan that
reproduces it (``horde profile``).

Logs are read streaming (:mod:`~horde.profile.logs`: nginx/Apache combined, JSON lines, gzip),
requests grouped into endpoints (:mod:`~horde.profile.endpoints`: method and path template),
added up per endpoint, per minute and per session (:mod:`~horde.profile.profile`,
:mod:`~horde.profile.sessions`, with :mod:`~horde.profile.histogram` for bounded-memory
percentiles), and written out as a plan (:mod:`~horde.profile.plan_writer`) and an HTML page
(:mod:`~horde.profile.page`). Secrets and personal data in the logs stay there
(:mod:`horde.plan.redaction` decides what is one).

This layer sits above the report (whose page machinery it reuses) and below the CLI; nothing
below it imports it.
"""

from typing import TYPE_CHECKING, Any

from horde.profile.endpoints import Shape, Slot, Templater, classify
from horde.profile.logs import FORMATS, LogRecord, ReadCounts, SessionKey
from horde.profile.plan_writer import PlanOptions, WrittenPlan, write_plan
from horde.profile.profile import Profile, ProfileOptions, build_profile

if TYPE_CHECKING:
    from horde.profile.page import render_page

__all__ = [
    "FORMATS",
    "LogRecord",
    "PlanOptions",
    "Profile",
    "ProfileOptions",
    "ReadCounts",
    "SessionKey",
    "Shape",
    "Slot",
    "Templater",
    "WrittenPlan",
    "render_page",
    "build_profile",
    "classify",
    "write_plan",
]


def __getattr__(name: str) -> Any:
    # The page brings the report's machinery (jinja2, the results and the store under it): it
    # is loaded when asked for, so that `horde --help` and `horde validate`, which register the
    # profile command, stay light.
    if name == "render_page":
        from horde.profile.page import render_page

        return render_page
    raise AttributeError(f"module 'horde.profile' has no attribute {name!r}")
