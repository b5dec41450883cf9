//! Latency histograms and their wire form (HDR V2, the format every HdrHistogram port reads).

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// Why an encoded histogram could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("not a valid HDR V2 histogram: {0}")]
    Decode(String),
    #[error("cannot encode histogram: {0}")]
    Encode(String),
}

/// A histogram of microseconds at 3 significant digits that grows to fit what it records.
///
/// Auto-resizing keeps an idle step's histogram small (a few KB) while still recording a
/// timeout of minutes exactly; the alternative, a fixed 1 µs..1 h range, costs ~190 KB each.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is a valid precision")
}

/// Serialises a histogram in the HDR V2 format (uncompressed; its counts are already
/// run-length and varint encoded, so compression gains little for per-second histograms).
pub fn encode_histogram(histogram: &Histogram<u64>) -> Result<Vec<u8>, HistogramError> {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(histogram, &mut bytes)
        .map_err(|error| HistogramError::Encode(format!("{error:?}")))?;
    Ok(bytes)
}

pub fn decode_histogram(bytes: &[u8]) -> Result<Histogram<u64>, HistogramError> {
    let mut histogram: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|error| HistogramError::Decode(format!("{error:?}")))?;
    // A decoded histogram has auto-resize off; merges into it must grow as needed.
    histogram.auto(true);
    Ok(histogram)
}

/// Merges encoded histograms exactly (bucket counts added), returning the merged histogram.
pub fn merge_encoded<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Result<Histogram<u64>, HistogramError> {
    let mut merged = new_latency_histogram();
    for part in parts {
        let histogram = decode_histogram(part)?;
        merged.add(&histogram).map_err(|error| HistogramError::Decode(format!("cannot merge: {error:?}")))?;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_merge_equal_concatenation() {
        let mut first = new_latency_histogram();
        let mut second = new_latency_histogram();
        let mut all = new_latency_histogram();
        for value in (1..50_000u64).step_by(7) {
            first.record(value).unwrap();
            all.record(value).unwrap();
        }
        for value in (1..5_000_000u64).step_by(997) {
            second.record(value).unwrap();
            all.record(value).unwrap();
        }
        let encoded = [encode_histogram(&first).unwrap(), encode_histogram(&second).unwrap()];
        let merged = merge_encoded(encoded.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(merged.len(), all.len());
        for quantile in [0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(merged.value_at_quantile(quantile), all.value_at_quantile(quantile), "q={quantile}");
        }
    }

    #[test]
    fn garbage_is_a_decode_error() {
        assert!(matches!(decode_histogram(b"not a histogram"), Err(HistogramError::Decode(_))));
    }
}
