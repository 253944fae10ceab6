//! Streaming statistics: sums for means, HDR histograms (microsecond resolution, 3 significant
//! digits) for percentiles. Memory is independent of the number of requests.
//!
//! **Recording.** A [`TimeStats`] counts its values by the index of the HDR histogram's bucket
//! they fall in ([`bucket`]), in an array of its own, and builds the `hdrhistogram` histogram
//! from those counts when it is read ([`TimeStats::summary`]): the same histogram, bucket for
//! bucket, as recording each value into it (a test holds the two equal, `==` as the crate
//! defines it: its counts, minimum and maximum). A record is then a few instructions inline,
//! where the crate's `record` is a call that also looks after resizing, clamping and the
//! histogram's own minimum and maximum: on the seed scenario about 70 instructions a value, a
//! value or two a request, a quarter of the direct engine's instructions (issue #36).

use hdrhistogram::Histogram;
use serde::Serialize;

const MICROS: f64 = 1e6;

/// A time of at least 0 s as the histograms hold it: rounded to the nearest microsecond.
/// Through i64, which saturates like u64 past 292,000 years and converts in one instruction.
#[inline]
pub(crate) fn micros(seconds: f64) -> u64 {
    (seconds * MICROS + 0.5) as i64 as u64
}

/// The time a histogram value stands for, in seconds.
#[inline]
pub(crate) fn seconds(micros: u64) -> f64 {
    micros as f64 / MICROS
}

/// The histograms' precision: 3 significant digits, values from 1 (a microsecond) up.
const SIGNIFICANT_DIGITS: u8 = 3;

/// What `hdrhistogram` derives from [`SIGNIFICANT_DIGITS`] and a lowest value of 1: a
/// bucket's sub-buckets (the first power of two at or above 2 × 10^3, 2^11), half of them
/// (2^10), and the leading zeros of a value in the first bucket (64 − 11). A test checks
/// [`bucket`] against the crate's own indexes.
const HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;
const LEADING_ZERO_BASE: u32 = 64 - (HALF_MAGNITUDE + 1);

/// The index of the HDR histogram's bucket that holds `value`, as `hdrhistogram` computes it
/// (`index_for`) for a histogram of [`SIGNIFICANT_DIGITS`] with a lowest value of 1: the
/// power of two above the first bucket's range, then the value's place in that bucket's upper
/// half.
#[inline]
fn bucket(value: u64) -> usize {
    let power = LEADING_ZERO_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub = (value >> power) as usize;
    ((power as usize + 1) << HALF_MAGNITUDE) + sub - (1 << HALF_MAGNITUDE)
}

/// The least value that [`bucket`] puts at `index` (every value of a bucket is recorded as
/// the same one: the histogram keeps its count, and reports it by the bucket's bounds).
fn least_value(index: usize) -> u64 {
    let power = (index >> HALF_MAGNITUDE).saturating_sub(1);
    let sub = if power == 0 {
        index
    } else {
        (index & ((1 << HALF_MAGNITUDE) - 1)) + (1 << HALF_MAGNITUDE)
    };
    (sub as u64) << power
}

/// Mean, percentiles and maximum of a time, in seconds.
#[derive(Debug, Clone, Serialize)]
pub struct TimeSummary {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Accumulates one kind of time (queue time, response time...).
#[derive(Debug, Clone)]
pub struct TimeStats {
    count: u64,
    /// Zeros are counted here and added to the histogram at the end: most requests do not
    /// wait, and a counter is cheaper than a histogram record.
    zeros: u64,
    sum: f64,
    max: f64,
    /// The values above zero, counted by their HDR bucket ([`bucket`]); as long as the
    /// greatest bucket recorded needs, in whole powers of two (as the histogram grows).
    counts: Vec<u64>,
}

impl Default for TimeStats {
    fn default() -> Self {
        TimeStats {
            count: 0,
            zeros: 0,
            sum: 0.0,
            max: 0.0,
            counts: Vec::new(),
        }
    }
}

impl TimeStats {
    #[inline]
    pub fn record(&mut self, seconds: f64) {
        self.count += 1;
        if seconds <= 0.0 {
            self.zeros += 1;
            return;
        }
        self.sum += seconds;
        if seconds > self.max {
            self.max = seconds;
        }
        self.count_value(micros(seconds));
    }

    /// Counts a histogram value (microseconds) in its bucket.
    #[inline]
    fn count_value(&mut self, value: u64) {
        let index = bucket(value);
        match self.counts.get_mut(index) {
            Some(count) => *count += 1,
            None => self.grow_and_count(index),
        }
    }

    /// The first value of a bucket beyond the counts: they grow to the end of its power of
    /// two, as the histogram would.
    #[cold]
    #[inline(never)]
    fn grow_and_count(&mut self, index: usize) {
        let end = ((index >> HALF_MAGNITUDE) + 1) << HALF_MAGNITUDE;
        self.counts.resize(end, 0);
        self.counts[index] += 1;
    }

    /// The histogram of the values above zero: each bucket's count recorded at once, the
    /// greatest first (so that the histogram takes its size once).
    fn histogram(&self) -> Histogram<u64> {
        let mut histogram =
            Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid");
        for (index, &count) in self.counts.iter().enumerate().rev() {
            if count > 0 {
                histogram
                    .record_n(least_value(index), count)
                    .expect("an auto-resizing histogram takes any u64");
            }
        }
        histogram
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Values above zero (e.g. requests that waited at all).
    pub fn positive_count(&self) -> u64 {
        self.count - self.zeros
    }

    /// Adds another set of values to these: the same as having recorded them here (the
    /// histograms' counts add exactly).
    pub fn add(&mut self, other: &TimeStats) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.zeros += other.zeros;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Both sets of values together.
    pub fn merged(&self, other: &TimeStats) -> TimeStats {
        let mut merged = self.clone();
        merged.add(other);
        merged
    }

    /// Summary over every value recorded.
    pub fn summary(&self) -> TimeSummary {
        let mut histogram = self.histogram();
        if self.zeros > 0 {
            histogram
                .record_n(0, self.zeros)
                .expect("0 is always in range");
        }
        summarize(&histogram, self.sum, self.count, self.max)
    }

    /// Summary over the values above zero only (queue time of the requests that waited).
    pub fn positive_summary(&self) -> TimeSummary {
        summarize(&self.histogram(), self.sum, self.positive_count(), self.max)
    }
}

fn summarize(histogram: &Histogram<u64>, sum: f64, count: u64, max: f64) -> TimeSummary {
    if count == 0 {
        return TimeSummary {
            mean: 0.0,
            p50: 0.0,
            p90: 0.0,
            p95: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
        };
    }
    let q = |p: f64| seconds(histogram.value_at_quantile(p));
    TimeSummary {
        mean: sum / count as f64,
        p50: q(0.5),
        p90: q(0.9),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the crate records for these values: the histogram [`TimeStats`] stands for.
    fn recorded(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new(SIGNIFICANT_DIGITS).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    /// Values of every magnitude: uniform in their number of bits, then in the bits.
    fn any_value() -> impl Strategy<Value = u64> {
        (0u32..=64, any::<u64>()).prop_map(|(bits, v)| match bits {
            0 => 0,
            64 => v,
            b => v & ((1u64 << b) - 1),
        })
    }

    #[test]
    fn buckets_are_the_crates_own_at_their_edges() {
        // Every power of two and its neighbours, the first buckets whole, and the greatest.
        let mut values: Vec<u64> = (0..5000).collect();
        for p in 0..64 {
            let v = 1u64 << p;
            values.extend([v - 1, v, v + 1, v | (v >> 1), (v << 1).wrapping_sub(1)]);
        }
        values.extend([u64::MAX, i64::MAX as u64, u64::MAX - 1]);
        for &v in &values {
            let h = recorded(&[v]);
            let i = bucket(v);
            // The crate's bucket of the value is the one whose bounds hold it, and
            // `least_value` names a value of the same bucket: its least.
            assert_eq!(least_value(i), h.lowest_equivalent(v), "value {v}");
            assert_eq!(bucket(h.lowest_equivalent(v)), i, "value {v}");
            assert_eq!(bucket(h.highest_equivalent(v)), i, "value {v}");
            if i > 0 {
                assert_eq!(bucket(least_value(i) - 1), i - 1, "value {v}");
            }
        }
    }

    proptest! {
        /// The histogram built from the counts is the crate's own of the same values: equal as
        /// the crate compares them (every bucket's count, the minimum, the maximum), of the
        /// same size, with the same percentiles.
        #[test]
        fn the_counts_build_the_histogram_the_crate_records(
            values in prop::collection::vec(any_value(), 0..300),
            more in prop::collection::vec(any_value(), 0..50),
        ) {
            let mut stats = TimeStats::default();
            let mut other = TimeStats::default();
            for &v in &values {
                stats.count_value(v);
            }
            for &v in &more {
                other.count_value(v);
            }
            let mut all = values.clone();
            all.extend(&more);
            for (mine, theirs) in [(stats.histogram(), recorded(&values)),
                                   (stats.merged(&other).histogram(), recorded(&all))] {
                prop_assert!(mine == theirs);
                prop_assert_eq!(mine.distinct_values(), theirs.distinct_values());
                prop_assert_eq!(mine.len(), theirs.len());
                for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                    prop_assert_eq!(mine.value_at_quantile(q), theirs.value_at_quantile(q));
                }
            }
        }
    }

    #[test]
    fn zeros_count_in_percentiles() {
        let mut s = TimeStats::default();
        for i in 0..100 {
            s.record(if i < 60 { 0.0 } else { 1.0 });
        }
        let t = s.summary();
        assert_eq!(s.count(), 100);
        assert_eq!(t.p50, 0.0);
        assert!((t.p90 - 1.0).abs() < 1e-3);
        assert!((t.mean - 0.4).abs() < 1e-12);
        let positive = s.positive_summary();
        assert_eq!(s.positive_count(), 40);
        assert!((positive.mean - 1.0).abs() < 1e-12);
        assert!((positive.p50 - 1.0).abs() < 1e-3);
    }

    #[test]
    fn percentiles_of_known_values() {
        let mut s = TimeStats::default();
        for i in 1..=1000 {
            s.record(i as f64 * 1e-3);
        }
        let t = s.summary();
        assert!((t.mean - 0.5005).abs() < 1e-12);
        assert!((t.p50 - 0.5).abs() < 0.5e-3 * 1.001, "p50 {}", t.p50);
        assert!((t.p99 - 0.99).abs() < 0.99e-3 * 1.001, "p99 {}", t.p99);
        assert_eq!(t.max, 1.0);
    }
}
