//! The scenario language end to end against the built-in target's game (`/game/`): setup steps,
//! extracted tokens, JSONPath filters, conditions, template functions, groups, cookies.

mod support;

use horde_target::{TargetConfig, TargetHandle};
use serde_json::json;
use support::{
    assert_scenario_accounting, closed_value, error_kinds, plan_of, run_timed, scenario_plan, step_errors, step_kind,
    step_ok, step_requests, RecordingServer, Reply,
};

fn target() -> TargetHandle {
    TargetHandle::start(TargetConfig::default()).expect("target starts")
}

fn bearer() -> serde_json::Value {
    json!({"Authorization": "Bearer {{ token }}"})
}

/// Register and log in as `p{{ vu }}`, keeping the token.
fn register_and_login() -> serde_json::Value {
    json!([
        {"name": "register", "method": "POST", "path": "/game/register",
         "json": {"login": "p{{ vu }}", "password": "pw"},
         "checks": [{"type": "status", "in": [201]}]},
        {"name": "login", "method": "POST", "path": "/game/login",
         "json": {"login": "p{{ vu }}", "password": "pw"},
         "extract": [{"var": "token", "from": "json", "expression": "$.token"}]},
    ])
}

#[test]
fn a_game_journey_registers_once_per_vu_then_plays() {
    let target = target();
    const VUS: u64 = 3;
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "name": "game",
            "setup": register_and_login(),
            "steps": [
                {"type": "group", "name": "look", "steps": [
                    {"name": "city", "method": "GET", "path": "/game/city", "headers": bearer(),
                     "checks": [{"type": "json", "expression": "$.player_id"}]},
                    {"name": "buildings", "method": "GET", "path": "/game/buildings", "headers": bearer(),
                     "extract": [{"var": "kinds", "from": "json", "pick": "all", "default": [],
                                  "expression": "$.buildings[?@.can_build == true].kind"}]},
                ]},
                {"type": "if", "condition": "kinds", "then": [
                    {"name": "construct", "method": "POST", "path": "/game/construct", "headers": bearer(),
                     "json": {"kind": "{{ random_choice(kinds) }}"},
                     "checks": [{"type": "status", "in": [201, 409]}]},
                ]},
                {"name": "collect", "method": "POST", "path": "/game/collect", "headers": bearer(),
                 "checks": [{"type": "json", "expression": "$.resources.gold"}],
                 "think_time": {"type": "constant", "duration_ms": 20}},
            ],
            "workload": closed_value(VUS, 2.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 2);
    assert_scenario_accounting(&snapshots);
    assert!(error_kinds(&snapshots).is_empty(), "errors: {:?}", error_kinds(&snapshots));
    // Setup ran exactly once per VU.
    assert_eq!(step_requests(&snapshots, "register"), VUS);
    assert_eq!(step_ok(&snapshots, "register"), VUS, "every VU registered its own player");
    assert_eq!(step_requests(&snapshots, "login"), VUS);
    // The loop ran, and built: a new city can afford a few buildings.
    let cities = step_requests(&snapshots, "city");
    assert!(cities >= 3 * VUS, "only {cities} city views");
    for step in ["city", "buildings", "collect"] {
        assert!(step_requests(&snapshots, step) > 0, "no entry for {step}");
        assert_eq!(step_kind(&snapshots, step), "request", "{step}");
    }
    let constructions = step_requests(&snapshots, "construct");
    assert!(constructions > 0, "nothing was built");
    assert!(constructions <= step_requests(&snapshots, "buildings"));
    // The group is recorded under its own name, as a group, once per pass.
    assert_eq!(step_kind(&snapshots, "look"), "group");
    let looks = step_requests(&snapshots, "look");
    assert!(looks >= cities && looks <= cities + VUS, "{looks} passes through the group for {cities} city views");
    assert_eq!(step_errors(&snapshots, "look", "step_failed"), 0);
}

#[test]
fn a_group_pass_with_a_failing_step_counts_step_failed() {
    let target = target();
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "setup": register_and_login(),
            "steps": [
                {"type": "group", "name": "look", "steps": [
                    {"name": "city", "method": "GET", "path": "/game/city", "headers": bearer()},
                    // An unknown game path: 404.
                    {"name": "missing", "method": "GET", "path": "/game/nope", "headers": bearer()},
                ]},
                {"type": "think", "think_time": {"type": "constant", "duration_ms": 10}},
            ],
            "workload": closed_value(1, 1.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let failed = step_errors(&snapshots, "missing", "status_404");
    assert!(failed > 0);
    assert_eq!(step_ok(&snapshots, "city"), step_requests(&snapshots, "city"));
    // Every pass that reached the failing step is a failed pass of the group.
    assert_eq!(step_errors(&snapshots, "look", "step_failed"), failed);
    assert_eq!(step_kind(&snapshots, "look"), "group");
}

#[test]
fn the_session_cookie_from_login_is_sent_back() {
    let target = target();
    const VUS: u64 = 2;
    let plan = scenario_plan(
        &target.base_url(),
        json!({
            "setup": [
                {"name": "register", "method": "POST", "path": "/game/register",
                 "json": {"login": "c{{ vu }}", "password": "pw"}},
                // Before logging in there is no cookie: 401, which this check expects.
                {"name": "city_before_login", "method": "GET", "path": "/game/city",
                 "checks": [{"type": "status", "in": [401]}]},
                {"name": "login", "method": "POST", "path": "/game/login",
                 "json": {"login": "c{{ vu }}", "password": "pw"}},
            ],
            // No Authorization header: only the `session` cookie (Path=/game) can log us in.
            "steps": [
                {"name": "city", "method": "GET", "path": "/game/city",
                 "checks": [{"type": "json", "expression": "$.player_id"}],
                 "think_time": {"type": "constant", "duration_ms": 20}},
            ],
            "workload": closed_value(VUS, 1.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert_eq!(step_ok(&snapshots, "city_before_login"), VUS);
    assert_eq!(step_ok(&snapshots, "login"), VUS);
    let views = step_requests(&snapshots, "city");
    assert!(views >= 10, "only {views} city views");
    assert_eq!(step_ok(&snapshots, "city"), views, "errors: {:?}", error_kinds(&snapshots));
}

#[test]
fn cookies_follow_their_path_and_are_replaced_by_name() {
    let server = RecordingServer::start(|request| match request.path.as_str() {
        "/app/login" => {
            Reply::ok("in").header("Set-Cookie", "sid=first; Path=/app").header("Set-Cookie", "theme=dark; Path=/")
        }
        "/app/relogin" => Reply::ok("again").header("Set-Cookie", "sid=second; Path=/app; HttpOnly"),
        _ => Reply::ok("ok"),
    });
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "setup": [
                {"name": "login", "method": "POST", "path": "/app/login"},
                {"name": "inside", "method": "GET", "path": "/app/page"},
                {"name": "outside", "method": "GET", "path": "/other"},
                {"name": "relogin", "method": "POST", "path": "/app/relogin"},
                {"name": "inside_again", "method": "GET", "path": "/app/again"},
            ],
            "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 50}}],
            "workload": closed_value(1, 0.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let cookie_of = |path: &str| -> Option<String> {
        let seen = server.requests().into_iter().filter(|request| request.path == path).collect::<Vec<_>>();
        assert_eq!(seen.len(), 1, "{path} requested {} times", seen.len());
        seen[0].header("Cookie").map(str::to_owned)
    };
    assert_eq!(cookie_of("/app/login"), None, "no cookie before the first Set-Cookie");
    let inside = cookie_of("/app/page").expect("cookies sent under /app");
    assert!(inside.contains("sid=first") && inside.contains("theme=dark"), "{inside}");
    assert_eq!(cookie_of("/other").as_deref(), Some("theme=dark"), "sid is for /app only");
    let again = cookie_of("/app/again").expect("cookies sent under /app");
    assert!(
        again.contains("sid=second") && !again.contains("sid=first"),
        "the newer sid replaces the old one: {again}"
    );
}

#[test]
fn cookies_work_under_a_base_url_with_a_path_prefix() {
    // The server sees /api/login and scopes its cookie to /api, as any server behind a prefix does.
    let server = RecordingServer::start(|request| match request.path.as_str() {
        "/api/login" => Reply::ok("in").header("Set-Cookie", "sid=abc; Path=/api"),
        _ => {
            let logged_in = request.header("Cookie").is_some_and(|cookie| cookie.contains("sid=abc"));
            Reply::new(if logged_in { 200 } else { 401 }, "")
        }
    });
    let plan = scenario_plan(
        &format!("{}/api", server.base_url()),
        json!({
            "setup": [{"name": "login", "method": "POST", "path": "/login"}],
            "steps": [{"name": "me", "method": "GET", "path": "/me",
                       "think_time": {"type": "constant", "duration_ms": 50}}],
            "workload": closed_value(1, 1.0),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    assert!(step_requests(&snapshots, "me") > 0);
    assert_eq!(step_errors(&snapshots, "me", "status_401"), 0, "the cookie set for /api was not sent to /api/me");
}

#[test]
fn a_cookie_without_path_defaults_to_the_request_directory() {
    let server = RecordingServer::start(|request| match request.path.as_str() {
        "/app/login" => Reply::ok("in").header("Set-Cookie", "sid=abc"),
        _ => Reply::ok("ok"),
    });
    let plan = scenario_plan(
        &server.base_url(),
        json!({
            "setup": [
                // Nothing templated: the request goes out as bytes encoded at start.
                {"name": "login", "method": "POST", "path": "/app/login"},
                {"name": "inside", "method": "GET", "path": "/app/page"},
                {"name": "outside", "method": "GET", "path": "/elsewhere"},
            ],
            "steps": [{"type": "think", "think_time": {"type": "constant", "duration_ms": 50}}],
            "workload": closed_value(1, 0.5),
        }),
    );
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    let requests = server.requests();
    let cookie =
        |path: &str| requests.iter().find(|request| request.path == path).and_then(|request| request.header("Cookie"));
    assert_eq!(cookie("/app/page"), Some("sid=abc"));
    // RFC 6265 5.1.4: the default path of a cookie set by /app/login is /app.
    assert_eq!(cookie("/elsewhere"), None);
}

#[test]
fn vu_numbers_are_unique_across_scenarios() {
    let target = target();
    let scenario = |name: &str| {
        json!({"name": name, "setup": register_and_login(),
               "steps": [{"name": format!("{name}_city"), "method": "GET", "path": "/game/city", "headers": bearer(),
                          "think_time": {"type": "constant", "duration_ms": 50}}],
               "workload": closed_value(2, 1.0)})
    };
    let mut first = scenario("first");
    let mut second = scenario("second");
    // Step names are unique within a scenario only; setup names may repeat across scenarios.
    first["setup"][0]["name"] = json!("register");
    second["setup"][0]["name"] = json!("register");
    let plan = plan_of(json!({
        "version": 1,
        "target": {"base_url": target.base_url(), "request_timeout_ms": 5000},
        "graceful_stop_s": 2,
        "scenarios": [first, second],
    }));
    let (snapshots, _) = run_timed(&plan, 1);
    assert_scenario_accounting(&snapshots);
    // Four VUs in the run, four distinct `vu` values: four distinct logins, all registered.
    assert_eq!(step_requests(&snapshots, "register"), 4);
    assert_eq!(step_ok(&snapshots, "register"), 4, "errors: {:?}", error_kinds(&snapshots));
}
