//! What a replication measures, shared by both engines so that they report the same figures
//! in the same way: each engine says when a request arrived, started and completed, and
//! [`Measures`] turns that into a [`ReplicationResult`].

use crate::alloc::filled;
use crate::error::Result;
use crate::result::{QueueDepth, ReplicationResult, Utilisation};
use crate::scenario::Scenario;
use crate::stats::TimeStats;

#[derive(Debug)]
pub(crate) struct Measures {
    window_start: f64,
    window_end: f64,
    /// Queue times; its positive part is the queue time of the requests that waited.
    queue: TimeStats,
    response: TimeStats,
    service_sum: f64,
    completions_in_window: u64,
    /// Busy slot-seconds inside the window, per dyno.
    busy_area: Vec<f64>,
    /// Most requests waiting at each dyno, seen inside the window.
    max_dyno_queue: Vec<usize>,
    max_router_queue: usize,
    arrived: u64,
    completed: u64,
}

impl Measures {
    /// Bytes kept per dyno: the two lists below and the utilisation list of the result.
    pub const BYTES_PER_DYNO: f64 = 24.0;

    pub fn new(scenario: &Scenario) -> Result<Self> {
        let n = scenario.dynos as usize;
        Ok(Measures {
            window_start: scenario.warmup,
            window_end: scenario.warmup + scenario.duration,
            queue: TimeStats::default(),
            response: TimeStats::default(),
            service_sum: 0.0,
            completions_in_window: 0,
            busy_area: filled(n, 0.0)?,
            max_dyno_queue: filled(n, 0)?,
            max_router_queue: 0,
            arrived: 0,
            completed: 0,
        })
    }

    /// When arrivals stop: the end of the measurement window.
    #[inline]
    pub fn window_end(&self) -> f64 {
        self.window_end
    }

    /// A request arrived at `time` needing `service` seconds.
    #[inline]
    pub fn arrived(&mut self, time: f64, service: f64) {
        self.arrived += 1;
        if time >= self.window_start {
            // Summed in arrival order, so every policy and engine reports the very same figure.
            self.service_sum += service;
        }
    }

    pub fn arrivals(&self) -> u64 {
        self.arrived
    }

    /// A request that arrived at `arrival` started `service` seconds of work on a slot of
    /// `dyno` at `start`.
    #[inline]
    pub fn started(&mut self, dyno: usize, arrival: f64, start: f64, service: f64) {
        self.busy(dyno, start, service);
        if arrival >= self.window_start {
            self.queue.record(start - arrival);
        }
    }

    /// The slot is busy over [start, start + service]: its overlap with the window, counted
    /// once per request, is that request's share of the dyno's utilisation. Inside the window
    /// (nearly always) the overlap is `service` itself, taken as it is rather than as a
    /// difference of two times so that no rounding enters.
    #[inline]
    fn busy(&mut self, dyno: usize, start: f64, service: f64) {
        let end = start + service;
        let area = if start >= self.window_start && end <= self.window_end {
            service
        } else {
            end.min(self.window_end) - start.max(self.window_start)
        };
        if area > 0.0 {
            self.busy_area[dyno] += area;
        }
    }

    /// A request that arrived at `arrival` completed at `end`.
    #[inline]
    pub fn completed(&mut self, arrival: f64, end: f64) {
        self.completed += 1;
        if arrival >= self.window_start {
            self.response.record(end - arrival);
        }
        if end >= self.window_start && end <= self.window_end {
            self.completions_in_window += 1;
        }
    }

    /// [`Self::started`] and then [`Self::completed`], for an engine that knows both at once:
    /// the same figures, with one test of the window for a request that lies wholly inside it.
    #[inline]
    pub fn served(&mut self, dyno: usize, arrival: f64, start: f64, service: f64) {
        let end = start + service;
        if arrival >= self.window_start && end <= self.window_end {
            self.busy_area[dyno] += service;
            self.queue.record(start - arrival);
            self.response.record(end - arrival);
            self.completed += 1;
            self.completions_in_window += 1;
        } else {
            self.started(dyno, arrival, start, service);
            self.completed(arrival, end);
        }
    }

    /// `waiting` requests wait at `dyno` at `time`, just after one joined them.
    #[inline]
    pub fn dyno_queue(&mut self, dyno: usize, time: f64, waiting: usize) {
        if time >= self.window_start {
            let max = &mut self.max_dyno_queue[dyno];
            *max = (*max).max(waiting);
        }
    }

    /// `waiting` requests wait at a router at `time`, just after one joined them.
    #[inline]
    pub fn router_queue(&mut self, time: f64, waiting: usize) {
        if time >= self.window_start {
            self.max_router_queue = self.max_router_queue.max(waiting);
        }
    }

    pub fn finish(self, scenario: &Scenario) -> ReplicationResult {
        let capacity = scenario.slots as f64 * scenario.duration;
        let per_dyno: Vec<f64> = self.busy_area.iter().map(|a| a / capacity).collect();
        let requests = self.queue.count();
        ReplicationResult {
            requests,
            queued_fraction: ratio(self.queue.positive_count() as f64, requests as f64),
            queue: self.queue.summary(),
            queue_of_queued: self.queue.positive_summary(),
            response: self.response.summary(),
            service_mean: ratio(self.service_sum, requests as f64),
            throughput: self.completions_in_window as f64 / scenario.duration,
            utilisation: Utilisation {
                mean: per_dyno.iter().sum::<f64>() / per_dyno.len() as f64,
                min: per_dyno.iter().copied().fold(f64::INFINITY, f64::min),
                max: per_dyno.iter().copied().fold(0.0, f64::max),
                per_dyno,
            },
            max_queue_depth: QueueDepth {
                dyno: self.max_dyno_queue.iter().copied().max().unwrap_or(0) as u64,
                router: self.max_router_queue as u64,
            },
            simulated_requests: self.arrived,
            events: self.arrived + self.completed,
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}
