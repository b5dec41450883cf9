//! `profile_logs`: access logs read and added up by `horde-logs` (what `horde profile` builds
//! its profile from), with Horde's redaction rules asked of Python (`horde.plan.redaction`
//! owns them). The GIL is held: the rules and the progress callback are Python, and the
//! callback checks for Ctrl-C every 65,536 lines.

use std::cell::RefCell;
use std::path::PathBuf;

use horde_logs::profile::{profile, Endpoint, LogHistogram, Options, Stop};
use horde_logs::read::ReadError;
use horde_logs::template::{Piece, Rules};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

/// The rules as Python callables; their first error is kept and raised after the reading.
struct PyRules<'py> {
    is_secret_parameter: Bound<'py, PyAny>,
    has_email: Bound<'py, PyAny>,
    error: &'py RefCell<Option<PyErr>>,
}

impl PyRules<'_> {
    fn ask(&self, rule: &Bound<'_, PyAny>, text: &str) -> bool {
        match rule.call1((text,)).and_then(|answer| answer.is_truthy()) {
            Ok(answer) => answer,
            Err(error) => {
                self.error.borrow_mut().get_or_insert(error);
                true // a rule that failed keeps the value out of the plan
            }
        }
    }
}

impl Rules for PyRules<'_> {
    fn is_secret_parameter(&mut self, name: &str) -> bool {
        self.ask(&self.is_secret_parameter, name)
    }
    fn has_email(&mut self, text: &str) -> bool {
        self.ask(&self.has_email, text)
    }
}

fn histogram<'py>(py: Python<'py>, histogram: &LogHistogram) -> PyResult<Bound<'py, PyTuple>> {
    (histogram.buckets(), histogram.count, histogram.total, histogram.maximum, histogram.zeros).into_pyobject(py)
}

fn endpoint<'py>(py: Python<'py>, stats: &Endpoint) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let shapes = PyList::empty(py);
    for shape in &stats.shapes {
        let pieces = PyList::empty(py);
        for piece in &shape.pieces {
            match piece {
                Piece::Text(text) => pieces.append(text)?,
                Piece::Slot(index) => pieces.append(index)?,
            }
        }
        let slots: Vec<(&str, &str, &str)> = shape
            .slots
            .iter()
            .map(|slot| (slot.label.as_str(), slot.kind.name(), if slot.in_query { "query" } else { "path" }))
            .collect();
        shapes.append((shape.method.as_str(), pieces, shape.query.clone(), slots))?;
    }
    dict.set_item("shapes", shapes)?;
    dict.set_item("count", stats.count)?;
    dict.set_item("timing", histogram(py, &stats.timing)?)?;
    dict.set_item("statuses", stats.statuses.clone())?;
    let samples = PyList::empty(py);
    for sample in &stats.samples {
        samples.append(PyTuple::new(py, sample)?)?;
    }
    dict.set_item("samples", samples)?;
    Ok(dict)
}

/// Reads combined or nginx logs into their aggregate (see `python/horde/_engine.pyi`).
#[pyfunction]
#[pyo3(signature = (paths, *, nginx, time_unit_ms, session_name, session_gap_s, max_endpoints, is_secret_parameter, has_email, on_progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn profile_logs<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    nginx: bool,
    time_unit_ms: Option<f64>,
    session_name: Option<String>,
    session_gap_s: f64,
    max_endpoints: usize,
    is_secret_parameter: Bound<'py, PyAny>,
    has_email: Bound<'py, PyAny>,
    on_progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = Options { nginx, time_unit_ms, session_name, session_gap_s, max_endpoints };
    let error = RefCell::new(None);
    let rules = PyRules { is_secret_parameter, has_email, error: &error };
    let progress = |counts: &horde_logs::profile::Counts| -> PyResult<()> {
        py.check_signals()?;
        if let Some(callback) = &on_progress {
            callback.call1((counts.lines, counts.records, counts.bad, counts.bytes_read, counts.bytes_total))?;
        }
        Ok(())
    };
    let result = PyDict::new(py);
    let aggregate = match profile(&paths, &options, rules, progress) {
        Ok(aggregate) => aggregate,
        Err(Stop::Progress(error)) => return Err(error),
        Err(Stop::Read { file, error }) => {
            let failure = PyDict::new(py);
            failure.set_item("file", file)?;
            match error {
                ReadError::Io { line, message } => {
                    failure.set_item("kind", "io")?;
                    failure.set_item("line", line)?;
                    failure.set_item("message", message)?;
                }
                ReadError::NotText { zeros } => {
                    failure.set_item("kind", "not_text")?;
                    failure.set_item("zeros", zeros)?;
                }
            }
            result.set_item("error", failure)?;
            return Ok(result);
        }
    };
    if let Some(error) = error.into_inner() {
        return Err(error);
    }
    let endpoints = PyList::empty(py);
    for stats in &aggregate.endpoints {
        endpoints.append(endpoint(py, stats)?)?;
    }
    result.set_item("endpoints", endpoints)?;
    result.set_item("other", aggregate.other.as_ref().map(|other| endpoint(py, other)).transpose()?)?;
    result.set_item("per_minute", aggregate.per_minute)?;
    let sessions = PyDict::new(py);
    let s = &aggregate.sessions;
    sessions.set_item("think_ms", histogram(py, &s.think_ms)?)?;
    sessions.set_item("lengths", s.lengths.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>())?;
    sessions.set_item("transitions", s.transitions.clone())?;
    sessions.set_item("transitions_pruned", s.transitions_pruned)?;
    sessions.set_item("unkeyed", s.unkeyed)?;
    sessions.set_item("closed_early", s.closed_early)?;
    result.set_item("sessions", sessions)?;
    let c = &aggregate.counts;
    let counts = PyDict::new(py);
    counts.set_item("lines", c.lines)?;
    counts.set_item("records", c.records)?;
    counts.set_item("bad", c.bad)?;
    let bad: Vec<(usize, u64, &str, &str)> =
        c.bad_samples.iter().map(|b| (b.file, b.line, b.reason.as_str(), b.text.as_str())).collect();
    counts.set_item("bad_samples", bad)?;
    counts.set_item("bytes_read", c.bytes_read)?;
    counts.set_item("bytes_total", c.bytes_total)?;
    result.set_item("counts", counts)?;
    result.set_item("refused", aggregate.refused.map(|r| (r.bad, r.lines, r.file)))?;
    Ok(result)
}
