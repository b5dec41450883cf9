//! The game's HTTP side: which path is which endpoint, who is asking (the session), what the
//! body says, and the JSON that goes back.
//!
//! Every answer is JSON (`json.rs`), errors included (`{"error": "..."}`, one line), so that a
//! plan's JSONPath checks and extractions work on any response.

use std::borrow::Cow;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderMap, HeaderValue, ALLOW, AUTHORIZATION, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use hyper::{Method, Response, StatusCode};
use serde::{Deserialize, Serialize};

use super::economy::{Amounts, City, ConstructError, Kind};
use super::json::{
    error, json, to_json, view_catalogue, view_city, with_body, CATALOGUE_BYTES, CITY_BYTES_PER_BUILDING,
};
use super::state::{RegisterError, Token, World};

/// Largest request body a game endpoint reads (16 KiB); the JSON it expects is tiny.
pub(crate) const MAX_BODY: usize = 16 * 1024;

/// Longest login or password, in bytes, so that accounts have a bounded size.
const MAX_CREDENTIAL: usize = 128;

/// Whether a path belongs to the game, which answers every path under `/game/` itself (unknown
/// ones with a JSON 404).
pub(crate) fn is_game_path(path: &str) -> bool {
    path == "/game" || path.starts_with("/game/")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Register,
    Login,
    /// Needs a session.
    Player(Action),
}

/// What a logged-in player may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    City,
    Buildings,
    Construct,
    Collect,
    Resources,
}

impl Endpoint {
    fn from_path(path: &str) -> Option<Endpoint> {
        Some(match path.strip_prefix("/game/")? {
            "register" => Endpoint::Register,
            "login" => Endpoint::Login,
            "city" => Endpoint::Player(Action::City),
            "buildings" => Endpoint::Player(Action::Buildings),
            "construct" => Endpoint::Player(Action::Construct),
            "collect" => Endpoint::Player(Action::Collect),
            "resources" => Endpoint::Player(Action::Resources),
            _ => return None,
        })
    }

    /// Reads are GET (and so HEAD); anything that changes the world is POST.
    fn is_read(self) -> bool {
        matches!(self, Endpoint::Player(Action::City | Action::Buildings | Action::Resources))
    }
}

/// The response to a game request whose stall and capacity waits are over. `body` is `None`
/// when it was longer than [`MAX_BODY`].
pub(crate) fn respond(
    world: &World,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Option<Bytes>,
) -> Response<Full<Bytes>> {
    let Some(endpoint) = Endpoint::from_path(path) else {
        return error(
            StatusCode::NOT_FOUND,
            "not found: game endpoints are /game/register, /game/login, /game/city, \
             /game/buildings, /game/construct, /game/collect, /game/resources",
        );
    };
    let allowed =
        if endpoint.is_read() { method == Method::GET || method == Method::HEAD } else { method == Method::POST };
    if !allowed {
        return method_not_allowed(endpoint);
    }
    let Some(body) = body else {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large (at most 16384 bytes)");
    };
    match endpoint {
        Endpoint::Register => register(world, &body),
        Endpoint::Login => login(world, &body),
        Endpoint::Player(action) => match session(headers) {
            Some(player_id) => play(world, action, player_id, &body),
            None => unauthorized(
                "not logged in: send `Authorization: Bearer TOKEN` or the `session` cookie \
                 from /game/login",
            ),
        },
    }
}

#[derive(Deserialize)]
struct Credentials<'a> {
    // Borrowed unless the JSON string has escapes, so most requests copy nothing.
    #[serde(borrow)]
    login: Cow<'a, str>,
    #[serde(borrow)]
    password: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ConstructOrder<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
}

/// Parses a JSON body, or gives the reason for a 400.
fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Cow<'static, str>> {
    // Derived structs would also take an array of the fields in order, which no client means.
    if body.trim_ascii_start().first() == Some(&b'[') {
        return Err("bad JSON body: expected an object, got an array".into());
    }
    // serde_json's messages are one line, such as "missing field `password` at line 1 column
    // 17".
    serde_json::from_slice(body).map_err(|reason| format!("bad JSON body: {reason}").into())
}

fn register(world: &World, body: &[u8]) -> Response<Full<Bytes>> {
    let credentials: Credentials = match parse(body) {
        Ok(credentials) => credentials,
        Err(reason) => return error(StatusCode::BAD_REQUEST, &reason),
    };
    if credentials.login.is_empty()
        || credentials.login.len() > MAX_CREDENTIAL
        || credentials.password.len() > MAX_CREDENTIAL
    {
        return error(StatusCode::BAD_REQUEST, "login must be 1 to 128 bytes and password at most 128 bytes");
    }
    match world.register(&credentials.login, &credentials.password) {
        Ok(player_id) => {
            #[derive(Serialize)]
            struct Registered {
                player_id: u64,
            }
            json(StatusCode::CREATED, &Registered { player_id }, 32)
        }
        Err(RegisterError::LoginTaken) => error(StatusCode::CONFLICT, "login taken"),
        Err(RegisterError::WorldFull) => error(StatusCode::SERVICE_UNAVAILABLE, "world full"),
    }
}

fn login(world: &World, body: &[u8]) -> Response<Full<Bytes>> {
    let credentials: Credentials = match parse(body) {
        Ok(credentials) => credentials,
        Err(reason) => return error(StatusCode::BAD_REQUEST, &reason),
    };
    let Some(token) = world.login(&credentials.login, &credentials.password) else {
        return unauthorized("bad login or password");
    };
    let token_text = token.to_string();
    let cookie = HeaderValue::try_from(format!("session={token_text}; Path=/game"))
        .expect("a token is hexadecimal digits and dots");
    #[derive(Serialize)]
    struct LoggedIn<'a> {
        token: &'a str,
        player_id: u64,
    }
    let mut response =
        json(StatusCode::OK, &LoggedIn { token: &token_text, player_id: token.player_id }, 32 + token_text.len());
    response.headers_mut().insert(SET_COOKIE, cookie);
    response
}

/// The player a request's session belongs to: the first `Authorization: Bearer` token or
/// `session` cookie that this world could have issued.
fn session(headers: &HeaderMap) -> Option<u64> {
    let bearer = headers.get_all(AUTHORIZATION).iter().filter_map(|value| value.to_str().ok()).filter_map(|value| {
        let (scheme, token) = value.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    let cookies = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == "session").then(|| value.trim_matches('"'))
        });
    bearer.chain(cookies).find_map(Token::parse).map(|token| token.player_id)
}

/// An action on the logged-in player's city.
fn play(world: &World, action: Action, player_id: u64, body: &[u8]) -> Response<Full<Bytes>> {
    let now_ms = world.now_ms();
    let answer = match action {
        Action::Construct => {
            // Parsed before taking the lock, which is then held only for the city's own work.
            let kind = match construction_order(body) {
                Ok(kind) => kind,
                Err(reason) => return error(StatusCode::BAD_REQUEST, &reason),
            };
            world.with_city(player_id, |city| construct(world, city, kind, now_ms))
        }
        Action::Collect => world.with_city(player_id, |city| {
            #[derive(Serialize)]
            struct Collected {
                collected: Amounts,
                resources: Amounts,
            }
            let collected = city.collect(now_ms);
            let resources = city.resources();
            Ok((StatusCode::OK, to_json(&Collected { collected, resources }, 128)))
        }),
        Action::City => world.with_city(player_id, |city| {
            Ok((
                StatusCode::OK,
                to_json(&view_city(player_id, city, now_ms), 128 + CITY_BYTES_PER_BUILDING * city.buildings().len()),
            ))
        }),
        Action::Buildings => {
            world.with_city(player_id, |city| Ok((StatusCode::OK, to_json(&view_catalogue(city), CATALOGUE_BYTES))))
        }
        Action::Resources => world.with_city(player_id, |city| Ok((StatusCode::OK, to_json(&city.resources(), 64)))),
    };
    match answer {
        Some(Ok((status, body))) => with_body(status, body),
        Some(Err(ConstructError::NotEnoughResources)) => error(StatusCode::CONFLICT, "not enough resources"),
        Some(Err(ConstructError::CityFull)) => error(StatusCode::CONFLICT, "city full: at most 50 buildings"),
        // A token of the right form for a player this world does not have.
        None => unauthorized("unknown session"),
    }
}

/// The kind a `/game/construct` body asks for, or the reason for a 400.
fn construction_order(body: &[u8]) -> Result<Kind, Cow<'static, str>> {
    let order: ConstructOrder = parse(body)?;
    Kind::from_name(&order.kind)
        .ok_or(Cow::Borrowed("unknown building kind (expected farm, sawmill, quarry, barracks, market or wall)"))
}

fn construct(world: &World, city: &mut City, kind: Kind, now_ms: u64) -> Result<(StatusCode, Vec<u8>), ConstructError> {
    let building = city.construct(kind, now_ms)?;
    #[derive(Serialize)]
    struct Started {
        building_id: u16,
        ready_at_ms: u64,
    }
    let started = Started { building_id: building.id, ready_at_ms: world.unix_ms(building.ready_at_ms) };
    Ok((StatusCode::CREATED, to_json(&started, 64)))
}

fn method_not_allowed(endpoint: Endpoint) -> Response<Full<Bytes>> {
    let (allow, message) = if endpoint.is_read() {
        ("GET, HEAD", "method not allowed: this endpoint takes GET")
    } else {
        ("POST", "method not allowed: this endpoint takes POST")
    };
    let mut response = error(StatusCode::METHOD_NOT_ALLOWED, message);
    response.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn unauthorized(message: &str) -> Response<Full<Bytes>> {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    // RFC 9110 requires a challenge with every 401.
    response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_endpoints() {
        assert_eq!(Endpoint::from_path("/game/city"), Some(Endpoint::Player(Action::City)));
        assert_eq!(Endpoint::from_path("/game/register"), Some(Endpoint::Register));
        for path in ["/game", "/game/", "/game/city/", "/game/City", "/games/city"] {
            assert_eq!(Endpoint::from_path(path), None, "{path}");
        }
        assert!(is_game_path("/game"));
        assert!(is_game_path("/game/nope"));
        assert!(!is_game_path("/gamer"));
    }

    fn headers(pairs: &[(hyper::header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_str(value).unwrap())).collect()
    }

    #[test]
    fn sessions_come_from_a_bearer_token_or_the_cookie() {
        let world = World::new(10);
        world.register("ann", "pw").unwrap();
        let token = world.login("ann", "pw").unwrap().to_string();
        let bearer = format!("Bearer {token}");
        let cookie = format!("theme=dark; session={token}; lang=en");
        assert_eq!(session(&headers(&[(AUTHORIZATION, &bearer)])), Some(1));
        assert_eq!(session(&headers(&[(AUTHORIZATION, &format!("bearer  {token}"))])), Some(1));
        assert_eq!(session(&headers(&[(COOKIE, &cookie)])), Some(1));
        // A bad header does not hide a good cookie.
        assert_eq!(session(&headers(&[(AUTHORIZATION, "Bearer nope"), (COOKIE, &cookie)])), Some(1));
        assert_eq!(session(&headers(&[])), None);
        assert_eq!(session(&headers(&[(AUTHORIZATION, &format!("Basic {token}"))])), None);
        assert_eq!(session(&headers(&[(COOKIE, &format!("other={token}"))])), None);
    }

    #[test]
    fn a_well_formed_token_for_a_missing_player_is_refused() {
        let issuer = World::new(10);
        issuer.register("ann", "pw").unwrap();
        let bearer = format!("Bearer {}", issuer.login("ann", "pw").unwrap());
        // Another world has no player 1.
        let response = respond(
            &World::new(10),
            &Method::GET,
            "/game/city",
            &headers(&[(AUTHORIZATION, &bearer)]),
            Some(Bytes::new()),
        );
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
}
