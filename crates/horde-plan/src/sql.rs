//! The `postgres` transport's part of the plan: `sql` steps, what they extract from a result and
//! what they check on it.
//!
//! A plan whose `target.base_url` is `postgresql://user@host:port/database` sends SQL straight to
//! the database: its scenarios hold `sql` steps (and the usual control flow) instead of `http`
//! steps. The password is never in the plan: `target.password_env` names an environment
//! variable (or `target.password_file` a file) the engine reads when it connects.

use crate::{OnCheckFailure, ThinkTime};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One SQL statement, or several run in one transaction, timed and recorded under `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlStep {
    pub name: String,
    /// One statement; `$1`, `$2`... are its `params`. Either this or `statements`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Templates rendered per execution into the query's parameters (sent as text; the server
    /// converts them to the parameters' types, as pgbench does).
    #[serde(default)]
    pub params: Vec<String>,
    /// Several statements run in one transaction (`BEGIN` ... `COMMIT`, rolled back on an
    /// error); extractors and checks read the last statement's result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<SqlStatement>,
    #[serde(default)]
    pub mode: SqlMode,
    #[serde(default)]
    pub think_time: Option<ThinkTime>,
    #[serde(default)]
    pub extract: Vec<SqlExtractor>,
    #[serde(default)]
    pub checks: Vec<SqlCheck>,
    #[serde(default)]
    pub on_check_failure: OnCheckFailure,
}

/// One statement of a transaction step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlStatement {
    pub query: String,
    #[serde(default)]
    pub params: Vec<String>,
}

/// How a statement goes over the wire (pgbench's `-M`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqlMode {
    /// The simple query protocol: parameters are quoted into the text as literals.
    Simple,
    /// The extended protocol with an unnamed statement: parse, bind and execute in one round trip.
    #[default]
    Extended,
    /// Prepared once per connection, then only bound and executed.
    Prepared,
}

/// Takes a value of the result into a VU variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlExtractor {
    pub var: String,
    pub from: SqlExtractFrom,
    /// `column`: the column's name (of the first row).
    #[serde(default)]
    pub column: Option<String>,
    /// Taken when there is no row, the column is NULL, or its type cannot be read.
    #[serde(default)]
    pub default: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqlExtractFrom {
    /// A column of the first row.
    Column,
    /// Rows returned (a query) or affected (an insert, update or delete).
    RowCount,
}

/// A condition a result must meet; a failed check counts the step as `check_failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum SqlCheck {
    RowCount {
        #[serde(default)]
        equals: Option<u64>,
        #[serde(default)]
        min: Option<u64>,
        #[serde(default)]
        max: Option<u64>,
    },
    Column {
        column: String,
        equals: Value,
    },
}

impl SqlStep {
    /// The statements to run, in order, with their parameters.
    pub fn statements(&self) -> Vec<(&str, &[String])> {
        match &self.query {
            Some(query) => vec![(query.as_str(), self.params.as_slice())],
            None => self
                .statements
                .iter()
                .map(|statement| (statement.query.as_str(), statement.params.as_slice()))
                .collect(),
        }
    }
}

/// Whether a base URL names a PostgreSQL database rather than an HTTP target.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgresql://") || url.starts_with("postgres://")
}
