use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use crate::text_file::{self, LineError};
use crate::units::{parse_duration, time_unit_seconds};
use rand::Rng;
use std::io::BufRead;
use std::path::Path;

/// Resamples (with replacement) service times read from a text file: one value a line,
/// either with a unit (`46ms`) or a bare number in `unit` (default seconds). Blank lines and
/// lines starting with `#` are skipped; a first line that is not a number is taken as a header.
#[derive(Debug)]
pub struct Empirical {
    sorted: Vec<f64>,
    mean: f64,
    second_moment: f64,
}

/// The largest sample file read (1 GiB): a path to a device or a huge log is an error, not a
/// hang that eats memory.
const MAX_FILE_BYTES: u64 = 1 << 30;
const MAX_BYTES: text_file::MaxBytes<'static> =
    Some((MAX_FILE_BYTES, "a sample file may hold (1 GiB)"));
/// The most service times kept (10⁷, 80 MB), shared by every replication.
const MAX_SAMPLES: usize = 10_000_000;

pub fn build(p: &Params, base_dir: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let file: String = p.require("file", "a path to a file of service times")?;
    let unit = match p.get::<String>("unit")? {
        None => 1.0,
        Some(u) => time_unit_seconds(u.trim()).ok_or_else(|| {
            p.error(
                "unit",
                format!("expected a time unit such as ms or s, got {u:?}"),
            )
        })?,
    };
    let path = base_dir.join(&file);
    let reader = text_file::open(p, "file", &path, "service times", MAX_BYTES)?;
    read_samples(reader, unit)
        .and_then(|values| Empirical::new(values).map_err(|message| (0, message)))
        .map_err(|e| text_file::error(p, "file", &path, e))
        .map(|d| Box::new(d) as Box<dyn ServiceDistribution>)
}

/// Reads service times a line at a time, within the limits above; an error comes with its
/// line number (0 for the file as a whole).
fn read_samples(reader: impl BufRead, unit: f64) -> std::result::Result<Vec<f64>, LineError> {
    let mut values = Vec::new();
    text_file::for_each_line(reader, MAX_BYTES, |number, line| {
        let value = match line.parse::<f64>() {
            Ok(v) => Some(v * unit),
            Err(_) => parse_duration(line).filter(|_| line.ends_with(|c: char| c.is_alphabetic())),
        };
        match value {
            Some(v) if v.is_finite() && v >= 0.0 => values.push(v),
            Some(v) => return Err(format!("service times must be >= 0, got {v}")),
            None if values.is_empty() && number == 1 => return Ok(()), // header
            None => return Err(format!("expected a duration, got {line:?}")),
        }
        if values.len() > MAX_SAMPLES {
            return Err(format!(
                "more than {MAX_SAMPLES} service times; a sample file may hold that many"
            ));
        }
        Ok(())
    })?;
    Ok(values)
}

impl Empirical {
    pub fn new(mut values: Vec<f64>) -> std::result::Result<Self, String> {
        if values.is_empty() {
            return Err("no service times in the file".into());
        }
        values.sort_by(f64::total_cmp);
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let second_moment = values.iter().map(|v| v * v).sum::<f64>() / n;
        if mean <= 0.0 {
            return Err("all service times are zero".into());
        }
        Ok(Empirical {
            sorted: values,
            mean,
            second_moment,
        })
    }
}

impl ServiceDistribution for Empirical {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.sorted[rng.random_range(0..self.sorted.len())]
    }
    fn mean(&self) -> f64 {
        self.mean
    }
    fn second_moment(&self) -> f64 {
        self.second_moment
    }
    fn quantile(&self, p: f64) -> f64 {
        // Inverse of the empirical CDF: the smallest value with F(x) >= p.
        let n = self.sorted.len();
        let k = ((p * n as f64).ceil() as usize).clamp(1, n);
        self.sorted[k - 1]
    }
    fn cdf(&self, x: f64) -> f64 {
        self.sorted.partition_point(|&v| v <= x) as f64 / self.sorted.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn a_sample_file_is_read_within_its_limits() {
        let ok = read_samples(Cursor::new("time\n# ms\n\n7\n46ms\n"), 1e-3).unwrap();
        assert_eq!(ok, vec![0.007, 0.046]);
        let long = format!("7\n{}\n", "1".repeat(text_file::MAX_LINE_BYTES + 1));
        assert_eq!(read_samples(Cursor::new(long), 1.0).unwrap_err().0, 2);
        assert_eq!(read_samples(Cursor::new("7\nx\n"), 1.0).unwrap_err().0, 2);
        let bad = read_samples(Cursor::new(b"7\n\xff\n".to_vec()), 1.0).unwrap_err();
        assert_eq!(bad, (2, "not UTF-8 text".to_string()));
    }
}
