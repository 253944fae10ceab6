//! Time queued on the dyno inside `service=`: Heroku's router measures `service` from when it
//! hands the request to the dyno to the end of the response, so on a dyno that serves one
//! request at a time (one single-threaded process: thin, Unicorn with one worker, gunicorn
//! sync with one worker) a request sent while the one before it is still being served waits
//! in the dyno's socket first, and that wait is in its `service`.
//!
//! Per dyno, taking requests in the order they were sent to it (their start: the line's time
//! less the service time): a request that starts before the dyno's earlier requests have all
//! ended overlaps them by the difference, at most its own service time. Under the assumption
//! that the dyno serves one request at a time, first come first served, the overlap is exactly
//! the time the request queued there, and `service − overlap` its work. With several processes
//! or threads per dyno, overlaps are also requests served side by side: the overlap then
//! bounds the queueing from above.
//!
//! Lines come nearly in the order their requests ended (a drain interleaves a few seconds), so
//! in start order up to their service times; [`Overlaps`] puts them in start order within
//! [`LAG`] seconds of the latest end seen, in memory bounded by the requests of that long. A
//! request that comes later than that (a service time longer than about a minute: a websocket's
//! session) is not checked (counted in `late`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::Serialize;

/// How far a request's start may lie before the latest end seen and still be checked, seconds.
pub const LAG: f64 = 60.0;

/// A request waiting to be taken in end order, with what the caller carries along.
#[derive(Debug, Clone, Copy)]
struct Pending<T> {
    start: f64,
    end: f64,
    seq: u64,
    dyno: u32,
    service: f64,
    payload: T,
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Pending<T> {}
impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Pending<T> {
    /// Reversed: the heap's top is the earliest start (then the first read).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .start
            .total_cmp(&self.start)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// What the check found, over the requests with a dyno and a service time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OverlapSummary {
    /// Requests checked.
    pub requests: u64,
    /// Of those, the ones that started before their dyno's previous request ended.
    pub overlapping: u64,
    /// Their overlaps added up, seconds: the time queued on the dyno if it serves one request
    /// at a time.
    pub overlap_seconds: f64,
    /// The service times of the requests checked, added up.
    pub service_seconds: f64,
    /// Requests that started more than [`LAG`] seconds before a later request's end read
    /// before them: not checked.
    pub late: u64,
    /// Requests without a dyno or a service time: not checked.
    pub unchecked: u64,
}

/// Finds each request's overlap with the one before it on its dyno (see the module's
/// documentation), handing each request back with it in end order.
pub struct Overlaps<T> {
    heap: BinaryHeap<Pending<T>>,
    seq: u64,
    /// The latest end seen.
    newest: f64,
    /// Until when each dyno is busy with the requests taken (NEG_INFINITY: none yet).
    busy_until: Vec<f64>,
    /// The start of the last request taken, any dyno: the order is kept up to here.
    taken_to: f64,
    pub summary: OverlapSummary,
}

impl<T: Copy> Default for Overlaps<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> Overlaps<T> {
    pub fn new() -> Self {
        Overlaps {
            heap: BinaryHeap::new(),
            seq: 0,
            newest: f64::NEG_INFINITY,
            busy_until: Vec::new(),
            taken_to: f64::NEG_INFINITY,
            summary: OverlapSummary::default(),
        }
    }

    /// A request of dyno `dyno` (a small number the caller gives each dyno) that ended at
    /// `end` after `service` seconds. `take` gets every request whose turn has come, with its
    /// service time and its overlap (0 when none, or when it could not be checked).
    pub fn push(
        &mut self,
        dyno: u32,
        end: f64,
        service: f64,
        payload: T,
        take: &mut impl FnMut(T, f64, f64),
    ) {
        let start = end - service;
        if start < self.taken_to {
            // Too late to put in order: requests that started after it are taken already.
            self.summary.late += 1;
            take(payload, service, 0.0);
            return;
        }
        self.seq += 1;
        self.heap.push(Pending {
            start,
            end,
            seq: self.seq,
            dyno,
            service,
            payload,
        });
        self.newest = self.newest.max(end);
        while self.heap.peek().is_some_and(|p| p.end < self.newest - LAG) {
            let p = self.heap.pop().expect("peeked");
            self.take(p, take);
        }
    }

    /// A request that cannot be checked (no dyno, or no service time): handed back at once.
    pub fn unchecked(&mut self, service: f64, payload: T, take: &mut impl FnMut(T, f64, f64)) {
        self.summary.unchecked += 1;
        take(payload, service, 0.0);
    }

    /// Takes every request still waiting.
    pub fn finish(&mut self, take: &mut impl FnMut(T, f64, f64)) {
        while let Some(p) = self.heap.pop() {
            self.take(p, take);
        }
    }

    fn take(&mut self, p: Pending<T>, take: &mut impl FnMut(T, f64, f64)) {
        self.taken_to = p.start;
        let d = p.dyno as usize;
        if d >= self.busy_until.len() {
            self.busy_until.resize(d + 1, f64::NEG_INFINITY);
        }
        // In whole microseconds, the logs' finest: times since the epoch carry a few tenths of
        // a microsecond of rounding, which must not make back-to-back requests overlap.
        let overlap = (((self.busy_until[d] - p.start) * 1e6).round() / 1e6).clamp(0.0, p.service);
        self.busy_until[d] = self.busy_until[d].max(p.end);
        let s = &mut self.summary;
        s.requests += 1;
        s.service_seconds += p.service;
        if overlap > 0.0 {
            s.overlapping += 1;
            s.overlap_seconds += overlap;
        }
        take(p.payload, p.service, overlap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests as (dyno, end, service), in the order given; their overlaps by index.
    fn overlaps(requests: &[(u32, f64, f64)]) -> (Vec<f64>, OverlapSummary) {
        let mut o = Overlaps::new();
        let mut out = vec![f64::NAN; requests.len()];
        let mut take = |i: usize, _s: f64, overlap: f64| out[i] = overlap;
        for (i, &(dyno, end, service)) in requests.iter().enumerate() {
            o.push(dyno, end, service, i, &mut take);
        }
        o.finish(&mut take);
        let summary = o.summary.clone();
        (out, summary)
    }

    #[test]
    fn a_request_sent_while_its_dyno_is_busy_overlaps_by_the_wait() {
        // Dyno 0 serves 0..1; a request sent at 0.5 ends at 1.5 after service=1: it waited
        // 0.5. Dyno 1's requests do not touch dyno 0's. A request ending before its
        // predecessor's end but read after it (a drain) is put back in order.
        let (o, s) = overlaps(&[
            (0, 1.0, 1.0),
            (1, 1.2, 1.0),
            (0, 1.5, 1.0),
            (0, 3.0, 0.5),
            (1, 2.0, 1.5),
        ]);
        assert_eq!(o, vec![0.0, 0.0, 0.5, 0.0, 0.7]);
        assert_eq!((s.requests, s.overlapping, s.late), (5, 2, 0));
        assert!((s.overlap_seconds - 1.2).abs() < 1e-12);
        assert!((s.service_seconds - 5.0).abs() < 1e-12);
    }

    #[test]
    fn an_overlap_never_exceeds_the_service_and_late_lines_are_counted() {
        // A long request from 0 to 10 covers a short one from 4 to 5 on the same dyno (read
        // first, as it ended first): the short one, sent later, overlaps by all its service.
        let (o, _) = overlaps(&[(0, 5.0, 1.0), (0, 10.0, 10.0)]);
        assert_eq!(o, vec![1.0, 0.0]);
        // A request starting more than LAG before an end read earlier is not checked.
        let (o, s) = overlaps(&[(0, 100.0, 1.0), (0, 200.0, 1.0), (0, 120.0, 80.0)]);
        assert_eq!(o, vec![0.0, 0.0, 0.0]);
        assert_eq!(s.late, 1);
    }
}
