//! A virtual user: its connection (or, with a pool, the one it borrows per exchange), buffers,
//! random stream, variables and cookies, and how it walks its scenario's nodes.

mod http2_step;
mod http_step;
mod lane;
mod message_step;
mod parallel_step;
mod recording;
mod sql_step;
mod template_failure;
mod vars;

use crate::run::worker_state::WorkerState;
use crate::scenario::interpreter::{Condition, CookieJar, LoopMode, Node, ScenarioProgram};
use crate::template::Text;
use crate::time::think::{self, VuRandom};
use horde_metrics::ErrorKind;
use horde_plan::{FeederMode, ThinkTime};
use minijinja::Value;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `target.connect_backoff`: the first pause after a failed connect, doubled with each failure
/// in a row up to the last.
const FIRST_CONNECT_BACKOFF: Duration = Duration::from_millis(10);
const MAX_CONNECT_BACKOFF: Duration = Duration::from_secs(1);

/// How an iteration ended, as far as the VU's loop cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IterationEnd {
    Completed,
    /// The last request could not even connect (refused, DNS...).
    ConnectFailed,
    /// Not one request went out (every template failed, or every branch was empty).
    NothingSent,
    Stopped,
}

/// What the walk of a list of nodes says to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    EndIteration,
    Stopped,
}

/// The state of one walk: the open model's intended start (taken by the first request) and
/// whether a stop ends the walk (setup and teardown are not cut by a stop, only by the grace
/// period).
struct Pass {
    intended: Option<Instant>,
    stoppable: bool,
    /// The setup: its first failed step ends it (a failed login is one error, not a cascade).
    ends_on_failure: bool,
}

pub(crate) struct Vu {
    /// The VU's number in the whole run (unique across workers and scenarios): `vu` in templates.
    number: u64,
    /// Its scenario's index in the plan: whose pace factor its pauses follow
    /// (`Shared::pace_factors`). A u32 lies in padding the VU already had, where a usize added
    /// 8 bytes to every VU (520 bytes against 528); no plan holds 2^32 scenarios.
    scenario: u32,
    /// The VU's number within its scenario: its row in a unique feeder.
    scenario_number: u64,
    /// Which of the target's instances this VU talks to (`CompiledPlan::endpoints`): given at
    /// creation (open model) or, when `BY_NUMBER`, set by `start` from the VU number; the same
    /// one for the VU's whole life, so its connection, cookies and `Host` header stay with one
    /// instance, as behind a client-side balancer.
    instance: usize,
    /// Requests sent so far (an iteration or group pass that sent none is told apart).
    sent: u64,
    /// Its connection, read buffer and response capture for one request at a time.
    lane: lane::Lane,
    /// More lanes for a `parallel` group's requests over HTTP/1.1, kept with their connections
    /// for the next group (at most `target.parallel_connections` - 1); empty for a VU that runs
    /// no such group.
    extra_lanes: Vec<lane::Lane>,
    /// Where templated requests are encoded; reused.
    request: Vec<u8>,
    random: VuRandom,
    /// Variables by name: extracted values, loop items, feeder rows. Shared with the template
    /// context without copying; changed copy-on-write.
    vars: Arc<vars::Vars>,
    /// The template context, built once and rebuilt only when a variable or the iteration
    /// changes (most requests render several templates between such changes).
    context: Option<Value>,
    /// Last renderings of memoizable templates (see `TemplateRef::memo_slot`), valid until a
    /// variable they read changes; shared with the requests that send them.
    memo: Vec<Option<Arc<str>>>,
    cookies: CookieJar,
    iteration: u64,
    /// Failed outcomes recorded so far (a group fails when this moves during its pass).
    failures: u64,
    last_connect_failed: bool,
    /// Whether this VU pauses after a failed connect (closed models, `target.connect_backoff`),
    /// and its last pause (zero: none since its last connect that succeeded).
    backs_off: bool,
    backoff: Duration,
    /// Its SQL connection between `sql` steps (`vu/sql_step.rs`), from its first `sql` step:
    /// boxed and made on first use, so that a VU of a plan without them carries one word for it
    /// (a VU's size is paid 150,000 times over: see `bench/FIGURES.md`, "VU density").
    sql: Option<Box<sql_step::VuSql>>,
    /// Its connection and message numbers between message steps (`vu/message_step.rs`), from its
    /// first message step; boxed for the same reason.
    messages: Option<Box<message_step::VuMessages>>,
    /// The setup has run without a failure: the behaviour may run. Until then each iteration
    /// runs the setup first, and ends where a setup step fails.
    set_up: bool,
    /// The setup failed once already (the VU is counted once in `setup_failures`).
    setup_failed: bool,
    /// The last pause after a failed setup (zero: none since the last setup that succeeded).
    setup_backoff: Duration,
    /// Which part of its scenario the VU runs: `setup`, `steps` or `teardown` (recorded
    /// exchanges say it).
    phase: &'static str,
}

/// A request on its way. Recorded as `cut` if the VU's task is dropped before the request
/// ends: the grace period ran out and the worker dropped its tasks (see `run_worker`).
struct InFlight<'a> {
    state: &'a WorkerState,
    index: usize,
    started: Instant,
    ended: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let latency_us = self.started.elapsed().as_micros() as u64;
        if let Ok(mut recorder) = self.state.recorder.try_borrow_mut() {
            let step = &mut recorder.steps[self.index];
            step.record(latency_us, Err(ErrorKind::Cut), 0, 0);
            step.note_detail(ErrorKind::Cut, "no answer yet when the grace period (graceful_stop_s) ended".into());
        }
    }
}

/// `Vu::instance` before `start`: take the instance from the VU number.
const BY_NUMBER: usize = usize::MAX;

impl Vu {
    /// A VU of scenario number `scenario`: `offset` is the scenario's first VU number in the
    /// run; `scenario_number` the VU's number within its scenario.
    pub fn new(scenario: usize, offset: u64, scenario_number: u64) -> Self {
        Self::for_instance(scenario, offset, scenario_number, BY_NUMBER)
    }

    /// A VU bound to instance `instance` of the target whatever its number: the open model
    /// spreads arrivals over instances by arrival, not by which VU happens to be free.
    pub fn for_instance(scenario: usize, offset: u64, scenario_number: u64, instance: usize) -> Self {
        let number = offset + scenario_number;
        Self {
            number,
            scenario: scenario as u32,
            scenario_number,
            instance,
            sent: 0,
            lane: lane::Lane::default(),
            extra_lanes: Vec::new(),
            request: Vec::new(),
            random: VuRandom::new(number),
            vars: Arc::new(vars::Vars::default()),
            context: None,
            memo: Vec::new(),
            cookies: CookieJar::default(),
            iteration: 0,
            failures: 0,
            last_connect_failed: false,
            backs_off: false,
            backoff: Duration::ZERO,
            sql: None,
            messages: None,
            set_up: false,
            setup_failed: false,
            setup_backoff: Duration::ZERO,
            phase: "setup",
        }
    }

    /// Makes this VU pause after a failed connect (`target.connect_backoff`, closed models: an
    /// open model's arrivals keep the plan's pace whatever the target does).
    pub fn set_connect_backoff(&mut self, enabled: bool) {
        self.backs_off = enabled;
    }

    pub fn instance(&self) -> usize {
        self.instance
    }

    /// Takes the VU's unique feeder rows and runs the setup steps. False when the VU cannot
    /// run at all (a unique feeder has no row for it).
    pub async fn start(&mut self, state: &WorkerState, program: &ScenarioProgram) -> bool {
        // Here rather than in `new`: the instance count is the plan's, and every VU is started
        // before its first request. A scenario's VUs are numbered consecutively, so they take
        // the instances in turn.
        if self.instance == BY_NUMBER {
            self.instance = (self.number % state.shared.plan.endpoints.len() as u64) as usize;
        }
        for feeder in program.feeders.iter().filter(|feeder| feeder.mode == FeederMode::Unique) {
            match feeder.row_of_vu(self.scenario_number) {
                Some(row) => {
                    self.vars_mut().insert(&feeder.name, row);
                }
                None => {
                    if let Some(index) = program.first_request_index {
                        self.record(state, index, 0, Err(ErrorKind::FeederExhausted), 0, 0);
                        let message =
                            format!("unique feeder '{}' has no row for VU {}", feeder.name, self.scenario_number);
                        self.note(state, index, ErrorKind::FeederExhausted, message);
                    }
                    return false;
                }
            }
        }
        // The setup runs at the start of the first iteration (and again at the start of each
        // later one until it succeeds): see `run_iteration`.
        self.set_up = program.setup.is_empty();
        true
    }

    /// Runs the setup steps up to the first that fails; true when none did. A VU whose setup
    /// fails is counted once in the snapshot's `setup_failures`.
    async fn run_setup(&mut self, state: &WorkerState, program: &ScenarioProgram) -> bool {
        let failures = self.failures;
        self.phase = "setup";
        let mut pass = Pass { intended: None, stoppable: false, ends_on_failure: true };
        self.run_nodes(state, &program.setup, &mut pass).await;
        self.set_up = self.failures == failures;
        if !self.set_up && !self.setup_failed {
            self.setup_failed = true;
            state.recorder.borrow_mut().setup_failures += 1;
        }
        if !self.set_up && self.backs_off {
            // Tried again at the next iteration, after a pause (as after a failed connect), so
            // that a failing login is not hammered by every VU in a loop.
            self.setup_backoff = if self.setup_backoff.is_zero() {
                FIRST_CONNECT_BACKOFF
            } else {
                (self.setup_backoff * 2).min(MAX_CONNECT_BACKOFF)
            };
            wait_unless_stopped(state, self.setup_backoff).await;
        }
        self.set_up
    }

    /// Runs the behaviour once. `intended` is the arrival's intended instant in the open model:
    /// the first request is timed from it, so any lateness counts as latency.
    pub async fn run_iteration(
        &mut self,
        state: &WorkerState,
        program: &ScenarioProgram,
        intended: Option<Instant>,
    ) -> IterationEnd {
        for feeder in program.feeders.iter().filter(|feeder| feeder.mode != FeederMode::Unique) {
            let row = feeder.next_row(self.random.next_u64());
            self.vars_mut().insert(&feeder.name, row);
        }
        self.last_connect_failed = false;
        let sent_before = self.sent;
        // A failed setup ends the iteration: the behaviour would only fail on what it left unset.
        let flow = if self.set_up || self.run_setup(state, program).await {
            self.phase = "steps";
            let mut pass = Pass { intended, stoppable: true, ends_on_failure: false };
            self.walk(state, &program.steps, &mut pass).await
        } else {
            Flow::EndIteration
        };
        self.iteration += 1;
        self.context = None;
        match flow {
            Flow::Stopped => IterationEnd::Stopped,
            _ if self.last_connect_failed => IterationEnd::ConnectFailed,
            _ if self.sent == sent_before => IterationEnd::NothingSent,
            _ => IterationEnd::Completed,
        }
    }

    /// Runs the teardown steps (a VU that stops on its own, not one cut by the grace period).
    pub async fn finish(&mut self, state: &WorkerState, program: &ScenarioProgram) {
        if !program.teardown.is_empty() {
            self.phase = "teardown";
            let mut pass = Pass { intended: None, stoppable: false, ends_on_failure: false };
            self.run_nodes(state, &program.teardown, &mut pass).await;
        }
    }

    /// A walk below the iteration's own (a group, a branch, a loop's body): boxed, since a walk
    /// holds the walks below it.
    fn run_nodes<'a>(
        &'a mut self,
        state: &'a WorkerState,
        nodes: &'a [Node],
        pass: &'a mut Pass,
    ) -> Pin<Box<dyn Future<Output = Flow> + 'a>> {
        Box::pin(self.walk(state, nodes, pass))
    }

    /// Walks a list of nodes. The iteration's own walk is awaited in place (in the VU task's
    /// future, made once per VU), not boxed: a box per iteration was an allocation and a copy
    /// of the whole walk's future (2.6 KB) at every arrival of the open model.
    async fn walk(&mut self, state: &WorkerState, nodes: &[Node], pass: &mut Pass) -> Flow {
        // A choice or an `if` that ends the list goes on with its branch in this same walk
        // (a tail call), rather than in a walk of its own: each walk below the iteration's is a
        // boxed future, one allocation and a copy of a few KB per level (`bench/NOTES.md`). The
        // checks after each node then apply to the branch's nodes, as they would in the
        // branch's own walk, and its end is the list's end.
        let mut nodes = nodes;
        let mut next = 0;
        while let Some(node) = nodes.get(next) {
            next += 1;
            let last = next == nodes.len();
            let failures = self.failures;
            let flow = match node {
                Node::Request(request) => {
                    if pass.stoppable && state.stopping.get() && pass.intended.is_none() {
                        return Flow::Stopped;
                    }
                    let intended = pass.intended.take();
                    OutOfLine { future: self.request(state, request, intended) }.await
                }
                Node::Sql(_) | Node::Message(_)
                    if pass.stoppable && state.stopping.get() && pass.intended.is_none() =>
                {
                    return Flow::Stopped;
                }
                Node::Sql(step) => {
                    let intended = pass.intended.take();
                    OutOfLine { future: self.sql_step(state, step, intended) }.await
                }
                Node::Message(step) => {
                    let intended = pass.intended.take();
                    // Boxed, as a parallel group is below: a walk's future is the size of its
                    // largest step, held in every VU's task and copied into a box at every group.
                    Box::pin(self.message_step(state, step, intended)).await
                }
                Node::Group { global_index, children } => {
                    let started = Instant::now();
                    let failures = self.failures;
                    let sent = self.sent;
                    let flow = self.run_nodes(state, children, pass).await;
                    // A pass cut by a stop before anything was sent is no pass at all; one cut
                    // after some of its requests did not complete, and is counted `cut`, never
                    // as a pass that held (its last requests were never sent).
                    if !(flow == Flow::Stopped && self.sent == sent) {
                        let outcome = if self.failures != failures {
                            Err(ErrorKind::StepFailed)
                        } else if flow == Flow::Stopped {
                            Err(ErrorKind::Cut)
                        } else {
                            Ok(())
                        };
                        let latency_us = started.elapsed().as_micros() as u64;
                        self.record(state, *global_index, latency_us, outcome, 0, 0);
                    }
                    flow
                }
                Node::Parallel { global_index, requests } => {
                    if pass.stoppable && state.stopping.get() && pass.intended.is_none() {
                        return Flow::Stopped;
                    }
                    let started = Instant::now();
                    let failures = self.failures;
                    let intended = pass.intended.take();
                    let flow = Box::pin(self.parallel(state, requests, intended)).await;
                    let outcome = if self.failures != failures { Err(ErrorKind::StepFailed) } else { Ok(()) };
                    let latency_us = started.elapsed().as_micros() as u64;
                    self.record(state, *global_index, latency_us, outcome, 0, 0);
                    flow
                }
                Node::Choice { cumulative_weights, branches } => {
                    let total = cumulative_weights.last().copied().unwrap_or(0.0);
                    let draw = self.random.next_f64() * total;
                    let branch =
                        cumulative_weights.iter().position(|bound| draw < *bound).unwrap_or(branches.len() - 1);
                    if last {
                        (nodes, next) = (&branches[branch], 0);
                        continue;
                    }
                    self.run_nodes(state, &branches[branch], pass).await
                }
                Node::Loop { mode, children } => self.run_loop(state, mode, children, pass).await,
                Node::If { condition, then, otherwise } => {
                    let branch = if self.condition(state, condition) { then } else { otherwise };
                    if last {
                        (nodes, next) = (branch, 0);
                        continue;
                    }
                    self.run_nodes(state, branch, pass).await
                }
                Node::Think(think_time) => {
                    self.pause(state, think_time).await;
                    Flow::Continue
                }
                Node::EndIteration => Flow::EndIteration,
            };
            if flow != Flow::Continue {
                return flow;
            }
            if pass.ends_on_failure && self.failures != failures {
                return Flow::EndIteration;
            }
        }
        Flow::Continue
    }

    async fn run_loop(&mut self, state: &WorkerState, mode: &LoopMode, children: &[Node], pass: &mut Pass) -> Flow {
        match mode {
            LoopMode::Count(count) => {
                for _ in 0..*count {
                    let flow = self.run_nodes(state, children, pass).await;
                    if flow != Flow::Continue {
                        return flow;
                    }
                }
            }
            LoopMode::While(condition, max) => {
                for _ in 0..*max {
                    if !self.condition(state, condition) {
                        break;
                    }
                    let flow = self.run_nodes(state, children, pass).await;
                    if flow != Flow::Continue {
                        return flow;
                    }
                }
            }
            LoopMode::ForEach { variable, item, max } => {
                let items: Vec<Value> = match self.vars.get(variable).and_then(|list| list.try_iter().ok()) {
                    Some(iterator) => iterator.take(*max as usize).collect(),
                    None => Vec::new(),
                };
                for value in items {
                    self.vars_mut().insert(item, value);
                    let flow = self.run_nodes(state, children, pass).await;
                    if flow != Flow::Continue {
                        return flow;
                    }
                }
            }
        }
        Flow::Continue
    }

    /// The template context: the VU's variables, then `params`, `vu`, `iteration`.
    #[inline]
    fn context(&mut self, state: &WorkerState) -> Value {
        if let Some(context) = &self.context {
            return context.clone();
        }
        let builtins = minijinja::context! {
            params => state.shared.plan.params.clone(),
            vu => self.number,
            iteration => self.iteration,
        };
        let context = minijinja::value::merge_maps([Value::from_dyn_object(self.vars.clone()), builtins]);
        self.context = Some(context.clone());
        context
    }

    /// The variables, for changing: the cached context (which shares them) is dropped first so
    /// that the change does not copy the whole map.
    #[inline]
    fn vars_mut(&mut self) -> &mut vars::Vars {
        self.forget_renderings();
        Arc::make_mut(&mut self.vars)
    }

    /// A variable is about to change: the context and the memoized renderings are stale.
    #[inline]
    fn forget_renderings(&mut self) {
        self.context = None;
        self.memo.iter_mut().for_each(|rendered| *rendered = None);
    }

    /// Variable `name` is about to change: the context is stale, and of the memoized renderings
    /// those of templates that read it (`CompiledPlan::memo_readers`).
    #[inline]
    fn forget_renderings_of(&mut self, state: &WorkerState, name: &str) {
        self.context = None;
        if let Some(slots) = state.shared.plan.memo_readers.get(name) {
            for slot in slots {
                if let Some(rendered) = self.memo.get_mut(*slot) {
                    *rendered = None;
                }
            }
        }
    }

    #[inline]
    fn render(state: &WorkerState, context: &Value, template: &str) -> Option<String> {
        state.shared.plan.environment.get_template(template).ok()?.render(context).ok()
    }

    fn condition(&mut self, state: &WorkerState, condition: &Condition) -> bool {
        // A variable alone holds as the template's `if` would judge it (its value's truth),
        // without rendering; a variable not set goes to the template, which fails on it.
        if let Some(value) = condition.variable.as_deref().and_then(|name| self.vars.get(name)) {
            return value.is_true();
        }
        // A condition that cannot be evaluated (a variable left unset) does not hold.
        let context = self.context(state);
        Self::render(state, &context, &condition.template).is_some_and(|rendered| rendered == "1")
    }

    /// Fixed text is borrowed from the node, a memoized rendering shared; only templates
    /// rendered anew produce new strings, and only they need the context (built on first use).
    #[inline]
    fn render_text<'n>(&mut self, state: &WorkerState, text: &'n Text) -> Option<Rendered<'n>> {
        let template = match text {
            Text::Fixed(fixed) => return Some(Rendered::Fixed(fixed)),
            Text::Template(template) => template,
        };
        if let Some(direct) = &template.direct {
            let mut rendered = String::new();
            if self.render_direct(direct, &mut rendered) {
                return Some(Rendered::New(rendered));
            }
        }
        let Some(slot) = template.memo_slot else {
            let context = self.context(state);
            return Self::render(state, &context, &template.name).map(Rendered::New);
        };
        if let Some(Some(rendered)) = self.memo.get(slot) {
            return Some(Rendered::Memo(Arc::clone(rendered)));
        }
        let context = self.context(state);
        let rendered: Arc<str> = Self::render(state, &context, &template.name)?.into();
        if self.memo.len() < state.shared.plan.memo_slots {
            self.memo.resize(state.shared.plan.memo_slots, None);
        }
        self.memo[slot] = Some(Arc::clone(&rendered));
        Some(Rendered::Memo(rendered))
    }

    /// Renders `text` at the end of `out`, a buffer the caller keeps between its steps: a
    /// fixed or memoized text, a variable or a `random_int` call is written without an
    /// allocation of its own (`vu/sql_step.rs`'s parameters). False when a variable it reads is
    /// not set; `out` is then as it was.
    fn render_text_into(&mut self, state: &WorkerState, text: &Text, out: &mut String) -> bool {
        if let Text::Template(template) = text {
            if let Some(direct) = &template.direct {
                if self.render_direct(direct, out) {
                    return true;
                }
            }
        }
        match self.render_text(state, text) {
            Some(rendered) => {
                out.push_str(rendered.as_str());
                true
            }
            None => false,
        }
    }

    /// A template that is one variable or one `random_int` call (`crate::template::Direct`),
    /// rendered at the end of `out` without the template engine; false, with `out` as it was,
    /// when the engine must decide (a name that is not the VU's own variable, a field the value
    /// lacks, a variable named `random_int`).
    #[inline]
    fn render_direct(&self, direct: &crate::template::Direct, out: &mut String) -> bool {
        use crate::template::{push_rendered, Direct};
        match direct {
            Direct::Var { name, field, column } => {
                let Some(value) = self.vars.get(name) else { return false };
                match field {
                    None => push_rendered(value, out),
                    Some(field) => {
                        // A CSV feeder's row: its field's text, read in place.
                        if let Some(row) = value.downcast_object_ref::<crate::scenario::interpreter::CsvRow>() {
                            let Some(text) = field.as_str().and_then(|field| row.field_hinted(field, column)) else {
                                return false;
                            };
                            out.push_str(text);
                            return true;
                        }
                        // A map's field (a JSON feeder's row): `t.aid` looks the key up as `t['aid']` does.
                        if value.kind() != minijinja::value::ValueKind::Map {
                            return false;
                        }
                        match value.get_item(field) {
                            Ok(value) if !value.is_undefined() => push_rendered(&value, out),
                            _ => return false,
                        }
                    }
                }
                true
            }
            Direct::RandomInt { low, high } => {
                if self.vars.get("random_int").is_some() {
                    return false;
                }
                match horde_plan::templates::random_int(*low, *high) {
                    Ok(value) => {
                        // Not the formatter: a fifth of a parameter's rendering.
                        out.push_str(itoa::Buffer::new().format(value));
                        true
                    }
                    Err(_) => false,
                }
            }
        }
    }

    /// Keeps `message` as a detail of `kind` on step `index` (bounded; failures only).
    #[inline]
    fn note(&self, state: &WorkerState, index: usize, kind: ErrorKind, message: String) {
        state.recorder.borrow_mut().steps[index].note_detail(kind, message);
    }

    #[inline]
    fn record(
        &mut self,
        state: &WorkerState,
        index: usize,
        latency_us: u64,
        outcome: Result<(), ErrorKind>,
        sent: u64,
        received: u64,
    ) {
        if outcome.is_err() {
            self.failures += 1;
        }
        state.recorder.borrow_mut().steps[index].record(latency_us, outcome, sent, received);
    }

    /// A think time: drawn from the plan's distribution (the VU's random stream moves the same
    /// whatever the pace), then divided by the scenario's pace factor of now.
    async fn pause(&mut self, state: &WorkerState, think_time: &ThinkTime) {
        let drawn = think::draw(think_time, &mut self.random);
        let pause = state.shared.pace_factors.scaled(self.scenario as usize, drawn);
        wait_unless_stopped(state, pause).await;
    }

    /// How every step kind ends: the back-off after a failed connect, the step's think time
    /// (it applies after a failure too, as after a response), and whether the iteration goes on.
    async fn end_step(
        &mut self,
        state: &WorkerState,
        back_off: bool,
        think_time: Option<&ThinkTime>,
        end_iteration: bool,
    ) -> Flow {
        if back_off {
            // Boxed: a back-off is rare (a refused connect), and held in place its future would
            // widen every step's, which is moved at each step.
            Box::pin(self.back_off(state)).await;
        }
        if let Some(think_time) = think_time {
            self.pause(state, think_time).await;
        }
        if end_iteration {
            Flow::EndIteration
        } else {
            Flow::Continue
        }
    }

    /// The pause after a failed connect: 10 ms, then twice the last one up to 1 s; counted
    /// with its length (a stop ends it early).
    async fn back_off(&mut self, state: &WorkerState) {
        self.backoff =
            if self.backoff.is_zero() { FIRST_CONNECT_BACKOFF } else { (self.backoff * 2).min(MAX_CONNECT_BACKOFF) };
        let began = Instant::now();
        wait_unless_stopped(state, self.backoff).await;
        let mut recorder = state.recorder.borrow_mut();
        recorder.connect_backoffs += 1;
        recorder.connect_backoff_us += began.elapsed().as_micros() as u64;
    }
}

pin_project_lite::pin_project! {
    /// A step's future polled through a function of its own, never inlined into the walk's:
    /// each kind of step's code then lies together, apart from the walk's and the other
    /// kinds', and a step touches fewer lines of the instruction cache (a `sql` step missed it
    /// about 100 times a transaction, pgbench 8: `bench/NOTES.md`, issue 19's notes).
    struct OutOfLine<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for OutOfLine<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

/// A text as rendered for one request: the node's own fixed text, a memoized rendering, or a
/// new one.
enum Rendered<'n> {
    Fixed(&'n str),
    Memo(Arc<str>),
    New(String),
}

impl<'n> Rendered<'n> {
    fn as_str(&self) -> &str {
        match self {
            Rendered::Fixed(text) => text,
            Rendered::Memo(text) => text,
            Rendered::New(text) => text,
        }
    }

    fn into_owned(self) -> String {
        match self {
            Rendered::Fixed(text) => text.to_owned(),
            Rendered::Memo(text) => text.as_ref().to_owned(),
            Rendered::New(text) => text,
        }
    }

    /// Borrowed when it is the node's own text.
    fn into_cow(self) -> Cow<'n, str> {
        match self {
            Rendered::Fixed(text) => Cow::Borrowed(text),
            rendered => Cow::Owned(rendered.into_owned()),
        }
    }
}

impl std::ops::Deref for Rendered<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Rendered::Fixed(text) => text,
            Rendered::Memo(text) => text,
            Rendered::New(text) => text,
        }
    }
}

/// Sleeps for `pause`, or until the run stops. The stop's notification is registered before
/// the flag is read, so a stop between the two still wakes it; a stop that came earlier (during
/// the request) skips the pause altogether.
async fn wait_unless_stopped(state: &WorkerState, pause: Duration) {
    let stopped = state.stop_notify.notified();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    if !pause.is_zero() && !state.stopping.get() {
        tokio::select! {
            _ = state.pauses.until(tokio::time::Instant::now() + pause) => {}
            _ = stopped => {}
        }
    }
}
