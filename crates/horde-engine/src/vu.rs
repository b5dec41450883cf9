//! A virtual user: its connection (or, with a pool, the one it borrows per exchange), buffers,
//! random stream, variables and cookies, and how it walks its scenario's nodes.

mod message_step;
mod sql_step;
mod template_failure;

use crate::http::{encode_request, read_response, Capture, Connection, RequestParts};
use crate::interpreter::{body_prefix, Body, CookieJar, JsonTemplate, UNDEFINED_MARK, LoopMode, Node, RequestNode, ResponseView, ScenarioProgram, Text};
use crate::pool::Pool;
use crate::think::{self, VuRandom};
use crate::worker_state::WorkerState;
use horde_metrics::ErrorKind;
use horde_plan::{FeederMode, ThinkTime};
use minijinja::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
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

/// Why one exchange failed, in words too (the error detail), and whether it failed before
/// reaching the target.
#[derive(Debug, Clone)]
struct ExchangeError {
    kind: ErrorKind,
    connecting: bool,
    detail: String,
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
    /// The VU's number within its scenario: its row in a unique feeder.
    scenario_number: u64,
    /// Which of the target's instances this VU talks to (`CompiledPlan::endpoints`): given at
    /// creation (open model) or, when `BY_NUMBER`, set by `start` from the VU number; the same
    /// one for the VU's whole life, so its connection, cookies and `Host` header stay with one
    /// instance, as behind a client-side balancer.
    instance: usize,
    /// Requests sent so far (an iteration or group pass that sent none is told apart).
    sent: u64,
    connection: Option<Connection>,
    /// Reused for every response this VU reads; grows only for very large response heads.
    buffer: Vec<u8>,
    /// Where templated requests are encoded; reused.
    request: Vec<u8>,
    capture: Capture,
    random: VuRandom,
    /// Bytes of the current request already written: still counted when the response times out.
    written: u64,
    /// Variables by name: extracted values, loop items, feeder rows. Shared with the template
    /// context without copying; changed copy-on-write.
    vars: Arc<BTreeMap<String, Value>>,
    /// The template context, built once and rebuilt only when a variable or the iteration
    /// changes (most requests render several templates between such changes).
    context: Option<Value>,
    /// Last renderings of memoizable templates (see `TemplateRef::memo_slot`), valid until a
    /// variable changes.
    memo: Vec<Option<String>>,
    cookies: CookieJar,
    iteration: u64,
    /// Failed outcomes recorded so far (a group fails when this moves during its pass).
    failures: u64,
    last_connect_failed: bool,
    /// Whether this VU pauses after a failed connect (closed models, `target.connect_backoff`),
    /// and its last pause (zero: none since its last connect that succeeded).
    backs_off: bool,
    backoff: Duration,
    /// Its SQL connection between `sql` steps (`vu/sql_step.rs`).
    sql: sql_step::VuSql,
    /// Its connection and message numbers between message steps (`vu/message_step.rs`).
    messages: message_step::VuMessages,
    /// The setup has run without a failure: the behaviour may run. Until then each iteration
    /// runs the setup first, and ends where a setup step fails.
    set_up: bool,
    /// The setup failed once already (the VU is counted once in `setup_failures`).
    setup_failed: bool,
    /// The last pause after a failed setup (zero: none since the last setup that succeeded).
    setup_backoff: Duration,
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
    /// `offset` is the scenario's first VU number in the run; `scenario_number` the VU's number
    /// within its scenario.
    pub fn new(offset: u64, scenario_number: u64) -> Self {
        Self::for_instance(offset, scenario_number, BY_NUMBER)
    }

    /// A VU bound to instance `instance` of the target whatever its number: the open model
    /// spreads arrivals over instances by arrival, not by which VU happens to be free.
    pub fn for_instance(offset: u64, scenario_number: u64, instance: usize) -> Self {
        let number = offset + scenario_number;
        Self {
            number,
            scenario_number,
            instance,
            sent: 0,
            connection: None,
            buffer: Vec::new(),
            request: Vec::new(),
            capture: Capture::default(),
            random: VuRandom::new(number),
            written: 0,
            vars: Arc::new(BTreeMap::new()),
            context: None,
            memo: Vec::new(),
            cookies: CookieJar::default(),
            iteration: 0,
            failures: 0,
            last_connect_failed: false,
            backs_off: false,
            backoff: Duration::ZERO,
            sql: sql_step::VuSql::default(),
            messages: message_step::VuMessages::default(),
            set_up: false,
            setup_failed: false,
            setup_backoff: Duration::ZERO,
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
                    self.vars_mut().insert(feeder.name.clone(), row);
                }
                None => {
                    if let Some(index) = program.first_request_index {
                        self.record(state, index, 0, Err(ErrorKind::FeederExhausted), 0, 0);
                        let message = format!("unique feeder '{}' has no row for VU {}", feeder.name, self.scenario_number);
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
            self.setup_backoff =
                if self.setup_backoff.is_zero() { FIRST_CONNECT_BACKOFF } else { (self.setup_backoff * 2).min(MAX_CONNECT_BACKOFF) };
            wait_unless_stopped(state, self.setup_backoff).await;
        }
        self.set_up
    }

    /// Runs the behaviour once. `intended` is the arrival's intended instant in the open model:
    /// the first request is timed from it, so any lateness counts as latency.
    pub async fn run_iteration(&mut self, state: &WorkerState, program: &ScenarioProgram, intended: Option<Instant>) -> IterationEnd {
        for feeder in program.feeders.iter().filter(|feeder| feeder.mode != FeederMode::Unique) {
            let row = feeder.next_row(self.random.next_u64());
            self.vars_mut().insert(feeder.name.clone(), row);
        }
        self.last_connect_failed = false;
        let sent_before = self.sent;
        // A failed setup ends the iteration: the behaviour would only fail on what it left unset.
        let flow = if self.set_up || self.run_setup(state, program).await {
            let mut pass = Pass { intended, stoppable: true, ends_on_failure: false };
            self.run_nodes(state, &program.steps, &mut pass).await
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
            let mut pass = Pass { intended: None, stoppable: false, ends_on_failure: false };
            self.run_nodes(state, &program.teardown, &mut pass).await;
        }
    }

    fn run_nodes<'a>(&'a mut self, state: &'a WorkerState, nodes: &'a [Node], pass: &'a mut Pass) -> Pin<Box<dyn Future<Output = Flow> + 'a>> {
        Box::pin(async move {
            for node in nodes {
                let failures = self.failures;
                let flow = match node {
                    Node::Request(request) => {
                        if pass.stoppable && state.stopping.get() && pass.intended.is_none() {
                            return Flow::Stopped;
                        }
                        let intended = pass.intended.take();
                        self.request(state, request, intended).await
                    }
                    Node::Sql(_) | Node::Message(_) if pass.stoppable && state.stopping.get() && pass.intended.is_none() => {
                        return Flow::Stopped;
                    }
                    Node::Sql(step) => {
                        let intended = pass.intended.take();
                        self.sql_step(state, step, intended).await
                    }
                    Node::Message(step) => {
                        let intended = pass.intended.take();
                        self.message_step(state, step, intended).await
                    }
                    Node::Group { global_index, children } => {
                        let started = Instant::now();
                        let failures = self.failures;
                        let sent = self.sent;
                        let flow = self.run_nodes(state, children, pass).await;
                        // A pass cut by a stop before anything was sent is no pass at all.
                        if !(flow == Flow::Stopped && self.sent == sent) {
                            let outcome = if self.failures == failures { Ok(()) } else { Err(ErrorKind::StepFailed) };
                            let latency_us = started.elapsed().as_micros() as u64;
                            self.record(state, *global_index, latency_us, outcome, 0, 0);
                        }
                        flow
                    }
                    Node::Choice { cumulative_weights, branches } => {
                        let total = cumulative_weights.last().copied().unwrap_or(0.0);
                        let draw = self.random.next_f64() * total;
                        let branch = cumulative_weights.iter().position(|bound| draw < *bound).unwrap_or(branches.len() - 1);
                        self.run_nodes(state, &branches[branch], pass).await
                    }
                    Node::Loop { mode, children } => self.run_loop(state, mode, children, pass).await,
                    Node::If { condition, then, otherwise } => {
                        let branch = if self.condition(state, condition) { then } else { otherwise };
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
        })
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
                    self.vars_mut().insert(item.clone(), value);
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
    fn vars_mut(&mut self) -> &mut BTreeMap<String, Value> {
        self.forget_renderings();
        Arc::make_mut(&mut self.vars)
    }

    /// A variable is about to change: the context and the memoized renderings are stale.
    fn forget_renderings(&mut self) {
        self.context = None;
        self.memo.iter_mut().for_each(|rendered| *rendered = None);
    }

    fn render(state: &WorkerState, context: &Value, template: &str) -> Option<String> {
        state.shared.plan.environment.get_template(template).ok()?.render(context).ok()
    }

    fn condition(&mut self, state: &WorkerState, template: &str) -> bool {
        // A condition that cannot be evaluated (a variable left unset) does not hold.
        let context = self.context(state);
        Self::render(state, &context, template).is_some_and(|rendered| rendered == "1")
    }

    /// Fixed text is borrowed from the node; only templates produce new strings.
    fn render_text<'n>(&mut self, state: &WorkerState, context: &Value, text: &'n Text) -> Option<Cow<'n, str>> {
        let template = match text {
            Text::Fixed(fixed) => return Some(Cow::Borrowed(fixed)),
            Text::Template(template) => template,
        };
        let Some(slot) = template.memo_slot else { return Self::render(state, context, &template.name).map(Cow::Owned) };
        if let Some(Some(rendered)) = self.memo.get(slot) {
            return Some(Cow::Owned(rendered.clone()));
        }
        let rendered = Self::render(state, context, &template.name)?;
        if self.memo.len() < state.shared.plan.memo_slots {
            self.memo.resize(state.shared.plan.memo_slots, None);
        }
        self.memo[slot] = Some(rendered.clone());
        Some(Cow::Owned(rendered))
    }

    fn render_json(state: &WorkerState, context: &Value, template: &JsonTemplate) -> Option<serde_json::Value> {
        Some(match template {
            JsonTemplate::Fixed(value) => value.clone(),
            JsonTemplate::Typed(name) => {
                let rendered = Self::render(state, context, name)?;
                if rendered == UNDEFINED_MARK {
                    return None;
                }
                serde_json::from_str(&rendered).ok()?
            }
            JsonTemplate::Text(name) => serde_json::Value::String(Self::render(state, context, name)?),
            JsonTemplate::Array(items) => {
                serde_json::Value::Array(items.iter().map(|item| Self::render_json(state, context, item)).collect::<Option<_>>()?)
            }
            JsonTemplate::Object(fields) => serde_json::Value::Object(
                fields.iter().map(|(key, item)| Some((key.clone(), Self::render_json(state, context, item)?))).collect::<Option<_>>()?,
            ),
        })
    }

    /// Encodes a request whose parts are templated (or that carries cookies) into `self.request`.
    /// Returns the rendered path (for cookie paths), or `None` when a template failed.
    fn encode_dynamic(&mut self, state: &WorkerState, node: &RequestNode) -> Option<String> {
        let context = self.context(state);
        let path = safe_path(self.render_text(state, &context, &node.path)?.into_owned());
        let mut rendered_headers = Vec::with_capacity(node.headers.len());
        for (name, value) in &node.headers {
            let value = self.render_text(state, &context, value)?;
            // A line break in a header value would end the header (or the request) early.
            if value.contains(['\r', '\n']) {
                return None;
            }
            rendered_headers.push((name.as_str(), value));
        }
        let (body, json) = match &node.body {
            Body::None => (Vec::new(), false),
            Body::Text(text) => (self.render_text(state, &context, text)?.into_owned().into_bytes(), false),
            Body::Json(template) => (serde_json::to_vec(&Self::render_json(state, &context, template)?).ok()?, true),
        };
        let headers: Vec<(&str, &str)> = rendered_headers.iter().map(|(name, value)| (*name, value.as_ref())).collect();
        let endpoint = &state.shared.plan.endpoints[self.instance];
        let cookie = self.cookies.header_for(&endpoint.path_prefix, &path);
        let parts = RequestParts { method: &node.method, path: &path, headers: &headers, cookie: cookie.as_deref(), body: &body, json };
        self.request.clear();
        encode_request(&mut self.request, endpoint, &parts);
        Some(path)
    }

    /// Keeps `message` as a detail of `kind` on step `index` (bounded; failures only).
    fn note(&self, state: &WorkerState, index: usize, kind: ErrorKind, message: String) {
        state.recorder.borrow_mut().steps[index].note_detail(kind, message);
    }

    fn record(&mut self, state: &WorkerState, index: usize, latency_us: u64, outcome: Result<(), ErrorKind>, sent: u64, received: u64) {
        if outcome.is_err() {
            self.failures += 1;
        }
        state.recorder.borrow_mut().steps[index].record(latency_us, outcome, sent, received);
    }

    async fn pause(&mut self, state: &WorkerState, think_time: &ThinkTime) {
        let pause = think::draw(think_time, &mut self.random);
        wait_unless_stopped(state, pause).await;
    }

    /// The pause after a failed connect: 10 ms, then twice the last one up to 1 s; counted
    /// with its length (a stop ends it early).
    async fn back_off(&mut self, state: &WorkerState) {
        self.backoff = if self.backoff.is_zero() { FIRST_CONNECT_BACKOFF } else { (self.backoff * 2).min(MAX_CONNECT_BACKOFF) };
        let began = Instant::now();
        wait_unless_stopped(state, self.backoff).await;
        let mut recorder = state.recorder.borrow_mut();
        recorder.connect_backoffs += 1;
        recorder.connect_backoff_us += began.elapsed().as_micros() as u64;
    }

    async fn request(&mut self, state: &WorkerState, node: &RequestNode, intended: Option<Instant>) -> Flow {
        let started = intended.unwrap_or_else(Instant::now);
        // Requests with nothing templated go out as encoded at start, unless cookies must be added.
        let (fixed, path) = match (&node.fixed, self.cookies.is_empty(), &node.path) {
            (Some(bytes), true, Text::Fixed(path)) => (Some(&bytes[self.instance]), Cow::Borrowed(path.as_str())),
            _ => match self.encode_dynamic(state, node) {
                Some(path) => (None, Cow::Owned(path)),
                None => {
                    // Not sent; the step's think time still applies, as it would after a reply.
                    self.record(state, node.global_index, 0, Err(ErrorKind::TemplateFailed), 0, 0);
                    let why = self.template_failure(state, node);
                    self.note(state, node.global_index, ErrorKind::TemplateFailed, why);
                    if let Some(think_time) = &node.think_time {
                        self.pause(state, think_time).await;
                    }
                    return Flow::Continue;
                }
            },
        };
        self.sent += 1;
        // Only a request timed from an intended instant needs its send instant too: a closed
        // model's latency is already from its send.
        let sent_at = intended.map(|_| Instant::now());
        self.capture.keep_body = node.keep_body;
        self.capture.keep_headers = node.keep_headers;
        let encoded = if fixed.is_none() { Some(std::mem::take(&mut self.request)) } else { None };
        let request: &[u8] = fixed.map(Vec::as_slice).or(encoded.as_deref()).unwrap_or_default();
        let mut in_flight = InFlight { state, index: node.global_index, started, ended: false };
        let outcome = self.exchange(state, request, node.is_head).await;
        in_flight.ended = true;
        if let Some(buffer) = encoded {
            // The encoding buffer is reused by the next templated request.
            self.request = buffer;
        }
        let latency_us = started.elapsed().as_micros() as u64;
        let from_send_us = sent_at.map(|sent_at| sent_at.elapsed().as_micros() as u64);
        let mut end_iteration = false;
        let mut back_off = false;
        let (result, sent, received, detail) = match outcome {
            Ok((status, sent, received)) => {
                let (result, why) = self.apply_response(state, node, status, &path);
                // A check that could not be judged (the body past the bound) did not pass.
                end_iteration = matches!(result, Err(ErrorKind::CheckFailed | ErrorKind::BodyTooLarge)) && node.end_on_check_failure;
                (result, sent, received, why)
            }
            Err((error, sent)) => {
                self.last_connect_failed = error.connecting;
                back_off = error.connecting && self.backs_off;
                (Err(error.kind), sent, 0, Some(error.detail))
            }
        };
        self.record(state, node.global_index, latency_us, result, sent, received);
        if let (Err(kind), Some(detail)) = (result, detail) {
            self.note(state, node.global_index, kind, detail);
        }
        // Only a request timed in `latency_us` (it got a response) has a latency from its send.
        let timed = result.is_ok() || result.is_err_and(|kind| kind.got_response());
        if let Some(from_send_us) = from_send_us.filter(|_| timed) {
            state.recorder.borrow_mut().steps[node.global_index].record_from_send(latency_us, from_send_us);
        }
        if back_off {
            self.back_off(state).await;
        }
        if let Some(think_time) = &node.think_time {
            self.pause(state, think_time).await;
        }
        if end_iteration {
            Flow::EndIteration
        } else {
            Flow::Continue
        }
    }

    /// Cookies, extractors and checks on a response (each check counted); the outcome to
    /// record, and on a failure why (the error detail).
    fn apply_response(&mut self, state: &WorkerState, node: &RequestNode, status: u16, path: &str) -> (Result<(), ErrorKind>, Option<String>) {
        let prefix = &state.shared.plan.endpoints[self.instance].path_prefix;
        if !self.capture.set_cookies.is_empty() {
            let request_path = format!("{prefix}{path}");
            for set_cookie in &self.capture.set_cookies {
                self.cookies.store(set_cookie, &request_path);
            }
        }
        // A body past `max_kept_body_bytes` was kept only in part: what reads it is not judged
        // on a part (a check could pass or fail on the cut), and the step counts as body_too_large.
        let truncated = node.keep_body && self.capture.body_truncated;
        let mut view = ResponseView::new(status, &self.capture.body, &self.capture.headers);
        let mut extract_failed = None;
        if !node.extractors.is_empty() {
            // (forget_renderings, spelled out: the response view borrows the capture buffers)
            self.context = None;
            self.memo.iter_mut().for_each(|rendered| *rendered = None);
            let vars = Arc::make_mut(&mut self.vars);
            for extractor in &node.extractors {
                if truncated && extractor.needs_body() {
                    vars.remove(&extractor.var);
                    extract_failed.get_or_insert(extractor);
                    continue;
                }
                match extractor.extract(&mut view, &mut self.random) {
                    Some(value) => {
                        vars.insert(extractor.var.clone(), value);
                    }
                    None => {
                        vars.remove(&extractor.var);
                        extract_failed.get_or_insert(extractor);
                    }
                }
            }
        }
        if truncated {
            let limit = state.shared.plan.read_limits.max_kept_body_bytes;
            return (Err(ErrorKind::BodyTooLarge), Some(format!("status {status}: the body passed target.max_kept_body_bytes ({limit} bytes)")));
        }
        // Every check is judged (and counted), not only up to the first that fails.
        let mut failed_check = None;
        if !node.checks.is_empty() {
            let mut recorder = state.recorder.borrow_mut();
            let step = &mut recorder.steps[node.global_index];
            for (index, check) in node.checks.iter().enumerate() {
                let passed = check.passes(&mut view);
                step.record_check(index, passed);
                if !passed && failed_check.is_none() {
                    failed_check = Some(check.failure(&mut view));
                }
            }
        }
        if let Some(why) = failed_check {
            (Err(ErrorKind::CheckFailed), Some(why))
        } else if !node.has_status_check && status >= 400 {
            let why = format!("{} — {}", self.capture.error_status_line, body_prefix(&self.capture.error_body));
            (Err(ErrorKind::Status(status)), Some(why))
        } else if let Some(extractor) = extract_failed {
            let why = format!("extractor '{}' ({}) found nothing (status {status}, {})", extractor.var, extractor.description, body_prefix(view.body));
            (Err(ErrorKind::ExtractFailed), Some(why))
        } else {
            (Ok(()), None)
        }
    }

    /// Sends one request and reads its response within the request timeout.
    /// Ok: (status, bytes sent, bytes received); Err: (why, bytes sent).
    /// With a pool, waiting for a connection is part of the exchange: its time and timeout.
    async fn exchange(&mut self, state: &WorkerState, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let plan = &state.shared.plan;
        self.written = 0;
        let exchange = async {
            match &state.pool {
                None => self.exchange_unbounded(state, request, is_head).await,
                Some(pool) => self.pooled_exchange(state, pool, request, is_head).await,
            }
        };
        match tokio::time::timeout(plan.request_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => {
                self.connection = None;
                let detail = format!("no whole response within {} ms (target.request_timeout_ms)", plan.request_timeout.as_millis());
                Err((ExchangeError { kind: ErrorKind::Timeout, connecting: false, detail }, self.written))
            }
        }
    }

    /// One exchange over a connection of the pool: the lease's connection and buffer are the
    /// VU's for the exchange, and go back to the pool when the lease drops (the connection only
    /// if still usable: `exchange_unbounded` drops one that failed or was closed).
    async fn pooled_exchange(&mut self, state: &WorkerState, pool: &Pool, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        let mut lease = pool.acquire(self.instance).await;
        self.connection = lease.connection.take();
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        let result = self.exchange_unbounded(state, request, is_head).await;
        std::mem::swap(&mut self.buffer, &mut lease.buffer);
        lease.connection = self.connection.take();
        result
    }

    /// The VU's instance of the target as `host:port`, for error details.
    fn address(&self, state: &WorkerState) -> String {
        let endpoint = &state.shared.plan.endpoints[self.instance];
        format!("{}:{}", endpoint.host, endpoint.port)
    }

    async fn exchange_unbounded(&mut self, state: &WorkerState, request: &[u8], is_head: bool) -> Result<(u16, u64, u64), (ExchangeError, u64)> {
        // A kept-alive connection may have been closed by the server while idle; that shows as
        // a failure before any response byte, and the request is then sent once more on a new
        // connection, as browsers and HTTP libraries do.
        for attempt in 0..2 {
            let reused = self.connection.is_some();
            if !reused {
                match state.shared.plan.connectors[self.instance].connect_detailed().await {
                    Ok(connection) => {
                        self.connection = Some(connection);
                        self.backoff = Duration::ZERO;
                        state.recorder.borrow_mut().connections_opened += 1;
                    }
                    Err((kind, detail)) => return Err((ExchangeError { kind, connecting: true, detail }, 0)),
                }
            }
            let connection = self.connection.as_mut().expect("connected above");
            if let Err(error) = connection.write_all(request).await {
                self.connection = None;
                if reused && attempt == 0 {
                    continue;
                }
                let detail = format!("{error} while sending the request to {}", self.address(state));
                return Err((ExchangeError { kind: ErrorKind::from_io(&error), connecting: false, detail }, 0));
            }
            let sent = request.len() as u64;
            self.written = sent;
            match read_response(connection, &mut self.buffer, is_head, &mut self.capture, state.shared.plan.read_limits).await {
                Ok(response) => {
                    if !response.keep_alive {
                        self.connection = None;
                    }
                    return Ok((response.status, sent, response.bytes_received));
                }
                Err(error) => {
                    self.connection = None;
                    if reused && attempt == 0 && error.nothing_received {
                        continue;
                    }
                    let why = match error.kind {
                        ErrorKind::Reset => "the connection closed before the response ended".to_owned(),
                        ErrorKind::Protocol => "the response is not valid HTTP/1.1".to_owned(),
                        ErrorKind::HeadersTooLarge => format!(
                            "the response head passed target.max_response_header_bytes ({} bytes)",
                            state.shared.plan.read_limits.max_head_bytes
                        ),
                        kind => format!("{} while reading the response", kind.label()),
                    };
                    let detail = format!("{why} ({})", self.address(state));
                    return Err((ExchangeError { kind: error.kind, connecting: false, detail }, sent));
                }
            }
        }
        unreachable!("the second attempt always returns")
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

/// A rendered path as it may go on the request line: spaces and control characters (which
/// would end the request line early) percent-encoded.
fn safe_path(path: String) -> String {
    if !path.bytes().any(|byte| byte <= b' ' || byte == 0x7F) {
        return path;
    }
    let mut safe = String::with_capacity(path.len() + 8);
    for character in path.chars() {
        if character <= ' ' || character == '\u{7f}' {
            safe.push_str(&format!("%{:02X}", character as u32));
        } else {
            safe.push(character);
        }
    }
    safe
}
