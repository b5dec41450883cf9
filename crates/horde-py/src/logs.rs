//! `profile_logs`: access logs read and added up by `horde-logs` (what `horde profile` builds
//! its profile from), with Horde's redaction rules asked of Python (`horde.plan.redaction`
//! owns them). The GIL is held: the rules and the progress callback are Python, and the
//! callback checks for Ctrl-C every 65,536 lines.

use std::cell::RefCell;
use std::path::PathBuf;

use horde_logs::json::{Field, JsonFields, JsonParser, JsonSession};
use horde_logs::profile::{profile, Endpoint, Format, LogHistogram, Options, Stop};
use horde_logs::read::ReadError;
use horde_logs::template::{Given, GivenPiece, Kind, Piece, Rules, Templated, Templater};
use horde_logs::text::TextParser;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;

/// The rules as Python callables (one missing: never); their first error is kept and raised
/// after the reading.
struct PyRules<'a, 'py> {
    is_secret_parameter: Option<Bound<'py, PyAny>>,
    names_a_secret: Option<Bound<'py, PyAny>>,
    has_email: Option<Bound<'py, PyAny>>,
    error: &'a RefCell<Option<PyErr>>,
}

impl PyRules<'_, '_> {
    fn ask(&self, rule: &Option<Bound<'_, PyAny>>, text: &str) -> bool {
        let Some(rule) = rule else { return false };
        match rule.call1((text,)).and_then(|answer| answer.is_truthy()) {
            Ok(answer) => answer,
            Err(error) => {
                self.error.borrow_mut().get_or_insert(error);
                true // a rule that failed keeps the value out of the plan
            }
        }
    }

    fn raise(error: RefCell<Option<PyErr>>) -> PyResult<()> {
        error.into_inner().map_or(Ok(()), Err)
    }
}

impl Rules for PyRules<'_, '_> {
    fn is_secret_parameter(&mut self, name: &str) -> bool {
        self.ask(&self.is_secret_parameter, name)
    }
    fn names_a_secret(&mut self, segment: &str) -> bool {
        self.ask(&self.names_a_secret, segment)
    }
    fn has_email(&mut self, text: &str) -> bool {
        self.ask(&self.has_email, text)
    }
}

/// Templates given (`horde.profile.endpoints.GivenTemplate`): (method or None, pieces: text or
/// placeholder index, labels, secret flags).
type GivenTemplates<'py> = Vec<(Option<String>, Vec<Bound<'py, PyAny>>, Vec<String>, Vec<bool>)>;

fn given(templates: GivenTemplates<'_>) -> PyResult<Vec<Given>> {
    templates
        .into_iter()
        .map(|(method, pieces, labels, secret)| {
            let pieces = pieces
                .iter()
                .map(|piece| match piece.extract::<String>() {
                    Ok(text) => Ok(GivenPiece::Text(text)),
                    Err(_) => piece.extract::<usize>().map(GivenPiece::Slot),
                })
                .collect::<PyResult<Vec<_>>>()?;
            Given::new(method, &pieces, labels, secret).map_err(pyo3::exceptions::PyValueError::new_err)
        })
        .collect()
}

/// A JSON log's fields: role -> (name, nested: a dotted path into nested objects).
type FieldsGiven = HashMap<String, (String, bool)>;
/// How sessions are told: None (client and agent), ("cookie", name, false) or ("header",
/// field, nested).
type SessionGiven = Option<(String, String, bool)>;

fn json_format(fields: &FieldsGiven, duration_ms: f64, session: &SessionGiven) -> PyResult<Format> {
    let field = |role: &str| fields.get(role).map(|(name, nested)| Field::new(name, *nested));
    let time = field("time").ok_or_else(|| pyo3::exceptions::PyValueError::new_err("a JSON log needs a time field"))?;
    let fields = JsonFields {
        time,
        method: field("method"),
        path: field("path"),
        query: field("query"),
        request: field("request"),
        status: field("status"),
        duration: field("duration"),
        client: field("client"),
        agent: field("agent"),
        cookie: field("cookie"),
    };
    let session = match session {
        None => JsonSession::ByClient,
        Some((kind, name, _)) if kind == "cookie" => JsonSession::Cookie(name.clone()),
        Some((_, name, nested)) => JsonSession::Header(Field::new(name, *nested)),
    };
    Ok(Format::Json { fields: Box::new(fields), duration_ms, session })
}

fn record_tuple<'py>(py: Python<'py>, r: horde_logs::text::Record<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok((r.time_s, &*r.method, &*r.target, r.status, r.duration_ms, &*r.client, &*r.agent, r.session.as_deref())
        .into_pyobject(py)?
        .into_any())
}

/// JSON lines one at a time (the Python reader's tests and first lines).
#[pyclass(module = "horde._engine", name = "JsonLineParser")]
pub(crate) struct PyJsonLineParser {
    inner: JsonParser,
}

#[pymethods]
impl PyJsonLineParser {
    #[new]
    fn new(fields: FieldsGiven, duration_ms: f64, session: SessionGiven) -> PyResult<Self> {
        match json_format(&fields, duration_ms, &session)? {
            Format::Json { fields, duration_ms, session } => {
                Ok(PyJsonLineParser { inner: JsonParser::new(*fields, duration_ms, session) })
            }
            Format::Text { .. } => unreachable!("json_format gives JSON"),
        }
    }

    /// `(time_s, method, target, status, duration_ms, client, agent, session)`, or why the line
    /// is no request.
    fn parse<'py>(&self, py: Python<'py>, line: &str) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.parse(line) {
            Ok(record) => record_tuple(py, record),
            Err(reason) => Ok(reason.into_owned().into_pyobject(py)?.into_any()),
        }
    }
}

/// Up to `count` non-blank lines from the start of a log (format detection), a line past the
/// limit left out: `("lines", [...])`, `("not_text", zeros)` or `("io", message)`.
#[pyfunction]
pub(crate) fn first_lines<'py>(py: Python<'py>, path: PathBuf, count: usize) -> PyResult<Bound<'py, PyAny>> {
    let failed = |error: ReadError| -> PyResult<Bound<'py, PyAny>> {
        Ok(match error {
            ReadError::NotText { zeros } => ("not_text", zeros).into_pyobject(py)?.into_any(),
            ReadError::Io { message, .. } => ("io", message).into_pyobject(py)?.into_any(),
        })
    };
    let mut reader = match horde_logs::read::LineReader::open(&path) {
        Ok(reader) => reader,
        Err(error) => return failed(error),
    };
    let mut lines = Vec::new();
    while lines.len() < count {
        match reader.next_line() {
            Ok(Some(horde_logs::read::Line::Text(bytes))) => {
                let text = String::from_utf8_lossy(bytes);
                if !text.chars().all(horde_logs::text::is_space) {
                    lines.push(text.into_owned());
                }
            }
            Ok(Some(horde_logs::read::Line::Long(_))) => {}
            Ok(None) => break,
            Err(error) => return failed(error),
        }
    }
    Ok(("lines", lines).into_pyobject(py)?.into_any())
}

/// One combined or nginx line at a time (the Python reader's tests and first lines).
#[pyclass(module = "horde._engine", name = "CombinedParser")]
pub(crate) struct PyCombinedParser {
    inner: TextParser,
}

#[pymethods]
impl PyCombinedParser {
    #[new]
    #[pyo3(signature = (*, nginx, time_unit_ms, session_name))]
    fn new(nginx: bool, time_unit_ms: Option<f64>, session_name: Option<String>) -> Self {
        PyCombinedParser { inner: TextParser::new(nginx, time_unit_ms, session_name) }
    }

    /// `(time_s, method, target, status, duration_ms, client, agent, session)`, or why the line
    /// is no request.
    fn parse<'py>(&mut self, py: Python<'py>, line: &str) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.parse(line) {
            Ok(record) => record_tuple(py, record),
            Err(reason) => Ok(reason.into_pyobject(py)?.into_any()),
        }
    }
}

type Template = (Vec<Py<PyAny>>, Vec<String>, Vec<(String, &'static str, &'static str)>, Vec<Option<String>>);

/// The rules as Python callables held between calls (a [`PyTemplater`]'s); their first error
/// is kept and raised after the call.
struct HeldRules {
    is_secret_parameter: Py<PyAny>,
    names_a_secret: Py<PyAny>,
    has_email: Py<PyAny>,
    error: Option<PyErr>,
}

impl HeldRules {
    fn ask(rule: &Py<PyAny>, error: &mut Option<PyErr>, text: &str) -> bool {
        Python::attach(|py| match rule.bind(py).call1((text,)).and_then(|answer| answer.is_truthy()) {
            Ok(answer) => answer,
            Err(failed) => {
                error.get_or_insert(failed);
                true // a rule that failed keeps the value out of the plan
            }
        })
    }
}

impl Rules for HeldRules {
    fn is_secret_parameter(&mut self, name: &str) -> bool {
        Self::ask(&self.is_secret_parameter, &mut self.error, name)
    }
    fn names_a_secret(&mut self, segment: &str) -> bool {
        Self::ask(&self.names_a_secret, &mut self.error, segment)
    }
    fn has_email(&mut self, text: &str) -> bool {
        Self::ask(&self.has_email, &mut self.error, text)
    }
}

/// Requests templated one at a time (the Python reader's), the rules' answers remembered.
#[pyclass(module = "horde._engine", name = "Templater", unsendable)]
pub(crate) struct PyTemplater {
    inner: Templater<HeldRules>,
    out: Templated,
}

#[pymethods]
impl PyTemplater {
    #[new]
    fn new(
        is_secret_parameter: Py<PyAny>,
        names_a_secret: Py<PyAny>,
        has_email: Py<PyAny>,
        templates: GivenTemplates<'_>,
    ) -> PyResult<Self> {
        let rules = HeldRules { is_secret_parameter, names_a_secret, has_email, error: None };
        Ok(PyTemplater { inner: Templater::with_given(rules, given(templates)?), out: Templated::default() })
    }

    /// A request's endpoint: `(pieces (str | slot index), query names, slots [(label, kind,
    /// where)], values)`.
    fn template(&mut self, py: Python<'_>, method: &str, target: &str) -> PyResult<Template> {
        self.inner.template(method, target, &mut self.out);
        if let Some(error) = self.inner.rules_mut().error.take() {
            return Err(error);
        }
        let shape = self.out.shape(method, target);
        let pieces = shape
            .pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => Ok(text.into_pyobject(py)?.into_any().unbind()),
                Piece::Slot(index) => Ok(index.into_pyobject(py)?.into_any().unbind()),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let slots = shape
            .slots
            .iter()
            .map(|slot| (slot.label.clone(), slot.kind.name(), if slot.in_query { "query" } else { "path" }))
            .collect();
        let values = self.out.values.iter().map(|value| value.map(|(a, b)| target[a..b].to_string())).collect();
        Ok((pieces, shape.query, slots, values))
    }
}

/// The kind of id a path segment (or a value) is, or None when it is literal text.
#[pyfunction]
pub(crate) fn classify(segment: &str, has_email: Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let error = RefCell::new(None);
    let rules = PyRules { is_secret_parameter: None, names_a_secret: None, has_email: Some(has_email), error: &error };
    let kind = Templater::new(rules).classify(segment);
    PyRules::raise(error)?;
    Ok(kind.map(Kind::name))
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
    dict.set_item("per_minute", stats.per_minute.clone())?;
    Ok(dict)
}

/// Reads combined or nginx logs into their aggregate (see `python/horde/_engine.pyi`).
#[pyfunction]
#[pyo3(signature = (paths, *, nginx, time_unit_ms, session_name, json_fields, json_duration_ms, json_session, templates, session_gap_s, max_endpoints, is_secret_parameter, names_a_secret, has_email, on_progress=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn profile_logs<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    nginx: bool,
    time_unit_ms: Option<f64>,
    session_name: Option<String>,
    json_fields: Option<FieldsGiven>,
    json_duration_ms: f64,
    json_session: SessionGiven,
    templates: GivenTemplates<'py>,
    session_gap_s: f64,
    max_endpoints: usize,
    is_secret_parameter: Bound<'py, PyAny>,
    names_a_secret: Bound<'py, PyAny>,
    has_email: Bound<'py, PyAny>,
    on_progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (format, keyed_sessions) = match &json_fields {
        Some(fields) => (json_format(fields, json_duration_ms, &json_session)?, json_session.is_some()),
        None => (Format::Text { nginx, time_unit_ms, session_name: session_name.clone() }, session_name.is_some()),
    };
    let options = Options { format, templates: given(templates)?, keyed_sessions, session_gap_s, max_endpoints };
    let error = RefCell::new(None);
    let rules = PyRules {
        is_secret_parameter: Some(is_secret_parameter),
        names_a_secret: Some(names_a_secret),
        has_email: Some(has_email),
        error: &error,
    };
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
    PyRules::raise(error)?;
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
    let sample = PyList::empty(py);
    for session in &s.sample {
        sample.append((session.mix.clone(), session.think_ms_total, session.thinks))?;
    }
    sessions.set_item("sample", sample)?;
    sessions.set_item("paced", s.paced)?;
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
