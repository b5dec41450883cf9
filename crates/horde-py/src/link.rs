//! The emulated link (`horde link`): `start_link` builds it, `LinkHandle` reads its figures and
//! tears it down.

use horde_link::{Link, LinkError, LinkStats, Shaping};
use horde_plan::Network;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;
use std::time::Duration;

fn to_python(error: LinkError) -> PyErr {
    match error {
        LinkError::NotPermitted(message) => PyPermissionError::new_err(message),
        LinkError::Unavailable(message) => PyFileNotFoundError::new_err(message),
        LinkError::Io(message) => PyOSError::new_err(message),
    }
}

/// A running link; `stop()` (or the handle's end) tears it down.
#[pyclass(module = "horde._engine", name = "LinkHandle")]
pub(crate) struct PyLinkHandle {
    inner: Mutex<Option<Link>>,
    namespace: String,
    outside_device: String,
    inside_device: String,
    outside_address: String,
    inside_address: String,
    last: Mutex<LinkStats>,
}

fn stats_dict<'py>(py: Python<'py>, stats: &LinkStats) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, values) in [
        ("packets", stats.packets),
        ("bytes", stats.bytes),
        ("dropped", stats.dropped),
        ("overflowed", stats.overflowed),
        ("duplicated", stats.duplicated),
        ("delivered", stats.delivered),
        ("write_errors", stats.write_errors),
    ] {
        dict.set_item(format!("{name}_out"), values[0])?;
        dict.set_item(format!("{name}_back"), values[1])?;
    }
    dict.set_item("cpu_s", stats.cpu_ns as f64 / 1e9)?;
    Ok(dict)
}

#[pymethods]
impl PyLinkHandle {
    #[getter]
    fn namespace(&self) -> &str {
        &self.namespace
    }

    #[getter]
    fn outside_device(&self) -> &str {
        &self.outside_device
    }

    #[getter]
    fn inside_device(&self) -> &str {
        &self.inside_device
    }

    #[getter]
    fn outside_address(&self) -> &str {
        &self.outside_address
    }

    #[getter]
    fn inside_address(&self) -> &str {
        &self.inside_address
    }

    /// Whether the relay runs (False once stopped, or if a device failed).
    #[getter]
    fn running(&self) -> bool {
        self.inner.lock().ok().is_some_and(|inner| inner.as_ref().is_some_and(Link::is_running))
    }

    /// The figures so far (the last ones once stopped): `packets_out`, `packets_back`,
    /// `bytes_*`, `dropped_*`, `duplicated_*`, `delivered_*`, `write_errors_*`, `cpu_s`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let current = self.inner.lock().ok().and_then(|inner| inner.as_ref().map(Link::stats));
        let stats = match current {
            Some(stats) => stats,
            None => self.last.lock().map(|last| *last).unwrap_or_default(),
        };
        stats_dict(py, &stats)
    }

    /// Tears the link down: the relay stops, the devices go, what runs in the namespace is
    /// killed and the namespace deleted. Idempotent.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let link = self.inner.lock().ok().and_then(|mut inner| inner.take());
        if let Some(link) = link {
            let ended = py.detach(|| {
                let stats = link.stats();
                (stats, link.stop())
            });
            let stats = match &ended.1 {
                Ok(stats) => *stats,
                Err(_) => ended.0,
            };
            if let Ok(mut last) = self.last.lock() {
                *last = stats;
            }
            ended.1.map_err(to_python)?;
        }
        Ok(())
    }
}

/// Builds a link (a namespace reached through two TUN devices) and starts its relay, the same
/// impairment each way, behind a bottleneck of `rate_mbit` Mbit/s each way (a drop-tail queue of
/// `queue_ms` of backlog) when given. Needs root: PermissionError when not allowed,
/// FileNotFoundError when `/dev/net/tun` or `ip` is missing, OSError otherwise.
#[pyfunction]
#[pyo3(signature = (delay_ms=0.0, jitter_ms=0.0, loss_percent=0.0, duplicate_percent=0.0, reorder_percent=0.0, seed=1,
                    rate_mbit=None, queue_ms=100.0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_link(
    py: Python<'_>,
    delay_ms: f64,
    jitter_ms: f64,
    loss_percent: f64,
    duplicate_percent: f64,
    reorder_percent: f64,
    seed: u64,
    rate_mbit: Option<f64>,
    queue_ms: f64,
) -> PyResult<PyLinkHandle> {
    let network =
        Network { delay_ms, jitter_ms, loss_percent, duplicate_percent, reorder_percent, rate_limit: None, seed };
    let shaping = rate_mbit
        .map(|rate| Shaping { bits_per_s: rate * 1e6, queue: Duration::from_secs_f64(queue_ms.max(0.0) / 1000.0) });
    let link = py.detach(|| Link::start(network, shaping)).map_err(to_python)?;
    Ok(PyLinkHandle {
        namespace: link.namespace().to_owned(),
        outside_device: link.outside_device().to_owned(),
        inside_device: link.inside_device().to_owned(),
        outside_address: link.outside_address().to_string(),
        inside_address: link.inside_address().to_string(),
        inner: Mutex::new(Some(link)),
        last: Mutex::new(LinkStats::default()),
    })
}
