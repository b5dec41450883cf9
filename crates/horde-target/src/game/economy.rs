//! The game's rules: what buildings cost, what they produce, how long they take, and one
//! player's city. Everything here is plain data and arithmetic on an explicit clock
//! (milliseconds since the world began), so the rules are unit-tested without sockets or sleeps.
//!
//! Resources are kept in thousandths of a unit. Production accrues by the millisecond, so a
//! player who collects every 300 ms gets exactly what one who collects every 3 s gets; whole
//! units alone would lose every fraction at each collect.

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// Most buildings one city may hold. Also bounds a player's memory (16 bytes a building).
pub(crate) const MAX_BUILDINGS: usize = 50;

/// What a new city starts with: enough for two or three buildings.
const STARTING: Amounts = Amounts::new(300, 300, 300);

/// What the city itself yields per second, buildings or not, so that a new player's first
/// `collect` already gets something and no player is ever stuck with nothing to build.
const CITY_YIELD: Amounts = Amounts::new(10, 10, 10);

/// Thousandths of a unit per unit.
const MILLI: u64 = 1000;

/// Gold, wood and stone, in whole units on the wire and thousandths in a city.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Amounts {
    pub(crate) gold: u64,
    pub(crate) wood: u64,
    pub(crate) stone: u64,
}

impl Amounts {
    pub(crate) const fn new(gold: u64, wood: u64, stone: u64) -> Amounts {
        Amounts { gold, wood, stone }
    }

    fn covers(self, other: Amounts) -> bool {
        self.gold >= other.gold && self.wood >= other.wood && self.stone >= other.stone
    }

    /// `self * factor + other`, saturating: a city left alone for years must not wrap around.
    fn add_scaled(self, other: Amounts, factor: u64) -> Amounts {
        let add = |mine: u64, theirs: u64| mine.saturating_add(theirs.saturating_mul(factor));
        Amounts::new(add(self.gold, other.gold), add(self.wood, other.wood), add(self.stone, other.stone))
    }

    /// `self - other`; callers check `covers` first.
    fn minus(self, other: Amounts) -> Amounts {
        Amounts::new(self.gold - other.gold, self.wood - other.wood, self.stone - other.stone)
    }

    fn whole_units(self) -> Amounts {
        Amounts::new(self.gold / MILLI, self.wood / MILLI, self.stone / MILLI)
    }
}

impl Serialize for Amounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = serializer.serialize_struct("Amounts", 3)?;
        object.serialize_field("gold", &self.gold)?;
        object.serialize_field("wood", &self.wood)?;
        object.serialize_field("stone", &self.stone)?;
        object.end()
    }
}

/// A kind of building, in catalogue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Farm,
    Sawmill,
    Quarry,
    Barracks,
    Market,
    Wall,
}

/// One catalogue entry.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) kind: Kind,
    pub(crate) name: &'static str,
    pub(crate) cost: Amounts,
    /// Units per second once built.
    pub(crate) yield_per_s: Amounts,
    pub(crate) build_ms: u64,
}

/// Every kind a player may build. Producers are cheap and quick; barracks, markets and walls
/// are the expensive goals that make a player save up and collect.
pub(crate) const CATALOGUE: [Spec; 6] = [
    Spec {
        kind: Kind::Farm,
        name: "farm",
        cost: Amounts::new(50, 100, 50),
        yield_per_s: Amounts::new(5, 0, 0),
        build_ms: 2_000,
    },
    Spec {
        kind: Kind::Sawmill,
        name: "sawmill",
        cost: Amounts::new(100, 50, 50),
        yield_per_s: Amounts::new(0, 5, 0),
        build_ms: 2_000,
    },
    Spec {
        kind: Kind::Quarry,
        name: "quarry",
        cost: Amounts::new(100, 100, 0),
        yield_per_s: Amounts::new(0, 0, 5),
        build_ms: 2_000,
    },
    Spec {
        kind: Kind::Barracks,
        name: "barracks",
        cost: Amounts::new(200, 150, 150),
        yield_per_s: Amounts::new(0, 0, 0),
        build_ms: 5_000,
    },
    Spec {
        kind: Kind::Market,
        name: "market",
        cost: Amounts::new(250, 100, 100),
        yield_per_s: Amounts::new(8, 0, 0),
        build_ms: 4_000,
    },
    Spec {
        kind: Kind::Wall,
        name: "wall",
        cost: Amounts::new(100, 50, 300),
        yield_per_s: Amounts::new(0, 0, 0),
        build_ms: 3_000,
    },
];

impl Kind {
    pub(crate) fn from_name(name: &str) -> Option<Kind> {
        CATALOGUE.iter().find(|spec| spec.name == name).map(|spec| spec.kind)
    }

    pub(crate) fn spec(self) -> &'static Spec {
        // The catalogue lists the kinds in declaration order.
        &CATALOGUE[self as usize]
    }
}

/// A building in a city. 16 bytes, so a full city costs 800.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Building {
    /// Milliseconds since the world began.
    pub(crate) ready_at_ms: u64,
    /// 1 for the city's first building, in construction order.
    pub(crate) id: u16,
    pub(crate) kind: Kind,
    pub(crate) level: u8,
}

impl Building {
    pub(crate) fn is_ready(&self, now_ms: u64) -> bool {
        self.ready_at_ms <= now_ms
    }
}

/// Why a construction is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConstructError {
    NotEnoughResources,
    CityFull,
}

/// One player's city.
#[derive(Debug)]
pub(crate) struct City {
    /// Thousandths of a unit.
    stock: Amounts,
    /// Production up to this instant has been collected.
    collected_at_ms: u64,
    buildings: Vec<Building>,
}

impl City {
    pub(crate) fn new(now_ms: u64) -> City {
        City {
            stock: Amounts::default().add_scaled(STARTING, MILLI),
            collected_at_ms: now_ms,
            // Empty until the first construction: most of two million idle players never
            // allocate.
            buildings: Vec::new(),
        }
    }

    /// Whole units in stock; production not yet collected is not included.
    pub(crate) fn resources(&self) -> Amounts {
        self.stock.whole_units()
    }

    pub(crate) fn buildings(&self) -> &[Building] {
        &self.buildings
    }

    /// Whether `construct(kind)` would succeed now.
    pub(crate) fn can_build(&self, kind: Kind) -> bool {
        self.buildings.len() < MAX_BUILDINGS && self.resources().covers(kind.spec().cost)
    }

    /// Spends the cost and starts a building that is ready `build_ms` from now.
    pub(crate) fn construct(&mut self, kind: Kind, now_ms: u64) -> Result<Building, ConstructError> {
        if self.buildings.len() >= MAX_BUILDINGS {
            return Err(ConstructError::CityFull);
        }
        let spec = kind.spec();
        let cost = Amounts::default().add_scaled(spec.cost, MILLI);
        if !self.stock.covers(cost) {
            return Err(ConstructError::NotEnoughResources);
        }
        self.stock = self.stock.minus(cost);
        let building = Building {
            ready_at_ms: now_ms.saturating_add(spec.build_ms),
            // At most MAX_BUILDINGS, so it fits.
            id: (self.buildings.len() + 1) as u16,
            kind,
            level: 1,
        };
        self.buildings.push(building);
        Ok(building)
    }

    /// Adds what the city and its finished buildings produced since the last collect, and
    /// returns it in whole units (the difference the player sees in `resources`).
    pub(crate) fn collect(&mut self, now_ms: u64) -> Amounts {
        let since = self.collected_at_ms;
        // A clock that went backwards (it cannot, it is monotonic) would yield nothing.
        let now_ms = now_ms.max(since);
        let before = self.resources();
        let mut stock = self.stock.add_scaled(CITY_YIELD, now_ms - since);
        for building in &self.buildings {
            // A building produces from when it was finished, not from when it was ordered.
            let from = since.max(building.ready_at_ms);
            if from < now_ms {
                stock = stock.add_scaled(building.kind.spec().yield_per_s, now_ms - from);
            }
        }
        self.stock = stock;
        self.collected_at_ms = now_ms;
        self.resources().minus(before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_in_kind_order_and_names_round_trip() {
        for (index, spec) in CATALOGUE.iter().enumerate() {
            assert_eq!(spec.kind as usize, index, "{}", spec.name);
            assert_eq!(Kind::from_name(spec.name), Some(spec.kind));
        }
        assert_eq!(Kind::from_name("castle"), None);
        assert_eq!(Kind::from_name("Farm"), None);
    }

    #[test]
    fn a_new_city_can_build_two_or_three_things() {
        let mut city = City::new(0);
        assert_eq!(city.resources(), STARTING);
        let mut built = 0;
        for kind in [Kind::Farm, Kind::Sawmill, Kind::Quarry, Kind::Farm] {
            if city.construct(kind, 0).is_ok() {
                built += 1;
            }
        }
        assert!((2..=3).contains(&built), "{built}");
    }

    #[test]
    fn construction_spends_the_cost_and_refuses_when_short() {
        let mut city = City::new(0);
        let building = city.construct(Kind::Wall, 100).unwrap();
        assert_eq!(building.id, 1);
        assert_eq!(building.ready_at_ms, 3_100);
        assert_eq!(city.resources(), Amounts::new(200, 250, 0));
        assert!(!city.can_build(Kind::Wall));
        assert_eq!(city.construct(Kind::Wall, 100), Err(ConstructError::NotEnoughResources));
        assert_eq!(city.resources(), Amounts::new(200, 250, 0));
        assert!(!building.is_ready(3_099));
        assert!(building.is_ready(3_100));
    }

    #[test]
    fn production_counts_whole_milliseconds_and_keeps_fractions() {
        let mut city = City::new(0);
        // 10 units/s: 150 ms give 1.5 units, shown as 1; the half is kept.
        assert_eq!(city.collect(150), Amounts::new(1, 1, 1));
        assert_eq!(city.collect(300), Amounts::new(2, 2, 2));
        assert_eq!(city.resources(), Amounts::new(303, 303, 303));
    }

    #[test]
    fn buildings_produce_only_once_ready() {
        let mut city = City::new(0);
        city.construct(Kind::Farm, 0).unwrap(); // ready at 2 000
        assert_eq!(city.resources(), Amounts::new(250, 200, 250));
        // City: 10/s for 3 s; farm: 5 gold/s for the last second only.
        assert_eq!(city.collect(3_000), Amounts::new(35, 30, 30));
        assert_eq!(city.collect(4_000), Amounts::new(15, 10, 10));
    }

    #[test]
    fn a_city_holds_at_most_max_buildings() {
        let mut city = City::new(0);
        city.stock = Amounts::new(u64::MAX / 2, u64::MAX / 2, u64::MAX / 2);
        for _ in 0..MAX_BUILDINGS {
            city.construct(Kind::Farm, 0).unwrap();
        }
        assert!(!city.can_build(Kind::Farm));
        assert_eq!(city.construct(Kind::Farm, 0), Err(ConstructError::CityFull));
        assert_eq!(city.buildings().last().unwrap().id, MAX_BUILDINGS as u16);
    }

    #[test]
    fn production_saturates_instead_of_wrapping() {
        let mut city = City::new(0);
        city.stock = Amounts::new(u64::MAX - 5, 0, 0);
        city.collect(u64::MAX);
        assert_eq!(city.stock.gold, u64::MAX);
    }
}
