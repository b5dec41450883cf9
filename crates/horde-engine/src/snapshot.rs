//! One interval of a run's metrics, as the engine hands it to its caller.
//!
//! Its serialized form (serde) is the snapshot Python reads: the binding converts it as it is,
//! so a field added here reaches Python with no other Rust to write. Keys sent only when they
//! hold something are marked `skip_serializing_if`; `tests/test_snapshot_contract.py` reads
//! those marks and the fields, and compares them with `horde.engine.snapshot`'s TypedDicts.

use crate::scenario::interpreter::StepKind;
use horde_metrics::{encode_histogram, merge_encoded, HistogramError};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;

/// What one step did during one interval, merged across workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSnapshot {
    pub scenario: String,
    pub step: String,
    /// `"request"` or `"group"` (a group's latency is the time of one pass through it).
    #[serde(default = "request_label", deserialize_with = "kind_label")]
    pub kind: Cow<'static, str>,
    pub requests: u64,
    pub ok: u64,
    /// Error kind label (`status_503`, `timeout`...) and count, only kinds that occurred.
    #[serde(serialize_with = "counts_by_kind", deserialize_with = "counts_by_kind_from")]
    pub errors: Vec<(String, u64)>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Rows returned or changed by an `sql` step's statements; 0 for HTTP.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows: u64,
    /// Requests sent over HTTP/1.1 and HTTP/2 (`http_version` "2" or "auto" only; 0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http1: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http2: u64,
    /// Requests over HTTP/2 whose body waited over 100 ms for the server's flow-control window.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h2_stalls: u64,
    /// Latency in microseconds, HDR V2 encoded, as users felt it (open-model requests timed
    /// from their intended instant).
    #[serde(serialize_with = "bytes", deserialize_with = "bytes_from")]
    pub histogram: Vec<u8>,
    /// Latency from each request's actual send (what the target took), HDR V2 encoded; empty
    /// when it equals `histogram` (no request of the interval was timed from an intended instant).
    #[serde(default, skip_serializing_if = "Vec::is_empty", serialize_with = "bytes", deserialize_with = "bytes_from")]
    pub from_send_histogram: Vec<u8>,
    /// The first distinct messages of each error kind: (kind label, message, count); bounded
    /// (`horde_metrics::MAX_DETAILS_PER_KIND` per kind), empty while nothing failed.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "error_details",
        deserialize_with = "error_details_from"
    )]
    pub error_details: Vec<(String, String, u64)>,
    /// Each check of the step in words, with its passes and failures; empty without checks.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "checks",
        deserialize_with = "checks_from"
    )]
    pub checks: Vec<(String, u64, u64)>,
    /// A message step's messages and datagrams (`tcp://`, `udp://`); all zero for other steps.
    #[serde(default, skip_serializing_if = "horde_metrics::MessageCounts::is_empty")]
    pub messages: horde_metrics::MessageCounts,
}

/// One interval (normally one second) of the whole run. Field meanings are documented with
/// the snapshot format in ARCHITECTURE.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub second: u64,
    pub elapsed_s: f64,
    pub interval_s: f64,
    pub timestamp: f64,
    #[serde(rename = "final")]
    pub is_final: bool,
    pub steps: Vec<StepSnapshot>,
    pub active_vus: u64,
    /// The most VUs alive at once during the interval.
    #[serde(default)]
    pub peak_vus: u64,
    pub busy_vus: u64,
    pub iterations: u64,
    pub dropped_arrivals: u64,
    pub connections_opened: u64,
    /// Pauses VUs took after a failed connect (`target.connect_backoff`), and their time
    /// summed over VUs, in seconds.
    #[serde(default)]
    pub connect_backoffs: u64,
    #[serde(default)]
    pub connect_backoff_s: f64,
    /// VUs whose setup failed in the interval (each VU counted once in the run).
    #[serde(default)]
    pub setup_failures: u64,
    pub target_vus: u64,
    pub target_rate_per_s: Option<f64>,
    pub cpu_percent: f64,
    pub timer_lateness_p99_ms: f64,
    /// The worst timer lateness of the interval, in ms.
    #[serde(default)]
    pub timer_lateness_max_ms: f64,
    /// How long this process's threads waited for a CPU (runnable, not running) during the
    /// interval, summed over threads, in ms: a generator that was not scheduled (a busy or
    /// overcommitted machine) shows here, one that was busy itself shows in `cpu_percent`.
    #[serde(default)]
    pub run_delay_ms: f64,
    /// The machine's CPU time taken by its hypervisor during the interval (steal), in percent of
    /// all CPUs; 0 where the system does not report it.
    #[serde(default)]
    pub steal_percent: f64,
    /// Exchanges recorded in full during the interval (`EngineOptions::record_exchanges`), in
    /// the order they started; empty when recording is off.
    /// Never read back: a merged second carries no exchanges (each generator's stay its own).
    #[serde(skip_serializing_if = "Vec::is_empty", skip_deserializing)]
    pub exchanges: Vec<crate::exchange::Exchange>,
}

impl Snapshot {
    pub fn requests(&self) -> u64 {
        self.steps.iter().map(|step| step.requests).sum()
    }

    pub fn ok(&self) -> u64 {
        self.steps.iter().map(|step| step.ok).sum()
    }
}

/// Why snapshots could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error(transparent)]
    Histogram(#[from] HistogramError),
}

impl StepSnapshot {
    /// Several snapshots of one step as one (the generators' of one second, or one step's
    /// seconds): counters summed; errors, checks and details added up by kind, check and
    /// message in the order they first occurred, at most [`horde_metrics::MAX_DETAILS_PER_KIND`]
    /// messages per kind, by the rule each worker keeps them by ([`horde_metrics::add_detail`]); histograms merged exactly. The name and kind are the
    /// first part's. A part that timed nothing from an intended instant adds its latency once to
    /// the from-send histogram (it equals its latency).
    pub fn merge(parts: &[StepSnapshot]) -> Result<StepSnapshot, MergeError> {
        let Some(first) = parts.first() else { return Err(MergeError::Empty) };
        let mut merged = StepSnapshot {
            histogram: merged_histogram(parts.iter().map(|part| part.histogram.as_slice()))?,
            from_send_histogram: Vec::new(),
            error_details: Vec::new(),
            checks: Vec::new(),
            errors: Vec::new(),
            ..first.clone()
        };
        if parts.iter().any(|part| !part.from_send_histogram.is_empty()) {
            merged.from_send_histogram = merged_histogram(parts.iter().map(|part| {
                if part.from_send_histogram.is_empty() {
                    part.histogram.as_slice()
                } else {
                    part.from_send_histogram.as_slice()
                }
            }))?;
        }
        merged.messages = horde_metrics::MessageCounts::default();
        for (index, part) in parts.iter().enumerate() {
            if index > 0 {
                merged.requests += part.requests;
                merged.ok += part.ok;
                merged.bytes_sent += part.bytes_sent;
                merged.bytes_received += part.bytes_received;
                merged.rows += part.rows;
                merged.http1 += part.http1;
                merged.http2 += part.http2;
                merged.h2_stalls += part.h2_stalls;
            }
            merged.messages.add(&part.messages);
            for (kind, count) in &part.errors {
                match merged.errors.iter_mut().find(|(known, _)| known == kind) {
                    Some((_, total)) => *total += count,
                    None => merged.errors.push((kind.clone(), *count)),
                }
            }
            for (check, passes, failures) in &part.checks {
                match merged.checks.iter_mut().find(|(known, _, _)| known == check) {
                    Some((_, total_passes, total_failures)) => {
                        *total_passes += passes;
                        *total_failures += failures;
                    }
                    None => merged.checks.push((check.clone(), *passes, *failures)),
                }
            }
            for detail in &part.error_details {
                horde_metrics::add_detail(&mut merged.error_details, detail.clone());
            }
        }
        Ok(merged)
    }
}

impl Snapshot {
    /// Several generators' snapshots of one second as the run's (at least one): steps merged by
    /// (scenario, step) in the order they first appear ([`StepSnapshot::merge`]); VUs,
    /// iterations, arrivals, connections, backoffs and setup failures summed; the interval,
    /// elapsed time and timestamp the longest (the agreed clock); the level asked for the first
    /// generator's (every generator reports the plan's level, its share is the engine's
    /// business); CPU, timer lateness, run delay and steal the sickest generator's (one
    /// saturated generator distorts the run, and the autostop rule must see it).
    pub fn merge_generators(parts: &[Snapshot], is_final: bool) -> Result<Snapshot, MergeError> {
        let Some(first) = parts.first() else { return Err(MergeError::Empty) };
        let mut order: Vec<(&str, &str)> = Vec::new();
        let mut grouped: Vec<Vec<StepSnapshot>> = Vec::new();
        for step in parts.iter().flat_map(|part| &part.steps) {
            let key = (step.scenario.as_str(), step.step.as_str());
            match order.iter().position(|known| *known == key) {
                Some(index) => grouped[index].push(step.clone()),
                None => {
                    order.push(key);
                    grouped.push(vec![step.clone()]);
                }
            }
        }
        let sum = |read: fn(&Snapshot) -> u64| parts.iter().map(read).sum::<u64>();
        let most = |read: fn(&Snapshot) -> f64| parts.iter().map(read).fold(0.0, f64::max);
        Ok(Snapshot {
            second: first.second,
            elapsed_s: most(|part| part.elapsed_s),
            interval_s: most(|part| part.interval_s),
            timestamp: most(|part| part.timestamp),
            is_final,
            steps: grouped.iter().map(|steps| StepSnapshot::merge(steps)).collect::<Result<_, _>>()?,
            active_vus: sum(|part| part.active_vus),
            peak_vus: sum(|part| part.peak_vus),
            busy_vus: sum(|part| part.busy_vus),
            iterations: sum(|part| part.iterations),
            dropped_arrivals: sum(|part| part.dropped_arrivals),
            connections_opened: sum(|part| part.connections_opened),
            connect_backoffs: sum(|part| part.connect_backoffs),
            connect_backoff_s: parts.iter().map(|part| part.connect_backoff_s).sum(),
            setup_failures: sum(|part| part.setup_failures),
            target_vus: first.target_vus,
            target_rate_per_s: first.target_rate_per_s,
            cpu_percent: most(|part| part.cpu_percent),
            timer_lateness_p99_ms: most(|part| part.timer_lateness_p99_ms),
            timer_lateness_max_ms: most(|part| part.timer_lateness_max_ms),
            run_delay_ms: most(|part| part.run_delay_ms),
            steal_percent: most(|part| part.steal_percent),
            exchanges: Vec::new(),
        })
    }
}

/// The exact merge of encoded histograms, encoded; one part is returned as it is, empty ones
/// (a stored second with no latency) are left out.
fn merged_histogram<'a>(parts: impl Iterator<Item = &'a [u8]>) -> Result<Vec<u8>, HistogramError> {
    let parts: Vec<&[u8]> = parts.filter(|part| !part.is_empty()).collect();
    match parts.as_slice() {
        [] => Ok(Vec::new()),
        [one] => Ok(one.to_vec()),
        _ => encode_histogram(&merge_encoded(parts.iter().copied())?),
    }
}

fn request_label() -> Cow<'static, str> {
    StepKind::Request.label().into()
}

fn kind_label<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Cow<'static, str>, D::Error> {
    let label = String::deserialize(deserializer)?;
    StepKind::from_label(&label)
        .map(|kind| kind.label().into())
        .ok_or_else(|| de::Error::custom(format!("no step kind is labelled {label:?}")))
}

/// Error kinds from a mapping, kind to count, in its order.
fn counts_by_kind_from<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, u64)>, D::Error> {
    struct Counts;
    impl<'de> Visitor<'de> for Counts {
        type Value = Vec<(String, u64)>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("a mapping of error kinds to counts")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut counts = Vec::new();
            while let Some(entry) = map.next_entry()? {
                counts.push(entry);
            }
            Ok(counts)
        }
    }
    deserializer.deserialize_map(Counts)
}

/// A histogram's encoding from bytes (or from a list of numbers).
fn bytes_from<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    struct Bytes;
    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
            formatter.write_str("bytes")
        }
        fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
            Ok(bytes.to_vec())
        }
        fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Self::Value, E> {
            Ok(bytes)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut bytes = Vec::new();
            while let Some(byte) = seq.next_element()? {
                bytes.push(byte);
            }
            Ok(bytes)
        }
    }
    deserializer.deserialize_byte_buf(Bytes)
}

#[derive(Deserialize)]
struct DetailRecord {
    kind: String,
    message: String,
    count: u64,
}

fn error_details_from<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, String, u64)>, D::Error> {
    let records = Vec::<DetailRecord>::deserialize(deserializer)?;
    Ok(records.into_iter().map(|record| (record.kind, record.message, record.count)).collect())
}

#[derive(Deserialize)]
struct CheckRecord {
    check: String,
    passes: u64,
    failures: u64,
}

fn checks_from<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, u64, u64)>, D::Error> {
    let records = Vec::<CheckRecord>::deserialize(deserializer)?;
    Ok(records.into_iter().map(|record| (record.check, record.passes, record.failures)).collect())
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// A histogram's encoding as bytes (Python `bytes`), not as a list of numbers.
fn bytes<S: Serializer>(encoded: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(encoded)
}

/// Error kinds as a mapping, kind to count, in the order they occurred.
fn counts_by_kind<S: Serializer>(counts: &[(String, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for (kind, count) in counts {
        map.serialize_entry(kind, count)?;
    }
    map.end()
}

/// Each error detail as a record: `{kind, message, count}`.
fn error_details<S: Serializer>(details: &[(String, String, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Detail<'a> {
        kind: &'a str,
        message: &'a str,
        count: u64,
    }
    serializer.collect_seq(details.iter().map(|(kind, message, count)| Detail { kind, message, count: *count }))
}

/// Each check as a record: `{check, passes, failures}`.
fn checks<S: Serializer>(checks: &[(String, u64, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Counted<'a> {
        check: &'a str,
        passes: u64,
        failures: u64,
    }
    serializer.collect_seq(checks.iter().map(|(check, passes, failures)| Counted {
        check,
        passes: *passes,
        failures: *failures,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use horde_metrics::MAX_DETAILS_PER_KIND;
    use horde_metrics::{decode_histogram, new_latency_histogram};

    fn encoded(values: &[u64]) -> Vec<u8> {
        let mut histogram = new_latency_histogram();
        for value in values {
            histogram.record(*value).expect("in range");
        }
        encode_histogram(&histogram).expect("encodes")
    }

    fn step(name: &str, values: &[u64], errors: &[(&str, u64)], details: &[(&str, &str, u64)]) -> StepSnapshot {
        StepSnapshot {
            scenario: "s".into(),
            step: name.into(),
            kind: "request".into(),
            requests: values.len() as u64 + errors.iter().map(|(_, count)| count).sum::<u64>(),
            ok: values.len() as u64,
            errors: errors.iter().map(|(kind, count)| (kind.to_string(), *count)).collect(),
            bytes_sent: 10,
            bytes_received: 20,
            rows: 0,
            http1: 0,
            http2: 0,
            h2_stalls: 0,
            histogram: encoded(values),
            from_send_histogram: Vec::new(),
            error_details: details
                .iter()
                .map(|(kind, message, count)| (kind.to_string(), message.to_string(), *count))
                .collect(),
            checks: vec![("status in [200]".into(), values.len() as u64, 1)],
            messages: horde_metrics::MessageCounts::default(),
        }
    }

    #[test]
    fn steps_merge_to_the_counts_and_samples_of_all_parts() {
        let first = step("get", &[1_000, 2_000], &[("timeout", 1)], &[("timeout", "a", 1)]);
        let mut second =
            step("get", &[3_000], &[("refused", 2), ("timeout", 1)], &[("timeout", "a", 1), ("refused", "b", 2)]);
        second.from_send_histogram = encoded(&[500]);
        let merged = StepSnapshot::merge(&[first, second]).expect("merges");
        assert_eq!((merged.requests, merged.ok, merged.bytes_sent), (7, 3, 20));
        assert_eq!(
            merged.errors,
            vec![("timeout".to_string(), 2), ("refused".to_string(), 2)],
            "first occurrence order"
        );
        assert_eq!(merged.error_details, vec![("timeout".into(), "a".into(), 2), ("refused".into(), "b".into(), 2)]);
        assert_eq!(merged.checks, vec![("status in [200]".to_string(), 3, 2)]);
        assert_eq!(decode_histogram(&merged.histogram).expect("decodes").len(), 3);
        // The first part timed nothing from an intended instant: its latency counts once there.
        let from_send = decode_histogram(&merged.from_send_histogram).expect("decodes");
        assert_eq!((from_send.len(), from_send.min()), (3, 500));
    }

    #[test]
    fn at_most_eight_messages_per_kind_survive_a_merge() {
        let parts: Vec<StepSnapshot> = (0..12)
            .map(|index| step("get", &[1_000], &[("status_503", 1)], &[("status_503", &format!("m{index}"), 1)]))
            .collect();
        let merged = StepSnapshot::merge(&parts).expect("merges");
        assert_eq!(merged.error_details.len(), MAX_DETAILS_PER_KIND);
        assert_eq!(merged.errors, vec![("status_503".to_string(), 12)], "the kind still counts them all");
        assert!(matches!(StepSnapshot::merge(&[]), Err(MergeError::Empty)));
    }
}
