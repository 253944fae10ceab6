//! Inside a dyno: its type (cores, memory quota), the app server (processes × threads and how
//! they take requests), and the memory model (per dyno, process, thread, request and malloc
//! arena; R14 over the quota, R15 restarts at the restart threshold).

use crate::dist::{self, ServiceDistribution};
use crate::error::{Error, Result};
use crate::params::{check_duration, whole};
use crate::timeout_spec::Timeout;
use crate::units::{Bytes, Duration};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// A dyno type of the table in docs/model.md: name, cores, memory quota (bytes), and the
/// multiple of the quota at which the dyno is restarted (R15).
pub const DYNO_TYPES: &[(&str, u32, f64, f64)] = &[
    ("eco", 1, 512e6, 2.0),
    ("basic", 1, 512e6, 2.0),
    ("standard-1x", 1, 512e6, 2.0),
    ("standard-2x", 2, 1024e6, 2.0),
    ("performance-m", 2, 2.5e9, 2.0),
    ("performance-l", 8, 14e9, 2.0),
    ("2013-1x", 1, 512e6, 3.0),
];

/// The `[app]` section.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    /// A preset: generic, thin, unicorn, puma, gunicorn.
    #[serde(default)]
    pub server: Option<String>,
    /// gunicorn's worker class: sync, gthread, gevent.
    #[serde(default)]
    pub worker_class: Option<String>,
    /// sync, threaded or async; set by the preset unless given.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub processes: Option<i64>,
    #[serde(default)]
    pub threads: Option<i64>,
    #[serde(default)]
    pub worker_connections: Option<i64>,
    /// How a dyno's processes take connections: shared or greedy (see [`Accept`]).
    #[serde(default)]
    pub accept: Option<String>,
    /// The interpreter lock a process's threads share: "gil" (CPython), "gvl" (CRuby) or
    /// "none"; true (the preset's, or the GIL) and false ("none") are still read.
    #[serde(default)]
    pub lock: Option<serde_json::Value>,
    /// CPython's switch interval (`sys.setswitchinterval`): how long a thread waits for the
    /// GIL before it asks the holder to drop it.
    #[serde(default)]
    pub switch_interval: Option<Duration>,
    /// CRuby's thread timeslice (`RUBY_THREAD_TIMESLICE`): how long a thread holds the GVL
    /// while others wait, counted in the timer thread's 10 ms ticks.
    #[serde(default)]
    pub timeslice: Option<Duration>,
    /// The app server's own CPU per request (accept, parse, write, log), under the lock,
    /// before the request's phases: a duration or a distribution.
    #[serde(default)]
    pub request_cpu: Option<serde_json::Value>,
    /// glibc's MALLOC_ARENA_MAX; unset: 8 × cores per process.
    #[serde(default)]
    pub malloc_arena_max: Option<i64>,
    /// The old name of `fleet.boot_time` (a duration): read there (see
    /// [`crate::scenario::Scenario::boot_time`]).
    #[serde(default)]
    pub boot_time: Option<Duration>,
    /// The app server's worker timeout (gunicorn `--timeout`, Unicorn `timeout`): a worker
    /// whose request takes longer is killed, and replaced after `worker_boot_time`.
    #[serde(default)]
    pub timeout: Option<serde_json::Value>,
    /// How long a killed worker takes to be replaced.
    #[serde(default)]
    pub worker_boot_time: Option<Duration>,
    /// Rack::Timeout's `wait_timeout`: a request older than this (since its router's arrival,
    /// X-Request-Start) when a thread takes it is dropped unserved, answered 503.
    #[serde(default)]
    pub wait_timeout: Option<Duration>,
    /// Rack::Timeout's `service_timeout`: a request that has run this long on its thread is
    /// stopped (a timeout raised inside it), answered 500, and its thread is free at once.
    #[serde(default)]
    pub service_timeout: Option<Duration>,
    /// A concurrency limit at each dyno, over the requests it holds (waiting or on a thread):
    /// see [`crate::limit`] (read by the scenario, as `Scenario::app_limit`).
    #[serde(default)]
    pub concurrency_limit: Option<crate::limit::LimitSpec>,
    /// The listen backlog: connections a dyno queues for its processes at most; more are
    /// refused (the router retries another dyno).
    #[serde(default)]
    pub backlog: Option<i64>,
    /// The worker's own time per request after its response: a duration or a distribution
    /// (see [`AppServer::overhead`]).
    #[serde(default)]
    pub overhead: Option<serde_json::Value>,
    /// How much CPU work slows over the memory quota: each 1.0 of the quota over it adds this
    /// many times the work's own time (a slowdown of 1 + swap_slowdown × (memory/quota − 1)).
    #[serde(default)]
    pub swap_slowdown: Option<f64>,
    /// How much CPU work slows when a process's busy threads outnumber its malloc arenas:
    /// by 1 + arena_contention × (busy − arenas) / busy (0: not at all).
    #[serde(default)]
    pub arena_contention: Option<f64>,
    /// The multiple of the quota at which the dyno is restarted (R15); the dyno type's unless given.
    #[serde(default)]
    pub restart_at: Option<f64>,
    #[serde(default)]
    pub memory: Option<MemorySpec>,
}

/// `[app.memory]`: what each part of a dyno holds.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    #[serde(default)]
    pub dyno: Option<Bytes>,
    #[serde(default)]
    pub process: Option<Bytes>,
    #[serde(default)]
    pub thread: Option<Bytes>,
    #[serde(default)]
    pub request: Option<Bytes>,
    #[serde(default)]
    pub arena: Option<Bytes>,
}

/// How a process takes requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// One request per process at a time (Unicorn, gunicorn sync, thin).
    Sync,
    /// `threads` requests per process, each on its own thread (gthread, Puma).
    Threaded,
    /// Up to `worker_connections` requests per process on one OS thread (gevent).
    Async,
}

/// How a dyno's processes take the connections that reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// A process accepts only when it has a thread free: the requests wait in the dyno's one
    /// accept queue for the first free thread (Unicorn, gunicorn sync, Puma, thin).
    Shared,
    /// Every process accepts while it holds fewer than `limit` connections, and queues them for
    /// its own threads: a request goes at once to one of those processes, drawn at random (the
    /// one whose accept() wins the wake-up), and waits there even while another process has a
    /// thread free (gunicorn's gthread and gevent workers, up to `worker_connections`).
    Greedy { limit: u32 },
}

/// The interpreter lock a process's threads share (docs/dyno.md, "The scheduler").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// No lock: free-threaded Python, the JVM, Go.
    None,
    /// CPython's GIL: a thread that has waited `switch_interval` asks the holder to drop it;
    /// a thread finding it free takes it at once.
    Gil,
    /// CRuby's GVL: a FIFO queue with direct hand-off; the holder yields after `timeslice`
    /// of contention, counted in 10 ms ticks.
    Gvl,
}

impl Lock {
    pub fn name(self) -> &'static str {
        match self {
            Lock::None => "none",
            Lock::Gil => "gil",
            Lock::Gvl => "gvl",
        }
    }

    pub fn is_some(self) -> bool {
        self != Lock::None
    }
}

/// CPython's default switch interval (`DEFAULT_INTERVAL` in Python/ceval_gil.c).
pub const DEFAULT_SWITCH_INTERVAL: f64 = 0.005;
/// CRuby's default thread quantum (`thread_default_quantum_ms`).
pub const DEFAULT_TIMESLICE: f64 = 0.100;
/// CRuby's timer thread ticks every 10 ms while a thread is timesliced.
pub const GVL_TICK: f64 = 0.010;

/// The app server every dyno runs.
#[derive(Debug, Clone)]
pub struct AppServer {
    pub server: String,
    pub model: Model,
    pub processes: u32,
    /// Requests one process holds at once: 1 (sync), threads, or worker_connections.
    pub per_process: u32,
    /// OS threads per process (memory): 1 for sync and async, `threads` for threaded.
    pub os_threads: u32,
    pub lock: Lock,
    /// `app.switch_interval` (the GIL's), seconds.
    pub switch_interval: f64,
    /// `app.timeslice` (the GVL's), seconds.
    pub timeslice: f64,
    pub accept: Accept,
    /// The worker timeout (`app.timeout`): a sync worker whose request runs longer is killed;
    /// None: never.
    pub timeout: Option<Arc<Timeout>>,
    /// How long a killed worker takes to be replaced.
    pub worker_boot_time: f64,
    /// `app.wait_timeout`: a request older than this when a thread takes it is dropped
    /// unserved (None: never).
    pub wait_timeout: Option<f64>,
    /// `app.service_timeout`: a request that has run this long on its thread (since the
    /// thread took it) is stopped and answered with an error, and the thread is free at once
    /// (None: never).
    pub service_timeout: Option<f64>,
    /// `app.backlog`: requests a dyno's accept queue holds at most (None: no limit).
    pub backlog: Option<u32>,
    /// The thread's own time per request after the response has gone (writing and closing
    /// the connection, logging, back to accept): it holds the thread, and the request's
    /// memory, but the client and the router are done with the request. None: no time.
    pub overhead: Option<Arc<dyn ServiceDistribution>>,
    pub memory: Memory,
}

/// The memory model of one dyno, bytes.
#[derive(Debug, Clone)]
pub struct Memory {
    pub quota: f64,
    pub restart_at: f64,
    pub dyno: f64,
    pub process: f64,
    pub thread: f64,
    pub request: f64,
    pub arena: f64,
    pub arena_max: u32,
    pub swap_slowdown: f64,
    /// See [`AppSpec::arena_contention`].
    pub arena_contention: f64,
}

impl Memory {
    /// Whether the memory model can change anything: some part holds memory.
    pub fn is_modelled(&self) -> bool {
        self.dyno + self.process + self.thread + self.request + self.arena > 0.0
    }

    /// Whether processes count their malloc arenas (for memory or for contention).
    pub fn counts_arenas(&self) -> bool {
        self.arena > 0.0 || self.arena_contention > 0.0
    }

    /// The factor a process's CPU work slows by with `busy` threads holding requests and
    /// `arenas` arenas in all.
    #[inline]
    pub fn contention(&self, busy: u32, arenas: u32) -> f64 {
        if busy > arenas {
            1.0 + self.arena_contention * f64::from(busy - arenas) / f64::from(busy)
        } else {
            1.0
        }
    }

    /// The factor CPU work slows by at `bytes` in use (1 within the quota).
    #[inline]
    pub fn slowdown(&self, bytes: f64) -> f64 {
        if bytes > self.quota {
            1.0 + self.swap_slowdown * (bytes / self.quota - 1.0)
        } else {
            1.0
        }
    }
}

/// The dyno type: its name, cores and memory quota (bytes).
#[derive(Debug, Clone)]
pub struct DynoType {
    pub name: String,
    pub cores: u32,
    pub quota: f64,
    pub restart_at: f64,
}

impl DynoType {
    pub fn build(name: Option<&str>, cores: Option<i64>, memory: Option<f64>) -> Result<DynoType> {
        let name = name.unwrap_or("standard-1x");
        let (_, table_cores, table_quota, restart) = DYNO_TYPES
            .iter()
            .find(|(n, ..)| *n == name.to_ascii_lowercase())
            .copied()
            .ok_or_else(|| {
                Error::config(
                    "fleet.type",
                    format!(
                        "unknown dyno type {name:?}; expected one of: {}",
                        DYNO_TYPES
                            .iter()
                            .map(|t| t.0)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        let cores = match cores {
            Some(c) => whole(c, "fleet.cores", 1, 1024)?,
            None => table_cores,
        };
        let quota = match memory {
            Some(m) if m.is_finite() && m >= 1e6 => m,
            Some(m) => {
                return Err(Error::config(
                    "fleet.memory",
                    format!("must be at least 1 MB, got {m} bytes"),
                ))
            }
            None => table_quota,
        };
        Ok(DynoType {
            name: name.to_ascii_lowercase(),
            cores,
            quota,
            restart_at: restart,
        })
    }
}

/// A preset's defaults: model, processes, threads, lock, whether its processes accept greedily.
struct Preset {
    model: Model,
    processes: i64,
    threads: i64,
    lock: Lock,
    greedy: bool,
}

fn preset(server: &str, worker_class: Option<&str>, cores: u32) -> Result<Preset> {
    let p = |model, processes, threads, lock| Preset {
        model,
        processes,
        threads,
        lock,
        greedy: false,
    };
    let gunicorn_workers = 2 * i64::from(cores) + 1;
    Ok(match (server, worker_class) {
        ("generic", None) => p(Model::Threaded, 1, 1, Lock::None),
        ("thin", None) => p(Model::Sync, 1, 1, Lock::Gvl),
        ("unicorn", None) => p(Model::Sync, 2, 1, Lock::Gvl),
        ("puma", None) => p(Model::Threaded, 2, 5, Lock::Gvl),
        ("gunicorn", None | Some("sync")) => p(Model::Sync, gunicorn_workers, 1, Lock::Gil),
        // gunicorn's gthread and gevent workers poll the listening socket and accept while
        // they hold fewer than worker_connections connections, whatever their threads do.
        ("gunicorn", Some("gthread")) => Preset {
            greedy: true,
            ..p(Model::Threaded, gunicorn_workers, 1, Lock::Gil)
        },
        ("gunicorn", Some("gevent") | Some("eventlet")) => Preset {
            greedy: true,
            ..p(Model::Async, gunicorn_workers, 1, Lock::Gil)
        },
        ("gunicorn", Some(other)) => {
            return Err(Error::config(
                "app.worker_class",
                format!(
                    "unknown gunicorn worker class {other:?}; expected sync, gthread or gevent"
                ),
            ))
        }
        (_, Some(_)) if ["generic", "thin", "unicorn", "puma"].contains(&server) => {
            return Err(Error::config(
                "app.worker_class",
                format!("only gunicorn takes a worker_class, not {server:?}"),
            ))
        }
        (other, _) => {
            return Err(Error::config(
                "app.server",
                format!(
                    "unknown app server {other:?}; expected one of: generic, thin, unicorn, \
                     puma, gunicorn"
                ),
            ))
        }
    })
}

impl AppSpec {
    /// Whether the section sets nothing but the per-request overhead and Rack::Timeout's
    /// timeouts, which a dyno of plain `fleet.slots` may have too. Every field is named, so that a new one must be decided
    /// here.
    pub fn only_overhead(&self) -> bool {
        let AppSpec {
            server,
            worker_class,
            model,
            processes,
            threads,
            worker_connections,
            accept,
            lock,
            switch_interval,
            timeslice,
            request_cpu,
            malloc_arena_max,
            boot_time,
            timeout,
            worker_boot_time,
            wait_timeout: _,
            service_timeout: _,
            concurrency_limit: _,
            backlog,
            overhead: _,
            swap_slowdown,
            arena_contention,
            restart_at,
            memory,
        } = self;
        server.is_none()
            && worker_class.is_none()
            && model.is_none()
            && processes.is_none()
            && threads.is_none()
            && worker_connections.is_none()
            && accept.is_none()
            && lock.is_none()
            && switch_interval.is_none()
            && timeslice.is_none()
            && request_cpu.is_none()
            && malloc_arena_max.is_none()
            && boot_time.is_none()
            && timeout.is_none()
            && worker_boot_time.is_none()
            && backlog.is_none()
            && swap_slowdown.is_none()
            && arena_contention.is_none()
            && restart_at.is_none()
            && memory.is_none()
    }
}

impl AppServer {
    /// The app server of a scenario written with `fleet.slots` and `[service]`: `slots`
    /// requests at once, each holding its slot for its service time, no CPU or memory model.
    pub fn slots(slots: u32, dyno: &DynoType) -> AppServer {
        AppServer {
            server: "generic".into(),
            model: Model::Threaded,
            processes: 1,
            per_process: slots,
            os_threads: slots,
            lock: Lock::None,
            switch_interval: DEFAULT_SWITCH_INTERVAL,
            timeslice: DEFAULT_TIMESLICE,
            accept: Accept::Shared,
            timeout: None,
            worker_boot_time: DEFAULT_WORKER_BOOT_TIME,
            wait_timeout: None,
            service_timeout: None,
            backlog: None,
            overhead: None,
            memory: Memory {
                quota: dyno.quota,
                restart_at: dyno.restart_at * dyno.quota,
                dyno: 0.0,
                process: 0.0,
                thread: 0.0,
                request: 0.0,
                arena: 0.0,
                arena_max: 1,
                swap_slowdown: 0.0,
                arena_contention: 0.0,
            },
        }
    }

    /// `app.wait_timeout`, if set.
    pub fn wait_timeout_of(spec: &AppSpec) -> Result<Option<f64>> {
        spec.wait_timeout
            .map(|d| check_duration(d.0, "app.wait_timeout"))
            .transpose()
    }

    /// `app.service_timeout`, if set.
    pub fn service_timeout_of(spec: &AppSpec) -> Result<Option<f64>> {
        spec.service_timeout
            .map(|d| check_duration(d.0, "app.service_timeout"))
            .transpose()
    }

    /// The overhead `app.overhead` sets, if any.
    pub fn overhead_of(
        spec: &AppSpec,
        base_dir: &Path,
    ) -> Result<Option<Arc<dyn ServiceDistribution>>> {
        Ok(match &spec.overhead {
            None => None,
            Some(v) => dist::from_value_or_zero(v, "app.overhead", base_dir)?.map(Arc::from),
        })
    }

    pub fn build(spec: &AppSpec, dyno: &DynoType, base_dir: &Path) -> Result<AppServer> {
        let server = spec.server.as_deref().unwrap_or("generic");
        let preset = preset(server, spec.worker_class.as_deref(), dyno.cores)?;
        let model = match spec.model.as_deref() {
            None => preset.model,
            Some("sync") => Model::Sync,
            Some("threaded") => Model::Threaded,
            Some("async") => Model::Async,
            Some(other) => {
                return Err(Error::config(
                    "app.model",
                    format!("unknown model {other:?}; expected sync, threaded or async"),
                ))
            }
        };
        let processes = whole(
            spec.processes.unwrap_or(preset.processes),
            "app.processes",
            1,
            10_000,
        )?;
        let threads: u32 = whole(
            spec.threads.unwrap_or(preset.threads),
            "app.threads",
            1,
            100_000,
        )?;
        let connections: u32 = whole(
            spec.worker_connections.unwrap_or(1000),
            "app.worker_connections",
            1,
            1_000_000,
        )?;
        if model == Model::Sync && threads > 1 {
            return Err(Error::config(
                "app.threads",
                format!(
                    "a sync server runs one request per process; for {threads} threads use \
                     model = \"threaded\" (gunicorn: worker_class = \"gthread\")"
                ),
            ));
        }
        let (per_process, os_threads) = match model {
            Model::Sync => (1, 1),
            Model::Threaded => (threads, threads),
            Model::Async => (connections, 1),
        };
        let accept = match spec.accept.as_deref() {
            None if preset.greedy => Accept::Greedy { limit: connections },
            None | Some("shared") => Accept::Shared,
            Some("greedy") => Accept::Greedy { limit: connections },
            Some(other) => {
                return Err(Error::config(
                    "app.accept",
                    format!("unknown accept {other:?}; expected shared or greedy"),
                ))
            }
        };
        let m = spec.memory.clone().unwrap_or_default();
        let bytes = |v: Option<Bytes>, path: &str| -> Result<f64> {
            let b = v.map_or(0.0, |b| b.0);
            if b.is_finite() && b >= 0.0 {
                Ok(b)
            } else {
                Err(Error::config(path, format!("must be a size >= 0, got {b}")))
            }
        };
        let arena_max = match spec.malloc_arena_max {
            Some(n) => whole(n, "app.malloc_arena_max", 1, 100_000)?,
            None => 8 * dyno.cores,
        };
        let swap_slowdown = spec.swap_slowdown.unwrap_or(DEFAULT_SWAP_SLOWDOWN);
        if !(swap_slowdown.is_finite() && swap_slowdown >= 0.0) {
            return Err(Error::config("app.swap_slowdown", "must be a number >= 0"));
        }
        let arena_contention = spec.arena_contention.unwrap_or(0.0);
        if !(arena_contention.is_finite() && arena_contention >= 0.0) {
            return Err(Error::config(
                "app.arena_contention",
                "must be a number >= 0",
            ));
        }
        let restart_at = spec.restart_at.unwrap_or(dyno.restart_at);
        if !(restart_at.is_finite() && restart_at > 1.0) {
            return Err(Error::config(
                "app.restart_at",
                format!("must be a multiple of the memory quota above 1, got {restart_at}"),
            ));
        }
        let overhead = Self::overhead_of(spec, base_dir)?;
        let timeout = match &spec.timeout {
            None => None,
            Some(v) => Timeout::build(v, "app.timeout", base_dir)?.map(Arc::new),
        };
        // A master kills a worker that has not reported alive within the timeout. A sync
        // worker reports between requests, so a long request kills it; threaded and async
        // workers (gthread, gevent, Puma) report from another thread or between greenlets,
        // and a long request does not: for them the timeout never fires here (as in gunicorn,
        // where --timeout applies to every worker class).
        let timeout = timeout.filter(|_| model == Model::Sync && accept == Accept::Shared);
        let worker_boot_time = match spec.worker_boot_time {
            Some(d) => check_duration(d.0, "app.worker_boot_time")?,
            None => DEFAULT_WORKER_BOOT_TIME,
        };
        let backlog = match spec.backlog {
            None => None,
            Some(n) => Some(whole(n, "app.backlog", 1, 1_000_000_000)?),
        };
        Ok(AppServer {
            server: server.to_string(),
            model,
            processes,
            per_process,
            os_threads,
            lock: lock_of(spec.lock.as_ref(), preset.lock)?,
            switch_interval: match spec.switch_interval {
                Some(d) => positive(d.0, "app.switch_interval")?,
                None => DEFAULT_SWITCH_INTERVAL,
            },
            timeslice: match spec.timeslice {
                Some(d) => positive(d.0, "app.timeslice")?,
                None => DEFAULT_TIMESLICE,
            },

            accept,
            timeout,
            worker_boot_time,
            wait_timeout: Self::wait_timeout_of(spec)?,
            service_timeout: Self::service_timeout_of(spec)?,
            backlog,
            overhead,
            memory: Memory {
                quota: dyno.quota,
                restart_at: restart_at * dyno.quota,
                dyno: bytes(m.dyno, "app.memory.dyno")?,
                process: bytes(m.process, "app.memory.process")?,
                thread: bytes(m.thread, "app.memory.thread")?,
                request: bytes(m.request, "app.memory.request")?,
                arena: bytes(m.arena, "app.memory.arena")?,
                arena_max,
                swap_slowdown,
                arena_contention,
            },
        })
    }

    /// Requests one dyno holds at once.
    pub fn capacity(&self) -> u64 {
        u64::from(self.processes) * u64::from(self.per_process)
    }
}

/// `app.lock` as written: a name, or true (the preset's lock, the GIL for a preset of none)
/// and false (none), as before the locks had names.
fn lock_of(v: Option<&serde_json::Value>, preset: Lock) -> Result<Lock> {
    use serde_json::Value;
    Ok(match v {
        None => preset,
        Some(Value::Bool(false)) => Lock::None,
        Some(Value::Bool(true)) if preset == Lock::None => Lock::Gil,
        Some(Value::Bool(true)) => preset,
        Some(Value::String(s)) if s == "gil" => Lock::Gil,
        Some(Value::String(s)) if s == "gvl" => Lock::Gvl,
        Some(Value::String(s)) if s == "none" => Lock::None,
        Some(other) => {
            return Err(Error::config(
                "app.lock",
                format!("expected \"gil\", \"gvl\" or \"none\" (or true, false), got {other}"),
            ))
        }
    })
}

/// A duration that must be above 0 (a lock's interval).
fn positive(t: f64, path: &str) -> Result<f64> {
    if t.is_finite() && t > 0.0 {
        Ok(t)
    } else {
        Err(Error::config(
            path,
            format!("must be a duration > 0, got {t}"),
        ))
    }
}

/// `app.swap_slowdown` by default: 10% over the quota makes CPU work 3× slower. Heroku says
/// only that a swapping dyno "slows down a lot"; see docs/model.md.
pub const DEFAULT_SWAP_SLOWDOWN: f64 = 20.0;
/// `fleet.boot_time` by default: how long a dyno restarted for memory (R15) has taken to boot
/// since before the key was the fleet's.
pub const DEFAULT_BOOT_TIME: f64 = 10.0;
/// `app.worker_boot_time` by default: the master forks a new worker, which loads the app
/// (unless preloaded): about a second for a typical Rails or Django app.
pub const DEFAULT_WORKER_BOOT_TIME: f64 = 1.0;
