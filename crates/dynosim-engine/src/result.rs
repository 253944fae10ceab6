//! What a replication reports: the figures every engine produces, and the optional trace.

use crate::stats::TimeSummary;
use serde::Serialize;
use std::collections::BTreeMap;

/// What one replication measured, over requests arriving after the warm-up.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicationResult {
    /// Requests that arrived in the measurement window.
    pub requests: u64,
    /// Fraction of them that waited at all (router or dyno queue).
    pub queued_fraction: f64,
    /// Queue time (router + dyno) over all requests.
    pub queue: TimeSummary,
    /// Queue time over the requests that waited.
    pub queue_of_queued: TimeSummary,
    /// Queue + service time.
    pub response: TimeSummary,
    pub service_mean: f64,
    /// Completions per second inside the window.
    pub throughput: f64,
    pub utilisation: Utilisation,
    pub max_queue_depth: QueueDepth,
    /// Every request simulated, warm-up included (for throughput benchmarks).
    pub simulated_requests: u64,
    /// Arrivals and completions simulated, warm-up included.
    pub events: u64,
    /// Inside the dynos (scenarios with `[app]` or `[request]`): CPU, processes, memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dyno: Option<DynoFigures>,
    /// Requests that failed, by cause (scenarios in which requests can fail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<Failed>,
    /// Each shared resource, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, ResourceFigures>>,
    /// Each request class, by name (scenarios with `[[request.class]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<BTreeMap<String, ClassFigures>>,
    /// What a closed-loop load generator (ab, hey) would report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<ClosedLoop>,
}

/// Averages over the dynos and the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct DynoFigures {
    /// Cores in use / cores.
    pub cpu_utilisation: f64,
    /// Busy threads (requests held) / threads: the same as `utilisation.mean`.
    pub thread_occupancy: f64,
    /// Processes holding at least one request / processes.
    pub process_occupancy: f64,
    /// Most requests waiting in one dyno's accept queue.
    pub accept_queue_max: u64,
    pub memory: MemoryFigures,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryFigures {
    /// Time-weighted mean of a dyno's memory, bytes.
    pub mean: f64,
    /// The most any dyno held, bytes.
    pub peak: f64,
    /// Fraction of dyno-time over the memory quota (R14).
    pub over_quota: f64,
    /// Dyno-seconds over the quota (R14).
    pub r14_seconds: f64,
    /// Dynos restarted for memory (R15).
    pub r15_restarts: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Failed {
    /// Failed requests among those arriving in the window, as a fraction of them.
    pub fraction: f64,
    pub total: u64,
    /// In flight or queued on a dyno restarted for memory.
    pub r15: u64,
    /// No dyno was up to take it.
    pub no_dyno: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourceFigures {
    /// Busy servers / servers.
    pub utilisation: f64,
    /// Waiting for a connection from the pool, over every use of the resource.
    pub pool_wait: TimeSummary,
    /// Waiting for a server of the resource, once connected.
    pub queue: TimeSummary,
    /// Uses of the resource in the window.
    pub uses: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassFigures {
    pub requests: u64,
    pub response: TimeSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClosedLoop {
    pub clients: u32,
    /// Requests answered, successfully or not.
    pub completed: u64,
    pub failed: u64,
    /// From the first request sent to the last response, s.
    pub elapsed: f64,
    /// completed / elapsed: ab's "Requests per second".
    pub requests_per_s: f64,
    /// Response time of the answered requests: ab's percentiles.
    pub latency: TimeSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct Utilisation {
    /// Busy slot-time / (slots × window), averaged over dynos.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Each dyno's utilisation. A report keeps it only in its summary (see
    /// [`crate::report::PER_DYNO_LIMIT`]): each replication's list is emptied there, and an
    /// empty list is not written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_dyno: Vec<f64>,
}

/// Snapshots of the system every `interval` seconds from t = 0 to `until` (for plots and
/// animations). Kept only when asked for; memory is frames × dynos.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub interval: f64,
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub time: f64,
    /// Requests at each dyno, in service or waiting (empty when the trace was asked for
    /// fleet totals only).
    pub depth: Vec<u32>,
    /// Requests waiting at the routers.
    pub router_waiting: u64,
    /// Requests waiting at the dynos (in their accept queues), all dynos together.
    pub dyno_waiting: u64,
    /// Threads busy with a request, all dynos together (an answered request's overhead too).
    pub busy: u64,
    /// Requests that have arrived so far.
    pub arrived: u64,
    /// Requests that have had to wait so far (joined a router or dyno queue).
    pub queued: u64,
    /// Requests answered so far (not counting failures).
    pub completed: u64,
    /// Requests failed so far.
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Most requests waiting at one dyno (not counting those in service).
    pub dyno: u64,
    /// Most requests waiting at one router.
    pub router: u64,
}
