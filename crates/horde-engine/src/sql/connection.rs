//! One PostgreSQL connection and how a statement goes over it in each mode.

use super::result::{ColumnValue, FirstRow};
use super::{quote_literal, SimplePart, StatementNode, TransactionEffect};
use horde_plan::SqlMode;
use std::collections::HashMap;
use tokio_postgres::types::{to_sql_checked, Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage, Statement};

/// A connection: the client half (the socket half runs as a task on the worker's `LocalSet`),
/// its prepared statements, and whether a transaction is open on it.
pub(crate) struct SqlConnection {
    client: Client,
    /// `mode: prepared`: by (step's global index, statement index).
    prepared: HashMap<(usize, usize), Statement>,
    /// A `BEGIN` ran and no `COMMIT`/`ROLLBACK` yet (by the statements' first keywords).
    pub in_transaction: bool,
}

/// What one statement returned: rows returned or affected, and the first row when asked for.
pub(crate) struct StatementOutcome {
    pub row_count: u64,
    /// The rows of the step's statements so far, this one's included (the step's `rows`).
    pub step_rows: u64,
    pub first_row: Option<FirstRow>,
}

impl SqlConnection {
    pub async fn connect(config: &tokio_postgres::Config) -> Result<Self, tokio_postgres::Error> {
        let (client, connection) = config.connect(NoTls).await?;
        tokio::task::spawn_local(async move {
            // Ends when the client is dropped or the server closes; the client sees the error.
            let _ = connection.await;
        });
        Ok(Self { client, prepared: HashMap::new(), in_transaction: false })
    }

    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Runs text with no parameters through the simple protocol (`BEGIN`, `COMMIT`, `ROLLBACK`).
    pub async fn batch(&mut self, text: &str) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute(text).await
    }

    /// Runs one statement with its rendered parameters.
    pub async fn run(
        &mut self,
        key: (usize, usize),
        statement: &StatementNode,
        params: &[String],
        mode: SqlMode,
        keep_row: bool,
    ) -> Result<StatementOutcome, tokio_postgres::Error> {
        let outcome = match mode {
            SqlMode::Simple => self.run_simple(statement, params, keep_row).await?,
            SqlMode::Extended => {
                let typed = params.iter().map(|param| (TextParam(param), UNSPECIFIED.clone()));
                let stream = self.client.query_typed_raw(&statement.query, typed).await?;
                read_rows(stream, keep_row).await?
            }
            SqlMode::Prepared => {
                let prepared = match self.prepared.get(&key) {
                    Some(prepared) => prepared.clone(),
                    None => {
                        let prepared = self.client.prepare(&statement.query).await?;
                        self.prepared.insert(key, prepared.clone());
                        prepared
                    }
                };
                let stream = self.client.query_raw(&prepared, params.iter().map(|param| TextParam(param))).await?;
                read_rows(stream, keep_row).await?
            }
        };
        match statement.transaction_effect {
            TransactionEffect::Begins => self.in_transaction = true,
            TransactionEffect::Ends => self.in_transaction = false,
            TransactionEffect::None => {}
        }
        Ok(outcome)
    }

    async fn run_simple(&mut self, statement: &StatementNode, params: &[String], keep_row: bool) -> Result<StatementOutcome, tokio_postgres::Error> {
        let text = if params.is_empty() {
            std::borrow::Cow::Borrowed(statement.query.as_str())
        } else {
            let mut text = String::with_capacity(statement.query.len() + 16 * params.len());
            for part in &statement.simple_parts {
                match part {
                    SimplePart::Text(piece) => text.push_str(piece),
                    // A placeholder past the parameters given stays NULL, as the server would say.
                    SimplePart::Param(index) => match params.get(*index) {
                        Some(value) => quote_literal(value, &mut text),
                        None => text.push_str("NULL"),
                    },
                }
            }
            std::borrow::Cow::Owned(text)
        };
        let mut row_count = 0;
        let mut first_row = None;
        for message in self.client.simple_query(&text).await? {
            match message {
                SimpleQueryMessage::Row(row) if keep_row && first_row.is_none() => {
                    let columns = row
                        .columns()
                        .iter()
                        .enumerate()
                        .map(|(index, column)| {
                            let value = row.get(index).map_or(ColumnValue::Null, |text| ColumnValue::Text(text.to_owned()));
                            (column.name().to_owned(), value)
                        })
                        .collect();
                    first_row = Some(FirstRow { columns });
                }
                SimpleQueryMessage::CommandComplete(count) => row_count = count,
                _ => {}
            }
        }
        Ok(StatementOutcome { row_count, step_rows: row_count, first_row })
    }
}

/// Reads a result to its end: its count, and its first row's columns when asked for.
async fn read_rows(stream: tokio_postgres::RowStream, keep_row: bool) -> Result<StatementOutcome, tokio_postgres::Error> {
    use futures_util::StreamExt;
    let mut stream = std::pin::pin!(stream);
    let mut rows = 0u64;
    let mut first_row = None;
    while let Some(row) = stream.next().await {
        let row = row?;
        if keep_row && first_row.is_none() {
            first_row = Some(FirstRow::decode(&row));
        }
        rows += 1;
    }
    let row_count = stream.rows_affected().unwrap_or(rows);
    Ok(StatementOutcome { row_count, step_rows: row_count, first_row })
}

/// A parameter's type left for the server to infer (OID 0), as an untyped literal's would be.
static UNSPECIFIED: std::sync::LazyLock<Type> =
    std::sync::LazyLock::new(|| Type::new("unspecified".into(), 0, tokio_postgres::types::Kind::Pseudo, "pg_catalog".into()));

/// A rendered template sent as a parameter in text format: the server parses it into the
/// parameter's type (an `int4`, a `timestamptz`...), as it does for pgbench's parameters.
#[derive(Debug)]
struct TextParam<'a>(&'a str);

impl ToSql for TextParam<'_> {
    fn to_sql(&self, _type: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_type: &Type) -> bool {
        true
    }

    fn encode_format(&self, _type: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}
