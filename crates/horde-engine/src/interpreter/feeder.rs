//! Feeders: rows of test data (CSV with a header row, or JSON lines) handed to VUs.
//!
//! Rows are read into memory when the run starts; each becomes a template variable named after
//! the feeder (`{{ users.login }}`).

use crate::error::EngineError;
use horde_plan::{FeederFormat, FeederMode};
use minijinja::Value;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct Feeder {
    pub name: String,
    pub mode: FeederMode,
    rows: Vec<Value>,
    /// The next row of a circular feeder, shared by every VU of the run.
    next: AtomicU64,
}

impl Feeder {
    pub fn load(feeder: &horde_plan::Feeder) -> Result<Self, EngineError> {
        let cannot = |why: String| EngineError::Setup(format!("feeder '{}' ({}): {why}", feeder.name, feeder.path));
        let format = feeder.format().ok_or_else(|| cannot("unknown format: give 'csv' or 'jsonl'".into()))?;
        let rows = match format {
            FeederFormat::Csv => {
                let mut reader = csv::Reader::from_path(&feeder.path).map_err(|error| cannot(error.to_string()))?;
                let headers = reader.headers().map_err(|error| cannot(error.to_string()))?.clone();
                let mut rows = Vec::new();
                for (index, record) in reader.records().enumerate() {
                    let record = record.map_err(|error| cannot(format!("row {}: {error}", index + 2)))?;
                    let row: std::collections::BTreeMap<String, Value> =
                        headers.iter().zip(record.iter()).map(|(name, field)| (name.to_owned(), Value::from(field))).collect();
                    rows.push(Value::from_object(row));
                }
                rows
            }
            FeederFormat::Jsonl => {
                let text = std::fs::read_to_string(&feeder.path).map_err(|error| cannot(error.to_string()))?;
                // Editors on some systems start the file with a byte-order mark.
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                let mut rows = Vec::new();
                for (index, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
                    let value: serde_json::Value =
                        serde_json::from_str(line).map_err(|error| cannot(format!("line {}: {error}", index + 1)))?;
                    if !value.is_object() {
                        return Err(cannot(format!("line {}: a row must be a JSON object (its fields are the variables)", index + 1)));
                    }
                    rows.push(Value::from_serialize(&value));
                }
                rows
            }
        };
        if rows.is_empty() {
            return Err(cannot("has no rows".into()));
        }
        Ok(Self { name: feeder.name.clone(), mode: feeder.mode, rows, next: AtomicU64::new(0) })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The row for a VU's next iteration (circular and random feeders).
    pub fn next_row(&self, random: u64) -> Value {
        let index = match self.mode {
            FeederMode::Random => random % self.rows.len() as u64,
            _ => self.next.fetch_add(1, Ordering::Relaxed) % self.rows.len() as u64,
        };
        self.rows[index as usize].clone()
    }

    /// The row a unique feeder gives VU `vu` for its whole life, if there is one.
    pub fn row_of_vu(&self, vu: u64) -> Option<Value> {
        self.rows.get(vu as usize).cloned()
    }
}
