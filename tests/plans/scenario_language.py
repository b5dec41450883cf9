"""Every construct of the scenario language, with the Python builder: the same plan as
scenario_language.yaml beside it (tests/test_scenario.py compares their JSON byte for byte)."""

import horde
from horde import (
    branch,
    check,
    choice,
    closed,
    constant,
    end_iteration,
    exponential,
    extract,
    feeder,
    group,
    http,
    loop,
    open_model,
    parallel,
    param,
    scenario,
    stage,
    think,
    uniform,
    when,
)

player = scenario(
    "player",
    weight=3,
    headers={"authorization": "Bearer {{ token }}"},
    feeders=[feeder("users", "data/users.csv", mode="unique")],
    setup=[
        http.post(
            "login",
            "/game/login",
            json={
                "login": "{{ users.login }}",
                "password": "{{ users.password }}",
                "remember": True,
                "tags": ["a", 1, None],
            },
            extract=[
                extract.json("token", "$.token"),
                extract.header("session", "set-cookie", default="none"),
                extract.status("login_status"),
                extract.regex("motd", "motd=([a-z]+)", pick="random"),
            ],
            checks=[
                check.status(200, 201),
                check.json("$.token"),
                check.json("$.role", equals="player"),
                check.body_contains("token"),
                check.body_matches('"token":\\s*"'),
            ],
            on_check_failure="end_iteration",
        ),
    ],
    steps=[
        choice(
            branch(
                70,
                http.get(
                    "city", "/game/city/{{ params.city_id }}?vu={{ vu }}", think_time=uniform(100, param("think_ms"))
                ),
            ),
            branch(
                25,
                group(
                    "build",
                    http.get(
                        "buildings",
                        "/game/buildings",
                        extract=[
                            extract.json("buildable", "$.buildings[?@.can_build == true].id", pick="all"),
                        ],
                    ),
                    loop(
                        http.post("construct", "/game/buildings/{{ building }}/construct", body="{}"),
                        for_each="buildable",
                        as_="building",
                    ),
                ),
            ),
            branch(5),
        ),
        loop(http.get("resources", "/game/resources"), count=2),
        parallel(
            "dashboard",
            http.get("army", "/game/army"),
            http.get("market", "/game/market", extract=[extract.status("market_status")]),
        ),
        loop(think(exponential(50)), while_="login_status == 200 and iteration < 3", max_iterations=5),
        when(
            "token",
            http.post("collect", "/game/collect", think_time=constant(param("think_ms"))),
            else_=[end_iteration()],
        ),
        think(100),
    ],
    teardown=[http.delete("logout", "/game/session", headers={"x-reason": "teardown"})],
    workload=closed([stage(2, vus=param("vus")), stage(param("duration_s"), vus=param("vus"))], start_vus=0),
)

device = scenario(
    "device",
    feeders=[feeder("devices", "data/devices.jsonl", format="jsonl", mode="random")],
    pacing_s=1,
    steps=[http.put("report", "/devices/{{ devices.device_id }}", body="t={{ now_ms() }}")],
    workload=closed([stage(param("duration_s"), vus=2)]),
)

reader = scenario(
    "reader",
    steps=[http.get("chart", "/charts/1")],
    workload=open_model([stage(param("duration_s"), rate_per_s=5)], max_vus=10, start_rate_per_s=1),
)

# The module-level `plan` is what `horde run` reads (horde.plan builds it).
plan = horde.plan(
    "scenario-language",
    base_url="http://127.0.0.1:8080",
    headers={"accept": "application/json"},
    insecure=param("insecure"),
    parameters={"vus": 4, "duration_s": 10, "think_ms": 250, "city_id": "paris", "insecure": False},
    scenarios=[player, device, reader],
    graceful_stop_s=2,
)
