//! A log's requests added up, one pass, in bounded memory: per endpoint (requests, a histogram
//! of times, statuses, a reservoir sample of its ids, requests per minute where it had any), per
//! minute, and per session (lengths,
//! think times, transitions). What `horde profile` builds its profile from, with no object per
//! line: Python (`horde.profile`) orchestrates, shows and writes the plan.

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use crate::json::{JsonFields, JsonParser, JsonReason, JsonSession};
use crate::mt::PyRandom;
use crate::read::{Line, LineReader, ReadError};
use crate::template::{Given, Rules, Shape, Templated, Templater};
use crate::text::{is_space, Record, TextParser};
use std::cell::Cell;
use std::rc::Rc;

/// Requests whose slot values are kept per endpoint (a uniform sample: frequent ids stay frequent).
pub const SAMPLE_SIZE: usize = 100;
/// Shapes of one endpoint kept (its ids' kinds, for the plan's made-up values).
pub const MAX_VARIANTS: usize = 16;
/// Unparsable lines kept to show (the rest are only counted).
pub const BAD_SAMPLES: usize = 5;
/// Characters of a bad line kept to show.
pub const BAD_TEXT: usize = 160;
/// Lines read before a file whose lines nearly all fail is refused early (a wrong format).
pub const EARLY_CHECK_LINES: u64 = 2000;
/// The share of lines that may fail, at the end, before the whole log is refused.
pub const MAX_BAD_SHARE: f64 = 0.5;
/// How often (in lines) the reading reports its progress.
pub const PROGRESS_EVERY: u64 = 65536;
/// The reason an over-long line is counted as unreadable.
pub const LONG_LINE: &str = "longer than 65,536 characters";
/// Sessions open at once beyond which the longest idle are closed.
pub const MAX_OPEN: usize = 200_000;
/// Distinct transitions kept before the rarest are pruned; pruning keeps PRUNED_TO.
pub const MAX_TRANSITIONS: usize = 200_000;
pub const PRUNED_TO: usize = 50_000;
/// Requests per session are counted exactly up to this.
pub const MAX_COUNTED_LENGTH: u64 = 10_000;
const SWEEP_EVERY: u64 = 1024;
/// Sessions kept, drawn uniformly over the whole log, with their endpoint mix and pace: what
/// client kinds are found from (`horde.profile.kinds`).
pub const KIND_SAMPLE: usize = 2000;
/// Distinct endpoints a session's mix keeps (the rest of its requests still count in its length).
const MIX_ENDPOINTS: usize = 64;
/// Shapes remembered with their endpoint (a log of ever new paths must not grow the memory).
const MAX_SHAPES: usize = 65536;
const DENSE_BUCKETS: usize = 4096;

/// How the logs are read and grouped.
#[derive(Debug, Clone)]
pub struct Options {
    pub format: Format,
    /// Templates given (`--template`): a path one matches takes its shape.
    pub templates: Vec<Given>,
    /// Sessions by a cookie or header (else by client address and agent).
    pub keyed_sessions: bool,
    pub session_gap_s: f64,
    pub max_endpoints: usize,
}

/// The logs' format, with what its parser needs.
#[derive(Debug, Clone)]
pub enum Format {
    /// Combined or nginx (`nginx`: a whole bare number is seconds, not µs), with the unit of a
    /// bare number when given and the session cookie's or header's name.
    Text { nginx: bool, time_unit_ms: Option<f64>, session_name: Option<String> },
    /// JSON lines: each role's field, a duration's unit, how sessions are told.
    Json { fields: Box<JsonFields>, duration_ms: f64, session: JsonSession },
}

/// A log's parser.
enum Parser {
    Text(TextParser),
    Json(Box<JsonParser>),
}

impl Parser {
    fn new(format: &Format) -> Self {
        match format {
            Format::Text { nginx, time_unit_ms, session_name } => {
                Parser::Text(TextParser::new(*nginx, *time_unit_ms, session_name.clone()))
            }
            Format::Json { fields, duration_ms, session } => {
                Parser::Json(Box::new(JsonParser::new((**fields).clone(), *duration_ms, session.clone())))
            }
        }
    }

    fn parse<'a>(&mut self, line: &'a str) -> Result<Record<'a>, JsonReason> {
        match self {
            Parser::Text(parser) => parser.parse(line).map_err(Cow::Borrowed),
            Parser::Json(parser) => parser.parse(line),
        }
    }
}

/// Durations (ms) in 1 %-wide buckets with the exact count, sum and maximum: the bucket of a
/// duration is `floor(ln(ms / 0.001) / ln(1.01))` (`horde.profile.histogram`'s, which reads them).
#[derive(Debug, Clone, Default)]
pub struct LogHistogram {
    dense: Vec<u64>,
    sparse: HashMap<i64, u64>,
    pub count: u64,
    pub total: f64,
    pub maximum: f64,
    /// Durations under 0.001 ms.
    pub zeros: u64,
}

impl LogHistogram {
    pub fn add(&mut self, value_ms: f64) {
        self.count += 1;
        self.total += value_ms;
        if value_ms > self.maximum {
            self.maximum = value_ms;
        }
        if value_ms < 0.001 || value_ms.is_nan() {
            self.zeros += 1;
            return;
        }
        let index = ((value_ms / 0.001).ln() * (1.0 / 1.01f64.ln())) as i64;
        match usize::try_from(index) {
            Ok(at) if at < DENSE_BUCKETS => {
                if at >= self.dense.len() {
                    self.dense.resize(at + 1, 0);
                }
                self.dense[at] += 1;
            }
            _ => *self.sparse.entry(index).or_insert(0) += 1,
        }
    }

    /// (bucket, count) of the buckets touched.
    pub fn buckets(&self) -> Vec<(i64, u64)> {
        let mut out: Vec<(i64, u64)> =
            self.dense.iter().enumerate().filter(|(_, &n)| n > 0).map(|(i, &n)| (i as i64, n)).collect();
        out.extend(self.sparse.iter().map(|(&i, &n)| (i, n)));
        out
    }
}

/// One endpoint's figures.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Its shapes, the first first (they differ only in their slots' kinds).
    pub shapes: Vec<Shape>,
    pub count: u64,
    pub timing: LogHistogram,
    /// (status, requests), in the order first seen.
    pub statuses: Vec<(i64, u64)>,
    /// Slot values of a uniform sample of its requests.
    pub samples: Vec<Vec<Option<String>>>,
    /// (minute since the epoch, requests), in the order first seen: only the minutes it had
    /// requests in (sparse), so that its intensity in any window of minutes (the peak hour) is
    /// exact while the endpoints stay capped at `max_endpoints`.
    pub per_minute: Vec<(i64, u64)>,
    minute_at: HashMap<i64, usize>,
}

impl Endpoint {
    fn new(shape: Option<Shape>) -> Self {
        Endpoint {
            shapes: shape.into_iter().collect(),
            count: 0,
            timing: LogHistogram::default(),
            statuses: Vec::new(),
            samples: Vec::new(),
            per_minute: Vec::new(),
            minute_at: HashMap::default(),
        }
    }

    /// One request in `minute`. A log is read in (nearly) time order: the last minute first.
    fn add_minute(&mut self, minute: i64) {
        if let Some((last, requests)) = self.per_minute.last_mut() {
            if *last == minute {
                *requests += 1;
                return;
            }
        }
        match self.minute_at.get(&minute) {
            Some(&at) => self.per_minute[at].1 += 1,
            None => {
                self.minute_at.insert(minute, self.per_minute.len());
                self.per_minute.push((minute, 1));
            }
        }
    }
}

/// A line that did not parse: where, why, and its start (not redacted: the caller shows it).
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub file: usize,
    pub line: u64,
    pub reason: String,
    pub text: String,
}

/// What the reading met.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub lines: u64,
    pub records: u64,
    pub bad: u64,
    pub bad_samples: Vec<BadLine>,
    pub bytes_read: u64,
    pub bytes_total: u64,
}

/// A log refused for its bad lines: `bad` of `lines` failed, in file `file` (read early) or in
/// all of them (`None`, at the end).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub bad: u64,
    pub lines: u64,
    pub file: Option<usize>,
}

#[derive(Debug, Clone)]
struct Open {
    last_s: f64,
    last_ms: f64,
    endpoint: u32,
    requests: u64,
    /// (endpoint index, requests), in the order first requested.
    mix: Vec<(u32, u64)>,
    think_ms_total: f64,
    thinks: u64,
    /// Its place in the order of use (the least recently used is closed first).
    stamp: u64,
}

/// A session of the sample client kinds are found from: what it requested and how it paced.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledSession {
    /// (endpoint index, requests), in the order first requested.
    pub mix: Vec<(u32, u64)>,
    pub think_ms_total: f64,
    pub thinks: u64,
}

/// Sessions followed through a log read in (roughly) time order.
#[derive(Debug, Default)]
pub struct Sessions {
    /// Up to [`KIND_SAMPLE`] of the sessions with a pause (two requests or more), drawn
    /// uniformly over the whole log (reservoir sampling, a fixed seed: the same log gives the
    /// same sample), and how many there were.
    pub sample: Vec<SampledSession>,
    pub paced: u64,
    draws: u64,
    pub think_ms: LogHistogram,
    /// (requests in a session, sessions).
    pub lengths: HashMap<u64, u64>,
    /// ((from, to) endpoint indices, count), in the order first seen.
    pub transitions: Vec<((u32, u32), u64)>,
    transition_index: HashMap<(u32, u32), usize>,
    pub transitions_pruned: bool,
    pub unkeyed: u64,
    pub closed_early: u64,
    open: HashMap<u64, Open>,
    order: VecDeque<(u64, u64)>,
    stamp: u64,
    clock: f64,
    added: u64,
}

impl Sessions {
    fn new() -> Self {
        Sessions { clock: f64::NEG_INFINITY, ..Default::default() }
    }

    fn add(&mut self, key: u64, now: f64, duration_ms: f64, endpoint: u32, gap_s: f64) {
        if now > self.clock {
            self.clock = now;
        }
        self.added += 1;
        if self.added.is_multiple_of(SWEEP_EVERY) {
            self.sweep(gap_s);
        }
        self.stamp += 1;
        let stamp = self.stamp;
        if let Some(session) = self.open.get_mut(&key) {
            let gap = now - session.last_s;
            if gap <= gap_s {
                let think = (gap * 1000.0 - session.last_ms).max(0.0);
                let from = session.endpoint;
                session.think_ms_total += think;
                session.thinks += 1;
                match session.mix.iter().position(|(known, _)| *known == endpoint) {
                    Some(at) => session.mix[at].1 += 1,
                    None if session.mix.len() < MIX_ENDPOINTS => session.mix.push((endpoint, 1)),
                    None => {}
                }
                if gap > 0.0 {
                    session.last_s = now;
                }
                session.last_ms = duration_ms;
                session.endpoint = endpoint;
                session.requests += 1;
                session.stamp = stamp;
                self.order.push_back((key, stamp));
                self.think_ms.add(think);
                self.transition(from, endpoint);
                self.compact();
                return;
            }
            self.close(key);
        }
        let mix = vec![(endpoint, 1)];
        self.open.insert(
            key,
            Open {
                last_s: now,
                last_ms: duration_ms,
                endpoint,
                requests: 1,
                mix,
                think_ms_total: 0.0,
                thinks: 0,
                stamp,
            },
        );
        self.order.push_back((key, stamp));
        if self.open.len() > MAX_OPEN {
            self.closed_early += 1;
            if let Some(oldest) = self.oldest() {
                self.close(oldest);
            }
        }
        self.compact();
    }

    fn transition(&mut self, from: u32, to: u32) {
        match self.transition_index.get(&(from, to)) {
            Some(&at) => self.transitions[at].1 += 1,
            None => {
                self.transition_index.insert((from, to), self.transitions.len());
                self.transitions.push(((from, to), 1));
            }
        }
        if self.transitions.len() > MAX_TRANSITIONS {
            // The most frequent kept, in that order (ties in the order first seen).
            self.transitions.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
            self.transitions.truncate(PRUNED_TO);
            self.transition_index = self.transitions.iter().enumerate().map(|(i, (pair, _))| (*pair, i)).collect();
            self.transitions_pruned = true;
        }
    }

    /// The least recently used open session.
    fn oldest(&mut self) -> Option<u64> {
        while let Some(&(key, stamp)) = self.order.front() {
            if self.open.get(&key).is_some_and(|open| open.stamp == stamp) {
                return Some(key);
            }
            self.order.pop_front();
        }
        None
    }

    /// Drops the order's stale entries when they outnumber the live ones.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.open.len() + 4096 {
            let open = &self.open;
            self.order.retain(|(key, stamp)| open.get(key).is_some_and(|o| o.stamp == *stamp));
        }
    }

    /// Closes the sessions idle for longer than the gap (the least recent come first).
    fn sweep(&mut self, gap_s: f64) {
        let horizon = self.clock - gap_s;
        while let Some(key) = self.oldest() {
            if self.open[&key].last_s >= horizon {
                break;
            }
            self.close(key);
        }
    }

    fn close(&mut self, key: u64) {
        if let Some(session) = self.open.remove(&key) {
            *self.lengths.entry(session.requests.min(MAX_COUNTED_LENGTH)).or_insert(0) += 1;
            if session.thinks > 0 {
                self.offer(SampledSession {
                    mix: session.mix,
                    think_ms_total: session.think_ms_total,
                    thinks: session.thinks,
                });
            }
        }
    }

    /// Algorithm R: the n-th paced session replaces a kept one with probability
    /// KIND_SAMPLE / n, so every session of the log is as likely to be kept.
    fn offer(&mut self, session: SampledSession) {
        self.paced += 1;
        if self.sample.len() < KIND_SAMPLE {
            self.sample.push(session);
            return;
        }
        // splitmix64: a fixed, seedless stream; the draws need only be uniform and repeatable.
        self.draws = self.draws.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut draw = self.draws;
        draw = (draw ^ (draw >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        draw = (draw ^ (draw >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        draw ^= draw >> 31;
        let slot = draw % self.paced;
        if let Some(kept) = self.sample.get_mut(slot as usize) {
            *kept = session;
        }
    }

    fn finish(&mut self) {
        while let Some(key) = self.oldest() {
            self.close(key);
        }
    }
}

/// What the logs add up to.
#[derive(Debug)]
pub struct Aggregate {
    /// By first appearance (an endpoint's index is its place here).
    pub endpoints: Vec<Endpoint>,
    /// The endpoints past `max_endpoints`, together (index `max_endpoints`).
    pub other: Option<Endpoint>,
    /// (minute since the epoch, requests), in the order first seen.
    pub per_minute: Vec<(i64, u64)>,
    pub sessions: Sessions,
    pub counts: Counts,
    pub refused: Option<Refusal>,
}

/// Why the reading stopped: a file unreadable, or the progress callback's error.
#[derive(Debug)]
pub enum Stop<E> {
    Read { file: usize, error: ReadError },
    Progress(E),
}

struct Builder<R: Rules> {
    options: Options,
    templater: Templater<R>,
    scratch: Templated,
    shapes: HashMap<Box<[u8]>, u32>,
    by_key: HashMap<String, u32>,
    endpoints: Vec<Endpoint>,
    other: Option<Endpoint>,
    per_minute: Vec<(i64, u64)>,
    minute_index: HashMap<i64, usize>,
    last_time: f64,
    last_minute: usize,
    sessions: Sessions,
    rng: PyRandom,
}

impl<R: Rules> Builder<R> {
    fn add(&mut self, record: &Record<'_>) {
        self.templater.template(&record.method, &record.target, &mut self.scratch);
        let index = match self.shapes.get(self.scratch.key.as_slice()) {
            Some(&index) => index,
            None => self.endpoint_of_new_shape(record),
        };
        if record.time_s != self.last_time || self.per_minute.is_empty() {
            self.last_time = record.time_s;
            let minute = (record.time_s / 60.0).floor() as i64;
            self.last_minute = *self.minute_index.entry(minute).or_insert_with(|| {
                self.per_minute.push((minute, 0));
                self.per_minute.len() - 1
            });
        }
        self.per_minute[self.last_minute].1 += 1;
        let minute = self.per_minute[self.last_minute].0;
        let other = index as usize >= self.endpoints.len();
        let stats = if other {
            self.other.get_or_insert_with(|| Endpoint::new(None))
        } else {
            &mut self.endpoints[index as usize]
        };
        stats.count += 1;
        stats.add_minute(minute);
        if let Some(ms) = record.duration_ms {
            stats.timing.add(ms);
        }
        match stats.statuses.iter_mut().find(|(status, _)| *status == record.status) {
            Some((_, n)) => *n += 1,
            None => stats.statuses.push((record.status, 1)),
        }
        if !other && !self.scratch.values.is_empty() {
            // Reservoir sampling (Algorithm R), drawing as Python's builder draws.
            let values = &self.scratch.values;
            let owned = || values.iter().map(|v| v.map(|(a, b)| record.target[a..b].to_string())).collect();
            if stats.samples.len() < SAMPLE_SIZE {
                stats.samples.push(owned());
            } else if self.rng.random() * (stats.count as f64) < SAMPLE_SIZE as f64 {
                let at = (self.rng.random() * SAMPLE_SIZE as f64) as usize;
                stats.samples[at] = owned();
            }
        }
        let key = match (self.options.keyed_sessions, &record.session) {
            (false, _) => {
                let mut hasher = DefaultHasher::new();
                (&*record.client, &*record.agent).hash(&mut hasher);
                hasher.finish()
            }
            (true, Some(session)) => {
                let mut hasher = DefaultHasher::new();
                (**session).hash(&mut hasher);
                hasher.finish()
            }
            (true, None) => {
                self.sessions.unkeyed += 1;
                return;
            }
        };
        let endpoint = if other { self.options.max_endpoints as u32 } else { index };
        self.sessions.add(key, record.time_s, record.duration_ms.unwrap_or(0.0), endpoint, self.options.session_gap_s);
    }

    /// The endpoint of a shape not remembered: the one of the same name, or a new one while
    /// there is room (else the others', `u32::MAX`).
    fn endpoint_of_new_shape(&mut self, record: &Record<'_>) -> u32 {
        let shape = self.scratch.shape(&record.method, &record.target);
        let key = shape.endpoint_key();
        let index = match self.by_key.get(&key) {
            Some(&index) => {
                let stats = &mut self.endpoints[index as usize];
                if stats.shapes.len() < MAX_VARIANTS && !stats.shapes.contains(&shape) {
                    stats.shapes.push(shape);
                }
                index
            }
            None if self.endpoints.len() < self.options.max_endpoints => {
                let index = self.endpoints.len() as u32;
                self.endpoints.push(Endpoint::new(Some(shape)));
                self.by_key.insert(key, index);
                index
            }
            None => u32::MAX,
        };
        if self.shapes.len() >= MAX_SHAPES {
            self.shapes.clear();
        }
        self.shapes.insert(self.scratch.key.clone().into_boxed_slice(), index);
        index
    }
}

fn note_bad(counts: &mut Counts, file: usize, line: u64, reason: &str, text: &str) {
    counts.bad += 1;
    if counts.bad_samples.len() < BAD_SAMPLES {
        counts.bad_samples.push(BadLine {
            file,
            line,
            reason: reason.to_string(),
            text: text.chars().take(BAD_TEXT).collect(),
        });
    }
}

/// One log being read: its lines, its parser (each keeps its own time cache), and when several
/// logs are merged, its next request's line and time.
struct Source {
    reader: LineReader,
    parser: Parser,
    raw: Rc<Cell<u64>>,
    size: u64,
    /// Lines read, and of them those that failed.
    number: u64,
    bad: u64,
    head: Vec<u8>,
    head_time: f64,
    done: bool,
}

/// What reading on in one log met.
enum Next {
    /// A request (held as the log's head when merging; added already when not).
    Request,
    End,
    Refused(Refusal),
}

/// The reading's state over all the logs.
struct Reading<'a, P> {
    counts: &'a mut Counts,
    lines: u64,
    progress: P,
}

/// Bytes read so far: the logs ended whole, the others as far as read.
fn bytes_read<'a>(sources: impl Iterator<Item = &'a Source>) -> u64 {
    sources.map(|s| if s.done { s.size } else { s.raw.get() }).sum()
}

/// A log ended: progress is told.
fn end_of_log<E>(
    sources: &mut [Source],
    file: usize,
    reading: &mut Reading<'_, impl FnMut(&Counts) -> Result<(), E>>,
) -> Result<(), Stop<E>> {
    sources[file].done = true;
    reading.counts.lines = reading.lines;
    reading.counts.bytes_read = bytes_read(sources.iter());
    (reading.progress)(reading.counts).map_err(Stop::Progress)
}

/// Reads on in `source` (log number `file`) to its next request: added to `builder` when given,
/// else kept as the source's head (merging). Bad and blank lines are counted on the way.
fn advance<R: Rules, E>(
    source: &mut Source,
    file: usize,
    others: (&[Source], &[Source]),
    reading: &mut Reading<'_, impl FnMut(&Counts) -> Result<(), E>>,
    mut builder: Option<&mut Builder<R>>,
) -> Result<Next, Stop<E>> {
    loop {
        let line = match source.reader.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(Next::End),
            Err(error) => return Err(Stop::Read { file, error }),
        };
        source.number += 1;
        reading.lines += 1;
        let number = source.number;
        if number.is_multiple_of(PROGRESS_EVERY) || number == EARLY_CHECK_LINES {
            if number == EARLY_CHECK_LINES && source.bad as f64 > 0.9 * number as f64 {
                return Ok(Next::Refused(Refusal { bad: source.bad, lines: number, file: Some(file) }));
            }
            reading.counts.lines = reading.lines;
            reading.counts.bytes_read = bytes_read(others.0.iter().chain(others.1)) + source.raw.get();
            (reading.progress)(reading.counts).map_err(Stop::Progress)?;
        }
        let bytes = match line {
            Line::Long(start) => {
                source.bad += 1;
                note_bad(reading.counts, file, number, LONG_LINE, &String::from_utf8_lossy(start));
                continue;
            }
            Line::Text(bytes) => bytes,
        };
        // A stray byte in a user agent must not stop the whole log: decoded with U+FFFD.
        let text: Cow<'_, str> = match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        if text.chars().all(is_space) {
            continue;
        }
        match source.parser.parse(&text) {
            Ok(record) => {
                reading.counts.records += 1;
                match builder.as_deref_mut() {
                    Some(builder) => builder.add(&record),
                    None => {
                        source.head_time = record.time_s;
                        source.head.clear();
                        source.head.extend_from_slice(text.as_bytes());
                    }
                }
                return Ok(Next::Request);
            }
            Err(reason) => {
                source.bad += 1;
                note_bad(reading.counts, file, number, &reason, &text);
            }
        }
    }
}

/// Reads the logs and adds them up; several logs are merged into one stream in time order (the
/// next request is the earliest of each log's next one, the log given first on a tie: rotated
/// logs given oldest first are read one after the other; logs of several servers, interleaved).
/// `progress` is called every [`PROGRESS_EVERY`] lines of a log and at each log's end, and may
/// stop the reading with its error.
pub fn profile<R: Rules, E>(
    paths: &[PathBuf],
    options: &Options,
    rules: R,
    progress: impl FnMut(&Counts) -> Result<(), E>,
) -> Result<Aggregate, Stop<E>> {
    let mut builder = Builder {
        options: options.clone(),
        templater: Templater::with_given(rules, options.templates.clone()),
        scratch: Templated::default(),
        shapes: HashMap::default(),
        by_key: HashMap::default(),
        endpoints: Vec::new(),
        other: None,
        per_minute: Vec::new(),
        minute_index: HashMap::default(),
        last_time: f64::NAN,
        last_minute: 0,
        sessions: Sessions::new(),
        rng: PyRandom::new(0),
    };
    let mut sources = Vec::with_capacity(paths.len());
    for (file, path) in paths.iter().enumerate() {
        let reader = LineReader::open(path).map_err(|error| Stop::Read { file, error })?;
        sources.push(Source {
            raw: reader.raw_bytes(),
            reader,
            parser: Parser::new(&options.format),
            size: std::fs::metadata(path).map_or(0, |m| m.len()),
            number: 0,
            bad: 0,
            head: Vec::new(),
            head_time: 0.0,
            done: false,
        });
    }
    let mut counts = Counts { bytes_total: sources.iter().map(|s| s.size).sum(), ..Default::default() };
    let mut reading = Reading { counts: &mut counts, lines: 0, progress };
    let merging = sources.len() > 1;
    let mut refused = None;
    // Each log's first request (merging), or each log whole, one after the other.
    'logs: for file in 0..sources.len() {
        loop {
            let (before, rest) = sources.split_at_mut(file);
            let (source, after) = rest.split_first_mut().expect("file < len");
            let next =
                advance(source, file, (before, after), &mut reading, if merging { None } else { Some(&mut builder) })?;
            match next {
                Next::Request if merging => break,
                Next::Request => continue,
                Next::End => {
                    end_of_log(&mut sources, file, &mut reading)?;
                    break;
                }
                Next::Refused(refusal) => {
                    refused = Some(refusal);
                    break 'logs;
                }
            }
        }
    }
    // Merging: the earliest head next, until every log has ended.
    while merging && refused.is_none() {
        let Some(file) = (0..sources.len())
            .filter(|&i| !sources[i].done)
            .min_by(|&a, &b| sources[a].head_time.total_cmp(&sources[b].head_time).then(a.cmp(&b)))
        else {
            break;
        };
        {
            let source = &mut sources[file];
            let text = std::str::from_utf8(&source.head).expect("kept from a str");
            let record = source.parser.parse(text).expect("parsed once already");
            builder.add(&record);
        }
        let (before, rest) = sources.split_at_mut(file);
        let (source, after) = rest.split_first_mut().expect("file < len");
        match advance(source, file, (before, after), &mut reading, None::<&mut Builder<R>>)? {
            Next::Request => {}
            Next::End => end_of_log(&mut sources, file, &mut reading)?,
            Next::Refused(refusal) => refused = Some(refusal),
        }
    }
    drop(reading);
    if refused.is_none() && counts.lines > 0 && counts.bad as f64 > MAX_BAD_SHARE * counts.lines as f64 {
        refused = Some(Refusal { bad: counts.bad, lines: counts.lines, file: None });
    }
    builder.sessions.finish();
    Ok(Aggregate {
        endpoints: builder.endpoints,
        other: builder.other,
        per_minute: builder.per_minute,
        sessions: builder.sessions,
        counts,
        refused,
    })
}
