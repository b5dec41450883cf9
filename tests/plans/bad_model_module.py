"""A plan module whose step is invalid: pydantic raises while the module runs."""

from horde.plan import HttpStep

step = HttpStep(name="home", method="get", path="/")
