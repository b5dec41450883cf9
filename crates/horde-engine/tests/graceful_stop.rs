//! Stopping a run: RunHandle::stop() mid-run, the grace period for in-flight requests, the open
//! model's arrivals after a stop, and a RunHandle dropped without a stop.
//!
//! The tests of this file run one at a time (a lock): one of them counts the process's engine
//! threads, which must not see another test's run.

mod support;

use horde_engine::{EngineOptions, RunHandle, Snapshot};
use horde_target::{TargetConfig, TargetHandle};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use support::{
    assert_accounting, closed, collect, connections_opened, custom_plan, error_kinds, get_step, open, run_threads,
    send, total_ok, total_requests, RawServer,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn target() -> TargetHandle {
    // Enough target threads that 10 concurrent delays never queue behind one another.
    TargetHandle::start(TargetConfig { threads: 2, ..TargetConfig::default() }).expect("target starts")
}

/// Starts `plan`, sleeps `after`, stops it; returns the snapshots, the stop's instant since
/// `start()` was called, and how long the run took to finish after the stop.
fn stop_after(plan: &horde_plan::Plan, workers: usize, after: Duration) -> (Vec<Snapshot>, Duration, Duration) {
    let began = Instant::now();
    let mut run: RunHandle = horde_engine::start(plan, EngineOptions::with_workers(workers)).expect("run starts");
    std::thread::sleep(after);
    let stop_at = began.elapsed();
    run.stop();
    let stopped = Instant::now();
    let snapshots = collect(&mut run, Duration::from_secs(30));
    (snapshots, stop_at, stopped.elapsed())
}

#[test]
fn stop_completes_and_records_the_requests_in_flight() {
    let _serial = serial();
    // A server that answers every request after 300 ms and counts the requests it read: each
    // one in flight at the stop must be completed and recorded, so the engine's count and the
    // server's agree exactly, whatever the timing.
    let server = RawServer::start(|stream, _, _| {
        std::thread::sleep(Duration::from_millis(300));
        send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        true
    });
    let vus = 10;
    let graceful_stop_s = 5.0;
    let plan = custom_plan(&server.base_url(), "", &get_step("/", None), &closed(vus, 30.0), graceful_stop_s);
    let (snapshots, stop_at, after_stop) = stop_after(&plan, 2, Duration::from_millis(1650));
    assert_accounting(&snapshots);
    assert!(
        after_stop < Duration::from_secs_f64(graceful_stop_s + 2.0),
        "the run took {after_stop:?} to end after the stop"
    );
    let last = snapshots.last().expect("snapshots");
    assert!(last.is_final);
    assert!(last.elapsed_s < stop_at.as_secs_f64() + graceful_stop_s, "final snapshot at {} s", last.elapsed_s);
    let requests = total_requests(&snapshots);
    assert!(requests >= 40, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests, "errors: {:?}", error_kinds(&snapshots));
    assert_eq!(requests, server.requests(), "every request sent was completed and recorded");
    let iterations: u64 = snapshots.iter().map(|s| s.iterations).sum();
    assert_eq!(iterations, requests, "one iteration per request for a one-step scenario");
    assert_eq!(connections_opened(&snapshots), vus);
}

#[test]
fn requests_still_in_flight_after_the_grace_period_are_counted_as_cut_in_the_last_snapshot() {
    let _serial = serial();
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/5000", None), &closed(5, 30.0), 0.5);
    let (snapshots, _, after_stop) = stop_after(&plan, 1, Duration::from_millis(1000));
    assert_accounting(&snapshots);
    assert!(after_stop < Duration::from_millis(2500), "the run took {after_stop:?} to end after the stop");
    assert!(
        after_stop >= Duration::from_millis(400),
        "ended {after_stop:?} after the stop: the grace period was not given"
    );
    assert_eq!(total_requests(&snapshots), 5, "each VU's request was cut once: {:?}", error_kinds(&snapshots));
    assert_eq!(error_kinds(&snapshots).into_iter().collect::<Vec<_>>(), vec![("cut".to_owned(), 5)]);
    let last = snapshots.last().expect("snapshots");
    assert!(last.is_final);
    assert_eq!(last.requests(), 5, "the cut requests are counted in the final snapshot");
    // A cut request got no answer: counted, never timed.
    assert!(support::latency(&snapshots, "get").is_empty(), "a cut request is not a latency result");
    assert_eq!(connections_opened(&snapshots), 5);
}

#[test]
fn open_model_arrivals_cease_at_the_stop() {
    let _serial = serial();
    let target = target();
    let rate = 100.0;
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/200", None), &open(rate, 30.0, 200), 3.0);
    let (snapshots, stop_at, after_stop) = stop_after(&plan, 2, Duration::from_millis(1500));
    assert_accounting(&snapshots);
    assert!(after_stop < Duration::from_secs(5), "the run took {after_stop:?} to end after the stop");
    let dropped: u64 = snapshots.iter().map(|s| s.dropped_arrivals).sum();
    assert_eq!(dropped, 0);
    let stop_s = stop_at.as_secs_f64();
    let requests = total_requests(&snapshots) as f64;
    // Arrivals are due every 10 ms from time zero (20 ms after start()); every one due before
    // the stop was served (its 200 ms request fits the grace period) and none after it. The
    // slack covers the stop taking effect a little late on a busy machine.
    assert!(requests <= rate * stop_s + 15.0, "{requests} requests for a stop at {stop_s:.3} s");
    assert!(requests >= rate * (stop_s - 0.3), "{requests} requests for a stop at {stop_s:.3} s");
    assert_eq!(total_ok(&snapshots) as f64, requests, "errors: {:?}", error_kinds(&snapshots));
    // Nothing at all in intervals that begin well after the stop.
    let late: u64 =
        snapshots.iter().filter(|s| s.elapsed_s - s.interval_s > stop_s + 0.5).map(Snapshot::requests).sum();
    assert_eq!(late, 0);
    let last = snapshots.last().expect("snapshots");
    assert!(last.elapsed_s < stop_s + 1.5, "final snapshot at {} s for a stop at {stop_s:.3} s", last.elapsed_s);
    assert_eq!(last.target_rate_per_s, Some(0.0));
}

#[test]
fn dropping_a_run_handle_stops_the_run_and_frees_its_threads() {
    let _serial = serial();
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/2000", None), &closed(5, 30.0), 1.0);
    let run = horde_engine::start(&plan, EngineOptions::with_workers(2)).expect("run starts");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!run_threads().is_empty(), "the run's threads are visible while it runs");
    drop(run);
    // The dropped run stops on its own: its threads end within the grace period (and a margin).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !run_threads().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(run_threads(), Vec::<String>::new(), "threads of a dropped run are still alive");
    // And the process is fine for another run.
    let plan = custom_plan(&target.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let mut run = horde_engine::start(&plan, EngineOptions::with_workers(2)).expect("second run starts");
    let snapshots = collect(&mut run, Duration::from_secs(15));
    assert_accounting(&snapshots);
    let requests = total_requests(&snapshots);
    assert!(requests >= 20, "only {requests} requests");
    assert_eq!(total_ok(&snapshots), requests);
}

#[test]
fn the_run_threads_end_after_a_run_that_finished_normally() {
    let _serial = serial();
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/", Some(10.0)), &closed(2, 1.0), 1.0);
    let mut run = horde_engine::start(&plan, EngineOptions::with_workers(3)).expect("run starts");
    let snapshots = collect(&mut run, Duration::from_secs(15));
    assert!(run.is_finished());
    assert_accounting(&snapshots);
    // The final snapshot joins the threads before it is handed out (a short bounded wait covers
    // the kernel removing an exited thread's entry a moment after the join).
    let deadline = Instant::now() + Duration::from_secs(2);
    while !run_threads().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(run_threads(), Vec::<String>::new());
    drop(run);
}

#[test]
fn a_think_time_that_begins_after_the_stop_is_cut() {
    // Each VU is inside its first (1 s) request when the stop comes. The request is completed
    // and recorded, then the step's 20 s think time begins: it should be skipped because the run
    // is stopping. It is not: stop_notify.notify_waiters() fired while no VU was waiting on it,
    // so the pause runs until the grace period (10 s) cuts the VU, and the iteration is lost.
    let _serial = serial();
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/delay/1000", Some(20_000.0)), &closed(4, 30.0), 10.0);
    let (snapshots, _, after_stop) = stop_after(&plan, 1, Duration::from_millis(400));
    assert_accounting(&snapshots);
    assert_eq!(total_requests(&snapshots), 4);
    assert_eq!(total_ok(&snapshots), 4);
    assert!(
        after_stop < Duration::from_secs(5),
        "the run took {after_stop:?} to end after the stop (grace period 10 s)"
    );
    let iterations: u64 = snapshots.iter().map(|s| s.iterations).sum();
    assert_eq!(iterations, 4, "the stopped VUs' iterations were lost");
}

#[test]
fn a_think_time_in_progress_at_the_stop_is_cut() {
    // The documented behaviour that works today: VUs already pausing when the stop comes wake.
    let _serial = serial();
    let target = target();
    let plan = custom_plan(&target.base_url(), "", &get_step("/", Some(20_000.0)), &closed(4, 30.0), 10.0);
    let (snapshots, _, after_stop) = stop_after(&plan, 1, Duration::from_millis(800));
    assert_accounting(&snapshots);
    assert_eq!(total_requests(&snapshots), 4);
    assert!(
        after_stop < Duration::from_secs(5),
        "the run took {after_stop:?} to end after the stop (grace period 10 s)"
    );
    let iterations: u64 = snapshots.iter().map(|s| s.iterations).sum();
    assert_eq!(iterations, 4);
}
