//! What a step keeps of a result, and its extractors and checks.

use super::wire::Column;
use horde_plan::{SqlCheck, SqlExtractFrom, SqlExtractor};

/// A column's value as templates and checks see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ColumnValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    /// A type this reader does not decode (cast it to text in the query to read it).
    Unreadable,
}

/// The first row of a result: its columns by name, in order.
#[derive(Debug, Clone)]
pub(crate) struct FirstRow {
    pub columns: Vec<(String, ColumnValue)>,
}

impl FirstRow {
    /// A binary-format row (extended and prepared modes): integers, floats, booleans, numerics
    /// and text types; other types read as `Unreadable`.
    pub fn from_binary(columns: &[Column], values: &[Option<&[u8]>]) -> Self {
        let columns = columns
            .iter()
            .zip(values)
            .map(|(column, value)| {
                let value = value.map_or(ColumnValue::Null, |bytes| decode_binary(column.type_oid, bytes));
                (column.name.clone(), value)
            })
            .collect();
        Self { columns }
    }

    /// A text-format row (simple mode): every value as the server wrote it.
    pub fn from_text(columns: &[Column], values: &[Option<&[u8]>]) -> Self {
        let columns = columns
            .iter()
            .zip(values)
            .map(|(column, value)| {
                let value = match value {
                    None => ColumnValue::Null,
                    Some(bytes) => std::str::from_utf8(bytes)
                        .map_or(ColumnValue::Unreadable, |text| ColumnValue::Text(text.to_owned())),
                };
                (column.name.clone(), value)
            })
            .collect();
        Self { columns }
    }

    fn column(&self, name: &str) -> Option<&ColumnValue> {
        self.columns.iter().find(|(column, _)| column == name).map(|(_, value)| value)
    }
}

/// Type OIDs the reader decodes (PostgreSQL's pg_type.dat: fixed since the types were added).
mod oid {
    pub const BOOL: u32 = 16;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const UNKNOWN: u32 = 705;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const NUMERIC: u32 = 1700;
    pub const JSONB: u32 = 3802;
}

fn decode_binary(type_oid: u32, bytes: &[u8]) -> ColumnValue {
    let fixed = |size: usize| (bytes.len() == size).then_some(bytes);
    let decoded = match type_oid {
        oid::BOOL => fixed(1).map(|b| ColumnValue::Bool(b[0] != 0)),
        oid::INT2 => fixed(2).map(|b| ColumnValue::Int(i16::from_be_bytes([b[0], b[1]]).into())),
        oid::INT4 => fixed(4).and_then(|b| b.try_into().ok()).map(|b| ColumnValue::Int(i32::from_be_bytes(b).into())),
        oid::INT8 => fixed(8).and_then(|b| b.try_into().ok()).map(|b| ColumnValue::Int(i64::from_be_bytes(b))),
        oid::OID => fixed(4).and_then(|b| b.try_into().ok()).map(|b| ColumnValue::Int(u32::from_be_bytes(b).into())),
        oid::FLOAT4 => {
            fixed(4).and_then(|b| b.try_into().ok()).map(|b| ColumnValue::Float(f32::from_be_bytes(b).into()))
        }
        oid::FLOAT8 => fixed(8).and_then(|b| b.try_into().ok()).map(|b| ColumnValue::Float(f64::from_be_bytes(b))),
        oid::NUMERIC => decode_numeric(bytes).map(ColumnValue::Text),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::NAME | oid::UNKNOWN | oid::JSON => {
            std::str::from_utf8(bytes).ok().map(|text| ColumnValue::Text(text.to_owned()))
        }
        oid::JSONB => bytes
            .split_first()
            .and_then(|(_, text)| std::str::from_utf8(text).ok())
            .map(|text| ColumnValue::Text(text.to_owned())),
        _ => None,
    };
    decoded.unwrap_or(ColumnValue::Unreadable)
}

/// PostgreSQL's binary numeric (base-10000 digits) as decimal text, e.g. `-12.50`.
fn decode_numeric(bytes: &[u8]) -> Option<String> {
    let word = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let (count, weight, sign, scale) = (word(0)? as usize, word(2)? as i16, word(4)?, word(6)? as usize);
    match sign {
        0xC000 => return Some("NaN".into()),
        0xD000 => return Some("Infinity".into()),
        0xF000 => return Some("-Infinity".into()),
        _ => {}
    }
    let digits = (0..count).map(|index| word(8 + 2 * index)).collect::<Option<Vec<u16>>>()?;
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    // Integer part: digit groups at weights weight..=0.
    if weight < 0 {
        text.push('0');
    } else {
        for position in 0..=weight as usize {
            let group = digits.get(position).copied().unwrap_or(0);
            if position == 0 {
                text.push_str(&group.to_string());
            } else {
                text.push_str(&format!("{group:04}"));
            }
        }
    }
    if scale > 0 {
        let mut fraction = String::new();
        let first_fraction_group = weight as i32 + 1;
        let mut position = first_fraction_group;
        while fraction.len() < scale {
            let group = if position < 0 { 0 } else { digits.get(position as usize).copied().unwrap_or(0) };
            fraction.push_str(&format!("{group:04}"));
            position += 1;
        }
        fraction.truncate(scale);
        text.push('.');
        text.push_str(&fraction);
    }
    Some(text)
}

impl ColumnValue {
    pub fn to_value(&self) -> Option<minijinja::Value> {
        Some(match self {
            ColumnValue::Null | ColumnValue::Unreadable => return None,
            ColumnValue::Bool(value) => minijinja::Value::from(*value),
            ColumnValue::Int(value) => minijinja::Value::from(*value),
            ColumnValue::Float(value) => minijinja::Value::from(*value),
            ColumnValue::Text(value) => minijinja::Value::from(value.as_str()),
        })
    }

    /// Whether this value is the JSON value a check expects: equal numbers, booleans, strings,
    /// or null; a value read as text (the simple protocol) is compared by its text.
    fn equals(&self, expected: &serde_json::Value) -> bool {
        match (self, expected) {
            (ColumnValue::Null, serde_json::Value::Null) => true,
            (ColumnValue::Bool(value), serde_json::Value::Bool(expected)) => value == expected,
            (ColumnValue::Int(value), serde_json::Value::Number(expected)) => {
                expected.as_i64() == Some(*value) || expected.as_f64() == Some(*value as f64)
            }
            (ColumnValue::Float(value), serde_json::Value::Number(expected)) => expected.as_f64() == Some(*value),
            (ColumnValue::Text(value), serde_json::Value::String(expected)) => value == expected,
            (ColumnValue::Text(value), serde_json::Value::Number(expected)) => {
                value.parse::<f64>().ok().zip(expected.as_f64()).is_some_and(|(value, expected)| value == expected)
            }
            (ColumnValue::Text(value), serde_json::Value::Bool(expected)) => {
                matches!((value.as_str(), expected), ("t" | "true", true) | ("f" | "false", false))
            }
            (ColumnValue::Int(value), serde_json::Value::String(expected)) => value.to_string() == *expected,
            _ => false,
        }
    }
}

/// A step's result as its extractors and checks read it (the last statement's).
pub(crate) struct SqlResultView<'a> {
    pub row_count: u64,
    pub first_row: Option<&'a FirstRow>,
}

impl SqlResultView<'_> {
    /// The extractor's value, its default when the result has none, or `None`.
    pub fn extract(&self, extractor: &SqlExtractor) -> Option<minijinja::Value> {
        let found = match extractor.from {
            SqlExtractFrom::RowCount => Some(minijinja::Value::from(self.row_count)),
            SqlExtractFrom::Column => {
                let column = extractor.column.as_deref().unwrap_or_default();
                self.first_row.and_then(|row| row.column(column)).and_then(ColumnValue::to_value)
            }
        };
        found.or_else(|| extractor.default.as_ref().map(minijinja::Value::from_serialize))
    }

    pub fn passes(&self, check: &SqlCheck) -> bool {
        match check {
            SqlCheck::RowCount { equals, min, max } => {
                equals.is_none_or(|equals| self.row_count == equals)
                    && min.is_none_or(|min| self.row_count >= min)
                    && max.is_none_or(|max| self.row_count <= max)
            }
            SqlCheck::Column { column, equals } => {
                self.first_row.and_then(|row| row.column(column)).is_some_and(|value| value.equals(equals))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerics_read_as_decimal_text() {
        // 12.50: two digit groups (12, 5000), weight 0, positive, scale 2.
        let bytes = [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88];
        assert_eq!(decode_numeric(&bytes).as_deref(), Some("12.50"));
        // -10000: one group (1) at weight 1, negative, scale 0.
        let bytes = [0, 1, 0, 1, 0x40, 0, 0, 0, 0, 1];
        assert_eq!(decode_numeric(&bytes).as_deref(), Some("-10000"));
        // 0.05: one group (500) at weight -1, scale 2.
        let bytes = [0, 1, 0xFF, 0xFF, 0, 0, 0, 2, 0x01, 0xF4];
        assert_eq!(decode_numeric(&bytes).as_deref(), Some("0.05"));
    }

    #[test]
    fn checks_compare_json_values() {
        let row = FirstRow {
            columns: vec![("n".into(), ColumnValue::Int(3)), ("name".into(), ColumnValue::Text("7".into()))],
        };
        let view = SqlResultView { row_count: 1, first_row: Some(&row) };
        assert!(view.passes(&SqlCheck::Column { column: "n".into(), equals: serde_json::json!(3) }));
        assert!(view.passes(&SqlCheck::Column { column: "name".into(), equals: serde_json::json!(7) }));
        assert!(!view.passes(&SqlCheck::Column { column: "missing".into(), equals: serde_json::json!(3) }));
        assert!(view.passes(&SqlCheck::RowCount { equals: None, min: Some(1), max: Some(1) }));
        assert!(!view.passes(&SqlCheck::RowCount { equals: Some(2), min: None, max: None }));
    }
}
