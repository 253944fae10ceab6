//! What fitting a scenario to a log needs, in one pass in bounded memory: arrivals counted per
//! interval (by arrival time: the line's time less its connect and service times), the service
//! times' histogram overall and per route, the dynos seen, and each request's overlap with the
//! one before it on its dyno (time that may be queueing inside `service=`, see
//! [`crate::overlap`]), optionally taken off the service times. The fitting itself (the rate
//! or schedule, the quantile table, the fit's quality) is done from these by the Python side.

use serde::Serialize;

use crate::error::LogError;
use crate::hash::Ids;
use crate::overlap::{OverlapSummary, Overlaps};
use crate::reader::{read_logs, ReadOptions, ReadSummary, Visitor, OTHER};
use crate::record::Request;
use crate::series::Series;
use crate::summary::{TimeSummary, Times, MAX_DYNOS, MAX_ROUTES};
use crate::time::iso8601;
use crate::window::{arrival, bound_text, Window};

#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    pub read: ReadOptions,
    pub window: Window,
    /// Take each request's overlap off its service time.
    pub correct_queueing: bool,
    /// Routes reported with their own histogram, the busiest first.
    pub routes: usize,
}

/// Service times as fitted: the summary, and each distinct time (whole milliseconds, as logs
/// have them) with its count, for quantiles, the KS distance and the QQ plot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distribution {
    pub summary: TimeSummary,
    /// `[seconds, requests]`, in increasing time.
    pub histogram: Vec<(f64, u64)>,
}

impl Distribution {
    fn of(times: &Times) -> Option<Distribution> {
        Some(Distribution {
            summary: times.summary()?,
            histogram: times.distinct(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteFit {
    /// `GET /users/:id`, or `(other)` for every route after the busiest.
    pub route: String,
    /// Requests with a service time.
    pub count: u64,
    pub service: Distribution,
}

/// What `dynosim logs fit` fits from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitData {
    #[serde(flatten)]
    pub read: ReadSummary,
    /// Requests arriving in the window (all of them without one).
    pub fitted: u64,
    pub outside_window: u64,
    /// Of the fitted requests, those without a service time (counted in the arrivals only).
    pub without_service: u64,
    /// The first and last arrival fitted.
    pub first: String,
    pub last: String,
    pub first_epoch: f64,
    pub span_seconds: f64,
    /// The window as given, resolved: its ends in seconds since the epoch (null: open).
    pub window_start: Option<f64>,
    pub window_end: Option<f64>,
    /// Arrivals per interval: the width, the first interval's start (seconds since the
    /// epoch), and the counts of the intervals the log covers whole: inside the window, and
    /// from its first line's time to its last's. (A log starts with the ends of requests: in
    /// the time before its first line, it holds only the requests still running then, the
    /// longest; near its end, it lacks the requests that ended after it.)
    pub interval_seconds: f64,
    pub counts_start: f64,
    pub counts: Vec<u64>,
    /// Distinct dynos among the fitted requests.
    pub dynos: usize,
    /// Service times as fitted (less their overlaps with `correct_queueing`).
    pub service: Option<Distribution>,
    /// Service times as logged, when they were corrected.
    pub service_logged: Option<TimeSummary>,
    /// The busiest routes' service times, and `(other)` for the rest (with `routes` > 0).
    pub routes: Vec<RouteFit>,
    pub routes_distinct: usize,
    pub queueing: OverlapSummary,
    pub corrected: bool,
}

const NO_ROUTE: u32 = u32::MAX;

/// Where a request's service time goes once its overlap is known.
#[derive(Debug, Clone, Copy)]
struct Payload {
    route: u32,
}

/// The service-time side: fed in end order by [`Overlaps`].
struct Services {
    correct: bool,
    fitted: Times,
    logged: Times,
    routes: Vec<Times>,
    overflow: Times,
}

impl Services {
    fn take(&mut self, p: Payload, service: f64, overlap: f64) {
        let s = if self.correct {
            service - overlap
        } else {
            service
        };
        self.fitted.record(s);
        self.logged.record(service);
        if p.route == NO_ROUTE {
            self.overflow.record(s);
        } else {
            self.routes[p.route as usize].record(s);
        }
    }
}

/// Gathers what fitting needs from the requests read.
pub struct Fitter {
    /// Routes reported with their own histogram (see [`FitOptions::routes`]).
    report_routes: usize,
    correct_queueing: bool,
    /// The window in seconds since the epoch.
    from: f64,
    to: f64,
    fitted: u64,
    outside: u64,
    without_service: u64,
    first: f64,
    last: f64,
    /// The first and last line's times (requests' ends), of every request read.
    first_end: f64,
    last_end: f64,
    arrivals: Series,
    routes: Ids,
    route_key: String,
    dynos: Ids,
    overlaps: Overlaps<Payload>,
    services: Services,
}

impl Fitter {
    /// A fitter of requests arriving in `[from, to)` (seconds since the epoch): the options'
    /// window resolved (see [`fit_data`], which finds the first arrival when it needs it).
    pub fn new(options: &FitOptions, from: f64, to: f64) -> Fitter {
        Fitter {
            report_routes: options.routes,
            correct_queueing: options.correct_queueing,
            from,
            to,
            fitted: 0,
            outside: 0,
            without_service: 0,
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            first_end: f64::INFINITY,
            last_end: f64::NEG_INFINITY,
            arrivals: Series::new(None),
            routes: Ids::new(MAX_ROUTES),
            route_key: String::new(),
            dynos: Ids::new(MAX_DYNOS),
            overlaps: Overlaps::new(),
            services: Services {
                correct: options.correct_queueing,
                fitted: Times::default(),
                logged: Times::default(),
                routes: Vec::new(),
                overflow: Times::default(),
            },
        }
    }

    /// What to fit, from what was read and gathered.
    pub fn finish(mut self, read: ReadSummary) -> Result<FitData, LogError> {
        let requests = read.requests;
        if self.fitted == 0 {
            return Err(LogError::Option {
                option: "--window".into(),
                message: format!(
                    "none of the {requests} requests read arrived in it ({} to {})",
                    bound_text(self.from),
                    bound_text(self.to)
                ),
            });
        }
        let services = &mut self.services;
        self.overlaps.finish(&mut |p, s, o| services.take(p, s, o));
        let (width, start, counts) = self.arrivals.counts();
        let (lo, hi) = (self.from.max(self.first_end), self.to.min(self.last_end));
        let whole: Vec<usize> = (0..counts.len())
            .filter(|&i| {
                let a = start + i as f64 * width;
                a >= lo && a + width <= hi
            })
            .collect();
        let (counts_start, counts) = match (whole.first(), whole.last()) {
            (Some(&a), Some(&b)) => (start + a as f64 * width, counts[a..=b].to_vec()),
            _ => (start, Vec::new()),
        };
        let mut routes = Vec::new();
        let route_names = self.routes.names();
        let routes_distinct = route_names.len() + usize::from(services.overflow.count > 0);
        if self.report_routes > 0 {
            let mut order: Vec<usize> = (0..route_names.len()).collect();
            order.sort_by(|&a, &b| {
                services.routes[b]
                    .count
                    .cmp(&services.routes[a].count)
                    .then_with(|| route_names[a].cmp(&route_names[b]))
            });
            let mut other = services.overflow.clone();
            for (rank, &i) in order.iter().enumerate() {
                let times = &services.routes[i];
                if times.count == 0 {
                    continue;
                }
                if rank < self.report_routes {
                    routes.push(RouteFit {
                        route: route_names[i].clone(),
                        count: times.count,
                        service: Distribution::of(times).expect("a time recorded"),
                    });
                } else {
                    other.merge(times);
                }
            }
            if let Some(service) = Distribution::of(&other) {
                routes.push(RouteFit {
                    route: OTHER.into(),
                    count: other.count,
                    service,
                });
            }
        }
        let span = ((self.last - self.first) * 1e6).round() / 1e6;
        Ok(FitData {
            read,
            fitted: self.fitted,
            outside_window: self.outside,
            without_service: self.without_service,
            first: iso8601(self.first),
            last: iso8601(self.last),
            first_epoch: self.first,
            span_seconds: span,
            window_start: self.from.is_finite().then_some(self.from),
            window_end: self.to.is_finite().then_some(self.to),
            interval_seconds: width,
            counts_start,
            counts,
            dynos: self.dynos.len(),
            service: Distribution::of(&services.fitted),
            service_logged: if self.correct_queueing {
                services.logged.summary()
            } else {
                None
            },
            routes,
            routes_distinct,
            queueing: self.overlaps.summary.clone(),
            corrected: self.correct_queueing,
        })
    }
}

impl Visitor for Fitter {
    fn visit(&mut self, r: &Request<'_>) -> Result<(), LogError> {
        self.first_end = self.first_end.min(r.time);
        self.last_end = self.last_end.max(r.time);
        let a = arrival(r);
        if !(a >= self.from && a < self.to) {
            self.outside += 1;
            return Ok(());
        }
        self.fitted += 1;
        self.first = self.first.min(a);
        self.last = self.last.max(a);
        // Counts only: a width of its own choosing, never an error.
        let _ = self.arrivals.add(a, None);
        let Some(service) = r.service else {
            self.without_service += 1;
            return Ok(());
        };
        self.route_key.clear();
        self.route_key.push_str(r.method);
        self.route_key.push(' ');
        self.route_key.push_str(r.route);
        let route = match self.routes.id(&self.route_key) {
            Some(id) => {
                if id as usize == self.services.routes.len() {
                    self.services.routes.push(Times::default());
                }
                id
            }
            None => NO_ROUTE,
        };
        let payload = Payload { route };
        let services = &mut self.services;
        let mut take = |p, s, o| services.take(p, s, o);
        let dyno = if r.dyno.is_empty() {
            None
        } else {
            self.dynos.id(r.dyno)
        };
        match dyno {
            Some(d) => self.overlaps.push(d, r.time, service, payload, &mut take),
            None => self.overlaps.unchecked(service, payload, &mut take),
        }
        Ok(())
    }
}

/// The earliest arrival in the logs at `paths` (a first pass, for a window given as offsets).
fn first_arrival(
    paths: &[String],
    options: &FitOptions,
    stop: &dyn Fn() -> bool,
) -> Result<f64, LogError> {
    let (_, FirstArrival(first)) =
        read_logs(&options.read, paths, stop, FirstArrival(f64::INFINITY))?;
    Ok(first)
}

struct FirstArrival(f64);

impl Visitor for FirstArrival {
    fn visit(&mut self, r: &Request<'_>) -> Result<(), LogError> {
        self.0 = self.0.min(arrival(r));
        Ok(())
    }
}

/// Reads the logs at `paths` (`-`: standard input) for fitting. A window given as offsets
/// from the first arrival reads them twice (the first time for that arrival), so it needs
/// files, not standard input.
pub fn fit_data(
    paths: &[String],
    options: FitOptions,
    stop: &dyn Fn() -> bool,
) -> Result<FitData, LogError> {
    let (from, to) = if options.window.relative() {
        if paths.iter().any(|p| p == "-") {
            return Err(LogError::Option {
                option: "--window".into(),
                message: "offsets from the log's start read the log twice: name files rather \
                          than - (standard input), or give the window as times"
                    .into(),
            });
        }
        options
            .window
            .resolve(first_arrival(paths, &options, stop)?)
    } else {
        options.window.resolve(0.0)
    };
    let (read, fitter) = read_logs(&options.read, paths, stop, Fitter::new(&options, from, to))?;
    fitter.finish(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Bound;

    fn data(log: &str, options: FitOptions) -> Result<FitData, LogError> {
        let dir = std::env::temp_dir().join(format!("dynosim-fit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file of its own: tests run in parallel, and two may write logs of one length.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("{n}.log"));
        std::fs::write(&path, log).unwrap();
        let out = fit_data(&[path.to_string_lossy().into_owned()], options, &|| false);
        let _ = std::fs::remove_file(&path);
        out
    }

    /// One request a second on web.1 taking 200 ms, and every tenth second a second request
    /// on web.1 sent 100 ms into the first: it waits 100 ms of its 300 ms service.
    fn log() -> String {
        let mut out = String::new();
        for i in 0..60 {
            let line = |ms: u32, path: &str, service: u32| {
                format!(
                    "2014-01-09T06:{:02}:{:02}.{ms:03}000+00:00 heroku[router]: at=info method=GET path={path} host=h dyno=web.1 connect=0ms service={service}ms status=200 bytes=1\n",
                    i / 60, i % 60
                )
            };
            out += &line(200, "/users/1", 200);
            if i % 10 == 0 {
                out += &line(400, "/search", 300);
            }
        }
        out
    }

    #[test]
    fn arrivals_services_routes_and_overlaps() {
        let d = data(
            &log(),
            FitOptions {
                routes: 1,
                ..FitOptions::default()
            },
        )
        .unwrap();
        assert_eq!((d.fitted, d.without_service, d.dynos), (66, 0, 1));
        assert_eq!(d.span_seconds, 59.0);
        // The whole seconds from the first line's time (0.2 s) to the last's (59.2 s): 1 to 58,
        // with 58 of the users' requests and 5 searches.
        assert_eq!((d.counts.len(), d.counts.iter().sum::<u64>()), (58, 63));
        assert_eq!(d.interval_seconds, 1.0);
        let q = &d.queueing;
        assert_eq!((q.requests, q.overlapping), (66, 6));
        assert!((q.overlap_seconds - 0.6).abs() < 1e-9, "{q:?}");
        let s = d.service.as_ref().unwrap();
        assert_eq!(s.histogram, vec![(0.2, 60), (0.3, 6)]);
        assert_eq!(d.routes.len(), 2);
        assert_eq!(
            (d.routes[0].route.as_str(), d.routes[0].count),
            ("GET /users/:id", 60)
        );
        assert_eq!(
            (d.routes[1].route.as_str(), d.routes[1].count),
            ("(other)", 6)
        );
        assert!(d.service_logged.is_none());
    }

    #[test]
    fn a_correction_takes_the_overlaps_off_and_a_window_keeps_its_arrivals() {
        let d = data(
            &log(),
            FitOptions {
                correct_queueing: true,
                window: Window {
                    start: Some(Bound::After(10.0)),
                    end: Some(Bound::After(20.0)),
                },
                ..FitOptions::default()
            },
        )
        .unwrap();
        // Arrivals from 10 s to 20 s after the first: seconds 10 to 19, with one search.
        assert_eq!((d.fitted, d.outside_window), (11, 55));
        let s = d.service.as_ref().unwrap();
        assert_eq!(s.histogram, vec![(0.2, 11)]);
        assert_eq!(d.service_logged.as_ref().unwrap().max, 0.3);
        let none = data(
            &log(),
            FitOptions {
                window: Window {
                    start: Some(Bound::At(0.0)),
                    end: Some(Bound::At(1.0)),
                },
                ..FitOptions::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            none.starts_with("--window: none of the 66 requests"),
            "{none}"
        );
    }
}
