//! Streaming statistics: sums for means, HDR histograms (microsecond resolution, 3 significant
//! digits) for percentiles. Memory is independent of the number of requests.

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
    histogram: Histogram<u64>,
}

impl Default for TimeStats {
    fn default() -> Self {
        TimeStats {
            count: 0,
            zeros: 0,
            sum: 0.0,
            max: 0.0,
            histogram: Histogram::new(3).expect("3 significant digits is valid"),
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
        // `record` grows the auto-resizing histogram; it fails only past its u64 range.
        let micros = micros(seconds);
        if self.histogram.record(micros).is_err() {
            self.histogram.saturating_record(micros);
        }
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
        self.histogram
            .add(&other.histogram)
            .expect("an auto-resizing histogram takes any values");
        self.count += other.count;
        self.zeros += other.zeros;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Both sets of values together.
    pub fn merged(&self, other: &TimeStats) -> TimeStats {
        let mut histogram = self.histogram.clone();
        histogram
            .add(&other.histogram)
            .expect("an auto-resizing histogram takes any values");
        TimeStats {
            count: self.count + other.count,
            zeros: self.zeros + other.zeros,
            sum: self.sum + other.sum,
            max: self.max.max(other.max),
            histogram,
        }
    }

    /// Summary over every value recorded.
    pub fn summary(&self) -> TimeSummary {
        let mut histogram = self.histogram.clone();
        if self.zeros > 0 {
            histogram
                .record_n(0, self.zeros)
                .expect("0 is always in range");
        }
        summarize(&histogram, self.sum, self.count, self.max)
    }

    /// Summary over the values above zero only (queue time of the requests that waited).
    pub fn positive_summary(&self) -> TimeSummary {
        summarize(&self.histogram, self.sum, self.positive_count(), self.max)
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
