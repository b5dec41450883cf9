"""A plan written in Python: what `horde run tests/plans/plan_module.py` reads."""

from horde.plan import ClosedModel, ClosedStage, HttpStep, Plan, Scenario, Target

plan = Plan(
    version=1,
    name="from-python",
    target=Target(base_url="http://127.0.0.1:8080"),
    scenarios=[
        Scenario(
            name="browse",
            steps=[HttpStep(name="home", method="GET", path="/")],
            workload=ClosedModel(stages=[ClosedStage(duration_s=1, vus=2)]),
        )
    ],
)
