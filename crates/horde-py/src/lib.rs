//! `horde._engine`: the Python face of the engine, and the only crate that knows Python.
//!
//! It turns plan JSON into a running [`horde_engine::RunHandle`], hands snapshots to Python as
//! plain dicts (histograms as HDR V2 `bytes`), exposes the pure histogram functions the control
//! plane needs for exact merges, and starts the built-in target. The GIL is released whenever
//! the call waits or works (polling for a snapshot, merging histograms, stopping a target), so
//! the engine's threads and Python's never wait on each other. `link.rs`: the emulated link
//! (`horde link`, crate `horde-link`). `logs.rs`: access logs read and added up for
//! `horde profile` (crate `horde-logs`).
//!
//! Error mapping: a bad plan raises `ValueError` (the control plane has already checked it with
//! pydantic, so this is the second line of defence); a setup fault raises `RuntimeError`;
//! a target that cannot listen raises `OSError`. Failed requests never raise: they are counted.

mod link;
mod logs;
mod snapshots;

use horde_engine::{EngineError, EngineOptions, GeneratorShare, Next, RunControl};
use horde_target::{Capacity, GatewayConfig, GatewayFraming, GatewayHandle, ServiceTimes, TargetConfig, TargetHandle};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::Mutex;
use std::time::Duration;

/// Every problem of a plan as `(path, message, hint)` triples (the hint None where the rule has
/// none); empty when the engine can run it.
#[pyfunction]
fn validate_plan(plan_json: &str) -> Triples {
    match horde_plan::decode_and_validate(plan_json) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.into_iter().map(|problem| (problem.path, problem.message, problem.hint)).collect(),
    }
}

/// Problems as the binding gives them: `(path, message, hint)`, the hint None where the rule
/// has none.
type Triples = Vec<(String, String, Option<String>)>;

/// One part of a plan decoded from JSON and checked alone by `check`; a JSON that is no such
/// part is a ValueError (the Python types that dumped it agree with horde-plan's).
fn part_problems<T: serde::de::DeserializeOwned>(
    json: &str,
    what: &str,
    check: fn(&T) -> Vec<horde_plan::PlanError>,
) -> PyResult<Triples> {
    let part: T = serde_json::from_str(json)
        .map_err(|error| pyo3::exceptions::PyValueError::new_err(format!("{what}: {error}")))?;
    Ok(check(&part).into_iter().map(|problem| (problem.path, problem.message, problem.hint)).collect())
}

/// A target's own problems (its URLs, how VUs reach it, its options against its protocol),
/// located under `target.`: horde-plan's rules, which the plan's Python types ask as a target
/// is built.
#[pyfunction]
fn target_problems(target_json: &str) -> PyResult<Triples> {
    part_problems(target_json, "target", horde_plan::target_problems)
}

/// A workload's own problems (its stages, its levels' bounds), located under `workload.`.
#[pyfunction]
fn workload_problems(workload_json: &str) -> PyResult<Triples> {
    part_problems(workload_json, "workload", horde_plan::workload_problems)
}

/// The structure problems of a scenario's JSON, of any shape (names unique at any depth, how
/// deep steps nest, feeders and the variables beside them, pacing against the workload),
/// located from the scenario: horde-plan's rules, which the plan's Python types ask as a scenario
/// is built, listed with its type mistakes.
#[pyfunction]
fn scenario_structure_problems(scenario_json: &str) -> PyResult<Triples> {
    part_problems(scenario_json, "scenario", horde_plan::scenario_structure_problems)
}

/// Whether a header, query field, body field, variable or parameter so named carries a
/// credential: horde-plan's rule, the one the engine redacts recorded exchanges by.
#[pyfunction]
fn is_secret_name(name: &str) -> bool {
    horde_plan::secrets::is_secret_name(name)
}

/// Whether a query field so named holds a secret: a credential's name, or a one-time field.
#[pyfunction]
fn is_secret_query_field(name: &str) -> bool {
    horde_plan::secrets::is_secret_query_field(name)
}

/// Why `name` cannot name a variable templates read (`what` says which: "feeder name",
/// "variable"): the problem and its hint, or None. horde-plan's rule, which the plan's Python
/// types ask when a plan is built in code.
#[pyfunction]
fn variable_name_problem(name: &str, what: &str) -> Option<(String, String)> {
    horde_plan::templates::variable_name_problem(name, what)
}

/// The HTTP methods an http step sends (horde-plan's one list).
#[pyfunction]
fn http_methods() -> Vec<&'static str> {
    horde_plan::METHODS.to_vec()
}

/// Why an http step cannot send `method`: the problem and its hint, or None (horde-plan's rule).
#[pyfunction]
fn method_problem(method: &str) -> Option<(String, String)> {
    horde_plan::method_problem(method)
}

/// The engine's bounds on a plan's values, by name: counts as ints, amounts as floats. The one
/// copy `horde.plan` reads (`horde_plan::bounds`).
#[pyfunction]
fn plan_bounds(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let found = PyDict::new(py);
    for (name, bound) in horde_plan::bounds() {
        match bound {
            horde_plan::Bound::Count(count) => found.set_item(name, count)?,
            horde_plan::Bound::Amount(amount) => found.set_item(name, amount)?,
        }
    }
    Ok(found)
}

/// A running plan. Poll it for snapshots; stop it when you like.
#[pyclass(module = "horde._engine", name = "RunHandle")]
struct PyRunHandle {
    // Polling happens with the GIL released, so the handle lives behind its own lock.
    inner: Mutex<horde_engine::RunHandle>,
    // Stop and re-target go through here, so they never wait for a poll in progress.
    control: RunControl,
}

#[pymethods]
impl PyRunHandle {
    /// The next snapshot as a dict, or None if none arrived within `timeout_s`, or after the
    /// final one.
    fn poll<'py>(&self, py: Python<'py>, timeout_s: f64) -> PyResult<Option<Bound<'py, PyDict>>> {
        let timeout = Duration::from_secs_f64(timeout_s.max(0.0));
        let next = py.detach(|| self.inner.lock().map(|mut run| run.next_snapshot(timeout)).map_err(|_| ()));
        match next {
            Ok(Next::Snapshot(snapshot)) => Ok(Some(snapshots::to_dict(py, &snapshot)?)),
            Ok(Next::Pending | Next::Finished) => Ok(None),
            Err(_) => Err(PyRuntimeError::new_err("the run handle is unusable after a panic")),
        }
    }

    /// Stops new iterations; in-flight requests get the plan's grace period.
    fn stop(&self) {
        self.control.stop();
    }

    /// Moves scenario number `scenario` to `level` (VUs for a closed model, arrivals/s for an
    /// open one) over `ramp_s` seconds (at once when 0); raises ValueError when out of range.
    #[pyo3(signature = (scenario, level, ramp_s=0.0))]
    fn retarget(&self, scenario: usize, level: f64, ramp_s: f64) -> PyResult<()> {
        if !ramp_s.is_finite() || ramp_s < 0.0 {
            return Err(PyValueError::new_err(format!("a ramp must last 0 s or more (got {ramp_s})")));
        }
        self.control
            .retarget(scenario, level, Duration::from_secs_f64(ramp_s.min(horde_plan::MAX_STAGE_DURATION_S)))
            .map_err(|error| PyValueError::new_err(error.to_string()))
    }

    /// Sets scenario number `scenario`'s pace factor: each pause its VUs start from now on
    /// (think times, pacing) is the plan's divided by `factor` (2.0: twice the pace, 0.5: half),
    /// the VU count unchanged; pauses already waiting keep their end. Raises ValueError unless
    /// `factor` is finite and between 0.001 and 1000, or when there is no such scenario.
    fn repace(&self, scenario: usize, factor: f64) -> PyResult<()> {
        self.control.repace(scenario, factor).map_err(|error| PyValueError::new_err(error.to_string()))
    }

    /// True once the final snapshot has been returned by `poll`.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.lock().map(|run| run.is_finished()).unwrap_or(true)
    }

    /// Seconds until the stages end (without the grace period).
    #[getter]
    fn planned_duration_s(&self) -> f64 {
        self.inner.lock().map(|run| run.planned_duration().as_secs_f64()).unwrap_or(0.0)
    }
}

/// Starts a run of `plan_json` on `workers` threads (default: one per core). A generator of a
/// run spread over several gives its place (its workers hold slots `first_slot`... of `slots`,
/// see `GeneratorShare`) and the agreed start (`start_at`, seconds since the Unix epoch on this
/// machine's clock).
#[pyfunction]
#[pyo3(signature = (plan_json, workers=None, first_slot=None, slots=None, start_at=None, record_exchanges=0, single_iteration=false))]
#[allow(clippy::too_many_arguments)]
fn start_run(
    py: Python<'_>,
    plan_json: &str,
    workers: Option<usize>,
    first_slot: Option<usize>,
    slots: Option<usize>,
    start_at: Option<f64>,
    record_exchanges: u32,
    single_iteration: bool,
) -> PyResult<PyRunHandle> {
    let plan = horde_plan::decode(plan_json).map_err(|error| PyValueError::new_err(error.to_string()))?;
    let mut options = EngineOptions { record_exchanges, single_iteration, ..EngineOptions::default() };
    if let Some(workers) = workers {
        if workers == 0 {
            return Err(PyValueError::new_err("workers must be at least 1"));
        }
        options.workers = workers;
    }
    options.generator = match (first_slot, slots) {
        (Some(first_slot), Some(slots)) => Some(GeneratorShare { first_slot, slots }),
        (None, None) => None,
        _ => return Err(PyValueError::new_err("give first_slot and slots together")),
    };
    if let Some(at) = start_at {
        if !(at.is_finite() && at > 0.0) {
            return Err(PyValueError::new_err(format!("start_at must be seconds since the Unix epoch (got {at})")));
        }
        options.start_at = Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(at));
    }
    let run = py.detach(|| horde_engine::start(&plan, options)).map_err(|error| match error {
        EngineError::InvalidPlan(_) => PyValueError::new_err(error.to_string()),
        EngineError::Setup(message) => PyRuntimeError::new_err(message),
    })?;
    Ok(PyRunHandle { control: run.control(), inner: Mutex::new(run) })
}

/// Merges HDR V2 histograms exactly; returns the merged one, HDR V2 encoded.
#[pyfunction]
fn histogram_merge<'py>(py: Python<'py>, parts: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
    let encoded = py.detach(|| {
        let merged = horde_metrics::merge_encoded(parts.iter().map(Vec::as_slice))?;
        horde_metrics::encode_histogram(&merged)
    });
    encoded.map(|bytes| PyBytes::new(py, &bytes)).map_err(|error| PyValueError::new_err(error.to_string()))
}

/// Count, min, max, mean and the given percentiles (0..100) of an HDR V2 histogram, in µs.
#[pyfunction]
fn histogram_stats<'py>(py: Python<'py>, blob: &[u8], percentiles: Vec<f64>) -> PyResult<Bound<'py, PyDict>> {
    let histogram = horde_metrics::decode_histogram(blob).map_err(|error| PyValueError::new_err(error.to_string()))?;
    let dict = PyDict::new(py);
    let empty = histogram.is_empty();
    dict.set_item("count", histogram.len())?;
    dict.set_item("min_us", if empty { 0 } else { histogram.min() })?;
    dict.set_item("max_us", if empty { 0 } else { histogram.max() })?;
    dict.set_item("mean_us", if empty { 0.0 } else { histogram.mean() })?;
    let values: Vec<u64> = percentiles
        .iter()
        .map(|percentile| if empty { 0 } else { histogram.value_at_quantile((percentile / 100.0).clamp(0.0, 1.0)) })
        .collect();
    dict.set_item("percentiles_us", values)?;
    Ok(dict)
}

/// The non-empty buckets of an HDR V2 histogram, lowest first, as `(lowest_us, highest_us,
/// count)`: every value the histogram cannot tell apart at its precision, both ends inclusive.
/// For rank tests, distribution charts and fixed-bucket exposition; the GIL is released.
#[pyfunction]
fn histogram_buckets(py: Python<'_>, blob: &[u8]) -> PyResult<Vec<(u64, u64, u64)>> {
    let histogram = horde_metrics::decode_histogram(blob).map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok(py.detach(|| {
        histogram
            .iter_recorded()
            .map(|bucket| {
                let value = bucket.value_iterated_to();
                (histogram.lowest_equivalent(value), histogram.highest_equivalent(value), bucket.count_at_value())
            })
            .collect()
    }))
}

/// An HDR V2 histogram of `values_us` (microseconds; 0 counts as 1, as in the engine), encoded as
/// the engine encodes its own: lets tests build snapshots whose percentiles are known answers.
#[pyfunction]
fn histogram_from_values<'py>(py: Python<'py>, values_us: Vec<u64>) -> PyResult<Bound<'py, PyBytes>> {
    let mut histogram = horde_metrics::new_latency_histogram();
    for value_us in values_us {
        horde_metrics::record_latency(&mut histogram, value_us);
    }
    let encoded =
        horde_metrics::encode_histogram(&histogram).map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok(PyBytes::new(py, &encoded))
}

/// The built-in target, running on its own thread until stopped.
#[pyclass(module = "horde._engine", name = "TargetHandle")]
struct PyTargetHandle {
    inner: Mutex<Option<TargetHandle>>,
    port: u16,
    /// The gateway's TCP and UDP ports, when asked for (`tcp_port`, `udp_port`).
    gateway: Mutex<Option<GatewayHandle>>,
    tcp_port: Option<u16>,
    udp_port: Option<u16>,
    kcp_port: Option<u16>,
}

#[pymethods]
impl PyTargetHandle {
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    #[getter]
    fn tcp_port(&self) -> Option<u16> {
        self.tcp_port
    }

    #[getter]
    fn udp_port(&self) -> Option<u16> {
        self.udp_port
    }

    #[getter]
    fn kcp_port(&self) -> Option<u16> {
        self.kcp_port
    }

    /// Stops the target and its gateway (bounded: returns within about 2 s each).
    fn stop(&self, py: Python<'_>) {
        let handle = self.inner.lock().ok().and_then(|mut inner| inner.take());
        if let Some(handle) = handle {
            py.detach(|| handle.stop());
        }
        let gateway = self.gateway.lock().ok().and_then(|mut gateway| gateway.take());
        if let Some(gateway) = gateway {
            py.detach(|| gateway.stop());
        }
    }
}

/// Starts the built-in target. `workers` and `service_ms` together set the capacity model
/// (at most `workers` requests in service, each taking `service_ms`, or that on average when
/// `service_times` is `"exponential"`). `tcp_port`, `udp_port` and `kcp_port` start the gateway on those
/// ports too (0: a free one), its TCP messages framed as `tcp_framing` says (`newline`,
/// `length1`, `length2` or `length4`: a big-endian length prefix). `shared` (serial ms,
/// crosstalk ms) joins the resource the process's targets share (`horde_target::SharedCosts`).
#[pyfunction]
#[pyo3(signature = (host="127.0.0.1", port=0, workers=None, service_ms=None, threads=1, service_times="fixed",
                    tcp_port=None, udp_port=None, tcp_framing="newline", kcp_port=None, tls=None, shared=None))]
#[allow(clippy::too_many_arguments)]
fn start_target(
    py: Python<'_>,
    host: &str,
    port: u16,
    workers: Option<usize>,
    service_ms: Option<f64>,
    threads: usize,
    service_times: &str,
    tcp_port: Option<u16>,
    udp_port: Option<u16>,
    tcp_framing: &str,
    kcp_port: Option<u16>,
    tls: Option<(String, String)>,
    shared: Option<(f64, f64)>,
) -> PyResult<PyTargetHandle> {
    let framing = match tcp_framing {
        "newline" => GatewayFraming::Newline,
        "length1" => GatewayFraming::Length(1),
        "length2" => GatewayFraming::Length(2),
        "length4" => GatewayFraming::Length(4),
        other => {
            return Err(PyValueError::new_err(format!(
                "tcp_framing must be newline, length1, length2 or length4 (got '{other}')"
            )))
        }
    };
    let service_times = match service_times {
        "fixed" => ServiceTimes::Fixed,
        "exponential" => ServiceTimes::Exponential,
        other => {
            return Err(PyValueError::new_err(format!(
                "service_times must be 'fixed' or 'exponential' (got '{other}')"
            )))
        }
    };
    let capacity = match (workers, service_ms) {
        (None, None) => None,
        (Some(workers), Some(service_ms)) => Some(Capacity { workers, service_ms, service_times }),
        _ => return Err(PyValueError::new_err("the capacity model needs both workers and service_ms")),
    };
    // The gateway first: once the HTTP port answers (what a caller waits for), every port is bound.
    let gateway = if tcp_port.is_some() || udp_port.is_some() || kcp_port.is_some() {
        let config = GatewayConfig { host: host.to_owned(), tcp_port, udp_port, kcp_port, framing, threads };
        Some(
            py.detach(|| GatewayHandle::start(config))
                .map_err(|error| PyOSError::new_err(format!("the gateway cannot start: {error}")))?,
        )
    } else {
        None
    };
    let tls = tls.map(|(certificate_pem, key_pem)| horde_target::TargetTls { certificate_pem, key_pem });
    let shared = shared.map(|(serial_ms, crosstalk_ms)| horde_target::SharedCosts { serial_ms, crosstalk_ms });
    let config = TargetConfig { host: host.to_owned(), port, capacity, threads, tls, shared };
    let handle = py.detach(|| TargetHandle::start(config)).map_err(|error| match error {
        horde_target::TargetError::InvalidConfig(message) => PyValueError::new_err(message),
        other => PyOSError::new_err(other.to_string()),
    })?;
    let port = handle.port();
    let tcp_port = gateway.as_ref().and_then(|gateway| gateway.tcp_addr).map(|address| address.port());
    let udp_port = gateway.as_ref().and_then(|gateway| gateway.udp_addr).map(|address| address.port());
    let kcp_port = gateway.as_ref().and_then(|gateway| gateway.kcp_addr).map(|address| address.port());
    Ok(PyTargetHandle {
        inner: Mutex::new(Some(handle)),
        port,
        gateway: Mutex::new(gateway),
        tcp_port,
        udp_port,
        kcp_port,
    })
}

/// A self-signed certificate for `names` (host names or IP addresses), made now:
/// (certificate PEM, private key PEM), for `start_target(tls=...)`.
#[pyfunction]
fn self_signed_certificate(names: Vec<String>) -> PyResult<(String, String)> {
    let tls = horde_target::self_signed(&names).map_err(|error| PyValueError::new_err(error.to_string()))?;
    Ok((tls.certificate_pem, tls.key_pem))
}

#[pymodule]
fn _engine(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(validate_plan, module)?)?;
    module.add_function(wrap_pyfunction!(plan_bounds, module)?)?;
    module.add_function(wrap_pyfunction!(is_secret_name, module)?)?;
    module.add_function(wrap_pyfunction!(is_secret_query_field, module)?)?;
    module.add_function(wrap_pyfunction!(variable_name_problem, module)?)?;
    module.add_function(wrap_pyfunction!(http_methods, module)?)?;
    module.add_function(wrap_pyfunction!(method_problem, module)?)?;
    module.add_function(wrap_pyfunction!(target_problems, module)?)?;
    module.add_function(wrap_pyfunction!(workload_problems, module)?)?;
    module.add_function(wrap_pyfunction!(scenario_structure_problems, module)?)?;
    module.add_function(wrap_pyfunction!(start_run, module)?)?;
    module.add_function(wrap_pyfunction!(histogram_merge, module)?)?;
    module.add_function(wrap_pyfunction!(snapshots::merge_seconds, module)?)?;
    module.add_function(wrap_pyfunction!(snapshots::merge_steps, module)?)?;
    module.add_function(wrap_pyfunction!(histogram_stats, module)?)?;
    module.add_function(wrap_pyfunction!(histogram_from_values, module)?)?;
    module.add_function(wrap_pyfunction!(histogram_buckets, module)?)?;
    module.add_function(wrap_pyfunction!(start_target, module)?)?;
    module.add_function(wrap_pyfunction!(link::start_link, module)?)?;
    module.add_function(wrap_pyfunction!(logs::profile_logs, module)?)?;
    module.add_function(wrap_pyfunction!(logs::classify, module)?)?;
    module.add_class::<logs::PyCombinedParser>()?;
    module.add_class::<logs::PyTemplater>()?;
    module.add_class::<logs::PyJsonLineParser>()?;
    module.add_function(wrap_pyfunction!(logs::first_lines, module)?)?;
    module.add_function(wrap_pyfunction!(self_signed_certificate, module)?)?;
    module.add_class::<PyRunHandle>()?;
    module.add_class::<PyTargetHandle>()?;
    module.add_class::<link::PyLinkHandle>()?;
    module.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
