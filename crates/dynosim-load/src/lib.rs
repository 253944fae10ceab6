//! An HTTP/1.1 load generator for dynosim's testbed: it follows a schedule exactly and sends
//! only to loopback addresses.
//!
//! - **Open loop** ([`Mode::Open`]): request `i` is sent at `start + at[i]`, whatever happened
//!   to the requests before it. A dispatcher thread sleeps until each request's time and hands
//!   it to the event loop as a task of its own, so that thousands in flight do not delay the
//!   next send; each request's lateness (`sent − scheduled`) is recorded.
//! - **Closed loop** ([`Mode::Closed`]): `clients` tasks each take the next unsent request,
//!   send it, wait for its response (or error), sleep the next think time and repeat until the
//!   requests run out (ab and hey semantics: the requests are the total count).
//!
//! - **Retries** ([`Options::retry`]): a client whose try failed asks its [`Retry`] whether
//!   to send the request again, and after how long; each try is a record of its own
//!   ([`Record::attempt`], [`Record::origin`]), and a try after the first carries its number in
//!   the id header ([`Options::id_header`]: `17` becomes `17.2`), so that the router's and the
//!   app's logs tell the tries apart.
//!
//! - **A circuit breaker** ([`Options::breaker`]): before each try (the first and every retry)
//!   the client asks its [`Breaker`] whether it may send; a try refused is not sent: its record
//!   has the error [`ErrorKind::BreakerOpen`] at once (and, with retries, it is a failed try
//!   like any other). Each try sent tells the breaker its outcome.
//!
//! Every request is a new TCP connection with `Connection: close`: `GET path HTTP/1.1` with
//! `Host` and the request's headers; the response's status line, headers and body
//! (`Content-Length`, or until the server closes) are read. Everything is bounded: at most the
//! given requests, at most `deadline` of time, and `stop()` (polled every 2 ms) ends the run
//! early; requests in flight then end with the error `deadline` or `interrupted`.
//!
//! Timestamps are Unix epoch seconds (the app server and the router stamp wall-clock time, and
//! the testbed subtracts them): the wall clock is read once at the start, and every timestamp
//! is that plus the monotonic time elapsed since, so they are monotonic within a run.

mod http;

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How a try ended, as its client has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A whole response with this status.
    Answered(u16),
    /// No (whole) response.
    Failed(ErrorKind),
}

/// A population of clients' retry decisions (one shared by every client of a run; it keeps
/// its own state, such as a retry budget, behind `&self`). Times are seconds since the run's
/// start.
pub trait Retry: Send + Sync {
    /// A request's first try is sent at `now`.
    fn first(&self, now: f64);
    /// Try `attempt` (1 for the first), sent after a backoff of `last_delay` (0 for the first),
    /// ended `now` as `outcome`: whether the client sends it again, and when.
    fn after(&self, attempt: u32, last_delay: f64, outcome: Outcome, now: f64) -> Next;
}

/// A population of clients' circuit breaker (one shared by every client of a run, its state
/// behind `&self`). Times are seconds since the run's start.
pub trait Breaker: Send + Sync {
    /// Whether a try may be sent `now` (false: it fails at once, never sent).
    fn allows(&self, now: f64) -> bool;
    /// A try sent at `sent` ended `now`, `failed` (no whole response, or a status of 500 or
    /// more) or not. Not told of tries the run's end cut short.
    fn record(&self, sent: f64, now: f64, failed: bool);
}

/// [`Options::breaker`]: the clients' circuit breaker, shared.
#[derive(Clone)]
pub struct BreakerHook(pub Arc<dyn Breaker>);

impl fmt::Debug for BreakerHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BreakerHook")
    }
}

impl PartialEq for BreakerHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What a client does after a try.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// Sends it again after this backoff (seconds).
    Retry(f64),
    /// Keeps this outcome, for this reason (such as "success", "exhausted"; the try's
    /// [`Record::kept`]).
    Keep(&'static str),
}

/// [`Options::retry`]: the clients' retry decisions, shared.
#[derive(Clone)]
pub struct RetryHook(pub Arc<dyn Retry>);

impl fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryHook")
    }
}

impl PartialEq for RetryHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The longest backoff a client may wait before a retry (a bound, as everything here is).
pub const MAX_BACKOFF: f64 = 3600.0;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// One request to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// When to send it, in seconds after the start (open loop); ignored in a closed loop.
    pub at: f64,
    /// The request target, such as `/work?cpu=0.01` (starts with `/`).
    pub path: String,
    /// Extra request headers, sent in this order after `Host` (which a `Host` here replaces)
    /// and `Connection: close`.
    pub headers: Vec<(String, String)>,
}

/// How to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Where to send: a loopback address only (anything else is refused).
    pub target: SocketAddr,
    /// The longest one request may take, from connect to the end of its response.
    pub timeout: Duration,
    /// The hard stop for the whole run, from its start.
    pub deadline: Duration,
    /// Response headers to return, by name (case-insensitive): each record has one value per
    /// name, the first such header's, or `None`.
    pub capture: Vec<String>,
    /// Threads of the event loop: 1 (the default) runs it on the calling thread, as one core
    /// does; more run a multi-threaded runtime. Open loop also has a dispatcher thread, which
    /// sleeps between sends.
    pub threads: usize,
    /// The clients' retries; None: a failed try is the request's outcome.
    pub retry: Option<RetryHook>,
    /// The clients' circuit breaker; None: every try is sent.
    pub breaker: Option<BreakerHook>,
    /// The request header that identifies a request (such as `X-Request-Id`): a retry's value
    /// is the first try's with `.k` appended (k the try's number, from 2). None: tries are
    /// sent as the first was.
    pub id_header: Option<String>,
}

impl Options {
    /// Options for `target` with a 30 s timeout, a 60 s deadline, no captured headers and one
    /// thread.
    pub fn new(target: SocketAddr) -> Self {
        Options {
            target,
            timeout: Duration::from_secs(30),
            deadline: Duration::from_secs(60),
            capture: Vec::new(),
            threads: 1,
            retry: None,
            breaker: None,
            id_header: None,
        }
    }
}

/// Open loop (follow the schedule) or closed loop (clients that wait for their answers).
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Request `i` is sent at `start + requests[i].at`, whatever happened to the others.
    Open,
    /// `clients` clients send the requests in order, one at a time each; after the k-th
    /// response (in order of completion, over all clients) its client thinks `think[k]`
    /// seconds. `think` is empty (no think time) or holds one value per request.
    Closed { clients: usize, think: Vec<f64> },
}

/// Why a request has no complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The TCP connection could not be made (other than refused: no ports, no descriptors...).
    Connect,
    /// The target refused the connection (nothing listens there).
    Refused,
    /// The request took longer than `Options::timeout`.
    Timeout,
    /// The connection failed after it was made: reset, or closed before a response or in the
    /// middle of a `Content-Length` body.
    Io,
    /// What came back was not an HTTP/1.x response (or its head exceeded 64 KiB).
    BadResponse,
    /// The run's deadline came first.
    Deadline,
    /// `stop()` said to stop first.
    Interrupted,
    /// The clients' circuit breaker ([`Options::breaker`]) refused the try: never sent.
    BreakerOpen,
}

impl ErrorKind {
    /// The kind's name: `connect`, `refused`, `timeout`, `io`, `bad_response`, `deadline`,
    /// `interrupted`, `breaker_open`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Refused => "refused",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Io => "io",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::Deadline => "deadline",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::BreakerOpen => "breaker_open",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happened to one request. Times are Unix epoch seconds; a moment the request never
/// reached is NaN.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The request's index in the given requests.
    pub index: u32,
    /// The closed loop's client that sent it (0 in open loop).
    pub client: u32,
    /// Which try of its request it is: 1 for the first (the only one without retries).
    pub attempt: u32,
    /// When its request's first try was sent (its own `sent` for the first try).
    pub origin: f64,
    /// When it was due: `start + at` in open loop; when its client was ready to send (after
    /// its think time) in a closed loop.
    pub scheduled: f64,
    /// When the generator began it (the TCP connect started).
    pub sent: f64,
    /// When the TCP connection was made.
    pub connected: f64,
    /// When the first byte of the response arrived.
    pub first_byte: f64,
    /// When the response was complete (NaN on error).
    pub done: f64,
    /// The response's status, or 0 if none was read.
    pub status: u16,
    /// Why the response is missing or incomplete, if it is.
    pub error: Option<ErrorKind>,
    /// Bytes received: status line, headers and body.
    pub bytes: u64,
    /// One value per `Options::capture` name.
    pub headers: Vec<Option<String>>,
    /// With retries: why its client kept this try's outcome ([`Next::Keep`]); None for a try
    /// that was retried, and without retries.
    pub kept: Option<&'static str>,
}

/// Send lateness (`sent − scheduled`, seconds) over a run's sent requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lateness {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Why a run ended before all its requests were answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    Deadline,
    Interrupted,
}

/// A run's records.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The run's start, Unix epoch seconds (`scheduled = start + at` in open loop).
    pub start: f64,
    /// One record per try sent, in request order and each request's tries in order
    /// (requests never sent, because the run stopped first, have none).
    pub records: Vec<Record>,
    /// Send lateness over the records; `None` when nothing was sent.
    pub lateness: Option<Lateness>,
    /// Set when the deadline or `stop()` ended the run early.
    pub stopped: Option<Stopped>,
    /// Requests never sent because the run stopped first.
    pub unsent: usize,
}

/// Why a run could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// The target is not a loopback address.
    NotLoopback(SocketAddr),
    /// Bad arguments: a malformed request, a bad think list...
    Config(String),
    /// The event loop could not be built.
    Runtime(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotLoopback(addr) => write!(
                f,
                "the load generator sends only to loopback addresses (127.0.0.0/8 or ::1), \
                 and {addr} is not one"
            ),
            LoadError::Config(message) => f.write_str(message),
            LoadError::Runtime(message) => write!(f, "cannot start the event loop: {message}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// A closed-loop client whose request the breaker refused sends its next no sooner than this
/// (seconds; the simulation's clients do the same).
pub const REFUSED_THINK: f64 = 1e-3;

/// How often the run checks `stop()`, its deadline and whether it is finished.
const POLL: Duration = Duration::from_millis(2);

/// What the tasks of a run share.
struct Shared {
    target: SocketAddr,
    timeout: Duration,
    /// Captured header names, lower case.
    capture: Vec<String>,
    /// Each request's bytes on the wire.
    wires: Vec<Vec<u8>>,
    /// The requests, kept to build a retry's bytes (with [`Options::id_header`] set).
    requests: Vec<Request>,
    retry: Option<RetryHook>,
    breaker: Option<BreakerHook>,
    id_header: Option<String>,
    t0: Instant,
    /// Set once, to the error that requests in flight end with, when the run stops early.
    cancel: watch::Receiver<Option<ErrorKind>>,
    /// Each request's tries' records (none: never sent).
    slots: Mutex<Vec<Vec<Record>>>,
    /// Open loop: requests dispatched and not yet recorded. Closed loop: clients running.
    active: AtomicUsize,
    /// Closed loop: the next request to take, and responses so far (the think list's index).
    next: AtomicUsize,
    completed: AtomicUsize,
    think: Vec<f64>,
}

impl Shared {
    /// Seconds since the start (the report adds the start's epoch time).
    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn store(&self, tries: Vec<Record>) {
        let Some(index) = tries.first().map(|r| r.index as usize) else {
            return;
        };
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots[index] = tries;
    }

    fn cancelled(&self) -> bool {
        self.cancel.borrow().is_some()
    }
}

/// Sends `requests` to `options.target` as `mode` says; see the crate's documentation.
/// `stop` is polled every few milliseconds: once it returns true, requests in flight end
/// with the error `interrupted`, and the records so far are returned.
pub fn run(
    requests: &[Request],
    mode: &Mode,
    options: &Options,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<Report, LoadError> {
    let wires = validate(requests, mode, options)?;
    let runtime = if options.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            // New requests (from the dispatcher, through the runtime's global queue) before
            // the ready tasks of requests in flight: a send is due at its time, a response
            // only waits to be read a little longer.
            .global_queue_interval(1)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads)
            .enable_all()
            .build()
    }
    .map_err(|e| LoadError::Runtime(e.to_string()))?;

    let (cancel_tx, cancel_rx) = watch::channel(None);
    let think = match mode {
        Mode::Open => Vec::new(),
        Mode::Closed { think, .. } => think.clone(),
    };
    let wall = SystemTime::now();
    let t0 = Instant::now();
    let start = wall
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let shared = Arc::new(Shared {
        target: options.target,
        timeout: options.timeout,
        capture: options
            .capture
            .iter()
            .map(|c| c.to_ascii_lowercase())
            .collect(),
        wires,
        requests: if options.retry.is_some() && options.id_header.is_some() {
            requests.to_vec()
        } else {
            Vec::new()
        },
        retry: options.retry.clone(),
        breaker: options.breaker.clone(),
        id_header: options.id_header.clone(),
        t0,
        cancel: cancel_rx,
        slots: Mutex::new(vec![Vec::new(); requests.len()]),
        active: AtomicUsize::new(0),
        next: AtomicUsize::new(0),
        completed: AtomicUsize::new(0),
        think,
    });
    let dispatched = AtomicBool::new(false);
    let halt = AtomicBool::new(false);
    let mut stopped = None;

    std::thread::scope(|scope| {
        let handle = runtime.handle().clone();
        let dispatcher = match mode {
            Mode::Open => {
                let mut order: Vec<usize> = (0..requests.len()).collect();
                order.sort_by(|&a, &b| requests[a].at.total_cmp(&requests[b].at));
                let at: Vec<f64> = requests.iter().map(|r| r.at).collect();
                let (shared, dispatched, halt) = (&shared, &dispatched, &halt);
                Some(scope.spawn(move || {
                    dispatch(&handle, shared, &order, &at, halt);
                    dispatched.store(true, Ordering::SeqCst);
                }))
            }
            Mode::Closed { clients, .. } => {
                let clients = (*clients).min(requests.len());
                shared.active.store(clients, Ordering::SeqCst);
                for client in 0..clients {
                    handle.spawn(client_loop(shared.clone(), client as u32));
                }
                dispatched.store(true, Ordering::SeqCst);
                None
            }
        };
        runtime.block_on(async {
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if stopped.is_none() {
                    if stop() {
                        stopped = Some(Stopped::Interrupted);
                    } else if t0.elapsed() >= options.deadline {
                        stopped = Some(Stopped::Deadline);
                    }
                    if let Some(why) = stopped {
                        let kind = match why {
                            Stopped::Deadline => ErrorKind::Deadline,
                            Stopped::Interrupted => ErrorKind::Interrupted,
                        };
                        cancel_tx.send_replace(Some(kind));
                        halt.store(true, Ordering::SeqCst);
                        if let Some(d) = &dispatcher {
                            d.thread().unpark();
                        }
                    }
                }
                if dispatched.load(Ordering::SeqCst) && shared.active.load(Ordering::SeqCst) == 0 {
                    break;
                }
            }
        });
    });
    drop(runtime);

    let slots = std::mem::take(&mut *shared.slots.lock().unwrap_or_else(|e| e.into_inner()));
    let unsent = slots.iter().filter(|tries| tries.is_empty()).count();
    let mut records: Vec<Record> = slots.into_iter().flatten().collect();
    let lateness = lateness(&records);
    for r in &mut records {
        for t in [
            &mut r.scheduled,
            &mut r.sent,
            &mut r.connected,
            &mut r.first_byte,
            &mut r.done,
            &mut r.origin,
        ] {
            *t += start;
        }
    }
    Ok(Report {
        start,
        records,
        lateness,
        stopped,
        unsent,
    })
}

/// Checks the arguments and builds each request's bytes.
fn validate(
    requests: &[Request],
    mode: &Mode,
    options: &Options,
) -> Result<Vec<Vec<u8>>, LoadError> {
    let config = |m: String| Err(LoadError::Config(m));
    if !options.target.ip().is_loopback() {
        return Err(LoadError::NotLoopback(options.target));
    }
    if options.timeout.is_zero() {
        return config("the request timeout must be positive".into());
    }
    if options.deadline.is_zero() {
        return config("the run's deadline must be positive".into());
    }
    if requests.len() > u32::MAX as usize {
        return config(format!(
            "at most {} requests, not {}",
            u32::MAX,
            requests.len()
        ));
    }
    if let Some(name) = options.id_header.as_deref() {
        if !http::is_token(name) {
            return config(format!("the id header {name:?} is not a header name"));
        }
    }
    for name in &options.capture {
        if !http::is_token(name) {
            return config(format!(
                "cannot capture the header {name:?}: not a header name"
            ));
        }
    }
    match mode {
        Mode::Open => {
            if let Some((i, r)) = requests
                .iter()
                .enumerate()
                .find(|(_, r)| !(r.at.is_finite() && r.at >= 0.0 && r.at < 1e9))
            {
                return config(format!(
                    "request {i}: its time `at` must be finite and >= 0 s, not {}",
                    r.at
                ));
            }
        }
        Mode::Closed { clients, think } => {
            if *clients == 0 {
                return config("a closed loop needs at least one client".into());
            }
            if !think.is_empty() && think.len() < requests.len() {
                return config(format!(
                    "a closed loop's think times are none or one per request ({}), not {}",
                    requests.len(),
                    think.len()
                ));
            }
            if let Some(t) = think
                .iter()
                .find(|t| !(t.is_finite() && **t >= 0.0 && **t < 1e9))
            {
                return config(format!("think times must be finite and >= 0 s, not {t}"));
            }
        }
    }
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            http::request_bytes(options.target, r)
                .map_err(|m| LoadError::Config(format!("request {i}: {m}")))
        })
        .collect()
}

/// Open loop: hands each request to the event loop at its time, in order of time, until done
/// or halted. Runs on a thread of its own so that the event loop's work never delays a send;
/// a late request is sent at once, and the ones after it keep their own times.
fn dispatch(
    handle: &tokio::runtime::Handle,
    shared: &Arc<Shared>,
    order: &[usize],
    at: &[f64],
    halt: &AtomicBool,
) {
    precise_sleeps();
    for &i in order {
        let due = shared.t0 + Duration::from_secs_f64(at[i]);
        loop {
            if halt.load(Ordering::SeqCst) {
                return;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::park_timeout(due - now);
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        let scheduled = at[i];
        handle.spawn(async move {
            let tries = send_tries(&shared, i, 0, scheduled).await;
            shared.store(tries);
            shared.active.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Asks the kernel to wake this thread when its sleeps end rather than up to 50 µs later
/// (Linux's default timer slack), which would be most of a send's lateness.
fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_TIMERSLACK, n) only sets the calling thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Closed loop: one client, taking the next request until none is left.
async fn client_loop(shared: Arc<Shared>, client: u32) {
    let n = shared.wires.len();
    let mut cancel = shared.cancel.clone();
    let mut ready = shared.now();
    loop {
        if shared.cancelled() {
            break;
        }
        let i = shared.next.fetch_add(1, Ordering::SeqCst);
        if i >= n {
            break;
        }
        let tries = send_tries(&shared, i, client, ready).await;
        let refused = tries
            .last()
            .is_some_and(|r| r.error == Some(ErrorKind::BreakerOpen));
        shared.store(tries);
        let k = shared.completed.fetch_add(1, Ordering::SeqCst);
        if shared.next.load(Ordering::SeqCst) >= n {
            break; // no request left to think before
        }
        let mut think = shared.think.get(k).copied().unwrap_or(0.0);
        if refused {
            // As the simulation's clients: time moves on before the next send.
            think = think.max(REFUSED_THINK);
        }
        if think > 0.0 {
            tokio::select! {
                biased;
                _ = cancel.wait_for(|c| c.is_some()) => break,
                _ = tokio::time::sleep(Duration::from_secs_f64(think)) => {}
            }
        }
        ready = shared.now();
    }
    shared.active.fetch_sub(1, Ordering::SeqCst);
}

/// Sends request `i`, and again while its client's retries say so: each try's record.
async fn send_tries(shared: &Shared, i: usize, client: u32, scheduled: f64) -> Vec<Record> {
    let mut tries = Vec::new();
    let mut record = checked_send(shared, i, client, scheduled, 1, None).await;
    let Some(RetryHook(retry)) = shared.retry.as_ref() else {
        tries.push(record);
        return tries;
    };
    retry.first(record.sent);
    let origin = record.sent;
    let mut last_delay = 0.0;
    let mut cancel = shared.cancel.clone();
    loop {
        let outcome = match record.error {
            Some(kind) => Outcome::Failed(kind),
            None => Outcome::Answered(record.status),
        };
        let attempt = record.attempt;
        let stopping = matches!(
            record.error,
            Some(ErrorKind::Deadline | ErrorKind::Interrupted)
        );
        let ended = if record.done.is_finite() {
            record.done
        } else {
            shared.now()
        };
        tries.push(record);
        if stopping || shared.cancelled() {
            return tries;
        }
        let delay = match retry.after(attempt, last_delay, outcome, ended) {
            Next::Retry(delay) => delay,
            Next::Keep(why) => {
                if let Some(last) = tries.last_mut() {
                    last.kept = Some(why);
                }
                return tries;
            }
        };
        let delay = if delay.is_finite() {
            delay.clamp(0.0, MAX_BACKOFF)
        } else {
            MAX_BACKOFF
        };
        if delay > 0.0 {
            tokio::select! {
                biased;
                _ = cancel.wait_for(|c| c.is_some()) => return tries,
                _ = tokio::time::sleep(Duration::from_secs_f64(delay)) => {}
            }
        }
        last_delay = delay;
        let wire = retry_wire(shared, i, attempt + 1);
        record = checked_send(
            shared,
            i,
            client,
            shared.now(),
            attempt + 1,
            wire.as_deref(),
        )
        .await;
        record.origin = origin;
    }
}

/// Try `attempt`'s bytes when they differ from the first try's (the id header's value gains
/// `.attempt`).
fn retry_wire(shared: &Shared, i: usize, attempt: u32) -> Option<Vec<u8>> {
    let name = shared.id_header.as_deref()?;
    let mut request = shared.requests.get(i)?.clone();
    for (n, v) in request.headers.iter_mut() {
        if n.eq_ignore_ascii_case(name) {
            *v = format!("{v}.{attempt}");
        }
    }
    http::request_bytes(shared.target, &request).ok()
}

/// Sends request `i` as [`send`] does if the clients' breaker lets it (else its record has
/// the error `breaker_open`, sent now), and tells the breaker its outcome.
async fn checked_send(
    shared: &Shared,
    i: usize,
    client: u32,
    scheduled: f64,
    attempt: u32,
    wire: Option<&[u8]>,
) -> Record {
    let Some(BreakerHook(breaker)) = shared.breaker.as_ref() else {
        return send(shared, i, client, scheduled, attempt, wire).await;
    };
    let now = shared.now();
    if !breaker.allows(now) {
        let mut record = blank(shared, i, client, scheduled, attempt, now);
        record.error = Some(ErrorKind::BreakerOpen);
        return record;
    }
    let record = send(shared, i, client, scheduled, attempt, wire).await;
    if !matches!(
        record.error,
        Some(ErrorKind::Deadline | ErrorKind::Interrupted)
    ) {
        let ended = if record.done.is_finite() {
            record.done
        } else {
            shared.now()
        };
        breaker.record(
            record.sent,
            ended,
            record.error.is_some() || record.status >= 500,
        );
    }
    record
}

/// A try's record before anything happened to it, sent `now`.
fn blank(shared: &Shared, i: usize, client: u32, scheduled: f64, attempt: u32, now: f64) -> Record {
    Record {
        index: i as u32,
        client,
        attempt,
        origin: now,
        scheduled,
        sent: now,
        connected: f64::NAN,
        first_byte: f64::NAN,
        done: f64::NAN,
        status: 0,
        error: None,
        bytes: 0,
        headers: vec![None; shared.capture.len()],
        kept: None,
    }
}

/// Sends request `i` (try `attempt`, with `wire` for bytes other than the request's own) and
/// records what happens to it (times relative to the start).
async fn send(
    shared: &Shared,
    i: usize,
    client: u32,
    scheduled: f64,
    attempt: u32,
    wire: Option<&[u8]>,
) -> Record {
    let mut record = blank(shared, i, client, scheduled, attempt, shared.now());
    let mut cancel = shared.cancel.clone();
    let outcome = tokio::select! {
        biased;
        why = cancel.wait_for(|c| c.is_some()) => {
            Err(why.ok().and_then(|c| *c).unwrap_or(ErrorKind::Interrupted))
        }
        answer = tokio::time::timeout(shared.timeout, http::exchange(shared, wire.unwrap_or(&shared.wires[i]), &mut record)) => {
            answer.unwrap_or(Err(ErrorKind::Timeout))
        }
    };
    match outcome {
        Ok(()) => record.done = shared.now(),
        Err(kind) => record.error = Some(kind),
    }
    record
}

/// Lateness over the records, from times relative to the start (before the epoch is added,
/// which would round them to a quarter of a microsecond).
fn lateness(records: &[Record]) -> Option<Lateness> {
    // A retry's lateness is its first try's: its own send waits for its backoff.
    let mut late: Vec<f64> = records
        .iter()
        .filter(|r| r.attempt == 1)
        .map(|r| r.sent - r.scheduled)
        .collect();
    if late.is_empty() {
        return None;
    }
    late.sort_by(f64::total_cmp);
    let rank = |p: f64| late[((p * late.len() as f64).ceil() as usize).clamp(1, late.len()) - 1];
    Some(Lateness {
        count: late.len(),
        p50: rank(0.5),
        p99: rank(0.99),
        max: late[late.len() - 1],
    })
}
