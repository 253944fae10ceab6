//! A log's requests as a trace to replay: each request's arrival (its line's time less its
//! connect and service times) and service time, in arrival order, written as the file that
//! the engine's `arrivals.process = "replay"` reads; and what the log recorded for the same
//! requests, to set beside the simulation.
//!
//! Unlike the summary, this keeps every request (32 bytes each) until the log is read: lines
//! come out of arrival order (a line is written when its request ends, and drains
//! interleave), and the trace must be sorted.

use std::io::Write;

use serde::Serialize;

use crate::error::LogError;
use crate::hash::Ids;
use crate::overlap::{OverlapSummary, Overlaps};
use crate::reader::{read_logs, ReadOptions, ReadSummary, Visitor, OTHER};
use crate::record::Request;
use crate::summary::{FastSortedCounts, TimeSummary, Times, MAX_DYNOS, MAX_ERROR_CODES};
use crate::time::iso8601;
use crate::window::{arrival, bound_text, Window};

#[derive(Debug, Clone)]
pub struct TraceOptions {
    pub read: ReadOptions,
    /// Only requests arriving in it.
    pub window: Window,
    /// Gaps between arrivals divided by this (2: twice the rate).
    pub speed: f64,
    /// Replay each request's service time less its overlap with the one before it on its dyno
    /// (see [`crate::overlap`]).
    pub correct_queueing: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            read: ReadOptions::default(),
            window: Window::default(),
            speed: 1.0,
            correct_queueing: false,
        }
    }
}

const NO_DYNO: u32 = u32::MAX;

/// One request, as read.
#[derive(Debug, Clone, Copy)]
struct Record {
    arrival: f64,
    end: f64,
    /// As logged.
    service: f64,
    /// Its overlap with the request before it on its dyno (see [`crate::overlap`]).
    overlap: f64,
    connect: f64,
    /// 0 when the line has none.
    status: u16,
    /// An index into the error codes, plus 1; 0 for none.
    error: u16,
    dyno: u32,
}

/// What the log recorded for the requests replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// `service=` as logged (before any correction).
    pub service: Option<TimeSummary>,
    pub connect: Option<TimeSummary>,
    /// Connect + service: the router's view of the response, less its own time.
    pub response: Option<TimeSummary>,
    pub status: FastSortedCounts,
    pub errors: FastSortedCounts,
    /// Dynos that served them.
    pub dynos: usize,
}

/// What was read and what is replayed: `dynosim logs replay --json`'s `log` part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceReport {
    #[serde(flatten)]
    pub read: ReadSummary,
    /// Requests in the trace.
    pub replayed: u64,
    /// Requests without a service time (an H10 or H13 the router answered itself): not
    /// replayed, being no work for a dyno.
    pub without_service: u64,
    /// Requests arriving outside `--window`.
    pub outside_window: u64,
    /// The trace's time 0 (the window's start, or the first arrival), ISO 8601 and epoch.
    pub origin: String,
    pub origin_epoch: f64,
    /// The first and last arrival replayed.
    pub first: String,
    pub last: String,
    /// From the origin to the last arrival, in the log's time, and in the trace's (divided by
    /// the speed).
    pub span_seconds: f64,
    pub speed: f64,
    pub trace_seconds: f64,
    pub recorded: Recorded,
    /// Requests whose start overlaps the previous request on their dyno; with
    /// `correct_queueing` their replayed service times are less the overlap.
    pub queueing: OverlapSummary,
    pub corrected: bool,
}

/// Gathers the requests read into a trace.
pub struct TraceBuilder {
    window: Window,
    speed: f64,
    correct_queueing: bool,
    records: Vec<Record>,
    without_service: u64,
    dynos: Ids,
    /// Error codes; past the bound, one more index for `(other)`.
    errors: Ids,
}

impl TraceBuilder {
    pub fn new(options: &TraceOptions) -> Result<TraceBuilder, LogError> {
        if !(options.speed.is_finite() && options.speed > 0.0) {
            return Err(LogError::Option {
                option: "--speed".into(),
                message: format!("must be a positive number, got {}", options.speed),
            });
        }
        Ok(TraceBuilder {
            window: options.window,
            speed: options.speed,
            correct_queueing: options.correct_queueing,
            records: Vec::new(),
            without_service: 0,
            dynos: Ids::new(MAX_DYNOS),
            errors: Ids::new(MAX_ERROR_CODES),
        })
    }

    /// Sorts the requests, keeps the window's, corrects their service times if asked, writes
    /// the trace (`arrival,service` in seconds from the origin, over the speed) to `out`, and
    /// reports.
    pub fn finish(
        mut self,
        read: ReadSummary,
        out: &mut dyn Write,
    ) -> Result<TraceReport, LogError> {
        let requests = read.requests;
        if self.records.is_empty() {
            return Err(LogError::NoRequests {
                message: format!(
                    "none of the {requests} request{} read has a service time: nothing to replay",
                    if requests == 1 { "" } else { "s" }
                ),
            });
        }
        let first = self
            .records
            .iter()
            .map(|r| r.arrival)
            .fold(f64::INFINITY, f64::min);
        // In start order for the overlaps (exact: every request is at hand; the whole log's,
        // as a dyno was busy with requests outside the window too), then in arrival order for
        // the trace; both sorts stable.
        self.records
            .sort_by(|a, b| (a.end - a.service).total_cmp(&(b.end - b.service)));
        let mut overlaps = Overlaps::<usize>::new();
        let mut overlap = vec![0.0; self.records.len()];
        {
            let mut take = |i: usize, _service: f64, o: f64| overlap[i] = o;
            for (i, r) in self.records.iter().enumerate() {
                if r.dyno == NO_DYNO {
                    overlaps.unchecked(r.service, i, &mut take);
                } else {
                    overlaps.push(r.dyno, r.end, r.service, i, &mut take);
                }
            }
            overlaps.finish(&mut take);
        }
        for (r, o) in self.records.iter_mut().zip(overlap) {
            r.overlap = o;
        }
        let (from, to) = self.window.resolve(first);
        let before = self.records.len();
        self.records.retain(|r| r.arrival >= from && r.arrival < to);
        let outside_window = (before - self.records.len()) as u64;
        if self.records.is_empty() {
            return Err(LogError::Option {
                option: "--window".into(),
                message: format!(
                    "no request arrived in it ({} to {}); the log's arrivals start at {}",
                    bound_text(from),
                    bound_text(to),
                    iso8601(first)
                ),
            });
        }

        self.records.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));

        let origin = if from.is_finite() { from } else { first };
        let speed = self.speed;
        let mut service = Times::default();
        let mut connect = Times::default();
        let mut response = Times::default();
        let mut status = vec![0u64; 1000];
        // Each code's count at its index plus 1, and `(other)`'s last.
        let mut errors = vec![0u64; self.errors.len() + 2];
        let mut dynos = vec![false; self.dynos.len()];
        let mut queueing = OverlapSummary::default();
        let mut text = Vec::with_capacity(64 * 1024);
        text.extend_from_slice(b"arrival,service\n");
        let write_error = |e: std::io::Error| LogError::Option {
            option: "trace".into(),
            message: format!("cannot write the trace: {e}"),
        };
        for r in &self.records {
            // The log's times hold microseconds at most: offsets rounded to them, so that a
            // trace of round times replays exactly.
            let offset = ((r.arrival - origin) * 1e6).round().max(0.0) / 1e6;
            let replayed = if self.correct_queueing {
                r.service - r.overlap
            } else {
                r.service
            };
            writeln!(text, "{},{replayed}", offset / speed).expect("writing to a Vec");
            if text.len() >= 60 * 1024 {
                out.write_all(&text).map_err(write_error)?;
                text.clear();
            }
            service.record(r.service);
            connect.record(r.connect);
            response.record(r.connect + r.service);
            if r.dyno == NO_DYNO {
                queueing.unchecked += 1;
            } else {
                queueing.requests += 1;
                queueing.service_seconds += r.service;
                if r.overlap > 0.0 {
                    queueing.overlapping += 1;
                    queueing.overlap_seconds += r.overlap;
                }
            }
            status[usize::from(r.status).min(999)] += u64::from(r.status > 0);
            errors[usize::from(r.error)] += 1;
            if r.dyno != NO_DYNO {
                dynos[r.dyno as usize] = true;
            }
        }
        out.write_all(&text).map_err(write_error)?;
        out.flush().map_err(write_error)?;

        let last = self.records.last().expect("not empty").arrival;
        let span = ((last - origin) * 1e6).round() / 1e6;
        let mut error_counts: Vec<(String, u64)> = self
            .errors
            .names()
            .iter()
            .map(String::as_str)
            .chain([OTHER])
            .zip(&errors[1..])
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (c.to_string(), *n))
            .collect();
        error_counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(TraceReport {
            read,
            replayed: self.records.len() as u64,
            without_service: self.without_service,
            outside_window,
            origin: iso8601(origin),
            origin_epoch: origin,
            first: iso8601(self.records[0].arrival),
            last: iso8601(last),
            span_seconds: span,
            speed,
            trace_seconds: span / speed,
            recorded: Recorded {
                service: service.summary(),
                connect: connect.summary(),
                response: response.summary(),
                status: FastSortedCounts(
                    status
                        .iter()
                        .enumerate()
                        .filter(|(_, n)| **n > 0)
                        .map(|(s, n)| (s.to_string(), *n))
                        .collect(),
                ),
                errors: FastSortedCounts(error_counts),
                dynos: dynos.iter().filter(|d| **d).count(),
            },
            queueing,
            corrected: self.correct_queueing,
        })
    }
}

impl Visitor for TraceBuilder {
    fn visit(&mut self, r: &Request<'_>) -> Result<(), LogError> {
        let Some(service) = r.service else {
            self.without_service += 1;
            return Ok(());
        };
        let dyno = if r.dyno.is_empty() {
            NO_DYNO
        } else {
            self.dynos.id(r.dyno).unwrap_or(NO_DYNO)
        };
        let error = match r.error {
            None => 0,
            Some(code) => match self.errors.id(code) {
                Some(e) => e as u16 + 1,
                None => MAX_ERROR_CODES as u16 + 1,
            },
        };
        self.records.push(Record {
            arrival: arrival(r),
            end: r.time,
            service,
            overlap: 0.0,
            connect: r.connect.unwrap_or(0.0),
            status: r.status.unwrap_or(0),
            error,
            dyno,
        });
        Ok(())
    }
}

/// Reads the logs at `paths` into a trace written to `out`.
pub fn build_trace(
    paths: &[String],
    options: TraceOptions,
    out: &mut dyn Write,
    stop: &dyn Fn() -> bool,
) -> Result<TraceReport, LogError> {
    let builder = TraceBuilder::new(&options)?;
    let (read, builder) = read_logs(&options.read, paths, stop, builder)?;
    builder.finish(read, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(log: &str, options: TraceOptions) -> Result<(String, TraceReport), LogError> {
        let dir = std::env::temp_dir().join(format!("dynosim-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file of its own: tests run in parallel, and two may write the same log.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("{n}.log"));
        std::fs::write(&path, log).unwrap();
        let mut out = Vec::new();
        let report = build_trace(
            &[path.to_string_lossy().into_owned()],
            options,
            &mut out,
            &|| false,
        );
        let _ = std::fs::remove_file(&path);
        Ok((String::from_utf8(out).unwrap(), report?))
    }

    const LOG: &str = "\
2014-01-09T06:00:01.000000+00:00 heroku[router]: at=info method=GET path=/a host=h dyno=web.1 connect=0ms service=1000ms status=200 bytes=1
2014-01-09T06:00:01.500000+00:00 heroku[router]: at=info method=GET path=/b host=h dyno=web.1 connect=0ms service=1000ms status=200 bytes=1
2014-01-09T06:00:00.400000+00:00 heroku[router]: at=info method=GET path=/c host=h dyno=web.2 connect=50ms service=250ms status=404 bytes=1
2014-01-09T06:00:31.000000+00:00 heroku[router]: at=error code=H12 desc=\"Request timeout\" method=GET path=/d host=h dyno=web.2 connect=0ms service=30000ms status=503 bytes=0
2014-01-09T06:00:02.000000+00:00 heroku[router]: at=error code=H10 desc=\"App crashed\" method=GET path=/ host=h dyno= connect= service= status=503 bytes=
";

    #[test]
    fn a_trace_is_in_arrival_order_from_the_first_arrival() {
        let (text, r) = trace(LOG, TraceOptions::default()).unwrap();
        // Arrivals: /a at 06:00:00, /c at 00.1, /b at 00.5, /d at 01 (its 30 s H12 line came
        // last); the H10 has no service time.
        assert_eq!(
            text, "arrival,service\n0,1\n0.1,0.25\n0.5,1\n1,30\n",
            "{r:?}"
        );
        assert_eq!((r.replayed, r.without_service, r.read.requests), (4, 1, 5));
        assert_eq!(r.recorded.errors.0, vec![("H12".to_string(), 1)]);
        assert_eq!(r.recorded.dynos, 2);
        assert_eq!(r.span_seconds, 1.0);
        // /b was sent to web.1 at 00.5 while /a held it until 01: 0.5 s of its 1 s queued.
        assert_eq!(
            (r.queueing.overlapping, r.queueing.overlap_seconds),
            (1, 0.5)
        );
        assert!(!r.corrected);
    }

    #[test]
    fn window_speed_and_correction_shape_the_trace() {
        let options = TraceOptions {
            window: Window {
                start: Some(crate::window::Bound::After(0.25)),
                end: None,
            },
            speed: 2.0,
            correct_queueing: true,
            ..TraceOptions::default()
        };
        let (text, r) = trace(LOG, options).unwrap();
        assert_eq!(text, "arrival,service\n0.125,0.5\n0.375,30\n");
        assert_eq!((r.replayed, r.outside_window), (2, 2));
        assert_eq!((r.span_seconds, r.trace_seconds), (0.75, 0.375));
        assert_eq!(r.recorded.service.as_ref().unwrap().max, 30.0);
        let none = TraceOptions {
            window: Window {
                start: Some(crate::window::Bound::After(100.0)),
                end: None,
            },
            ..TraceOptions::default()
        };
        let e = trace(LOG, none).unwrap_err().to_string();
        assert!(e.starts_with("--window: no request arrived in it"), "{e}");
    }
}
