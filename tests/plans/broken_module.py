"""A plan module that fails while it is imported."""

SETTINGS = {"rate": 10}

plan = {"version": 1, "rate": SETTINGS["rat"]}
