//! The engine's one error type: why a run could not start, or a re-target was refused.
//!
//! A module of its own, below everything that returns it (plan compilation, HTTP set-up, the
//! interpreter, levels, the run), so none of them has to reach up into the crate root for it.
//! The crate root re-exports it as [`crate::EngineError`].

/// Why a run could not start. Failed requests are never errors: they are counted.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the plan is invalid: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidPlan(Vec<horde_plan::PlanError>),
    #[error("{0}")]
    Setup(String),
}
