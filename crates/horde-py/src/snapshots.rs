//! The snapshot between the engine and Python: handed over in its serde form (the engine's
//! struct owns the fields), and merged by the engine's own rules (`Snapshot::merge_generators`,
//! `StepSnapshot::merge`) for a cluster's seconds and a run's totals.

use horde_engine::{MergeError, Snapshot, StepSnapshot};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::de::DeserializeOwned;

/// The snapshot as Python reads it: its serde form (crates/horde-engine/src/snapshot.rs owns
/// the fields, their keys and which are sent only when set).
pub fn to_dict<'py>(py: Python<'py>, snapshot: &impl serde::Serialize) -> PyResult<Bound<'py, PyDict>> {
    let converted = pythonize::pythonize(py, snapshot).map_err(|error| PyRuntimeError::new_err(error.to_string()))?;
    Ok(converted.downcast_into::<PyDict>()?)
}

fn from_dicts<T: DeserializeOwned>(parts: &[Bound<'_, PyAny>], what: &str) -> PyResult<Vec<T>> {
    parts
        .iter()
        .map(|part| {
            pythonize::depythonize(part).map_err(|error| PyValueError::new_err(format!("not a {what}: {error}")))
        })
        .collect()
}

fn merge_failed(error: MergeError) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// Several generators' snapshots of one second as the run's (`Snapshot::merge_generators`).
#[pyfunction]
pub fn merge_seconds<'py>(
    py: Python<'py>,
    parts: Vec<Bound<'py, PyAny>>,
    is_final: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let parts: Vec<Snapshot> = from_dicts(&parts, "snapshot")?;
    let merged = py.detach(|| Snapshot::merge_generators(&parts, is_final)).map_err(merge_failed)?;
    to_dict(py, &merged)
}

/// Several snapshots of one step as one (`StepSnapshot::merge`).
#[pyfunction]
pub fn merge_steps<'py>(py: Python<'py>, parts: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    let parts: Vec<StepSnapshot> = from_dicts(&parts, "step snapshot")?;
    let merged = py.detach(|| StepSnapshot::merge(&parts)).map_err(merge_failed)?;
    to_dict(py, &merged)
}
