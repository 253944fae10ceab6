//! A replication's random streams, one per purpose ([`crate::rng`]), all made here: the
//! builder takes this apart and hands each concern the streams it draws from, which it then
//! owns. A purpose's draws depend only on the seed, the replication and the purpose, so the
//! order the streams are made in, and the order concerns draw in, change nothing.

use crate::rng::{stream, SimRng, Stream};

pub(super) struct Streams {
    pub arrivals: SimRng,
    pub service: SimRng,
    pub routing: SimRng,
    pub think: SimRng,
    pub accept: SimRng,
    pub connect: SimRng,
    pub overhead: SimRng,
    pub router_timeout: SimRng,
    pub queue_timeout: SimRng,
    pub client_timeout: SimRng,
    pub app_timeout: SimRng,
    pub router_cost: SimRng,
    pub boot: SimRng,
    pub cycling: SimRng,
    pub request_cpu: SimRng,
    pub jitter: SimRng,
    pub view: SimRng,
    pub aperture: SimRng,
    pub idle_reports: SimRng,
    pub keys: SimRng,
    pub colocated: SimRng,
}

impl Streams {
    pub fn new(seed: u64, replication: u64) -> Streams {
        let make = |purpose| stream(seed, replication, purpose);
        Streams {
            arrivals: make(Stream::Arrivals),
            service: make(Stream::Service),
            routing: make(Stream::Routing),
            think: make(Stream::Think),
            accept: make(Stream::Accept),
            connect: make(Stream::Connect),
            overhead: make(Stream::Overhead),
            router_timeout: make(Stream::RouterTimeout),
            queue_timeout: make(Stream::QueueTimeout),
            client_timeout: make(Stream::ClientTimeout),
            app_timeout: make(Stream::AppTimeout),
            router_cost: make(Stream::RouterCost),
            boot: make(Stream::Boot),
            cycling: make(Stream::Cycling),
            request_cpu: make(Stream::RequestCpu),
            jitter: make(Stream::Jitter),
            view: make(Stream::View),
            aperture: make(Stream::Aperture),
            idle_reports: make(Stream::IdleReports),
            keys: make(Stream::Keys),
            colocated: make(Stream::Colocated),
        }
    }
}
