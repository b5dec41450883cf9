//! The aggregator thread: merges the workers' per-second parts exactly into snapshots.

use crate::run::shared::Shared;
use crate::run::worker_part::WorkerPart;
use crate::snapshot::{Snapshot, StepSnapshot};
use crate::system;
use horde_metrics::{encode_histogram, WorkerRecorder};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An interval being assembled from the workers' parts.
struct Pending {
    recorder: WorkerRecorder,
    exchanges: Vec<crate::exchange::Exchange>,
    reported: Vec<bool>,
    active_vus: u64,
    peak_vus: u64,
    busy_vus: u64,
    elapsed: Duration,
}

struct CpuClock {
    wall: Instant,
    cpu: Duration,
    run_delay: Duration,
    machine: system::MachineCpu,
}

/// What the generator's process and machine did with the CPU over one interval.
#[derive(Clone, Copy, Default)]
struct CpuLap {
    /// CPU the process used, in percent of one core.
    cpu_percent: f64,
    /// Time the process's threads waited to run, in ms.
    run_delay_ms: f64,
    /// The machine's steal, in percent of all its CPUs.
    steal_percent: f64,
}

impl CpuClock {
    fn now() -> Self {
        Self {
            wall: Instant::now(),
            cpu: system::process_cpu_time(),
            run_delay: system::process_run_delay(),
            machine: system::machine_cpu(),
        }
    }

    /// The interval since `self`, and resets to now.
    fn lap(&mut self) -> CpuLap {
        let now = CpuClock::now();
        let wall = now.wall.duration_since(self.wall).as_secs_f64();
        let cpu = now.cpu.saturating_sub(self.cpu).as_secs_f64();
        let run_delay_ms = now.run_delay.saturating_sub(self.run_delay).as_secs_f64() * 1000.0;
        let steal_percent = now.machine.steal_share_since(&self.machine) * 100.0;
        *self = now;
        CpuLap { cpu_percent: if wall > 0.0 { cpu / wall * 100.0 } else { 0.0 }, run_delay_ms, steal_percent }
    }
}

pub(crate) fn run_aggregator(
    shared: Arc<Shared>,
    parts: mpsc::Receiver<WorkerPart>,
    snapshots: mpsc::Sender<Snapshot>,
) {
    let workers = shared.workers;
    let step_count = shared.plan.step_names.len();
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    // The index of each worker's final part, once it has sent it.
    let mut finished_at: Vec<Option<u64>> = vec![None; workers];
    let mut next_index = 1u64;
    let mut cpu = CpuClock::now();
    let mut last_elapsed = Duration::ZERO;
    let mut emit = |index: u64, interval: Pending, is_final: bool, cpu: &mut CpuClock| -> bool {
        let elapsed = if is_final { interval.elapsed } else { Duration::from_secs(index) };
        let snapshot = build_snapshot(&shared, index, interval, elapsed, last_elapsed, is_final, cpu.lap());
        last_elapsed = elapsed;
        snapshots.send(snapshot).is_ok()
    };
    loop {
        let part = parts.recv();
        let disconnected = part.is_err();
        if let Ok(part) = part {
            let entry = pending.entry(part.index).or_insert_with(|| Pending {
                recorder: WorkerRecorder::new(step_count),
                exchanges: Vec::new(),
                reported: vec![false; workers],
                active_vus: 0,
                peak_vus: 0,
                busy_vus: 0,
                elapsed: Duration::ZERO,
            });
            entry.recorder.merge(&part.recorder);
            entry.exchanges.extend(part.exchanges);
            entry.reported[part.worker] = true;
            entry.active_vus += part.active_vus;
            // Workers hold disjoint VUs: the sum of their peaks bounds the run's peak (equal to
            // it when the peaks coincide, as in any steady stage).
            entry.peak_vus += part.peak_vus;
            entry.busy_vus += part.busy_vus;
            entry.elapsed = entry.elapsed.max(part.elapsed);
            if part.is_final {
                finished_at[part.worker] = Some(part.index);
            }
        }
        let all_finished = disconnected || finished_at.iter().all(Option::is_some);
        if all_finished {
            // Everything left, in order; the last interval closes the run.
            let last = pending.keys().next_back().copied().unwrap_or(next_index).max(next_index);
            for index in next_index..=last {
                let interval = pending.remove(&index).unwrap_or_else(|| Pending {
                    recorder: WorkerRecorder::new(step_count),
                    exchanges: Vec::new(),
                    reported: vec![true; workers],
                    active_vus: 0,
                    peak_vus: 0,
                    busy_vus: 0,
                    elapsed: Duration::from_secs(index),
                });
                if !emit(index, interval, index == last, &mut cpu) {
                    return;
                }
            }
            return;
        }
        // Emit every interval that all still-running workers have reported.
        while let Some(interval) = pending.get(&next_index) {
            let complete = (0..workers).all(|worker| {
                interval.reported[worker] || finished_at[worker].is_some_and(|final_index| final_index < next_index)
            });
            if !complete {
                break;
            }
            let interval = pending.remove(&next_index).expect("present above");
            if !emit(next_index, interval, false, &mut cpu) {
                return;
            }
            next_index += 1;
        }
    }
}

fn build_snapshot(
    shared: &Shared,
    index: u64,
    interval: Pending,
    elapsed: Duration,
    previous_elapsed: Duration,
    is_final: bool,
    cpu: CpuLap,
) -> Snapshot {
    let plan = &shared.plan;
    let steps = interval
        .recorder
        .steps
        .iter()
        .enumerate()
        .filter(|(_, step)| !step.is_empty())
        .map(|(global, step)| {
            let (scenario, name, kind) = &plan.step_names[global];
            StepSnapshot {
                scenario: scenario.clone(),
                step: name.clone(),
                kind: kind.label().into(),
                requests: step.requests,
                ok: step.ok,
                errors: step.errors_by_kind(),
                bytes_sent: step.bytes_sent,
                bytes_received: step.bytes_received,
                rows: step.rows,
                http1: step.http1,
                http2: step.http2,
                h2_stalls: step.h2_stalls,
                histogram: encode_histogram(&step.latency_us).unwrap_or_default(),
                from_send_histogram: step
                    .latency_from_send()
                    .and_then(|histogram| encode_histogram(&histogram).ok())
                    .unwrap_or_default(),
                error_details: step.details_by_kind(),
                checks: plan.check_labels[global]
                    .iter()
                    .zip(&step.checks)
                    .map(|(label, [passes, failures])| (label.clone(), *passes, *failures))
                    .collect(),
                messages: step.messages,
            }
        })
        .collect();
    let (target_vus, target_rate_per_s) = if is_final {
        (0, shared.levels.asked_at(f64::MAX).1.map(|_| 0.0))
    } else {
        shared.levels.asked_at(elapsed.as_secs_f64())
    };
    let lateness = &interval.recorder.timer_lateness_us;
    let timer_lateness_p99_ms =
        if lateness.is_empty() { 0.0 } else { lateness.value_at_quantile(0.99) as f64 / 1000.0 };
    let timer_lateness_max_ms = if lateness.is_empty() { 0.0 } else { lateness.max() as f64 / 1000.0 };
    let timestamp = (shared.start_wall + elapsed)
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_secs_f64())
        .unwrap_or(0.0);
    Snapshot {
        second: index,
        elapsed_s: elapsed.as_secs_f64(),
        interval_s: elapsed.saturating_sub(previous_elapsed).as_secs_f64(),
        timestamp,
        is_final,
        steps,
        active_vus: interval.active_vus,
        peak_vus: interval.peak_vus,
        busy_vus: interval.busy_vus,
        iterations: interval.recorder.iterations,
        dropped_arrivals: interval.recorder.dropped_arrivals,
        connections_opened: interval.recorder.connections_opened,
        connect_backoffs: interval.recorder.connect_backoffs,
        connect_backoff_s: interval.recorder.connect_backoff_us as f64 / 1e6,
        setup_failures: interval.recorder.setup_failures,
        target_vus,
        target_rate_per_s,
        cpu_percent: cpu.cpu_percent,
        timer_lateness_p99_ms,
        timer_lateness_max_ms,
        run_delay_ms: cpu.run_delay_ms,
        steal_percent: cpu.steal_percent,
        exchanges: {
            let mut exchanges = interval.exchanges;
            exchanges.sort_by(|a, b| a.started_s.total_cmp(&b.started_s));
            exchanges
        },
    }
}
