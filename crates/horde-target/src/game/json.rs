//! The JSON the game sends: views of a city and the catalogue, and the response around them.
//!
//! Views borrow the city and are serialized straight into the one buffer that becomes the
//! response body, under the city's shard lock: copying the city out first would cost more than
//! the microsecond or two the lock is held.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::{Serialize, Serializer};

use super::economy::{Amounts, Building, City, CATALOGUE};

/// Bytes of JSON per building in `/game/city`, rounded up (`{"id":50,"kind":"barracks",
/// "level":1,"ready":false},` is 55).
pub(super) const CITY_BYTES_PER_BUILDING: usize = 56;

/// Bytes of the `/game/buildings` answer, rounded up (it is 481 with every `can_build` false).
pub(super) const CATALOGUE_BYTES: usize = 512;

#[derive(Serialize)]
pub(super) struct CityView<'a> {
    player_id: u64,
    resources: Amounts,
    #[serde(serialize_with = "buildings_as_seen")]
    buildings: (&'a [Building], u64),
}

pub(super) fn view_city(player_id: u64, city: &City, now_ms: u64) -> CityView<'_> {
    CityView { player_id, resources: city.resources(), buildings: (city.buildings(), now_ms) }
}

fn buildings_as_seen<S: Serializer>(
    (buildings, now_ms): &(&[Building], u64),
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Seen {
        id: u16,
        kind: &'static str,
        level: u8,
        ready: bool,
    }
    serializer.collect_seq(buildings.iter().map(|building| Seen {
        id: building.id,
        kind: building.kind.spec().name,
        level: building.level,
        ready: building.is_ready(*now_ms),
    }))
}

#[derive(Serialize)]
pub(super) struct CatalogueView<'a> {
    #[serde(serialize_with = "catalogue_for")]
    buildings: &'a City,
}

pub(super) fn view_catalogue(city: &City) -> CatalogueView<'_> {
    CatalogueView { buildings: city }
}

fn catalogue_for<S: Serializer>(city: &&City, serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Entry {
        kind: &'static str,
        cost: Amounts,
        can_build: bool,
    }
    serializer.collect_seq(CATALOGUE.iter().map(|spec| Entry {
        kind: spec.name,
        cost: spec.cost,
        can_build: city.can_build(spec.kind),
    }))
}

pub(super) fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    #[derive(Serialize)]
    struct Failure<'a> {
        error: &'a str,
    }
    json(status, &Failure { error: message }, 16 + message.len())
}

pub(super) fn json(status: StatusCode, value: &impl Serialize, capacity: usize) -> Response<Full<Bytes>> {
    with_body(status, to_json(value, capacity))
}

/// `value` as JSON; `capacity` is a size that the text rarely exceeds, so that the buffer is
/// allocated once.
pub(super) fn to_json(value: &impl Serialize, capacity: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut body, value).expect("these values always serialize");
    body
}

pub(super) fn with_body(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::economy::Kind;

    #[test]
    fn city_json_has_the_documented_shape() {
        let mut city = City::new(0);
        city.construct(Kind::Farm, 0).unwrap();
        let text = String::from_utf8(to_json(&view_city(9, &city, 1_000), 0)).unwrap();
        assert_eq!(
            text,
            r#"{"player_id":9,"resources":{"gold":250,"wood":200,"stone":250},"buildings":[{"id":1,"kind":"farm","level":1,"ready":false}]}"#
        );
        let text = String::from_utf8(to_json(&view_catalogue(&city), 0)).unwrap();
        assert!(
            text.starts_with(
                r#"{"buildings":[{"kind":"farm","cost":{"gold":50,"wood":100,"stone":50},"can_build":true},"#
            ),
            "{text}"
        );
        assert!(text.len() <= CATALOGUE_BYTES, "{}", text.len());
    }
}
