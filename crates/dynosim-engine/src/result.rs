//! What a replication reports: the figures every engine produces, and the optional trace.

use crate::stats::TimeSummary;
use serde::Serialize;

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
    /// Requests at each dyno, in service or waiting.
    pub depth: Vec<u32>,
    /// Requests waiting at the routers.
    pub router_waiting: u64,
    /// Requests that have arrived so far.
    pub arrived: u64,
    /// Requests that have had to wait so far (joined a router or dyno queue).
    pub queued: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Most requests waiting at one dyno (not counting those in service).
    pub dyno: u64,
    /// Most requests waiting at one router.
    pub router: u64,
}
