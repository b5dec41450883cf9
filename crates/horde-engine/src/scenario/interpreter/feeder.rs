//! Feeders: rows of test data (CSV with a header row, or JSON lines) handed to VUs.
//!
//! Rows are read into memory when the run starts; each becomes a template variable named after
//! the feeder (`{{ users.login }}`).
//!
//! A CSV row is kept compact ([`CsvRow`]): its fields' text in one allocation and their ends in
//! another, the column names shared by every row. As a map of its own (a B-tree of `String`
//! keys and a string value per field), a row of four short fields took about 700 bytes; now
//! about 140. A 200,000-row feeder grew the generator's RSS by 143 MB, and now by 28 MB
//! (`bench/NOTES.md`, "Notes on issue 19's gap").

use crate::error::EngineError;
use crate::template::ColumnHint;
use horde_plan::{FeederFormat, FeederMode};
use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A CSV feeder's column names, in the order a template lists a row's keys (by name, as a map's
/// are), each with its field's place in a row. A name the header gives twice is its last column.
#[derive(Debug)]
struct Columns {
    names: Vec<(String, usize)>,
    /// Each place's name, in the header's order; `None` for a column whose name a later one
    /// repeats (templates see the later one's field).
    by_place: Vec<Option<String>>,
}

impl Columns {
    fn new(header: &csv::StringRecord) -> Self {
        let by_name: std::collections::BTreeMap<&str, usize> =
            header.iter().enumerate().map(|(place, name)| (name, place)).collect();
        let mut by_place = vec![None; header.len()];
        for (name, place) in &by_name {
            by_place[*place] = Some((*name).to_owned());
        }
        Self { names: by_name.into_iter().map(|(name, place)| (name.to_owned(), place)).collect(), by_place }
    }

    fn place(&self, name: &str) -> Option<usize> {
        self.names.binary_search_by(|(column, _)| column.as_str().cmp(name)).ok().map(|at| self.names[at].1)
    }

    /// [`Columns::place`], trying `hint`'s place first (checked by its name) and keeping the
    /// place found there for the next time.
    fn place_hinted(&self, name: &str, hint: &ColumnHint) -> Option<usize> {
        let guess = hint.0.load(Ordering::Relaxed);
        if self.by_place.get(guess).and_then(Option::as_deref) == Some(name) {
            return Some(guess);
        }
        let place = self.place(name)?;
        hint.0.store(place, Ordering::Relaxed);
        Some(place)
    }
}

/// One row of a CSV feeder: a map from column name to field, as templates see it.
#[derive(Debug)]
pub(crate) struct CsvRow {
    columns: Arc<Columns>,
    /// The fields one after the other.
    text: Box<str>,
    /// Where each field ends in `text` (it starts where the one before ends).
    ends: Box<[u32]>,
}

impl CsvRow {
    /// The field of column `name`, if the feeder has one.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.field_at(self.columns.place(name)?)
    }

    /// [`CsvRow::field`], its column's place guessed from `hint` first.
    pub fn field_hinted(&self, name: &str, hint: &ColumnHint) -> Option<&str> {
        self.field_at(self.columns.place_hinted(name, hint)?)
    }

    fn field_at(&self, place: usize) -> Option<&str> {
        let start = if place == 0 { 0 } else { *self.ends.get(place - 1)? as usize };
        self.text.get(start..*self.ends.get(place)? as usize)
    }
}

impl Object for CsvRow {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.field(key.as_str()?).map(Value::from)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.columns.names.iter().map(|(name, _)| Value::from(name.as_str())).collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.columns.names.len())
    }
}

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
                let columns = Arc::new(Columns::new(reader.headers().map_err(|error| cannot(error.to_string()))?));
                let mut rows = Vec::new();
                for (index, record) in reader.records().enumerate() {
                    let record = record.map_err(|error| cannot(format!("row {}: {error}", index + 2)))?;
                    let too_long = || cannot(format!("row {}: over 4 GiB", index + 2));
                    let ends = (0..record.len())
                        .map(|field| record.range(field).map_or(Ok(0), |range| u32::try_from(range.end)));
                    let ends: Box<[u32]> = ends.collect::<Result<_, _>>().map_err(|_| too_long())?;
                    rows.push(Value::from_object(CsvRow {
                        columns: Arc::clone(&columns),
                        text: record.as_slice().into(),
                        ends,
                    }));
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
                        return Err(cannot(format!(
                            "line {}: a row must be a JSON object (its fields are the variables)",
                            index + 1
                        )));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A circular feeder `t` loaded from `text` as a CSV file.
    fn load_csv(text: &str) -> Result<Feeder, EngineError> {
        let path = std::env::temp_dir().join(format!(
            "horde-feeder-{}-{:?}.csv",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, text).unwrap();
        let plan = horde_plan::Feeder {
            name: "t".into(),
            path: path.to_string_lossy().into_owned(),
            format: None,
            mode: FeederMode::Circular,
        };
        let feeder = Feeder::load(&plan);
        std::fs::remove_file(&path).unwrap();
        feeder
    }

    #[test]
    fn a_csv_row_reads_as_the_map_of_its_fields() {
        // Quoted fields with commas and quotes, an empty field, a name given twice (the last
        // column wins, as in a map built from the row), text that is not ASCII.
        let feeder = load_csv("login,password,note,login\nann,\"s3,cr\"\"t\",,ann2\nbob,pw,café,bob2\n").unwrap();
        assert_eq!(feeder.len(), 2);
        let first = feeder.next_row(0);
        let row = first.downcast_object_ref::<CsvRow>().unwrap();
        assert_eq!(
            (row.field("login"), row.field("password"), row.field("note")),
            (Some("ann2"), Some("s3,cr\"t"), Some(""))
        );
        assert_eq!(row.field("missing"), None);
        let second = feeder.next_row(0);
        assert_eq!(second.downcast_object_ref::<CsvRow>().unwrap().field("note"), Some("café"));

        // Templates see a map: fields by attribute and by key, keys listed by name, the whole
        // row printed as a map is.
        let mut environment = minijinja::Environment::new();
        environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        let render = |source: &str, row: &Value| {
            environment.render_str(source, minijinja::context! { t => row.clone() }).unwrap()
        };
        assert_eq!(render("{{ t.password }}|{{ t['note'] }}|{{ t.login }}", &first), "s3,cr\"t||ann2");
        assert_eq!(
            render("{% for key in t %}{{ key }}={{ t[key] }};{% endfor %}", &second),
            "login=bob2;note=café;password=pw;"
        );
        assert_eq!(render("{{ t is mapping }} {{ t | length }} {{ t.missing is undefined }}", &first), "True 3 True");
        let as_map: std::collections::BTreeMap<&str, &str> =
            [("login", "ann2"), ("note", ""), ("password", "s3,cr\"t")].into();
        assert_eq!(render("{{ t }}", &first), Value::from_serialize(as_map).to_string());
    }

    #[test]
    fn a_hinted_field_is_checked_by_its_name_and_the_hint_follows_the_column() {
        let feeder = load_csv("login,password,note,login\nann,pw,n,ann2\n").unwrap();
        let value = feeder.next_row(0);
        let row = value.downcast_object_ref::<CsvRow>().unwrap();
        // The first guess (place 0) is a column whose name a later one repeats: not taken.
        let hint = ColumnHint::default();
        assert_eq!(row.field_hinted("login", &hint), Some("ann2"));
        assert_eq!(hint.0.load(Ordering::Relaxed), 3);
        assert_eq!(row.field_hinted("login", &hint), Some("ann2"));
        // A guess that names another column is searched again, and moved.
        assert_eq!(row.field_hinted("note", &hint), Some("n"));
        assert_eq!(hint.0.load(Ordering::Relaxed), 2);
        // Another feeder's layout, where the guess is out of range or another column.
        let other = load_csv("x,note\n1,N\n").unwrap();
        let other_value = other.next_row(0);
        let other_row = other_value.downcast_object_ref::<CsvRow>().unwrap();
        assert_eq!(other_row.field_hinted("note", &hint), Some("N"));
        assert_eq!(row.field_hinted("note", &hint), Some("n"));
        assert_eq!(row.field_hinted("missing", &hint), None);
        assert_eq!(row.field_hinted("note", &hint), Some("n"));
    }

    #[test]
    fn a_csv_row_with_a_missing_field_is_refused_with_its_line() {
        let error = load_csv("a,b\n1,2\n3\n").unwrap_err().to_string();
        assert!(error.contains("row 3"), "{error}");
    }
}
