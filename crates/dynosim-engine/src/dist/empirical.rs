use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use crate::units::{parse_duration, time_unit_seconds};
use rand::Rng;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
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
/// The longest line (4 KiB): a service time needs a few dozen characters.
const MAX_LINE_BYTES: usize = 4096;
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
    let at = |message: String| p.error("file", format!("{}: {message}", path.display()));
    let cannot_read =
        |e: std::io::Error| p.error("file", format!("cannot read {}: {e}", path.display()));
    let meta = std::fs::metadata(&path).map_err(cannot_read)?;
    if !meta.is_file() {
        return Err(at(
            "not a regular file; expected a text file of service times, one a line".into(),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(at(format!(
            "{} bytes is more than a sample file may hold (1 GiB)",
            meta.len()
        )));
    }
    let reader = BufReader::new(File::open(&path).map_err(cannot_read)?);
    let values = read_samples(reader, unit).map_err(|(line, msg)| match line {
        0 => at(msg),
        line => p.error("file", format!("{}:{line}: {msg}", path.display())),
    })?;
    Empirical::new(values)
        .map_err(at)
        .map(|d| Box::new(d) as Box<dyn ServiceDistribution>)
}

/// Reads service times a line at a time, within the limits above; an error comes with its
/// line number (0 for the file as a whole).
fn read_samples(reader: impl BufRead, unit: f64) -> std::result::Result<Vec<f64>, (usize, String)> {
    // One byte past the limit tells a file that grew while it was read from one that fits.
    let mut reader = reader.take(MAX_FILE_BYTES + 1);
    let mut values = Vec::new();
    let mut raw = Vec::new();
    for number in 1.. {
        raw.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(|e| (0, format!("cannot read: {e}")))?;
        if read == 0 {
            break;
        }
        if reader.limit() == 0 {
            return Err((0, "more than a sample file may hold (1 GiB)".into()));
        }
        if raw.len() > MAX_LINE_BYTES && raw.last() != Some(&b'\n') {
            return Err((number, format!("longer than {MAX_LINE_BYTES} bytes")));
        }
        let line = std::str::from_utf8(&raw)
            .map_err(|_| (number, "not UTF-8 text".to_string()))?
            .trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let value = match line.parse::<f64>() {
            Ok(v) => Some(v * unit),
            Err(_) => parse_duration(line).filter(|_| line.ends_with(|c: char| c.is_alphabetic())),
        };
        match value {
            Some(v) if v.is_finite() && v >= 0.0 => values.push(v),
            Some(v) => return Err((number, format!("service times must be >= 0, got {v}"))),
            None if values.is_empty() && number == 1 => continue, // header
            None => return Err((number, format!("expected a duration, got {line:?}"))),
        }
        if values.len() > MAX_SAMPLES {
            return Err((
                number,
                format!("more than {MAX_SAMPLES} service times; a sample file may hold that many"),
            ));
        }
    }
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
        let long = format!("7\n{}\n", "1".repeat(MAX_LINE_BYTES + 1));
        assert_eq!(read_samples(Cursor::new(long), 1.0).unwrap_err().0, 2);
        // No line end at all (a device of zeros): stopped at the first line's limit.
        let zeros = std::io::repeat(0).take(10 * MAX_LINE_BYTES as u64);
        let (line, message) = read_samples(BufReader::new(zeros), 1.0).unwrap_err();
        assert_eq!(line, 1, "{message}");
        assert!(message.contains("longer than"), "{message}");
        let bad = read_samples(Cursor::new(b"7\n\xff\n".to_vec()), 1.0).unwrap_err();
        assert_eq!(bad, (2, "not UTF-8 text".to_string()));
    }
}
