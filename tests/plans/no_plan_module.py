"""A plan module that forgot to define `plan`."""

PLAN = {"version": 1}
