//! What a check may make a VU hold, measured: 10 VUs whose step checks the body of 24 MB
//! responses. With the default `max_kept_body_bytes` (1 MiB) the process's peak resident memory
//! grows by a few MiB; with the bound raised past the body it grows by the bodies kept (10 × 24
//! MB), which shows the measurement would see the bound fail. Its own test binary (one test),
//! so that the peak resident memory (Linux `VmHWM`, reset through `/proc/self/clear_refs`) is
//! this run's alone.

mod support;

use support::{closed, custom_plan, error_kinds, huge_body_server, run_timed, total_requests};

const BODY_BYTES: usize = 24 * 1024 * 1024;
const VUS: u64 = 10;

/// The process's peak resident memory since the last reset, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM line");
    let kib: u64 = line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).expect("VmHWM in kB");
    kib * 1024
}

/// Resets the peak to the current resident memory.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM through /proc/self/clear_refs");
}

/// The growth of the peak over one run of `VUS` VUs checking every body, and the run's outcome.
fn peak_growth(url: &str, target_extra: &str) -> (u64, Vec<String>, u64) {
    let steps =
        r#"[{"name": "get", "method": "GET", "path": "/", "checks": [{"type": "body_contains", "text": "THE-END"}]}]"#;
    let plan = custom_plan(url, target_extra, steps, &closed(VUS, 1.5), 1.0);
    reset_peak_rss();
    let before = peak_rss();
    let (snapshots, _) = run_timed(&plan, 1);
    (peak_rss().saturating_sub(before), error_kinds(&snapshots).into_keys().collect(), total_requests(&snapshots))
}

#[test]
fn a_body_check_holds_at_most_the_bound_per_vu() {
    let server = huge_body_server(BODY_BYTES);
    let url = server.base_url();
    let (bounded, kinds, requests) = peak_growth(&url, "");
    eprintln!("{VUS} VUs checking {BODY_BYTES}-byte bodies, {requests} responses: peak RSS grew {} MiB with the default bound", bounded >> 20);
    assert!(requests >= VUS, "only {requests} responses");
    assert_eq!(kinds, vec!["body_too_large"]);
    // 10 VUs × 1 MiB kept, the read buffers, the runtime's threads: well under 48 MiB.
    assert!(bounded < 48 << 20, "peak RSS grew {} MiB with a 1 MiB bound per VU", bounded >> 20);
    let (unbounded, kinds, requests) = peak_growth(&url, r#", "max_kept_body_bytes": 33554432"#);
    eprintln!("... and {} MiB with the bound at 32 MiB ({requests} responses, errors {kinds:?})", unbounded >> 20);
    // (A busy machine may leave a response or two still arriving when the grace period ends.)
    assert!(kinds.iter().all(|kind| kind == "cut"), "the check passes on the whole body: {kinds:?}");
    assert!(unbounded > (VUS * BODY_BYTES as u64) / 2, "the bodies kept did not show: {} MiB", unbounded >> 20);
}
