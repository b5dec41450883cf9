//! What a VU does: the step tree compiled into nodes (`interpreter`, whose `sql` and `message`
//! steps the transports define) and the whole plan prepared for running (`compiled`: scenarios
//! into programs, workloads into profiles, steps numbered), built once per run and shared
//! read-only by every worker.

pub(crate) mod compiled;
pub(crate) mod interpreter;
