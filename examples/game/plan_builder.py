"""The game test of plan.yaml beside it, written with Horde's Python builder.

Both give the same plan JSON (tests/e2e/test_examples.py checks it byte for byte); use whichever
reads better to you. Run it like the YAML: `horde run examples/game/plan_builder.py -p players=200`.
"""

import horde
from horde import branch, check, choice, closed, exponential, extract, group, http, param, scenario, stage, think, when

# Every action after login carries the session token taken from the login response.
auth = {"authorization": "Bearer {{ token }}"}

player = scenario(
    "player",
    # Once per player: create the account (409: it exists from an earlier run), then log in.
    setup=[
        http.post(
            "register",
            "/game/register",
            json={"login": "player-{{ vu }}", "password": "secret-{{ vu }}"},
            checks=[check.status(201, 409)],
        ),
        http.post(
            "login",
            "/game/login",
            json={"login": "player-{{ vu }}", "password": "secret-{{ vu }}"},
            extract=[extract.json("token", "$.token")],
            checks=[check.status(200)],
        ),
    ],
    # One weighted action per iteration, then a pause like a person reading the screen.
    steps=[
        choice(
            branch(40, http.get("city", "/game/city", headers=auth, checks=[check.json("$.resources.gold")])),
            branch(
                25,
                group(
                    "build",
                    http.get(
                        "buildings",
                        "/game/buildings",
                        headers=auth,
                        extract=[
                            extract.json("buildable", "$.buildings[?@.can_build == true].kind", pick="all", default=[]),
                        ],
                    ),
                    when(
                        "buildable",
                        http.post(
                            "construct",
                            "/game/construct",
                            headers=auth,
                            json={"kind": "{{ random_choice(buildable) }}"},
                            checks=[check.status(201, 409)],
                        ),
                    ),
                ),
            ),
            branch(25, http.post("collect", "/game/collect", headers=auth)),
            branch(10, http.get("resources", "/game/resources", headers=auth)),
        ),
        think(exponential(200)),
    ],
    workload=closed(
        [stage(param("ramp_up"), vus=param("players")), stage(param("duration"), vus=param("players"))], start_vus=0
    ),
)

# A device writes every second whatever the response time took.
device = scenario(
    "device",
    pacing_s=1,
    steps=[
        http.post(
            "telemetry",
            "/delay/2",
            json={"device": "{{ vu }}", "sent_at_ms": "{{ now_ms() }}", "reading": "{{ random_int(0, 100) }}"},
        ),
    ],
    workload=closed(
        [stage(param("ramp_up"), vus=param("devices")), stage(param("duration"), vus=param("devices"))],
        start_vus=param("devices"),
    ),
)

plan = horde.plan(
    "game",
    base_url="http://127.0.0.1:8080",
    headers={"accept": "application/json"},
    parameters={"players": 50, "ramp_up": 5, "duration": 10, "devices": 10},
    scenarios=[player, device],
)
