//! Streaming statistics: sums for means, HDR histograms (microsecond resolution, 3 significant
//! digits) for percentiles. Memory is independent of the number of requests.
//!
//! **The histograms are `hdrhistogram`'s, held as counts.** A [`TimeStats`] counts its values
//! by the index of the bucket that `hdrhistogram`'s histogram of 3 significant digits puts
//! them in ([`bucket`]), in an array laid out as the crate lays out its own, and reads its
//! percentiles off that array as the crate's `value_at_quantile` reads them off its own
//! ([`TimeStats::summary`]). Tests hold the two to the crate, to the bit: the buckets' bounds
//! at every power of two, and every figure of the summaries of random times against the
//! crate's histogram of the same times. Why not the crate's histogram itself: its `record` is
//! a call that also looks after resizing, clamping and the histogram's own minimum and
//! maximum, about 70 instructions a value where counting is a few inline (a fifth of the
//! direct engine's instructions on the seed scenario, issue #36); and it takes counts only a
//! value at a time, so that a histogram built from the counts when read cost a few hundred
//! thousand instructions a summary, more than a short run's requests.

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
const SIGNIFICANT_DIGITS: u32 = 3;

/// What `hdrhistogram` derives from [`SIGNIFICANT_DIGITS`] and a lowest value of 1: a
/// bucket's sub-buckets (the first power of two at or above 2 × 10^3, 2^11), half of them
/// (2^10), and the leading zeros of a value in the first bucket (64 − 11). A test checks
/// [`bucket`] against the crate's own indexes.
const HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;
const LEADING_ZERO_BASE: u32 = 64 - (HALF_MAGNITUDE + 1);
const _: () = assert!(
    1 << HALF_MAGNITUDE < 2 * 10u64.pow(SIGNIFICANT_DIGITS)
        && 2 * 10u64.pow(SIGNIFICANT_DIGITS) <= 1 << (HALF_MAGNITUDE + 1)
);

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

/// The power of two of the bucket at `index`: its values are that many bits coarser than a
/// microsecond (the first two halves of sub-buckets, below 2^11, are exact).
#[inline]
fn power(index: usize) -> u32 {
    (index >> HALF_MAGNITUDE).saturating_sub(1) as u32
}

/// The least value that [`bucket`] puts at `index`.
fn least_value(index: usize) -> u64 {
    let power = power(index);
    let sub = if power == 0 {
        index
    } else {
        (index & ((1 << HALF_MAGNITUDE) - 1)) + (1 << HALF_MAGNITUDE)
    };
    (sub as u64) << power
}

/// The greatest value that [`bucket`] puts at `index`: what the histogram reports for a
/// percentile that falls in that bucket (`highest_equivalent`).
fn greatest_value(index: usize) -> u64 {
    least_value(index).saturating_add(1 << power(index)) - 1
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
    #[inline(always)]
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

    /// The values at `QUANTILES`, counting `zeros` zeros with the values above zero, as the
    /// crate's `value_at_quantile` reads them off its histogram of the same values: the
    /// bucket where the count up to it first reaches the quantile's share of the values
    /// (rounded up, at least 1), reported as the greatest value of the bucket; 0 when there is
    /// none. One pass over the counts for all of them (a test holds them to the crate's).
    fn values_at_quantiles(&self, zeros: u64) -> [u64; QUANTILES.len()] {
        let total = zeros + self.counts.iter().sum::<u64>();
        let mut values = [0; QUANTILES.len()];
        if total == 0 {
            return values;
        }
        let mut next = 0;
        let mut seen = zeros;
        let mut index = 0;
        for (q, value) in QUANTILES.iter().zip(values.iter_mut()) {
            let target = ((q * total as f64).ceil() as u64).max(1);
            // The bucket where the running count reaches the target (zeros are bucket 0's).
            while seen < target && next < self.counts.len() {
                seen += self.counts[next];
                index = next;
                next += 1;
            }
            if seen >= target {
                *value = greatest_value(index);
            }
        }
        values
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
        summarize(
            || self.values_at_quantiles(self.zeros),
            self.sum,
            self.count,
            self.max,
        )
    }

    /// Summary over the values above zero only (queue time of the requests that waited).
    pub fn positive_summary(&self) -> TimeSummary {
        summarize(
            || self.values_at_quantiles(0),
            self.sum,
            self.positive_count(),
            self.max,
        )
    }
}

/// The quantiles a [`TimeSummary`] reports, ascending.
const QUANTILES: [f64; 5] = [0.5, 0.9, 0.95, 0.99, 0.999];

fn summarize(
    values_at_quantiles: impl FnOnce() -> [u64; QUANTILES.len()],
    sum: f64,
    count: u64,
    max: f64,
) -> TimeSummary {
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
    let [p50, p90, p95, p99, p999] = values_at_quantiles().map(seconds);
    TimeSummary {
        mean: sum / count as f64,
        p50,
        p90,
        p95,
        p99,
        p999,
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;

    /// The crate's histogram of these values (microseconds).
    fn recorded(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new(SIGNIFICANT_DIGITS as u8).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    /// The summary of these times as the crate's histogram gives it: each time above zero
    /// recorded into it, the zeros added at the end, the percentiles its `value_at_quantile`;
    /// the mean of the groups' sums (each group summed in order, as a `TimeStats` sums).
    fn summary_by_the_crate(groups: &[&[f64]], with_zeros: bool) -> TimeSummary {
        let sum: f64 = groups
            .iter()
            .map(|g| g.iter().filter(|&&t| t > 0.0).fold(0.0, |a, b| a + b))
            .fold(0.0, |a, b| a + b);
        let times: Vec<f64> = groups.concat();
        let positive: Vec<f64> = times.iter().copied().filter(|&t| t > 0.0).collect();
        let mut h = recorded(&positive.iter().map(|&t| micros(t)).collect::<Vec<_>>());
        let zeros = (times.len() - positive.len()) as u64;
        if with_zeros && zeros > 0 {
            h.record_n(0, zeros).unwrap();
        }
        let count = if with_zeros {
            times.len()
        } else {
            positive.len()
        } as u64;
        if count == 0 {
            return summarize(|| [0; 5], 0.0, 0, 0.0);
        }
        let q = |p: f64| seconds(h.value_at_quantile(p));
        TimeSummary {
            mean: sum / count as f64,
            p50: q(0.5),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: positive.iter().copied().fold(0.0, f64::max),
        }
    }

    fn same(a: &TimeSummary, b: &TimeSummary) -> bool {
        [a.mean, a.p50, a.p90, a.p95, a.p99, a.p999, a.max]
            .iter()
            .zip([b.mean, b.p50, b.p90, b.p95, b.p99, b.p999, b.max])
            .all(|(x, y)| x.to_bits() == y.to_bits())
    }

    /// Times of every magnitude, from a nanosecond (which rounds to 0 µs) to years, and zeros.
    fn any_time() -> impl Strategy<Value = f64> {
        prop_oneof![
            1 => Just(0.0),
            8 => (-9.0f64..9.0).prop_map(|e| 10f64.powf(e)),
        ]
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
            // The crate's bucket of the value is the one whose bounds hold it: `least_value`
            // and `greatest_value` are its bounds, and the crate reads that bucket's
            // percentiles as its greatest value.
            assert_eq!(least_value(i), h.lowest_equivalent(v), "value {v}");
            assert_eq!(
                greatest_value(i),
                h.highest_equivalent(least_value(i)),
                "value {v}"
            );
            assert_eq!(greatest_value(i), h.value_at_quantile(0.5), "value {v}");
            assert_eq!(bucket(least_value(i)), i, "value {v}");
            assert_eq!(bucket(greatest_value(i)), i, "value {v}");
            if i > 0 {
                assert_eq!(bucket(least_value(i) - 1), i - 1, "value {v}");
            }
        }
    }

    proptest! {
        /// Every figure of the summaries (with the zeros and without) is the one the crate's
        /// histogram of the same times gives, to the bit; and so for two sets merged.
        #[test]
        fn summaries_are_the_crates_to_the_bit(
            times in prop::collection::vec(any_time(), 0..300),
            more in prop::collection::vec(any_time(), 0..50),
        ) {
            let mut stats = TimeStats::default();
            let mut other = TimeStats::default();
            times.iter().for_each(|&t| stats.record(t));
            more.iter().for_each(|&t| other.record(t));
            let merged = stats.merged(&other);
            let groups = [&times[..], &more[..]];
            for (mine, theirs) in [(&stats, &groups[..1]), (&merged, &groups[..])] {
                prop_assert!(same(&mine.summary(), &summary_by_the_crate(theirs, true)));
                prop_assert!(same(&mine.positive_summary(), &summary_by_the_crate(theirs, false)));
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
