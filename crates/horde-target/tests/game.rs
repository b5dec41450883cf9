//! The game under `/game/`: a player's whole journey, sessions, errors, and many players at
//! once, over real sockets.

mod common;

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{start_default, Client, Response};
use horde_target::{Capacity, ServiceTimes, TargetConfig, TargetHandle};
use serde_json::{json, Value};

const MS: Duration = Duration::from_millis(1);

const KINDS: [&str; 6] = ["farm", "sawmill", "quarry", "barracks", "market", "wall"];

/// Checks the framing every game response promises and returns its JSON.
fn parse(response: &Response) -> Value {
    assert_eq!(response.header("content-type"), Some("application/json"), "{response:?}");
    assert_eq!(response.content_length(), Some(response.body.len()));
    serde_json::from_slice(&response.body).unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", response.text()))
}

fn send(client: &mut Client, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    client.request_with(method, path, headers, body.as_bytes()).expect("request")
}

fn credentials(login: &str) -> String {
    json!({"login": login, "password": format!("{login}-pw")}).to_string()
}

/// Registers and logs in `login`; returns its player id and token.
fn sign_up(client: &mut Client, login: &str) -> (u64, String) {
    let response = send(client, "POST", "/game/register", &[], &credentials(login));
    assert_eq!(response.status, 201, "{}", response.text());
    let player_id = parse(&response)["player_id"].as_u64().expect("player_id");
    let response = send(client, "POST", "/game/login", &[], &credentials(login));
    assert_eq!(response.status, 200, "{}", response.text());
    let body = parse(&response);
    assert_eq!(body["player_id"], player_id);
    let token = body["token"].as_str().expect("token").to_string();
    (player_id, token)
}

fn assert_error(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    let body = parse(response);
    let message = body["error"].as_str().expect("an error message").to_string();
    assert!(!message.is_empty() && !message.contains('\n'), "{message:?}");
    assert!(!response.text().contains('\n'), "{}", response.text());
    message
}

fn resources(value: &Value) -> [u64; 3] {
    ["gold", "wood", "stone"].map(|name| value[name].as_u64().expect(name))
}

fn unix_now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Every catalogue entry's `can_build` must be what the resources say (a city here is far from
/// the 50-building limit).
fn assert_catalogue_consistent(catalogue: &Value, stock: [u64; 3]) {
    let entries = catalogue["buildings"].as_array().expect("buildings");
    let kinds: Vec<&str> = entries.iter().map(|entry| entry["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, KINDS);
    for entry in entries {
        let cost = resources(&entry["cost"]);
        let affordable = (0..3).all(|index| stock[index] >= cost[index]);
        assert_eq!(entry["can_build"], affordable, "{entry} with {stock:?}");
    }
}

#[test]
fn a_player_registers_logs_in_builds_and_collects() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());

    let response = send(&mut client, "POST", "/game/register", &[], &credentials("ann"));
    assert_eq!(response.status, 201);
    assert_eq!(parse(&response), json!({"player_id": 1}));

    let response = send(&mut client, "POST", "/game/login", &[], &credentials("ann"));
    assert_eq!(response.status, 200);
    let body = parse(&response);
    assert_eq!(body["player_id"], 1);
    let token = body["token"].as_str().unwrap().to_string();
    assert_eq!(response.header("set-cookie"), Some(format!("session={token}; Path=/game").as_str()));
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    let cookie = format!("session={token}");

    // The same city through either credential.
    let by_header = parse(&send(&mut client, "GET", "/game/city", &auth, ""));
    let by_cookie = parse(&send(&mut client, "GET", "/game/city", &[("Cookie", &cookie)], ""));
    assert_eq!(by_header, by_cookie);
    assert_eq!(
        by_header,
        json!({"player_id": 1, "resources": {"gold": 300, "wood": 300, "stone": 300}, "buildings": []})
    );

    let catalogue = parse(&send(&mut client, "GET", "/game/buildings", &auth, ""));
    assert_catalogue_consistent(&catalogue, [300, 300, 300]);

    // Farms cost 100 wood of the 300: three are built, the fourth is refused, and nothing is
    // spent on it.
    let mut built = Vec::new();
    let refusal = loop {
        assert!(built.len() < 10, "construction never refused");
        let before = unix_now_ms();
        let response = send(&mut client, "POST", "/game/construct", &auth, r#"{"kind": "farm"}"#);
        if response.status != 201 {
            break response;
        }
        let body = parse(&response);
        let ready_at = body["ready_at_ms"].as_u64().unwrap();
        assert!(
            ready_at >= before + 1_000 && ready_at <= unix_now_ms() + 3_000,
            "ready_at_ms {ready_at} for a 2 s build started at {before}"
        );
        built.push(body["building_id"].as_u64().unwrap());
    };
    assert_eq!(assert_error(&refusal, 409), "not enough resources");
    assert_eq!(built, [1, 2, 3]);

    let city = parse(&send(&mut client, "GET", "/game/city", &auth, ""));
    let stock = resources(&city["resources"]);
    assert_eq!(stock, [150, 0, 150]);
    let buildings = city["buildings"].as_array().unwrap();
    assert_eq!(buildings.len(), 3);
    for (index, building) in buildings.iter().enumerate() {
        assert_eq!(building["id"], index as u64 + 1);
        assert_eq!(building["kind"], "farm");
        assert_eq!(building["level"], 1);
        assert!(building["ready"].is_boolean(), "{building}");
    }
    let catalogue = parse(&send(&mut client, "GET", "/game/buildings", &auth, ""));
    assert_catalogue_consistent(&catalogue, stock);
    assert_eq!(catalogue["buildings"][0]["can_build"], false);

    // The city yields 10 of each per second: 300 ms give about 3.
    thread::sleep(300 * MS);
    let response = send(&mut client, "POST", "/game/collect", &auth, "");
    assert_eq!(response.status, 200);
    let body = parse(&response);
    let collected = resources(&body["collected"]);
    let after = resources(&body["resources"]);
    for index in 0..3 {
        assert!(collected[index] >= 2, "collected {collected:?}");
        assert_eq!(after[index], stock[index] + collected[index]);
    }

    // Production is added only by collect, so the stock reads the same until the next one.
    let response = send(&mut client, "GET", "/game/resources", &auth, "");
    assert_eq!(response.status, 200);
    let body = parse(&response);
    assert_eq!(body, json!({"gold": after[0], "wood": after[1], "stone": after[2]}));
}

#[test]
fn endpoints_without_a_valid_session_are_401() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let (_, token) = sign_up(&mut client, "ann");
    let (_, check) = token.rsplit_once('.').unwrap();
    let altered = format!("2.1.{check}");
    let wrong_bearer = format!("Bearer {altered}");
    let wrong_cookie = format!("session={altered}");
    let basic = format!("Basic {token}");
    let endpoints = [
        ("GET", "/game/city"),
        ("GET", "/game/buildings"),
        ("GET", "/game/resources"),
        ("POST", "/game/construct"),
        ("POST", "/game/collect"),
    ];
    let credentials: [&[(&str, &str)]; 5] = [
        &[],
        &[("Authorization", "Bearer nonsense")],
        &[("Authorization", &wrong_bearer)],
        &[("Authorization", &basic)],
        &[("Cookie", &wrong_cookie)],
    ];
    for (method, path) in endpoints {
        for headers in credentials {
            let response = send(&mut client, method, path, headers, r#"{"kind": "farm"}"#);
            assert_error(&response, 401);
            assert_eq!(response.header("www-authenticate"), Some("Bearer"));
        }
    }
    // Nothing was built by the refused requests.
    let bearer = format!("Bearer {token}");
    let city = parse(&send(&mut client, "GET", "/game/city", &[("Authorization", &bearer)], ""));
    assert_eq!(city["buildings"], json!([]));

    for body in [
        json!({"login": "ann", "password": "wrong"}),
        json!({"login": "nobody", "password": "ann-pw"}),
        json!({"login": "ANN", "password": "ann-pw"}),
    ] {
        let response = send(&mut client, "POST", "/game/login", &[], &body.to_string());
        assert_eq!(assert_error(&response, 401), "bad login or password");
        assert_eq!(response.header("set-cookie"), None);
    }
}

#[test]
fn a_taken_login_is_409_and_every_login_gets_its_own_session() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    let (player_id, first) = sign_up(&mut client, "ann");
    let response = send(&mut client, "POST", "/game/register", &[], &credentials("ann"));
    assert_eq!(assert_error(&response, 409), "login taken");
    let response = send(&mut client, "POST", "/game/login", &[], &credentials("ann"));
    let second = parse(&response)["token"].as_str().unwrap().to_string();
    assert_ne!(first, second);
    for token in [first, second] {
        let bearer = format!("Bearer {token}");
        let city = parse(&send(&mut client, "GET", "/game/city", &[("Authorization", &bearer)], ""));
        assert_eq!(city["player_id"], player_id);
    }
}

#[test]
fn malformed_bodies_are_400_with_a_reason() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for body in [
        "",
        "not json",
        "{}",
        r#"{"login": "ann"}"#,
        r#"{"password": "pw"}"#,
        r#"{"login": 5, "password": "pw"}"#,
        r#"{"login": "", "password": "pw"}"#,
        r#"["ann", "pw"]"#,
    ] {
        for path in ["/game/register", "/game/login"] {
            let response = send(&mut client, "POST", path, &[], body);
            if path == "/game/login" && body.contains(r#""login": """#) {
                // Well-formed, just no such account.
                assert_error(&response, 401);
            } else {
                assert_error(&response, 400);
            }
        }
    }
    let long = "x".repeat(129);
    let response = send(&mut client, "POST", "/game/register", &[], &credentials(&long));
    assert_error(&response, 400);

    let (_, token) = sign_up(&mut client, "ann");
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    for body in ["", "{", r#"{"kind": "castle"}"#, r#"{"kind": 1}"#, r#"{"type": "farm"}"#] {
        let response = send(&mut client, "POST", "/game/construct", &auth, body);
        assert_error(&response, 400);
    }
    // Escaped strings are read like plain ones.
    let response = send(&mut client, "POST", "/game/construct", &auth, r#"{"kind": "f\u0061rm"}"#);
    assert_eq!(response.status, 201, "{}", response.text());
}

#[test]
fn unknown_paths_are_404_wrong_methods_405_and_huge_bodies_413() {
    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    for path in ["/game", "/game/", "/game/nope", "/game/city/", "/game/City"] {
        assert_error(&send(&mut client, "GET", path, &[], ""), 404);
    }
    for (method, path, allow) in [
        ("GET", "/game/register", "POST"),
        ("PUT", "/game/login", "POST"),
        ("GET", "/game/construct", "POST"),
        ("GET", "/game/collect", "POST"),
        ("POST", "/game/city", "GET, HEAD"),
        ("DELETE", "/game/buildings", "GET, HEAD"),
        ("POST", "/game/resources", "GET, HEAD"),
    ] {
        let response = send(&mut client, method, path, &[], "");
        assert_error(&response, 405);
        assert_eq!(response.header("allow"), Some(allow), "{method} {path}");
    }
    let huge = format!(r#"{{"login": "{}", "password": ""}}"#, "x".repeat(20_000));
    assert_error(&send(&mut client, "POST", "/game/register", &[], &huge), 413);
    // The body was read to its end, so the connection is still in step.
    assert_eq!(send(&mut client, "POST", "/game/register", &[], &credentials("ann")).status, 201);
    // HEAD of a read endpoint: its headers, no body.
    let response = send(&mut client, "POST", "/game/login", &[], &credentials("ann"));
    let token = parse(&response)["token"].as_str().unwrap().to_string();
    let bearer = format!("Bearer {token}");
    let response = send(&mut client, "HEAD", "/game/resources", &[("Authorization", &bearer)], "");
    assert_eq!(response.status, 200);
    assert!(response.content_length().unwrap() > 0);
    assert_eq!(client.get("/").status, 200);
}

#[test]
fn many_players_register_and_log_in_at_once() {
    const THREADS: usize = 16;
    const PLAYERS_PER_THREAD: usize = 200;
    let target = TargetHandle::start(TargetConfig { threads: 4, ..TargetConfig::default() }).expect("target starts");
    let address = target.local_addr();
    let workers: Vec<_> = (0..THREADS)
        .map(|thread_index| {
            thread::spawn(move || {
                let mut client = Client::connect(address);
                (0..PLAYERS_PER_THREAD)
                    .map(|index| {
                        let (player_id, token) = sign_up(&mut client, &format!("player-{thread_index}-{index}"));
                        assert!(token.starts_with(&format!("{player_id:x}.")), "{token}");
                        player_id
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let ids: Vec<u64> = workers.into_iter().flat_map(|worker| worker.join().expect("worker")).collect();
    let distinct: HashSet<u64> = ids.iter().copied().collect();
    let total = (THREADS * PLAYERS_PER_THREAD) as u64;
    assert_eq!(distinct.len() as u64, total);
    assert_eq!(distinct, (1..=total).collect());
}

#[test]
fn every_target_has_its_own_world_and_the_same_answers() {
    let tokens: Vec<(u64, String)> = (0..2)
        .map(|_| {
            let target = start_default();
            let mut client = Client::connect(target.local_addr());
            sign_up(&mut client, "ann")
        })
        .collect();
    assert_eq!(tokens[0], tokens[1]);
    assert_eq!(tokens[0].0, 1);
}

#[test]
fn game_requests_wait_for_stalls_and_capacity() {
    let target = TargetHandle::start(TargetConfig {
        capacity: Some(Capacity { workers: 1, service_ms: 50.0, service_times: ServiceTimes::Fixed }),
        ..TargetConfig::default()
    })
    .expect("target starts");
    let mut client = Client::connect(target.local_addr());
    let started = Instant::now();
    let response = send(&mut client, "POST", "/game/register", &[], &credentials("ann"));
    let elapsed = started.elapsed();
    assert_eq!(response.status, 201);
    assert!(elapsed >= 45 * MS, "took {elapsed:?} with a 50 ms service");

    let target = start_default();
    let mut client = Client::connect(target.local_addr());
    assert_eq!(client.get("/stall/200").status, 200);
    let started = Instant::now();
    let response = send(&mut client, "POST", "/game/register", &[], &credentials("ann"));
    let elapsed = started.elapsed();
    assert_eq!(response.status, 201);
    assert!(elapsed >= 150 * MS, "took {elapsed:?} during a 200 ms stall");
}
