//! A metric as an autoscaler is shown it: observations cut into buckets of time, aggregated
//! over the rule's window once the platform would report them.
//!
//! Bucket k holds the observations made in [k·w, (k+1)·w), w the window divided into at most
//! [`MAX_BUCKETS`] buckets no wider than the rule's interval. At time `now` the rule sees the
//! buckets that ended at least `delay` earlier, as many as make up the window: with e =
//! ⌊(now − delay) / w⌋, buckets e − n to e − 1 (n buckets to the window). The buckets live in
//! a ring just long enough for the window, the delay and the bucket being filled, each a
//! count and a sum (for a mean) and, for a quantile, an HDR histogram (microsecond resolution,
//! 3 significant digits, as [`crate::stats`]): memory depends on the window and the delay,
//! never on the number of observations.

use super::{Observed, Reading, Statistic};
use crate::stats::{micros, seconds};
use hdrhistogram::Histogram;

/// Most buckets a window is cut into. An hour in buckets of a minute, as Heroku's rule reads
/// it; a histogram of times up to 30 s holds about 128 kB, so a window holds at most 8 MB.
pub const MAX_BUCKETS: usize = 60;

/// Most buckets the ring may hold (window, delay and the bucket being filled).
pub const MAX_SLOTS: usize = 4096;

#[derive(Clone)]
struct Bucket {
    /// Which bucket it holds (its start is `index` × width); `i64::MIN` while unused.
    index: i64,
    count: u64,
    sum: f64,
    /// For a quantile only.
    histogram: Option<Histogram<u64>>,
}

impl Bucket {
    fn empty(quantile: bool) -> Bucket {
        Bucket {
            index: i64::MIN,
            count: 0,
            sum: 0.0,
            histogram: quantile.then(new_histogram),
        }
    }

    /// Empties it to hold bucket `index`, keeping the histogram's memory.
    fn reuse(&mut self, index: i64) {
        self.index = index;
        self.count = 0;
        self.sum = 0.0;
        if let Some(h) = &mut self.histogram {
            h.reset();
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// A rule's metric: what was observed, bucketed, and what the rule is shown of it.
#[derive(Clone)]
pub struct MetricWindow {
    statistic: Statistic,
    /// Seconds a bucket covers.
    width: f64,
    /// Buckets in the window.
    span: i64,
    delay: f64,
    ring: Vec<Bucket>,
    /// Where a quantile's buckets are merged, kept between reads for its memory.
    merged: Option<Histogram<u64>>,
}

/// The layout, not the histograms' counts.
impl std::fmt::Debug for MetricWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricWindow")
            .field("statistic", &self.statistic)
            .field("width", &self.width)
            .field("span", &self.span)
            .field("delay", &self.delay)
            .field("slots", &self.ring.len())
            .finish_non_exhaustive()
    }
}

impl MetricWindow {
    /// Buckets in the window for a rule evaluated every `interval` seconds, and their width.
    fn layout(reading: &Reading, interval: f64) -> (i64, f64) {
        let span = (reading.window / interval)
            .ceil()
            .clamp(1.0, MAX_BUCKETS as f64) as i64;
        (span, reading.window / span as f64)
    }

    /// The buckets the ring needs: the window's, those reported late, the one being filled and
    /// one for the rounding of the delay.
    pub fn slots(reading: &Reading, interval: f64) -> usize {
        let (span, width) = Self::layout(reading, interval);
        let late = (reading.delay / width).ceil();
        if late > MAX_SLOTS as f64 {
            return usize::MAX;
        }
        span as usize + late as usize + 2
    }

    /// An empty window for `reading`, read every `interval` seconds. The caller keeps
    /// [`Self::slots`] within [`MAX_SLOTS`].
    pub fn new(reading: &Reading, interval: f64) -> MetricWindow {
        let (span, width) = Self::layout(reading, interval);
        let slots = Self::slots(reading, interval);
        debug_assert!(slots <= MAX_SLOTS, "{slots} buckets");
        let quantile = matches!(reading.statistic, Statistic::Quantile(_));
        MetricWindow {
            statistic: reading.statistic,
            width,
            span,
            delay: reading.delay,
            ring: vec![Bucket::empty(quantile); slots],
            merged: quantile.then(new_histogram),
        }
    }

    /// The bucket for time `t`, emptied first if it held an older one; None when `t` is older
    /// than anything the ring still holds (it could never be shown).
    #[inline]
    fn bucket(&mut self, t: f64) -> Option<&mut Bucket> {
        let index = (t / self.width).floor() as i64;
        let slot = index.rem_euclid(self.ring.len() as i64) as usize;
        let bucket = &mut self.ring[slot];
        if bucket.index != index {
            if bucket.index > index {
                return None;
            }
            bucket.reuse(index);
        }
        Some(bucket)
    }

    /// One observation at time `t`: a time in seconds or a fraction, at least 0.
    #[inline]
    pub fn record(&mut self, t: f64, value: f64) {
        let value = value.max(0.0);
        if let Some(bucket) = self.bucket(t) {
            bucket.count += 1;
            bucket.sum += value;
            if let Some(h) = &mut bucket.histogram {
                let v = micros(value);
                if h.record(v).is_err() {
                    h.saturating_record(v);
                }
            }
        }
    }

    /// `count` observations at time `t` adding up to `total`, for a mean (a histogram cannot
    /// take them: a window read as a quantile must be given each observation).
    pub fn record_total(&mut self, t: f64, total: f64, count: u64) {
        debug_assert!(
            self.statistic == Statistic::Mean,
            "a quantile needs each observation"
        );
        if let Some(bucket) = self.bucket(t) {
            bucket.count += count;
            bucket.sum += total.max(0.0);
        }
    }

    /// What a rule evaluated at `now` is shown: the statistic over the window that ended
    /// `delay` or more before `now` (and not before the run's start).
    pub fn read(&mut self, now: f64) -> Observed {
        let end = ((now - self.delay) / self.width).floor() as i64;
        let start = end.saturating_sub(self.span);
        let slots = self.ring.len() as i64;
        let mut samples = 0;
        let mut sum = 0.0;
        if let Some(m) = &mut self.merged {
            m.reset();
        }
        for index in start..end {
            let bucket = &self.ring[index.rem_euclid(slots) as usize];
            if bucket.index != index || bucket.count == 0 {
                continue;
            }
            samples += bucket.count;
            sum += bucket.sum;
            if let (Some(m), Some(h)) = (&mut self.merged, &bucket.histogram) {
                m.add(h)
                    .expect("an auto-resizing histogram takes any values");
            }
        }
        let value = (samples > 0).then(|| match self.statistic {
            Statistic::Mean => sum / samples as f64,
            Statistic::Quantile(q) => seconds(
                self.merged
                    .as_ref()
                    .expect("a quantile")
                    .value_at_quantile(q),
            ),
        });
        Observed { value, samples }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::Metric;
    use proptest::prelude::*;

    fn reading(statistic: Statistic, window: f64, delay: f64) -> Reading {
        Reading {
            metric: Metric::QueueTime,
            statistic,
            window,
            delay,
        }
    }

    /// The quantile as the window defines it: the smallest value with at least q of the
    /// values at or below it (rank ⌈q·n⌉).
    fn exact_quantile(values: &mut [f64], q: f64) -> f64 {
        values.sort_by(f64::total_cmp);
        let rank = ((q * values.len() as f64).ceil() as usize).max(1);
        values[rank - 1]
    }

    proptest! {
        /// The window's p95 against a sorted array of the same times: within the histogram's
        /// precision (3 significant digits, times rounded to the microsecond).
        #[test]
        fn p95_matches_a_sorted_array(
            times in prop::collection::vec((0.0f64..60.0, 0.0f64..5.0), 1..400),
            q in prop::sample::select(vec![0.5, 0.9, 0.95, 0.99]),
        ) {
            let mut w = MetricWindow::new(&reading(Statistic::Quantile(q), 60.0, 0.0), 60.0);
            for &(t, v) in &times {
                w.record(t, v);
            }
            let seen = w.read(60.0);
            let mut values: Vec<f64> = times.iter().map(|&(_, v)| v).collect();
            let exact = exact_quantile(&mut values, q);
            let got = seen.value.expect("observations");
            prop_assert_eq!(seen.samples, times.len() as u64);
            prop_assert!(
                (got - exact).abs() <= exact * 1e-3 + 1e-6,
                "p{} {} against {}", q * 100.0, got, exact
            );
        }

        /// Over many buckets and evaluations, each read is the quantile of exactly the
        /// observations in its window, whatever fell out of the ring before.
        #[test]
        fn each_read_sees_its_window_only(
            times in prop::collection::vec((0.0f64..600.0, 0.0f64..2.0), 1..600),
            delay in prop::sample::select(vec![0.0, 10.0, 25.0]),
        ) {
            let mut times = times;
            times.sort_by(|a, b| a.0.total_cmp(&b.0));
            let r = reading(Statistic::Quantile(0.95), 60.0, delay);
            let mut w = MetricWindow::new(&r, 10.0);
            let mut next = 0;
            for k in 1..=60 {
                let now = f64::from(k) * 10.0;
                while next < times.len() && times[next].0 < now {
                    w.record(times[next].0, times[next].1);
                    next += 1;
                }
                let seen = w.read(now);
                // Buckets of 10 s; those ending at or before now − delay, six of them.
                let end = ((now - delay) / 10.0).floor() * 10.0;
                let mut inside: Vec<f64> = times
                    .iter()
                    .filter(|&&(t, _)| t >= end - 60.0 && t < end)
                    .map(|&(_, v)| v)
                    .collect();
                prop_assert_eq!(seen.samples, inside.len() as u64);
                if inside.is_empty() {
                    prop_assert_eq!(seen.value, None);
                } else {
                    let exact = exact_quantile(&mut inside, 0.95);
                    let got = seen.value.expect("observations");
                    prop_assert!((got - exact).abs() <= exact * 1e-3 + 1e-6, "{} against {}", got, exact);
                }
            }
        }
    }

    #[test]
    fn a_bucket_is_shown_once_the_delay_has_passed() {
        let mut w = MetricWindow::new(&reading(Statistic::Mean, 10.0, 10.0), 10.0);
        w.record(3.0, 0.5);
        assert_eq!(w.read(10.0).value, None, "not reported yet");
        assert_eq!(w.read(19.9).value, None);
        assert_eq!(w.read(20.0).value, Some(0.5));
        assert_eq!(w.read(29.9).value, Some(0.5));
        assert_eq!(w.read(30.0).value, None, "out of the window");
    }

    #[test]
    fn a_mean_of_reports_given_one_by_one_or_per_tick() {
        let r = reading(Statistic::Mean, 60.0, 0.0);
        let mut one = MetricWindow::new(&r, 15.0);
        let mut tick = MetricWindow::new(&r, 15.0);
        for (t, values) in [(5.0, [0.2, 0.4, 0.9]), (20.0, [0.1, 0.1, 0.1])] {
            for v in values {
                one.record(t, v);
            }
            tick.record_total(t, values.iter().sum(), 3);
        }
        let (a, b) = (one.read(60.0), tick.read(60.0));
        assert_eq!(a.samples, 6);
        assert!((a.value.unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(a.samples, b.samples);
        assert!((a.value.unwrap() - b.value.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn memory_is_the_ring_whatever_the_number_of_observations() {
        let r = reading(Statistic::Quantile(0.95), 3600.0, 0.0);
        let mut w = MetricWindow::new(&r, 60.0);
        assert_eq!(
            w.ring.len(),
            62,
            "an hour of minutes, the one being filled, one spare"
        );
        // A day at 50 requests per second.
        for i in 0..4_320_000u32 {
            let t = f64::from(i) * 0.02;
            w.record(t, 0.1 + (t % 7.0) * 0.01);
        }
        assert_eq!(w.ring.len(), 62);
        let seen = w.read(86_400.0);
        assert_eq!(seen.samples, 180_000);
        assert!((seen.value.unwrap() - 0.166).abs() < 0.002);
    }

    #[test]
    fn buckets_are_no_wider_than_the_interval_and_at_most_sixty_to_a_window() {
        let r = |window| reading(Statistic::Mean, window, 0.0);
        assert_eq!(MetricWindow::layout(&r(3600.0), 60.0), (60, 60.0));
        assert_eq!(MetricWindow::layout(&r(3600.0), 15.0), (60, 60.0));
        assert_eq!(MetricWindow::layout(&r(10.0), 10.0), (1, 10.0));
        assert_eq!(MetricWindow::layout(&r(10.0), 60.0), (1, 10.0));
        assert_eq!(MetricWindow::layout(&r(300.0), 15.0), (20, 15.0));
        let late = reading(Statistic::Mean, 10.0, 1e9);
        assert_eq!(MetricWindow::slots(&late, 10.0), usize::MAX);
    }

    #[test]
    fn an_observation_too_old_for_the_ring_is_dropped() {
        let mut w = MetricWindow::new(&reading(Statistic::Mean, 10.0, 0.0), 10.0);
        w.record(100.0, 1.0);
        // The ring has 3 buckets: 70 s would land in the slot of 100 s.
        w.record(70.0, 5.0);
        assert_eq!(w.read(110.0).value, Some(1.0));
    }
}
