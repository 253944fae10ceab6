//! Requests per interval and requests in service per interval, from lines in any order, in
//! bounded memory.
//!
//! Intervals are aligned on multiples of their width since the epoch (1 min intervals start on
//! the minute). Without a width given, counting starts at 1 s and, whenever the log's span
//! would need more than [`MAX_BINS`] intervals, the width grows along a ladder of round widths
//! (1 s, 5 s, 10 s, 30 s, 1 min, 5 min, 10 min, 30 min, 1 h, 6 h, 1 day, then doubling), each a
//! multiple of the one before, so intervals merge exactly. At the end the width is the
//! smallest of the ladder that shows the span in at most [`TARGET_BINS`] intervals.
//!
//! Requests in service: each request adds the part of `[time - service, time]` that falls in
//! each interval; divided by the width, the mean number in service over the interval. A
//! request covering many intervals costs O(1): the intervals it covers whole are kept as a
//! difference array and added up when the width changes or at the end.

/// Most intervals kept while reading (when the width is chosen automatically).
pub const MAX_BINS: usize = 20_000;
/// Most intervals a given width may make.
pub const MAX_BINS_GIVEN: usize = 1_000_000;
/// Intervals the span is shown in, at most, with an automatic width.
pub const TARGET_BINS: usize = 200;

const LADDER: [f64; 11] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 21_600.0, 86_400.0,
];

/// The width after `w` on the ladder.
fn next_width(w: f64) -> f64 {
    LADDER
        .iter()
        .copied()
        .find(|l| *l > w * (1.0 + 1e-9))
        .unwrap_or(w * 2.0)
}

#[derive(Debug, Clone)]
pub struct Series {
    width: f64,
    given: bool,
    /// The interval index (time / width, floored) of the first element.
    origin: i64,
    counts: Vec<u64>,
    busy: Vec<f64>,
    /// Difference array of intervals covered whole by a request: +1 at the first, -1 after the last.
    whole: Vec<i64>,
}

/// One interval of the finished series.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Its start, seconds since the epoch.
    pub start: f64,
    /// Requests whose line (end) falls in it.
    pub requests: u64,
    /// Mean number of requests in service over it.
    pub in_service: f64,
}

impl Series {
    /// A series with a given width (seconds), or chosen automatically.
    pub fn new(width: Option<f64>) -> Series {
        Series {
            width: width.unwrap_or(LADDER[0]),
            given: width.is_some(),
            origin: 0,
            counts: Vec::new(),
            busy: Vec::new(),
            whole: Vec::new(),
        }
    }

    pub fn width(&self) -> f64 {
        self.width
    }

    fn index(&self, t: f64) -> i64 {
        (t / self.width).floor() as i64
    }

    /// Makes room for times `lo..=hi`; Err when a given width would need too many intervals.
    fn reserve(&mut self, lo: f64, hi: f64) -> Result<(), usize> {
        loop {
            let (a, b) = (self.index(lo), self.index(hi));
            let (new_lo, new_hi) = if self.counts.is_empty() {
                (a, b)
            } else {
                (
                    a.min(self.origin),
                    b.max(self.origin + self.counts.len() as i64 - 1),
                )
            };
            let needed = (new_hi as i128 - new_lo as i128 + 1) as u128;
            let limit = if self.given { MAX_BINS_GIVEN } else { MAX_BINS };
            if needed <= limit as u128 {
                let needed = needed as usize;
                if self.counts.is_empty() {
                    self.origin = new_lo;
                    self.counts = vec![0; needed];
                    self.busy = vec![0.0; needed];
                    self.whole = vec![0; needed + 1];
                    return Ok(());
                }
                let mut front = (self.origin - new_lo) as usize;
                let mut needed = needed;
                if front > 0 {
                    // Room to spare before the start, so that a log read backwards does not
                    // shift the arrays at every line.
                    let slack = (self.counts.len() / 2).max(64).min(limit - needed);
                    front += slack;
                    needed += slack;
                    let new_lo = new_lo - slack as i64;
                    self.counts.splice(0..0, std::iter::repeat(0).take(front));
                    self.busy.splice(0..0, std::iter::repeat(0.0).take(front));
                    self.whole.splice(0..0, std::iter::repeat(0).take(front));
                    self.origin = new_lo;
                }
                self.counts.resize(needed, 0);
                self.busy.resize(needed, 0.0);
                self.whole.resize(needed + 1, 0);
                return Ok(());
            }
            if self.given {
                return Err(needed.min(usize::MAX as u128) as usize);
            }
            self.coarsen(next_width(self.width));
        }
    }

    /// A request ending at `end` that was in service from `start` (None: no service time).
    pub fn add(&mut self, end: f64, start: Option<f64>) -> Result<(), usize> {
        let start = start.filter(|s| *s < end);
        self.reserve(start.unwrap_or(end), end)?;
        let k = (self.index(end) - self.origin) as usize;
        self.counts[k] += 1;
        if let Some(s) = start {
            let ks = (self.index(s) - self.origin) as usize;
            if ks == k {
                self.busy[k] += end - s;
            } else {
                let w = self.width;
                self.busy[ks] += (self.origin + ks as i64 + 1) as f64 * w - s;
                self.busy[k] += end - (self.origin + k as i64) as f64 * w;
                if k > ks + 1 {
                    self.whole[ks + 1] += 1;
                    self.whole[k] -= 1;
                }
            }
        }
        Ok(())
    }

    /// Adds the whole-interval coverage into `busy`.
    fn settle(&mut self) {
        let mut covering = 0i64;
        for (k, d) in self.whole.iter_mut().enumerate().take(self.busy.len()) {
            covering += *d;
            *d = 0;
            self.busy[k] += covering as f64 * self.width;
        }
        if let Some(last) = self.whole.last_mut() {
            *last = 0;
        }
    }

    /// Merges intervals into ones `width` wide (a multiple of the current width).
    fn coarsen(&mut self, width: f64) {
        self.settle();
        let factor = (width / self.width).round() as i64;
        let new_origin = self.origin.div_euclid(factor);
        let new_last = (self.origin + self.counts.len() as i64 - 1).div_euclid(factor);
        let len = (new_last - new_origin + 1).max(0) as usize;
        let mut counts = vec![0; len];
        let mut busy = vec![0.0; len];
        for (i, (c, b)) in self.counts.iter().zip(&self.busy).enumerate() {
            let j = ((self.origin + i as i64).div_euclid(factor) - new_origin) as usize;
            counts[j] += c;
            busy[j] += b;
        }
        self.origin = new_origin;
        self.counts = counts;
        self.busy = busy;
        self.whole = vec![0; len + 1];
        self.width = width;
    }

    /// The first and last intervals with anything in them.
    fn occupied(&self) -> Option<(usize, usize)> {
        let used = |(c, b): (&u64, &f64)| *c > 0 || *b > 0.0;
        let first = self.counts.iter().zip(&self.busy).position(used)?;
        let last = self.counts.iter().zip(&self.busy).rposition(used)?;
        Some((first, last))
    }

    /// The requests per interval as counted (no coarsening to [`TARGET_BINS`]): the width,
    /// the start of the first interval with a request (seconds since the epoch), and the
    /// counts from it to the last with one.
    pub fn counts(&self) -> (f64, f64, Vec<u64>) {
        let w = self.width;
        let Some(first) = self.counts.iter().position(|c| *c > 0) else {
            return (w, 0.0, Vec::new());
        };
        let last = self.counts.iter().rposition(|c| *c > 0).expect("one is");
        (
            w,
            (self.origin + first as i64) as f64 * w,
            self.counts[first..=last].to_vec(),
        )
    }

    /// The width and the intervals from the first to the last with anything in them (an
    /// automatic width grown until they are at most [`TARGET_BINS`]).
    pub fn finish(mut self) -> (f64, Vec<Interval>) {
        self.settle();
        while !self.given && self.occupied().is_some_and(|(a, b)| b - a >= TARGET_BINS) {
            self.coarsen(next_width(self.width));
        }
        let w = self.width;
        let Some((first, last)) = self.occupied() else {
            return (w, Vec::new());
        };
        let intervals = (first..=last)
            .map(|k| Interval {
                start: (self.origin + k as i64) as f64 * w,
                requests: self.counts[k],
                in_service: self.busy[k] / w,
            })
            .collect();
        (w, intervals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_service_in_given_intervals() {
        let mut s = Series::new(Some(10.0));
        // ends at 25 after 20 s in service: 5 s of [0,10), 10 of [10,20), 5 of [20,30)
        s.add(25.0, Some(5.0)).unwrap();
        s.add(12.0, Some(11.0)).unwrap();
        s.add(38.0, None).unwrap();
        let (w, iv) = s.finish();
        assert_eq!(w, 10.0);
        let starts: Vec<f64> = iv.iter().map(|i| i.start).collect();
        assert_eq!(starts, [0.0, 10.0, 20.0, 30.0]);
        let reqs: Vec<u64> = iv.iter().map(|i| i.requests).collect();
        assert_eq!(reqs, [0, 1, 1, 1]);
        let busy: Vec<f64> = iv.iter().map(|i| i.in_service).collect();
        assert_eq!(busy, [0.5, 1.1, 0.5, 0.0]);
    }

    #[test]
    fn order_does_not_matter() {
        let points: Vec<(f64, f64)> = (0..500)
            .map(|i| {
                (
                    1000.0 + (i * 7919 % 500) as f64 * 3.7,
                    (i % 13) as f64 * 1.3,
                )
            })
            .collect();
        let run = |pts: &[(f64, f64)]| {
            let mut s = Series::new(None);
            for (t, d) in pts {
                s.add(*t, Some(t - d)).unwrap();
            }
            s.finish()
        };
        let forward = run(&points);
        let mut reversed = points.clone();
        reversed.reverse();
        let backward = run(&reversed);
        assert_eq!(forward.0, backward.0);
        for (a, b) in forward.1.iter().zip(&backward.1) {
            assert_eq!((a.start, a.requests), (b.start, b.requests));
            assert!((a.in_service - b.in_service).abs() < 1e-9);
        }
        let total: u64 = forward.1.iter().map(|i| i.requests).sum();
        assert_eq!(total, 500);
        let busy: f64 = forward.1.iter().map(|i| i.in_service * forward.0).sum();
        let expected: f64 = points.iter().map(|(_, d)| d).sum();
        assert!((busy - expected).abs() < 1e-6, "{busy} vs {expected}");
    }

    #[test]
    fn automatic_width_grows_along_the_ladder() {
        let mut s = Series::new(None);
        // a day of one request a minute
        for m in 0..1440 {
            s.add(
                1_400_000_000.0 + m as f64 * 60.0,
                Some(1_400_000_000.0 + m as f64 * 60.0 - 30.0),
            )
            .unwrap();
        }
        let (w, iv) = s.finish();
        assert_eq!(w, 600.0, "a day in 10 min intervals: 144 of them");
        assert!(iv.len() <= TARGET_BINS + 1);
        assert_eq!(iv.iter().map(|i| i.requests).sum::<u64>(), 1440);
        // each 10 min holds 10 requests of 30 s: 300 s busy, 0.5 in service
        let mid = &iv[iv.len() / 2];
        assert_eq!(mid.requests, 10);
        assert!((mid.in_service - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_given_width_too_fine_is_an_error() {
        let mut s = Series::new(Some(0.001));
        s.add(0.0, None).unwrap();
        assert!(s.add(10_000.0, None).is_err());
    }

    #[test]
    fn far_outliers_keep_memory_bounded() {
        let mut s = Series::new(None);
        s.add(1.0e9, None).unwrap();
        s.add(2.0e11, Some(1.0e11)).unwrap();
        assert!(s.counts.len() <= MAX_BINS);
        let (_, iv) = s.finish();
        assert!(iv.len() <= TARGET_BINS + 1);
        assert_eq!(iv.iter().map(|i| i.requests).sum::<u64>(), 2);
    }
}
