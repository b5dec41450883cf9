//! When things happen: the workload's level at any instant and the k-th arrival's time
//! (`workload`), the open model's arrival timer (`arrival_timer`), a worker's pauses (`pause`:
//! think times and pacing on one heap) and request deadlines (`deadline`), the think times drawn
//! (`think`) and the pace factors a steering sets (`pace_factors`). Nothing here knows a
//! transport, a scenario or a run; everything above uses it.

pub(crate) mod arrival_timer;
pub(crate) mod deadline;
pub(crate) mod pace_factors;
pub(crate) mod pause;
pub(crate) mod think;
pub mod workload;
