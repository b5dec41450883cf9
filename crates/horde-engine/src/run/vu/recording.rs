//! A VU's side of exchange recording (`crate::exchange`): the record of one exchange begun,
//! the variables a step set, and the record redacted and kept for the worker's next part.
//! Called only for a claimed exchange: a run without recording never gets here.

use super::Vu;
use crate::exchange::{is_secret_name, text_prefix, value_text, Exchange, MAX_BODY_BYTES, MAX_HEAD_BYTES};
use crate::response_rules::{CompiledCheck, ResponseView};
use crate::run::worker_state::WorkerState;
use minijinja::Value;
use std::time::Instant;

impl Vu {
    /// A record of an exchange of step `index` begun at `started`: where and when it ran.
    pub(super) fn exchange_record(
        &self,
        state: &WorkerState,
        index: usize,
        transport: &'static str,
        started: Instant,
    ) -> Exchange {
        let (scenario, step, _) = &state.shared.plan.step_names[index];
        Exchange {
            scenario: scenario.clone(),
            step: step.clone(),
            phase: self.phase,
            transport,
            vu: self.number,
            iteration: self.iteration,
            started_s: started.saturating_duration_since(state.shared.start).as_secs_f64(),
            ..Exchange::default()
        }
    }

    /// A record of an HTTP request about to go out as `request` (its head, its body's start).
    pub(super) fn request_record(
        &self,
        state: &WorkerState,
        index: usize,
        started: Instant,
        request: &[u8],
    ) -> Exchange {
        let mut exchange = self.exchange_record(state, index, "http", started);
        let head_end = request.windows(4).position(|window| window == b"\r\n\r\n").unwrap_or(request.len());
        exchange.request = text_prefix(&request[..head_end], MAX_HEAD_BYTES);
        let body = request.get(head_end + 4..).unwrap_or_default();
        exchange.request_body = text_prefix(body, MAX_BODY_BYTES);
        exchange.request_body_bytes = body.len() as u64;
        exchange
    }

    /// Each of `vars` with its value now (`None`: unset).
    pub(super) fn extracted<'v>(&self, vars: impl Iterator<Item = &'v str>) -> Vec<(String, Option<String>)> {
        vars.map(|var| (var.to_owned(), self.vars.get(var).map(value_text))).collect()
    }

    /// Redacts the record (credential headers and query fields by name, and the values of the
    /// VU's variables and the plan's parameters named like a credential, a feeder row's fields
    /// included) and keeps it for the worker's next part.
    pub(super) fn keep_exchange(&self, state: &WorkerState, mut exchange: Exchange) {
        exchange.redact(self.secrets(state));
        state.exchanges.borrow_mut().push(exchange);
    }

    /// The values of the VU's variables and the plan's parameters named like a credential (a
    /// feeder row's fields included): what a recorded exchange or an error detail must not show.
    pub(super) fn secrets(&self, state: &WorkerState) -> Vec<String> {
        let mut secrets = Vec::new();
        for (name, value) in self.vars.iter() {
            secret_values(name, value, &mut secrets);
        }
        if let Ok(names) = state.shared.plan.params.try_iter() {
            for name in names {
                if let (Some(name), Ok(value)) = (name.as_str(), state.shared.plan.params.get_item(&name)) {
                    secret_values(name, &value, &mut secrets);
                }
            }
        }
        secrets.retain(|secret| secret.len() >= 4);
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        secrets
    }
}

/// The values held under names like a credential: `value` itself when `name` is one, else the
/// fields of a map (a feeder row) that are.
fn secret_values(name: &str, value: &Value, secrets: &mut Vec<String>) {
    if is_secret_name(name) {
        secrets.push(value.to_string());
        return;
    }
    if value.kind() == minijinja::value::ValueKind::Map {
        if let Ok(keys) = value.try_iter() {
            for key in keys {
                if let (Some(field), Ok(field_value)) = (key.as_str(), value.get_item(&key)) {
                    if is_secret_name(field) && !field_value.is_undefined() {
                        secrets.push(field_value.to_string());
                    }
                }
            }
        }
    }
}

/// Each of a step's checks judged again on what it received, for its record: its label, whether
/// it passed, and when not, what it expected and found.
pub(super) fn judged(
    labels: &[String],
    checks: &[CompiledCheck],
    view: &mut ResponseView<'_>,
) -> Vec<(String, bool, Option<String>)> {
    checks
        .iter()
        .enumerate()
        .map(|(index, check)| {
            let passed = check.passes(view);
            let why = (!passed).then(|| check.failure(view));
            (labels.get(index).cloned().unwrap_or_default(), passed, why)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_feeder_rows_credential_fields_are_secrets() {
        let path = std::env::temp_dir().join(format!("horde-recording-secrets-{}.csv", std::process::id()));
        std::fs::write(&path, "login,password\nann,hunter22\n").unwrap();
        let plan = horde_plan::Feeder {
            name: "user".into(),
            path: path.to_string_lossy().into_owned(),
            format: None,
            mode: Default::default(),
        };
        let feeder = crate::scenario::interpreter::Feeder::load(&plan);
        std::fs::remove_file(&path).unwrap();
        let mut secrets = Vec::new();
        secret_values("user", &feeder.unwrap().next_row(0), &mut secrets);
        assert_eq!(secrets, ["hunter22"]);
    }
}
