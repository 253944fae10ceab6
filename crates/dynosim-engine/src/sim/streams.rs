//! A replication's random streams, one per purpose ([`crate::rng`]), all made here: the
//! builder hands each concern the streams it draws from (a concern with several declares
//! them in a struct of its own, beside its state), and the concern owns them from then on. A
//! purpose's draws depend only on the seed, the replication and the purpose, so the order the
//! streams are made in, and the order concerns draw in, change nothing.
//!
//! `[[arrivals.burst]]`'s substreams are the arrival process's own ([`crate::arrivals`]).

use super::deadlines::TimeoutStreams;
use super::retries::RetryStreams;
use super::router::RouterStreams;
use super::traffic::TrafficStreams;
use crate::rng::{stream, SimRng, Stream};

pub(super) struct Streams {
    pub traffic: TrafficStreams,
    pub routers: RouterStreams,
    /// Closed-loop clients' think times.
    pub think: SimRng,
    /// Which process accepts a connection (greedy accept).
    pub accept: SimRng,
    /// The app's per-request overhead (`app.overhead`).
    pub overhead: SimRng,
    /// `router.timeout`, `router.queue_timeout`, `arrivals.timeout`, `app.timeout`.
    pub timeouts: TimeoutStreams,
    /// Boot times (`fleet.boot_time`).
    pub boot: SimRng,
    /// Daily restarts (`fleet.cycling`).
    pub cycling: SimRng,
    /// A router's CPU on the dyno's machine (`router.colocated_cpu`).
    pub colocated: SimRng,
    /// The clients' retries (`[arrivals.retry]`): backoff jitter, the retried tries' patience.
    pub retries: RetryStreams,
    /// The app's retried queries' times (`[resources.NAME] retries`).
    pub queries: SimRng,
    /// The concurrency limits' draws (Vegas's probes).
    pub limits: SimRng,
}

impl Streams {
    pub fn new(seed: u64, replication: u64) -> Streams {
        let make = |purpose| stream(seed, replication, purpose);
        Streams {
            traffic: TrafficStreams {
                arrivals: make(Stream::Arrivals),
                service: make(Stream::Service),
                request_cpu: make(Stream::RequestCpu),
                jitter: make(Stream::Jitter),
                keys: make(Stream::Keys),
            },
            routers: RouterStreams {
                routing: make(Stream::Routing),
                view: make(Stream::View),
                aperture: make(Stream::Aperture),
                idle_reports: make(Stream::IdleReports),
                cost: make(Stream::RouterCost),
                connect: make(Stream::Connect),
            },
            think: make(Stream::Think),
            accept: make(Stream::Accept),
            overhead: make(Stream::Overhead),
            timeouts: TimeoutStreams {
                router: make(Stream::RouterTimeout),
                queue: make(Stream::QueueTimeout),
                client: make(Stream::ClientTimeout),
                app: make(Stream::AppTimeout),
            },
            boot: make(Stream::Boot),
            cycling: make(Stream::Cycling),
            colocated: make(Stream::Colocated),
            retries: RetryStreams {
                delays: make(Stream::RetryDelays),
                patience: make(Stream::RetryTimeouts),
            },
            queries: make(Stream::QueryRetries),
            limits: make(Stream::Limits),
        }
    }
}
