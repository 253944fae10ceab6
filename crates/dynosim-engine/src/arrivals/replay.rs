//! A replayed trace (trace-driven simulation): the arrival times of real requests, read from a
//! file, and with a second column their service times too, so that yesterday's traffic runs
//! through another fleet or policy exactly as it came (`dynosim logs replay` writes such a
//! file from a router log).
//!
//! The file has one request a line, `arrival` or `arrival,service` (a comma, spaces or a tab
//! between them), in seconds from the trace's start (a bare number, or a duration with its
//! unit: `46ms`); blank lines and lines starting with `#` are skipped, and a first line that
//! is not a number is a header. Lines need not be in time order: the trace is sorted (a stable
//! sort, so requests at the same instant keep their order in the file).
//!
//! The trace is read once and shared by every replication (an `Arc`): 8 bytes a request for
//! the arrival times, and with service times 8 more plus 8 for their sorted copy (the
//! distribution the offered load and the report's `service_mean` come from). Each replication
//! replays the same requests; only the routing (and anything else drawn) differs.

use super::ArrivalProcess;
use crate::dist::{Empirical, ServiceDistribution};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use crate::text_file::{self, LineError};
use crate::units::parse_duration;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

/// The most requests a trace may hold (10⁸: 2.4 GB with service times).
pub const MAX_REQUESTS: usize = 100_000_000;

/// The requests of a trace, in arrival order.
#[derive(Debug)]
pub struct Trace {
    /// Seconds from the trace's start, not decreasing.
    pub arrivals: Vec<f64>,
    /// Each request's service time, when the file gives them.
    pub services: Option<Vec<f64>>,
}

/// The trace replayed: each replication walks it from the start.
#[derive(Debug, Clone)]
pub struct Replay {
    trace: Arc<Trace>,
    /// The distribution of the trace's service times (for the offered load and the reports).
    service: Option<Arc<Empirical>>,
    /// The next request to arrive.
    next: usize,
}

pub fn build(p: &Params, base_dir: &Path) -> Result<Box<dyn ArrivalProcess>> {
    let file: String = p.require("file", "a path to a file of requests (arrival[,service])")?;
    let path = base_dir.join(&file);
    let reader = text_file::open(p, "file", &path, "requests", None)?;
    read_trace(reader)
        .and_then(|trace| Replay::new(trace).map_err(|message| (0, message)))
        .map_err(|e| text_file::error(p, "file", &path, e))
        .map(|r| Box::new(r) as Box<dyn ArrivalProcess>)
}

impl Replay {
    /// Replays `trace` (sorted here if it is not in arrival order).
    pub fn new(mut trace: Trace) -> std::result::Result<Replay, String> {
        if trace.arrivals.is_empty() {
            return Err("no requests in the trace".into());
        }
        if !trace.arrivals.windows(2).all(|w| w[0] <= w[1]) {
            let mut order: Vec<usize> = (0..trace.arrivals.len()).collect();
            order.sort_by(|&a, &b| trace.arrivals[a].total_cmp(&trace.arrivals[b]));
            trace.arrivals = order.iter().map(|&i| trace.arrivals[i]).collect();
            if let Some(s) = &trace.services {
                trace.services = Some(order.iter().map(|&i| s[i]).collect());
            }
        }
        let service = match &trace.services {
            None => None,
            Some(s) => Some(Arc::new(Empirical::new(s.clone()).map_err(|e| {
                if e.contains("zero") {
                    "every service time in the trace is zero".to_string()
                } else {
                    e
                }
            })?)),
        };
        Ok(Replay {
            trace: Arc::new(trace),
            service,
            next: 0,
        })
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    fn last(&self) -> f64 {
        *self.trace.arrivals.last().expect("a trace is not empty")
    }
}

/// Reads a trace a line at a time; an error comes with its line number (0 for the file as a
/// whole).
pub fn read_trace(reader: impl BufRead) -> std::result::Result<Trace, LineError> {
    let mut arrivals = Vec::new();
    let mut services = Vec::new();
    let mut columns = 0;
    text_file::for_each_line(reader, None, |number, line| {
        let mut fields = line
            .split(|c: char| c == ',' || c.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let (first, second) = (fields.next(), fields.next());
        if fields.next().is_some() {
            return Err(format!("expected arrival or arrival,service, got {line:?}"));
        }
        let n = 1 + usize::from(second.is_some());
        let (arrival, service) = match (first.and_then(seconds), second.map(seconds)) {
            (Some(a), None) => (a, None),
            (Some(a), Some(Some(s))) => (a, Some(s)),
            _ if columns == 0 && number == 1 => return Ok(()), // a header
            _ => {
                return Err(format!(
                    "expected times in seconds (arrival[,service]), got {line:?}"
                ))
            }
        };
        if columns == 0 {
            columns = n;
        } else if n != columns {
            return Err(format!(
                "{n} column{} where the lines before have {columns}",
                if n == 1 { "" } else { "s" }
            ));
        }
        if !(arrival.is_finite() && arrival >= 0.0) {
            return Err(format!("arrival times must be >= 0, got {arrival}"));
        }
        arrivals.push(arrival);
        if let Some(s) = service {
            if !(s.is_finite() && s >= 0.0) {
                return Err(format!("service times must be >= 0, got {s}"));
            }
            services.push(s);
        }
        if arrivals.len() > MAX_REQUESTS {
            return Err(format!(
                "more than {MAX_REQUESTS} requests; a trace may hold that many"
            ));
        }
        Ok(())
    })?;
    Ok(Trace {
        arrivals,
        services: (columns == 2).then_some(services),
    })
}

/// A bare number of seconds, or a duration with its unit.
fn seconds(field: &str) -> Option<f64> {
    match field.parse::<f64>() {
        Ok(v) => Some(v),
        Err(_) => parse_duration(field).filter(|_| field.ends_with(|c: char| c.is_alphabetic())),
    }
}

impl ArrivalProcess for Replay {
    #[inline]
    fn next_arrival(&mut self, _now: f64, _rng: &mut SimRng) -> Option<f64> {
        let t = self.trace.arrivals.get(self.next).copied();
        self.next += usize::from(t.is_some());
        t
    }

    fn next_arrivals(&mut self, _now: f64, _rng: &mut SimRng, out: &mut [f64]) -> usize {
        let left = &self.trace.arrivals[self.next..];
        let n = left.len().min(out.len());
        out[..n].copy_from_slice(&left[..n]);
        self.next += n;
        n
    }

    /// Requests over the trace's span, from 0 to its last arrival: the load it offers while
    /// it lasts (a finite trace sustains nothing after it; see docs/logs.md for why a replay
    /// allows an overload).
    fn mean_rate(&self) -> f64 {
        self.trace.arrivals.len() as f64 / self.last().max(1e-9)
    }

    fn expected(&self, from: f64, to: f64) -> f64 {
        let a = &self.trace.arrivals;
        (a.partition_point(|&t| t < to) - a.partition_point(|&t| t < from)) as f64
    }

    fn peak_rate(&self, to: f64) -> f64 {
        self.mean_rate().max(self.expected(0.0, to) / to)
    }

    fn carried_service(&self) -> Option<Box<dyn ServiceDistribution>> {
        self.service
            .as_ref()
            .map(|s| Box::new(Carried(s.clone())) as Box<dyn ServiceDistribution>)
    }

    #[inline]
    fn carried_services(&self, out: &mut [f64]) -> bool {
        match &self.trace.services {
            None => false,
            Some(s) => {
                out.copy_from_slice(&s[self.next - out.len()..self.next]);
                true
            }
        }
    }

    fn fresh(&self, _seed: u64, _replication: u64) -> Box<dyn ArrivalProcess> {
        Box::new(Replay {
            next: 0,
            ..self.clone()
        })
    }
}

/// The distribution of a trace's service times, shared with the trace's replications. Its
/// samples (resampled with replacement) are used by nothing that replays the trace, whose
/// requests keep their own times; its moments give the offered load.
#[derive(Debug)]
struct Carried(Arc<Empirical>);

impl ServiceDistribution for Carried {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.0.sample(rng)
    }
    fn mean(&self) -> f64 {
        self.0.mean()
    }
    fn second_moment(&self) -> f64 {
        self.0.second_moment()
    }
    fn quantile(&self, p: f64) -> f64 {
        self.0.quantile(p)
    }
    fn cdf(&self, x: f64) -> f64 {
        self.0.cdf(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn read(text: &str) -> std::result::Result<Trace, (usize, String)> {
        read_trace(Cursor::new(text.to_string()))
    }

    #[test]
    fn a_trace_file_is_read_with_its_header_comments_and_units() {
        let t = read("arrival,service\n# from a log\n0,0.1\n\n1.5 250ms\n2\t1\n").unwrap();
        assert_eq!(t.arrivals, vec![0.0, 1.5, 2.0]);
        assert_eq!(t.services, Some(vec![0.1, 0.25, 1.0]));
        let t = read("0\n3\n1\n").unwrap();
        assert_eq!(t.services, None);
        assert_eq!(read("0,1\n2\n").unwrap_err().0, 2);
        assert_eq!(read("0,1\n2,x\n").unwrap_err().0, 2);
        assert_eq!(read("0,1\n-1,1\n").unwrap_err().0, 2);
        assert_eq!(read("0,1\n1,-1\n").unwrap_err().0, 2);
        assert_eq!(read("0,1,2\n").unwrap_err().0, 1);
    }

    #[test]
    fn a_replay_walks_its_trace_in_time_order_with_each_requests_service() {
        let trace = read("5,0.5\n1,0.1\n3,0.3\n1,0.2\n").unwrap();
        let mut r = Replay::new(trace).unwrap();
        let mut rng = crate::rng::stream(1, 0, crate::rng::Stream::Arrivals);
        let mut got = Vec::new();
        let mut one = [0.0];
        while let Some(t) = r.next_arrival(0.0, &mut rng) {
            assert!(r.carried_services(&mut one));
            got.push((t, one[0]));
        }
        // Sorted by arrival; the two at 1 s keep the file's order.
        assert_eq!(got, vec![(1.0, 0.1), (1.0, 0.2), (3.0, 0.3), (5.0, 0.5)]);
        let mut fresh = r.fresh(1, 1);
        let mut out = [0.0; 3];
        assert_eq!(fresh.next_arrivals(0.0, &mut rng, &mut out), 3);
        let mut services = [0.0; 3];
        assert!(fresh.carried_services(&mut services));
        assert_eq!((out, services), ([1.0, 1.0, 3.0], [0.1, 0.2, 0.3]));
        assert_eq!(fresh.next_arrivals(0.0, &mut rng, &mut out), 1);
        assert_eq!(r.expected(1.0, 3.0), 2.0);
        assert_eq!(r.mean_rate(), 4.0 / 5.0);
        let s = r.carried_service().unwrap();
        assert!((s.mean() - 0.275).abs() < 1e-12);
    }
}
