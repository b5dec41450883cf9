"""Every module's doctests, collected rather than listed: a module that gains examples in its
docstrings is tested without a test naming it. (Alembic's migration environment runs only
under alembic, so it is the one module not imported.)"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import horde

#: Modules that only run inside another program.
NOT_IMPORTED = {"horde.store.migrations.env"}

MODULES = sorted(info.name for info in pkgutil.walk_packages(horde.__path__, "horde.") if info.name not in NOT_IMPORTED)


def test_every_module_is_walked() -> None:
    # The walk reaches the packages' depths (a module in a sub-package included).
    assert {"horde.control.target_response_time", "horde.plan.model", "horde.sinks.live"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
