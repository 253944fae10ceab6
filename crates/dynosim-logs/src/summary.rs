//! The summary of a log, in one pass over lines in any order and in bounded memory: counts,
//! span, service-time percentiles overall and per route, statuses, error codes, dynos, and the
//! series of requests and requests in service per interval.
//!
//! Bounds: [`MAX_ROUTES`] routes, [`MAX_DYNOS`] dynos, [`MAX_HOSTS`] hosts and
//! [`MAX_ERROR_CODES`] codes are tracked one by one (later newcomers are pooled as `(other)`),
//! duplicates are caught within [`crate::dedup::WINDOW`] requests, and the series within
//! [`crate::series::MAX_BINS`] intervals.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::error::LogError;
use crate::hash::FastMap;
use crate::reader::{read_logs, Visitor};
pub use crate::reader::{
    FileSummary, Malformed, ReadOptions, ReadSummary, MALFORMED_EXAMPLES, MAX_HOSTS, OTHER,
};
use crate::record::{Detail, Format, Request};
use crate::series::{Interval, Series, MAX_BINS_GIVEN};
use crate::time::iso8601;

/// Routes tracked one by one (each with its histogram).
pub const MAX_ROUTES: usize = 1000;
pub const MAX_DYNOS: usize = 10_000;
pub const MAX_ERROR_CODES: usize = 1000;

#[derive(Debug, Clone)]
pub struct Options {
    pub read: ReadOptions,
    /// The series' interval in seconds (default: chosen from the span).
    pub interval: Option<f64>,
    /// Routes reported one by one, the busiest first; the rest as one `(other)` row.
    pub top_routes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            read: ReadOptions::default(),
            interval: None,
            top_routes: 20,
        }
    }
}

/// Times recorded in whole milliseconds (every router logs milliseconds or coarser), with
/// HdrHistogram's 3 significant digits: percentiles are exact below 2.048 s and at most 0.1%
/// low above (a bucket's lowest value, so that H12's 30000 ms reads 30 s). The sum is kept in
/// whole microseconds, so that the mean does not depend on the order of the lines.
#[derive(Debug, Clone)]
pub(crate) struct Times {
    pub(crate) count: u64,
    sum_us: u64,
    max: f64,
    histogram: Histogram<u64>,
}

impl Default for Times {
    fn default() -> Self {
        Times {
            count: 0,
            sum_us: 0,
            max: 0.0,
            histogram: Histogram::new(3).expect("3 significant digits is valid"),
        }
    }
}

/// Seconds as whole microseconds (times are not negative).
#[inline]
fn micros(seconds: f64) -> u64 {
    (seconds * 1e6).round() as u64
}

impl Times {
    #[inline]
    pub(crate) fn record(&mut self, seconds: f64) {
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(micros(seconds));
        if seconds > self.max {
            self.max = seconds;
        }
        let ms = (seconds * 1000.0).round() as u64;
        // `record` grows the histogram; it fails only past u64's range.
        if self.histogram.record(ms).is_err() {
            self.histogram.saturating_record(ms);
        }
    }

    pub(crate) fn merge(&mut self, other: &Times) {
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max = self.max.max(other.max);
        self.histogram
            .add(&other.histogram)
            .expect("auto-resizing histograms merge");
    }

    /// Each distinct time recorded (seconds, whole milliseconds: a bucket's lowest value, at
    /// most the maximum) with its count, in increasing order.
    pub(crate) fn distinct(&self) -> Vec<(f64, u64)> {
        let h = &self.histogram;
        h.iter_recorded()
            .map(|v| {
                let ms = h.lowest_equivalent(v.value_iterated_to());
                ((ms as f64 / 1000.0).min(self.max), v.count_at_value())
            })
            .collect()
    }

    pub(crate) fn summary(&self) -> Option<TimeSummary> {
        if self.count == 0 {
            return None;
        }
        let h = &self.histogram;
        let q =
            |p: f64| (h.lowest_equivalent(h.value_at_quantile(p)) as f64 / 1000.0).min(self.max);
        Some(TimeSummary {
            count: self.count,
            mean: self.sum_us as f64 / 1e6 / self.count as f64,
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            max: self.max,
        })
    }
}

/// A time's distribution, in seconds. A percentile p is the smallest value that at least p of
/// the requests do not exceed (nearest rank).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default)]
struct RouteStats {
    count: u64,
    errors: u64,
    service: Times,
}

impl RouteStats {
    fn merge(&mut self, other: &RouteStats) {
        self.count += other.count;
        self.errors += other.errors;
        self.service.merge(&other.service);
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct DynoStats {
    requests: u64,
    /// Whole microseconds, for a sum independent of the order of the lines.
    busy_us: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteSummary {
    /// `GET /users/:id`
    pub route: String,
    pub method: String,
    pub path: String,
    pub count: u64,
    /// Requests with an error code (Heroku's H codes, HAProxy's termination states).
    pub errors: u64,
    pub service: Option<TimeSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DynoSummary {
    pub dyno: String,
    pub requests: u64,
    /// The sum of its requests' service times.
    pub busy_seconds: f64,
    /// `busy_seconds` over the log's span: the mean number of requests it had in service.
    pub in_service_mean: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorSummary {
    pub code: String,
    pub count: u64,
    pub description: Option<String>,
}

/// A point of the series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// The interval's start, ISO 8601.
    pub start: String,
    pub requests: u64,
    pub rate_per_s: f64,
    /// Mean number of requests in service during the interval (from `time - service`).
    pub in_service: f64,
}

/// The finished summary: what `dynosim logs summary --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub read: ReadSummary,
    /// Requests by router format.
    pub formats: FastSortedCounts,
    pub first: Option<String>,
    pub last: Option<String>,
    pub first_epoch: Option<f64>,
    pub last_epoch: Option<f64>,
    pub span_seconds: Option<f64>,
    pub rate_per_s: Option<f64>,
    pub service: Option<TimeSummary>,
    pub connect: Option<TimeSummary>,
    pub status: FastSortedCounts,
    pub errors: FastSortedCounts,
    pub error_codes: Vec<ErrorSummary>,
    pub dynos: usize,
    pub per_dyno: Vec<DynoSummary>,
    pub routes: Vec<RouteSummary>,
    /// Distinct routes seen (up to the bound, then those pooled as one).
    pub routes_distinct: usize,
    /// Requests by host (the Host header), of every host in the log, `--host` or not.
    pub hosts: FastSortedCounts,
    pub interval_seconds: f64,
    pub series: Vec<SeriesPoint>,
    /// Over the series' intervals: the mean and the largest interval mean of requests in service.
    pub in_service_mean: Option<f64>,
    pub in_service_peak: Option<f64>,
}

/// Counts by name, serialised as a JSON object in the order given (largest first, or by key).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FastSortedCounts(pub Vec<(String, u64)>);

impl Serialize for FastSortedCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// What the summary adds up, request by request: the visitor of a pass over logs (see
/// [`summarise`]), and the summary from it and what was read.
pub struct Summariser {
    top_routes: usize,
    by_format: [u64; 3],
    first: f64,
    last: f64,
    service: Times,
    connect: Times,
    status: Vec<u64>,
    errors: FastMap<String, (u64, Option<String>)>,
    routes: FastMap<String, RouteStats>,
    route_overflow: RouteStats,
    dynos: FastMap<String, DynoStats>,
    dyno_overflow: DynoStats,
    series: Series,
    route_key: String,
}

impl Summariser {
    pub fn new(options: &Options) -> Result<Summariser, LogError> {
        if let Some(w) = options.interval {
            if !(w.is_finite() && w > 0.0) {
                return Err(LogError::Option {
                    option: "--interval".into(),
                    message: format!("must be a positive duration, got {w}"),
                });
            }
        }
        Ok(Summariser {
            top_routes: options.top_routes,
            by_format: [0; 3],
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            service: Times::default(),
            connect: Times::default(),
            status: vec![0; 1000],
            errors: FastMap::default(),
            routes: FastMap::default(),
            route_overflow: RouteStats::default(),
            dynos: FastMap::default(),
            dyno_overflow: DynoStats::default(),
            series: Series::new(options.interval),
            route_key: String::new(),
        })
    }

    /// The summary of the requests visited, and of `read` (the reading of them).
    pub fn finish(self, read: ReadSummary) -> Summary {
        let totals = self;
        let requests = read.requests;
        // Timestamps hold microseconds at most; f64 seconds since the epoch hold 0.2 µs.
        let span = ((totals.last - totals.first) * 1e6).round() / 1e6;
        let (width, intervals) = totals.series.finish();
        let series: Vec<SeriesPoint> = intervals
            .iter()
            .map(
                |Interval {
                     start,
                     requests,
                     in_service,
                 }| SeriesPoint {
                    start: iso8601(*start),
                    requests: *requests,
                    rate_per_s: *requests as f64 / width,
                    in_service: *in_service,
                },
            )
            .collect();
        let (in_service_mean, in_service_peak) = if series.is_empty() {
            (None, None)
        } else {
            (
                Some(series.iter().map(|p| p.in_service).sum::<f64>() / series.len() as f64),
                series.iter().map(|p| p.in_service).reduce(f64::max),
            )
        };

        let mut routes: Vec<(String, RouteStats)> = totals.routes.into_iter().collect();
        routes.sort_by(|a, b| b.1.count.cmp(&a.1.count).then_with(|| a.0.cmp(&b.0)));
        let routes_distinct = routes.len() + usize::from(totals.route_overflow.count > 0);
        let mut other = totals.route_overflow;
        let top = totals.top_routes;
        for (_, r) in routes.iter().skip(top) {
            other.merge(r);
        }
        routes.truncate(top);
        let mut route_rows: Vec<RouteSummary> = routes
            .into_iter()
            .map(|(key, r)| {
                let (method, path) = key.split_once(' ').unwrap_or(("", key.as_str()));
                RouteSummary {
                    method: method.to_string(),
                    path: path.to_string(),
                    route: key.clone(),
                    count: r.count,
                    errors: r.errors,
                    service: r.service.summary(),
                }
            })
            .collect();
        if other.count > 0 {
            route_rows.push(RouteSummary {
                route: OTHER.into(),
                method: String::new(),
                path: String::new(),
                count: other.count,
                errors: other.errors,
                service: other.service.summary(),
            });
        }

        let mut dynos: Vec<(String, DynoStats)> = totals.dynos.into_iter().collect();
        if totals.dyno_overflow.requests > 0 {
            dynos.push((OTHER.into(), totals.dyno_overflow));
        }
        dynos.sort_by(|a, b| natural_cmp(&a.0, &b.0));
        let dyno_count = dynos.len();
        let per_dyno = dynos
            .into_iter()
            .map(|(dyno, d)| DynoSummary {
                dyno,
                requests: d.requests,
                busy_seconds: d.busy_us as f64 / 1e6,
                in_service_mean: (span > 0.0).then(|| d.busy_us as f64 / 1e6 / span),
            })
            .collect();

        let mut errors: Vec<(String, (u64, Option<String>))> = totals.errors.into_iter().collect();
        errors.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
        let hosts = read.hosts.clone();

        Summary {
            read,
            formats: FastSortedCounts(
                Format::ALL
                    .iter()
                    .filter(|f| totals.by_format[**f as usize] > 0)
                    .map(|f| (f.name().to_string(), totals.by_format[*f as usize]))
                    .collect(),
            ),
            first: Some(iso8601(totals.first)),
            last: Some(iso8601(totals.last)),
            first_epoch: Some(totals.first),
            last_epoch: Some(totals.last),
            span_seconds: Some(span),
            rate_per_s: (span > 0.0).then(|| requests as f64 / span),
            service: totals.service.summary(),
            connect: totals.connect.summary(),
            status: FastSortedCounts(
                totals
                    .status
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(s, n)| (s.to_string(), *n))
                    .collect(),
            ),
            errors: FastSortedCounts(errors.iter().map(|(c, (n, _))| (c.clone(), *n)).collect()),
            error_codes: errors
                .into_iter()
                .map(|(code, (count, description))| ErrorSummary {
                    code,
                    count,
                    description,
                })
                .collect(),
            dynos: dyno_count,
            per_dyno,
            routes: route_rows,
            routes_distinct,
            hosts: FastSortedCounts(hosts),
            interval_seconds: width,
            series,
            in_service_mean,
            in_service_peak,
        }
    }
}

impl Visitor for Summariser {
    fn visit(&mut self, r: &Request<'_>) -> Result<(), LogError> {
        let acc = self;
        acc.by_format[r.format() as usize] += 1;
        acc.first = acc.first.min(r.time);
        acc.last = acc.last.max(r.time);
        if let Some(s) = r.service {
            acc.service.record(s);
        }
        if let Some(c) = r.connect {
            acc.connect.record(c);
        }
        if let Some(s) = r.status {
            acc.status[usize::from(s).min(999)] += 1;
        }
        if let Some(code) = r.error {
            let desc = match r.detail {
                Detail::Heroku(d) => d.desc,
                _ => None,
            };
            if let Some(e) = acc.errors.get_mut(code) {
                e.0 += 1;
            } else if acc.errors.len() < MAX_ERROR_CODES {
                acc.errors
                    .insert(code.to_string(), (1, desc.map(str::to_string)));
            } else {
                acc.errors.entry(OTHER.to_string()).or_default().0 += 1;
            }
        }
        acc.route_key.clear();
        acc.route_key.push_str(r.method);
        acc.route_key.push(' ');
        acc.route_key.push_str(r.route);
        let count_route = |route: &mut RouteStats| {
            route.count += 1;
            route.errors += u64::from(r.error.is_some());
            if let Some(s) = r.service {
                route.service.record(s);
            }
        };
        if let Some(route) = acc.routes.get_mut(acc.route_key.as_str()) {
            count_route(route);
        } else if acc.routes.len() < MAX_ROUTES {
            count_route(acc.routes.entry(acc.route_key.clone()).or_default());
        } else {
            count_route(&mut acc.route_overflow);
        }
        if !r.dyno.is_empty() {
            let count_dyno = |dyno: &mut DynoStats| {
                dyno.requests += 1;
                dyno.busy_us = dyno.busy_us.saturating_add(r.service.map_or(0, micros));
            };
            if let Some(dyno) = acc.dynos.get_mut(r.dyno) {
                count_dyno(dyno);
            } else if acc.dynos.len() < MAX_DYNOS {
                count_dyno(acc.dynos.entry(r.dyno.to_string()).or_default());
            } else {
                count_dyno(&mut acc.dyno_overflow);
            }
        }
        acc.series.add(r.time, r.start()).map_err(|_| LogError::Option {
            option: "--interval".into(),
            message: format!(
                "{} s is too fine for this log: its requests span more than {MAX_BINS_GIVEN} intervals; \
                 give a longer interval",
                acc.series.width()
            ),
        })
    }
}

/// `web.2` before `web.10`: names compared with their digit runs as numbers.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (x[..n].trim_ascii_start(), y[..m].trim_ascii_start());
                let p = &p[p.iter().take_while(|c| **c == b'0').count()..];
                let q = &q[q.iter().take_while(|c| **c == b'0').count()..];
                let o = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Summarises the logs at `paths` (`-`: standard input).
pub fn summarise(
    paths: &[String],
    options: Options,
    stop: &dyn Fn() -> bool,
) -> Result<Summary, LogError> {
    let (read, summariser) = read_logs(&options.read, paths, stop, Summariser::new(&options)?)?;
    Ok(summariser.finish(read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynos_in_natural_order() {
        let mut v = vec!["web.10", "web.2", "web.1", "worker.1", "web.02x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["web.1", "web.2", "web.02x", "web.10", "worker.1"]);
    }

    #[test]
    fn percentiles_are_nearest_rank_and_exact_in_milliseconds() {
        let mut t = Times::default();
        for ms in 1..=100 {
            t.record(ms as f64 / 1000.0);
        }
        let s = t.summary().unwrap();
        assert_eq!(
            (s.p50, s.p90, s.p95, s.p99, s.max),
            (0.05, 0.09, 0.095, 0.099, 0.1)
        );
        assert!((s.mean - 0.0505).abs() < 1e-12);
        let mut t = Times::default();
        t.record(30.0);
        t.record(0.001);
        assert_eq!(t.summary().unwrap().p99, 30.0, "never above the maximum");
    }
}
