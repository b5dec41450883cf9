//! The game world of one target: accounts, sessions and cities, shared by every connection.
//!
//! A load test runs tens of thousands of players at once, so the world is split into shards,
//! each behind its own lock: players by id, accounts by a hash of the login. Two requests wait
//! for each other only when their players fall in the same shard and arrive in the same
//! microsecond or two; with a single lock every request would queue behind every other.
//!
//! Sessions take no memory at all: a token carries its player id and a check value computed
//! from it, so validating one is arithmetic, and a player may log in any number of times
//! without the world growing. This is no security mechanism (the check is not cryptographic);
//! it only makes a made-up or mistyped token fail the way a real server's would.
//!
//! Nothing is random: ids count up from 1 in registration order and tokens are a function of
//! the player id and a login counter, so a run can be replayed exactly.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::economy::City;

/// Most players one world holds (about 200 bytes each with an empty city, up to 1 KiB with a
/// full one), so that a runaway registration loop cannot exhaust the machine.
pub(crate) const MAX_PLAYERS: u64 = 2_000_000;

/// Shards per map: well above the core count of any machine the target shares with a load
/// generator, so that lock waits stay rare.
const SHARDS: usize = 64;

/// Mixed into every token's check value, so that a token is not just its visible numbers.
const TOKEN_KEY: u64 = 0x6a09_e667_f3bc_c908;

#[derive(Debug)]
struct Account {
    player_id: u64,
    password: Box<str>,
}

/// Why a registration is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RegisterError {
    LoginTaken,
    WorldFull,
}

/// A session token: `{player id}.{login serial}.{check}`, all hexadecimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) player_id: u64,
    serial: u64,
}

impl Token {
    fn check(player_id: u64, serial: u64) -> u64 {
        mix(mix(player_id ^ TOKEN_KEY) ^ serial)
    }

    /// The player a token was issued to, if it is one this world could have issued. The
    /// player may still not exist (a token forged for an id not registered yet).
    pub(crate) fn parse(text: &str) -> Option<Token> {
        let mut parts = text.split('.');
        let mut next = || parts.next().and_then(parse_hex);
        let (player_id, serial, check) = (next()?, next()?, next()?);
        if parts.next().is_some() || check != Token::check(player_id, serial) {
            return None;
        }
        Some(Token { player_id, serial })
    }
}

impl fmt::Display for Token {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let check = Token::check(self.player_id, self.serial);
        write!(formatter, "{:x}.{:x}.{check:016x}", self.player_id, self.serial)
    }
}

/// Lower-case or upper-case hexadecimal, 1 to 16 digits; no sign, no prefix.
fn parse_hex(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

/// The splitmix64 finalizer: a cheap bijection that spreads every input bit over the output.
fn mix(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// FNV-1a: picks a login's shard. Deterministic, unlike the maps' own seeded hashers.
fn login_hash(login: &str) -> u64 {
    login.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Locks a shard. A poisoned lock only means a request panicked mid-update; every update here
/// leaves the maps consistent at each step, so the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Everything the game knows.
#[derive(Debug)]
pub(crate) struct World {
    accounts: Vec<Mutex<HashMap<Box<str>, Account>>>,
    cities: Vec<Mutex<HashMap<u64, City>>>,
    /// The next player id; ids are never reused, so it also counts the players.
    next_player_id: AtomicU64,
    next_login_serial: AtomicU64,
    max_players: u64,
    /// The world's clock starts here; cities keep milliseconds since.
    epoch: Instant,
    /// The Unix time of `epoch` in milliseconds, to give clients instants they can compare
    /// with their own clocks.
    epoch_unix_ms: u64,
}

impl World {
    pub(crate) fn new(max_players: u64) -> World {
        World {
            accounts: (0..SHARDS).map(|_| Mutex::default()).collect(),
            cities: (0..SHARDS).map(|_| Mutex::default()).collect(),
            next_player_id: AtomicU64::new(1),
            next_login_serial: AtomicU64::new(1),
            max_players,
            epoch: Instant::now(),
            epoch_unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64),
        }
    }

    /// Milliseconds since the world began: the clock of every city.
    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A world instant as Unix milliseconds.
    pub(crate) fn unix_ms(&self, world_ms: u64) -> u64 {
        self.epoch_unix_ms.saturating_add(world_ms)
    }

    fn account_shard(&self, login: &str) -> &Mutex<HashMap<Box<str>, Account>> {
        &self.accounts[(login_hash(login) % SHARDS as u64) as usize]
    }

    fn city_shard(&self, player_id: u64) -> &Mutex<HashMap<u64, City>> {
        &self.cities[(player_id % SHARDS as u64) as usize]
    }

    /// Creates an account and its city; returns the new player's id.
    pub(crate) fn register(&self, login: &str, password: &str) -> Result<u64, RegisterError> {
        // Held until the account is in, so that two registrations of one login cannot both
        // pass the check.
        let mut accounts = lock(self.account_shard(login));
        if accounts.contains_key(login) {
            return Err(RegisterError::LoginTaken);
        }
        let player_id = self
            .next_player_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| (next <= self.max_players).then_some(next + 1))
            .map_err(|_| RegisterError::WorldFull)?;
        // The city goes in first: once the account exists, the player may log in and act, and
        // must find it. (Lock order is always account shard, then city shard.)
        lock(self.city_shard(player_id)).insert(player_id, City::new(self.now_ms()));
        accounts.insert(login.into(), Account { player_id, password: password.into() });
        Ok(player_id)
    }

    /// A new session for the player, if the login and password match.
    pub(crate) fn login(&self, login: &str, password: &str) -> Option<Token> {
        let player_id = {
            let accounts = lock(self.account_shard(login));
            let account = accounts.get(login)?;
            (*account.password == *password).then_some(account.player_id)?
        };
        let serial = self.next_login_serial.fetch_add(1, Ordering::Relaxed);
        Some(Token { player_id, serial })
    }

    /// Runs `action` on the player's city under its shard's lock; `None` if there is no such
    /// player. Keep `action` short: it holds up every player of the shard.
    pub(crate) fn with_city<R>(&self, player_id: u64, action: impl FnOnce(&mut City) -> R) -> Option<R> {
        lock(self.city_shard(player_id)).get_mut(&player_id).map(action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_logins_are_unique() {
        let world = World::new(MAX_PLAYERS);
        assert_eq!(world.register("ann", "pw"), Ok(1));
        assert_eq!(world.register("bob", "pw"), Ok(2));
        assert_eq!(world.register("ann", "other"), Err(RegisterError::LoginTaken));
        assert_eq!(world.register("carl", "pw"), Ok(3));
        assert!(world.with_city(3, |_| ()).is_some());
        assert!(world.with_city(4, |_| ()).is_none());
    }

    #[test]
    fn the_world_refuses_players_beyond_its_bound() {
        let world = World::new(2);
        assert_eq!(world.register("a", ""), Ok(1));
        assert_eq!(world.register("b", ""), Ok(2));
        assert_eq!(world.register("c", ""), Err(RegisterError::WorldFull));
        // A taken login is still reported as such.
        assert_eq!(world.register("a", ""), Err(RegisterError::LoginTaken));
    }

    #[test]
    fn login_checks_the_password_and_issues_distinct_tokens() {
        let world = World::new(MAX_PLAYERS);
        world.register("ann", "secret").unwrap();
        assert_eq!(world.login("ann", "wrong"), None);
        assert_eq!(world.login("nobody", "secret"), None);
        let first = world.login("ann", "secret").unwrap();
        let second = world.login("ann", "secret").unwrap();
        assert_eq!(first.player_id, 1);
        assert_ne!(first.to_string(), second.to_string());
        // Both sessions stay valid.
        assert_eq!(Token::parse(&first.to_string()), Some(first));
        assert_eq!(Token::parse(&second.to_string()), Some(second));
    }

    #[test]
    fn tokens_are_deterministic() {
        let token = Token { player_id: 7, serial: 3 };
        let again = Token { player_id: 7, serial: 3 };
        assert_eq!(token.to_string(), again.to_string());
        assert!(token.to_string().starts_with("7.3."));
    }

    #[test]
    fn altered_or_malformed_tokens_are_refused() {
        let token = Token { player_id: 7, serial: 3 }.to_string();
        let (_, check) = token.rsplit_once('.').unwrap();
        for bad in [
            String::new(),
            "7.3".to_string(),
            format!("8.3.{check}"),
            format!("7.4.{check}"),
            format!("7.3.{check}.0"),
            format!("+7.3.{check}"),
            format!("7.3.{check}0"),
            "x.y.z".to_string(),
        ] {
            assert_eq!(Token::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn logins_spread_over_shards() {
        let used: std::collections::HashSet<u64> =
            (0..1000).map(|index| login_hash(&format!("player{index}")) % SHARDS as u64).collect();
        assert_eq!(used.len(), SHARDS);
    }
}
