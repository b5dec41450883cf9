//! One worker thread: a single-threaded tokio runtime running its share of the VUs and arrivals.

use crate::run::shared::{GeneratorShare, Shared};
use crate::run::vu::{IterationEnd, Vu};
use crate::run::worker_part::WorkerPart;
use crate::run::worker_state::WorkerState;
use crate::scenario::compiled::{CompiledScenario, CompiledWorkload};
use crate::time::arrival_timer::ArrivalTimer;
use crate::time::deadline::Deadlines;
use crate::time::pause::Pauses;
use crate::time::think::VuRandom;
use crate::time::workload::share;
use crate::transport::pool::Pool;
use horde_metrics::WorkerRecorder;
use horde_plan::Arrivals;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::LocalSet;

/// How often a closed model's VU count is brought to what the stages ask.
const RAMP_TICK: Duration = Duration::from_millis(20);
/// How often the timer-lateness probe wakes.
const PROBE_PERIOD: Duration = Duration::from_millis(10);

/// Sends whatever is left as the worker's final part, even if the worker panics, so the
/// aggregator never waits for a worker that is gone.
struct FinalPart {
    state: Rc<WorkerState>,
    parts: mpsc::Sender<WorkerPart>,
    last_sent: Rc<Cell<u64>>,
}

impl Drop for FinalPart {
    fn drop(&mut self) {
        let elapsed = self.state.elapsed();
        let index = (elapsed.as_secs() + 1).max(self.last_sent.get() + 1);
        let recorder = self.state.recorder.borrow_mut().take();
        let exchanges = self.state.exchanges.take();
        let _ = self.parts.send(WorkerPart {
            worker: self.state.index,
            index,
            recorder,
            exchanges,
            active_vus: 0,
            peak_vus: self.state.take_peak(),
            busy_vus: 0,
            is_final: true,
            elapsed,
        });
    }
}

pub(crate) fn run_worker(index: usize, shared: Arc<Shared>, parts: mpsc::Sender<WorkerPart>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(_) => return, // dropping `parts` tells the aggregator this worker is gone
    };
    let (slot, slots) = GeneratorShare::slot(shared.generator, index, shared.workers);
    // The pool is per generator: its workers split it among themselves.
    let worker_share = |size| share(size, index as u64, shared.workers as u64);
    let instances = shared.plan.endpoints.len();
    let (pool, h2_pool) = match (shared.plan.pool_size, shared.plan.http2) {
        (None, _) => (None, None),
        (Some(size), None) => (Some(Pool::new(worker_share(size), instances)), None),
        (Some(size), Some(_)) => (None, Some(crate::transport::h2_pool::H2Pool::new(worker_share(size), instances))),
    };
    let sql_pool = shared.plan.sql.as_ref().and_then(|sql| sql.pool_size).map(|size| {
        crate::transport::sql::SqlPool::new(
            share(size, index as u64, shared.workers as u64),
            shared.plan.endpoints.len(),
        )
    });
    let state = Rc::new(WorkerState {
        index,
        slot: slot as u64,
        slots: slots as u64,
        recorder: RefCell::new(WorkerRecorder::new(shared.plan.step_names.len())),
        shared,
        active_vus: Cell::new(0),
        peak_vus: Cell::new(0),
        busy_vus: Cell::new(0),
        stopping: Cell::new(false),
        stop_notify: Notify::new(),
        idle_notify: Notify::new(),
        pool,
        h2_pool,
        sql_pool,
        pauses: Pauses::default(),
        deadlines: Deadlines::default(),
        exchanges: RefCell::new(Vec::new()),
    });
    let last_sent = Rc::new(Cell::new(0));
    let _final_part = FinalPart { state: Rc::clone(&state), parts: parts.clone(), last_sent: Rc::clone(&last_sent) };
    let local = LocalSet::new();
    // The worker's own course (start, stop, grace) runs as a task of its own, and the LocalSet
    // waits for a flag it sets: the future given to `block_on` is polled again at every wake of
    // any task of the set, and this course's select of a timer and the stop watch (then its
    // task's handle) was a twentieth of a SQL transaction's client instructions (issue 19).
    let ended = Rc::new(CourseEnd::default());
    let course_end = Rc::clone(&ended);
    let course = local.spawn_local(async move {
        let _ended = CourseEnded(course_end);
        tokio::task::spawn_local(report_intervals(Rc::clone(&state), parts, last_sent));
        tokio::task::spawn_local(probe_timer_lateness(Rc::clone(&state)));
        let pauses = Rc::clone(&state);
        tokio::task::spawn_local(async move { pauses.pauses.drive().await });
        let deadlines = Rc::clone(&state);
        tokio::task::spawn_local(async move { deadlines.deadlines.drive().await });
        let start = tokio::time::Instant::from_std(state.shared.start);
        tokio::time::sleep_until(start).await;
        let drivers: Vec<_> = (0..state.shared.plan.scenarios.len())
            .map(|scenario| tokio::task::spawn_local(drive_scenario(Rc::clone(&state), scenario)))
            .collect();
        let mut stop = state.shared.stop.subscribe();
        let stages_end = start + state.shared.plan.duration;
        tokio::select! {
            _ = tokio::time::sleep_until(stages_end) => {}
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
        state.stopping.set(true);
        state.stop_notify.notify_waiters();
        for driver in drivers {
            let _ = driver.await;
        }
        let grace_end = tokio::time::Instant::now() + state.shared.plan.graceful_stop;
        while state.active_vus.get() > 0 {
            let idle = state.idle_notify.notified();
            if state.active_vus.get() == 0 {
                break;
            }
            if tokio::time::timeout_at(grace_end, idle).await.is_err() {
                // The rest is cut when the LocalSet is dropped: each request still on its way
                // records itself as `cut` (vu.rs, `InFlight`) before the final part is sent.
                break;
            }
        }
    });
    local.block_on(&runtime, std::future::poll_fn(|cx| ended.poll(cx)));
    // The course has ended: its handle is ready at once, with its panic if it had one.
    if let Err(error) = local.block_on(&runtime, course) {
        if error.is_panic() {
            std::panic::resume_unwind(error.into_panic());
        }
    }
    // What the grace period cut goes with the set. A SQL statement among it asks its server to
    // cancel it (`sql/cancel.rs`), from a task on this runtime: the set is dropped inside the
    // runtime's context so that it can, and the runtime runs those tasks a moment, before the
    // final part goes.
    {
        let _context = runtime.enter();
        drop(local);
    }
    runtime.block_on(crate::transport::sql::cancels_sent(CANCELS_AT_THE_END));
}

/// The longest a worker's end waits for the cancel requests of the statements it cut.
const CANCELS_AT_THE_END: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a worker's course has ended, and the waker of the worker's thread waiting for it.
#[derive(Default)]
struct CourseEnd {
    ended: Cell<bool>,
    waiter: RefCell<Option<std::task::Waker>>,
}

impl CourseEnd {
    fn poll(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.ended.get() {
            return std::task::Poll::Ready(());
        }
        let mut waiter = self.waiter.borrow_mut();
        if !waiter.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
            *waiter = Some(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

/// Marks the course ended when it is dropped: at its end, or when it panics.
struct CourseEnded(Rc<CourseEnd>);

impl Drop for CourseEnded {
    fn drop(&mut self) {
        self.0.ended.set(true);
        if let Some(waker) = self.0.waiter.borrow_mut().take() {
            waker.wake();
        }
    }
}

/// Once a second (on the run's clock), hands the interval's measurements to the aggregator.
async fn report_intervals(state: Rc<WorkerState>, parts: mpsc::Sender<WorkerPart>, last_sent: Rc<Cell<u64>>) {
    let start = tokio::time::Instant::from_std(state.shared.start);
    for index in 1u64.. {
        tokio::time::sleep_until(start + Duration::from_secs(index)).await;
        let recorder = state.recorder.borrow_mut().take();
        let part = WorkerPart {
            worker: state.index,
            index,
            recorder,
            exchanges: state.exchanges.take(),
            active_vus: state.active_vus.get(),
            peak_vus: state.take_peak(),
            busy_vus: state.busy_vus.get(),
            is_final: false,
            elapsed: state.elapsed(),
        };
        last_sent.set(index);
        if parts.send(part).is_err() {
            return;
        }
    }
}

/// Measures how late this worker's timers fire: a busy or starved worker shows here first.
async fn probe_timer_lateness(state: Rc<WorkerState>) {
    loop {
        let due = tokio::time::Instant::now() + PROBE_PERIOD;
        tokio::time::sleep_until(due).await;
        let late = tokio::time::Instant::now().saturating_duration_since(due);
        horde_metrics::record_latency(&mut state.recorder.borrow_mut().timer_lateness_us, late.as_micros() as u64);
    }
}

async fn drive_scenario(state: Rc<WorkerState>, scenario: usize) {
    match &state.shared.plan.scenarios[scenario].workload {
        CompiledWorkload::Closed(_) => drive_closed(state, scenario).await,
        CompiledWorkload::Open { .. } => drive_open(state, scenario).await,
    }
}

fn scenario_of(state: &WorkerState, scenario: usize) -> &CompiledScenario {
    &state.shared.plan.scenarios[scenario]
}

/// Closed model: keeps this worker's share of the asked VU count alive. VU `local` (global
/// number `local * slots + slot`) runs iterations while `local` is below the share.
async fn drive_closed(state: Rc<WorkerState>, scenario: usize) {
    if !matches!(scenario_of(&state, scenario).workload, CompiledWorkload::Closed(_)) {
        return;
    }
    let mut levels = state.shared.levels.watch();
    let mut profile = state.shared.levels.profile(scenario);
    let (slot, slots) = (state.slot, state.slots);
    let wanted = Rc::new(Cell::new(0u64));
    let alive: Rc<RefCell<Vec<bool>>> = Rc::new(RefCell::new(Vec::new()));
    // VUs below this index were all alive at the last scan; only the rest need a look.
    let mut scan_from = 0u64;
    let start = tokio::time::Instant::from_std(state.shared.start);
    let mut tick = start;
    loop {
        if state.stopping.get() {
            return;
        }
        if levels.has_changed().unwrap_or(false) {
            levels.mark_unchanged();
            profile = state.shared.levels.profile(scenario);
        }
        let elapsed = state.elapsed().as_secs_f64();
        let target = share(profile.vus_at(elapsed), slot, slots);
        if target < wanted.get() {
            scan_from = scan_from.min(target);
        }
        wanted.set(target);
        {
            let mut alive_flags = alive.borrow_mut();
            if alive_flags.len() < target as usize {
                alive_flags.resize(target as usize, false);
            }
            // The VUs started at this tick start evenly over the tick rather than all at once:
            // started together, they would stay together (pacing keeps each VU's schedule), and
            // every pacing period their burst would delay one another's requests.
            let starting = (scan_from..target).filter(|local| !alive_flags[*local as usize]).count() as u32;
            let now = tokio::time::Instant::now();
            let mut nth = 0u32;
            for local in scan_from..target {
                if !alive_flags[local as usize] {
                    alive_flags[local as usize] = true;
                    let offset = scenario_of(&state, scenario).vu_offset;
                    let vu = Box::new(Vu::new(scenario, offset, local * slots + slot));
                    let starts_at = now + RAMP_TICK * nth / starting;
                    nth += 1;
                    tokio::task::spawn_local(closed_vu(
                        Rc::clone(&state),
                        scenario,
                        vu,
                        VuPlace { local, starts_at },
                        Rc::clone(&wanted),
                        Rc::clone(&alive),
                    ));
                }
            }
            scan_from = target;
        }
        tick += RAMP_TICK;
        tokio::time::sleep_until(tick.max(tokio::time::Instant::now())).await;
    }
}

/// A closed-model VU's index in its worker's share, and when it starts.
struct VuPlace {
    local: u64,
    starts_at: tokio::time::Instant,
}

/// The VU comes boxed: an `async fn` keeps its arguments twice in its future (as given and as
/// moved into its body), and a VU's task is allocated at its future's largest size for its whole
/// life, so a VU passed by value cost its size twice over for as long as it lived
/// (`bench/FIGURES.md`, "VU density").
async fn closed_vu(
    state: Rc<WorkerState>,
    scenario: usize,
    mut vu: Box<Vu>,
    place: VuPlace,
    wanted: Rc<Cell<u64>>,
    alive: Rc<RefCell<Vec<bool>>>,
) {
    let local = place.local;
    wait_until(&state, place.starts_at).await;
    if state.stopping.get() {
        alive.borrow_mut()[local as usize] = false;
        return;
    }
    state.vu_started();
    vu.set_connect_backoff(state.shared.plan.connect_backoff);
    let program = &scenario_of(&state, scenario).program;
    if !vu.start(&state, program).await {
        // No row for this VU in a unique feeder: it stays parked (rather than being started
        // again and again) until the run stops. The plan check makes this rare.
        if state.shared.single_iteration {
            state.shared.stop.send_replace(true);
        }
        while !state.stopping.get() {
            let stopped = state.stop_notify.notified();
            if state.stopping.get() {
                break;
            }
            stopped.await;
        }
        alive.borrow_mut()[local as usize] = false;
        state.vu_ended();
        return;
    }
    // With pacing, when this VU's next iteration is due.
    let mut due = tokio::time::Instant::now();
    while !state.stopping.get() && local < wanted.get() {
        state.busy_vus.set(state.busy_vus.get() + 1);
        let end = vu.run_iteration(&state, program, None).await;
        state.busy_vus.set(state.busy_vus.get() - 1);
        state.recorder.borrow_mut().iterations += 1;
        if matches!(end, IterationEnd::ConnectFailed | IterationEnd::NothingSent) {
            // A refused connection fails in microseconds (and backs off only when the plan
            // lets it), and an iteration that sent nothing (every template failed, every branch
            // empty) never waited at all; without a yield such a VU would spin and starve the
            // rest of its worker, the stop included.
            tokio::task::yield_now().await;
        }
        if state.shared.single_iteration {
            break;
        }
        if let Some(pacing) = program.pacing {
            // At the scenario's pace of now (`pace_factors.rs`); a wait already filed keeps its
            // end, so a change shows from the period after the one this VU is in.
            let period = state.shared.pace_factors.scaled(scenario, pacing);
            due = next_paced_start(due, period, tokio::time::Instant::now());
            wait_until(&state, due).await;
        }
    }
    vu.finish(&state, program).await;
    alive.borrow_mut()[local as usize] = false;
    state.vu_ended();
    if state.shared.single_iteration {
        // `horde try`: the one VU has run its iteration and its teardown; the run is over.
        state.shared.stop.send_replace(true);
    }
}

/// Open model: fires this worker's share of the arrivals (arrival k goes to slot k mod N) at
/// their intended instants; each runs one iteration on an idle VU, or is counted as dropped.
async fn drive_open(state: Rc<WorkerState>, scenario: usize) {
    let CompiledWorkload::Open { max_vus, arrivals, .. } = &scenario_of(&state, scenario).workload else { return };
    let mut levels = state.shared.levels.watch();
    let mut profile = state.shared.levels.profile(scenario);
    let (slot, slots) = (state.slot, state.slots);
    let capacity = share(*max_vus, slot, slots);
    // Idle VUs by the instance of the target they talk to. Arrival j (counted across workers)
    // goes to instance j mod k, so arrivals spread over instances evenly even when a few VUs
    // could carry them all (a free VU of another instance serves only when its own has none
    // and no VU may be added).
    let instances = state.shared.plan.endpoints.len();
    let idle: Idle = Rc::new(RefCell::new((0..instances).map(|_| Vec::new()).collect()));
    // Every open-model VU this driver creates: its idle ones are woken to leave at the stop.
    let mut everyone: Vec<Rc<ArrivalSlot>> = Vec::new();
    let mut fired = 0u64;
    let mut created = 0u64;
    let start = tokio::time::Instant::from_std(state.shared.start);
    // Arrivals are numbered along the rate's integral (the expected count so far). Uniform: this
    // worker takes arrivals slot, slot + N, ... (N slots over all generators). Poisson: each
    // slot runs its own Poisson process at 1/N of the rate (their superposition is a Poisson
    // process at the full rate), so its next arrival is N exponential(1) units further along.
    let mut random = VuRandom::new(0x5EED_0000 + slot);
    let mut gap = move || match arrivals {
        Arrivals::Uniform => slots as f64,
        Arrivals::Poisson => -(slots as f64) * (1.0 - random.next_f64()).ln(),
    };
    let mut arrival = match arrivals {
        Arrivals::Uniform => slot as f64,
        Arrivals::Poisson => gap(),
    };
    let mut overdue_in_a_row = 0u32;
    // Each wait's timer is registered before the previous one fires (`crate::time::arrival_timer`).
    let mut timer = ArrivalTimer::new(start);
    loop {
        if state.stopping.get() {
            break;
        }
        if levels.has_changed().unwrap_or(false) {
            levels.mark_unchanged();
            profile = state.shared.levels.profile(scenario);
        }
        let Some(offset_s) = profile.time_of_arrival(arrival) else {
            // No more arrivals as things stand (the rate fell to zero, or the stages ended):
            // wait for the stop, or for a re-target that brings arrivals back.
            tokio::select! {
                _ = state.stop_notify.notified() => {}
                _ = levels.changed() => profile = state.shared.levels.profile(scenario),
                _ = tokio::time::sleep_until(start + state.shared.plan.duration) => break,
            }
            continue;
        };
        let due = start + Duration::from_secs_f64(offset_s);
        if due > tokio::time::Instant::now() {
            overdue_in_a_row = 0;
            let mut retargeted = false;
            timer.arm(due);
            tokio::select! {
                _ = timer.wait() => {}
                _ = state.stop_notify.notified() => {}
                _ = levels.changed() => retargeted = true,
            }
            if retargeted {
                // This arrival's instant may have moved: take it again from the new profile.
                profile = state.shared.levels.profile(scenario);
                continue;
            }
        } else {
            // Arrivals already due fire without waiting; when the worker cannot keep up, this
            // loop would never give the runtime back (no stop, no interval report). Yield now
            // and then so the rest of the worker runs.
            overdue_in_a_row += 1;
            if overdue_in_a_row.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
        }
        if state.stopping.get() {
            break;
        }
        let instance = ((fired * slots + slot) % instances as u64) as usize;
        fired += 1;
        let own = idle.borrow_mut()[instance].pop();
        let idle_vu =
            own.or_else(|| if created < capacity { None } else { idle.borrow_mut().iter_mut().find_map(Vec::pop) });
        match idle_vu {
            // An idle VU's task is parked on its slot: handing it the arrival wakes it.
            Some(vu) => vu.hand(due.into_std()),
            None if created < capacity => {
                // A new VU: a task of its own, which serves this arrival and then every arrival
                // handed to it while it is idle (no task spawned per arrival).
                created += 1;
                state.vu_started();
                let number = (created - 1) * slots + slot;
                let offset = scenario_of(&state, scenario).vu_offset;
                let vu = Box::new(Vu::for_instance(scenario, offset, number, instance));
                let arrivals = Rc::new(ArrivalSlot::new(vu.instance()));
                arrivals.hand(due.into_std());
                everyone.push(Rc::clone(&arrivals));
                tokio::task::spawn_local(open_vu(Rc::clone(&state), scenario, vu, arrivals, Rc::clone(&idle)));
            }
            None => state.recorder.borrow_mut().dropped_arrivals += 1,
        }
        arrival += gap();
    }
    // Idle VUs leave once stopping begins; busy ones leave when their iteration ends.
    while !state.stopping.get() {
        let stopped = state.stop_notify.notified();
        if state.stopping.get() {
            break;
        }
        stopped.await;
    }
    // Stopping: every VU's task is woken (a busy one's wake is noticed once its iteration ends);
    // each leaves, its teardown run and its connection closed.
    idle.borrow_mut().iter_mut().for_each(Vec::clear);
    for vu in everyone {
        vu.wake();
    }
}

/// An open model's idle VUs (the slots their tasks are parked on), one list per instance of the
/// target.
type Idle = Rc<RefCell<Vec<Vec<Rc<ArrivalSlot>>>>>;

/// Where the pacer hands an open-model VU its next arrival, and the waker of the VU's task
/// parked there: one wake per arrival, instead of a task spawned (and its future moved and
/// freed) per arrival.
struct ArrivalSlot {
    /// The instance of the target this VU talks to.
    instance: usize,
    /// The intended instant of the arrival handed to the VU, until it takes it.
    due: Cell<Option<Instant>>,
    waker: RefCell<Option<std::task::Waker>>,
}

impl ArrivalSlot {
    fn new(instance: usize) -> Self {
        Self { instance, due: Cell::new(None), waker: RefCell::new(None) }
    }

    /// Hands the VU an arrival due at `intended` and wakes its task.
    fn hand(&self, intended: Instant) {
        self.due.set(Some(intended));
        self.wake();
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// The next arrival handed to this VU, or `None` once `stopping` is set and none is.
    async fn next(&self, stopping: &Cell<bool>) -> Option<Instant> {
        std::future::poll_fn(|cx| {
            if let Some(due) = self.due.take() {
                return std::task::Poll::Ready(Some(due));
            }
            if stopping.get() {
                return std::task::Poll::Ready(None);
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            std::task::Poll::Pending
        })
        .await
    }
}

/// One open-model VU for its whole life: it runs each arrival handed to it (its setup first, on
/// the first), then goes back to the idle list and waits for the next; it leaves when the run
/// stops or its setup failed. Each arrival's first request is timed from its intended instant,
/// so the setup's time shows as that request's latency.
/// The VU comes boxed, as to `closed_vu`.
async fn open_vu(state: Rc<WorkerState>, scenario: usize, mut vu: Box<Vu>, arrivals: Rc<ArrivalSlot>, idle: Idle) {
    let program = &scenario_of(&state, scenario).program;
    let mut fresh = true;
    while let Some(intended) = arrivals.next(&state.stopping).await {
        state.busy_vus.set(state.busy_vus.get() + 1);
        let usable = !std::mem::take(&mut fresh) || vu.start(&state, program).await;
        if usable {
            vu.run_iteration(&state, program, Some(intended)).await;
            state.recorder.borrow_mut().iterations += 1;
        }
        state.busy_vus.set(state.busy_vus.get() - 1);
        if !usable {
            // Its setup failed: the VU is done for good (no teardown, as before).
            drop(vu);
            state.vu_ended();
            return;
        }
        if state.stopping.get() {
            break;
        }
        idle.borrow_mut()[arrivals.instance].push(Rc::clone(&arrivals));
    }
    // The VU is done for good: its connection closes now rather than at the end of the run.
    vu.finish(&state, program).await;
    drop(vu);
    state.vu_ended();
}

/// When a paced VU's next iteration starts: `pacing` after this one was *due*, however long it
/// took, or at once if that has passed (the iteration took longer than the pacing; the schedule
/// goes on from now). Counting from when it was due rather than when it started keeps a VU on
/// its own schedule when its worker woke it late: counted from the late start, every VU woken
/// together after a stall would stay together, and its burst would stall the worker again one
/// pacing later, and grow.
fn next_paced_start(due: tokio::time::Instant, pacing: Duration, now: tokio::time::Instant) -> tokio::time::Instant {
    (due + pacing).max(now)
}

/// Sleeps until `deadline`, or until the run stops.
async fn wait_until(state: &WorkerState, deadline: tokio::time::Instant) {
    let stopped = state.stop_notify.notified();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    if !state.stopping.get() && deadline > tokio::time::Instant::now() {
        tokio::select! {
            _ = state.pauses.until(deadline) => {}
            _ = stopped => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_open_vu_takes_each_arrival_handed_to_it_then_leaves_at_the_stop() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        LocalSet::new().block_on(&runtime, async {
            let slot = Rc::new(ArrivalSlot::new(3));
            let stopping = Rc::new(Cell::new(false));
            let taken: Rc<RefCell<Vec<Option<Instant>>>> = Rc::default();
            let start = Instant::now();
            let at = |ms| start + Duration::from_millis(ms);
            // Handed before the VU's task first runs: not lost.
            slot.hand(at(1));
            let task = tokio::task::spawn_local({
                let (slot, stopping, taken) = (Rc::clone(&slot), Rc::clone(&stopping), Rc::clone(&taken));
                async move {
                    loop {
                        let next = slot.next(&stopping).await;
                        taken.borrow_mut().push(next);
                        if next.is_none() {
                            break;
                        }
                    }
                }
            });
            tokio::task::yield_now().await;
            assert_eq!(*taken.borrow(), vec![Some(at(1))]);
            // Parked: nothing more until an arrival is handed, and then exactly that one.
            tokio::task::yield_now().await;
            assert_eq!(taken.borrow().len(), 1);
            assert!(slot.waker.borrow().is_some(), "the parked task left its waker");
            slot.hand(at(2));
            tokio::task::yield_now().await;
            assert_eq!(*taken.borrow(), vec![Some(at(1)), Some(at(2))]);
            // A wake with nothing handed (the stop not yet set) is no arrival.
            slot.wake();
            tokio::task::yield_now().await;
            assert_eq!(taken.borrow().len(), 2);
            // An arrival handed before the stop is still served; then the VU leaves.
            slot.hand(at(3));
            stopping.set(true);
            task.await.unwrap();
            assert_eq!(*taken.borrow(), vec![Some(at(1)), Some(at(2)), Some(at(3)), None]);
            assert_eq!(slot.instance, 3);
        });
    }

    #[test]
    fn pacing_counts_from_when_an_iteration_was_due() {
        let zero = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        // Due at 0, woken 30 ms late, done at 40 ms: the next is still due at 100 ms.
        assert_eq!(next_paced_start(zero, ms(100), zero + ms(40)), zero + ms(100));
        // An iteration longer than the pacing: the next starts at once, and the schedule goes
        // on from there.
        let late = next_paced_start(zero, ms(100), zero + ms(250));
        assert_eq!(late, zero + ms(250));
        assert_eq!(next_paced_start(late, ms(100), zero + ms(260)), zero + ms(350));
    }

    #[test]
    fn a_pace_factor_divides_the_pacing_from_the_next_period_on() {
        let factors = crate::time::pace_factors::PaceFactors::new(1);
        let zero = tokio::time::Instant::now();
        let (ms, pacing) = (Duration::from_millis, Duration::from_millis(200));
        let first = next_paced_start(zero, factors.scaled(0, pacing), zero + ms(5));
        assert_eq!(first, zero + ms(200));
        // Twice the pace: the period computed after the change is half the plan's.
        factors.set(0, 2.0).unwrap();
        let second = next_paced_start(first, factors.scaled(0, pacing), first + ms(5));
        assert_eq!(second, zero + ms(300));
        factors.set(0, 0.5).unwrap();
        assert_eq!(next_paced_start(second, factors.scaled(0, pacing), second), zero + ms(700));
    }
}
