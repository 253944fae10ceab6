use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use crate::units::parse_duration;
use rand::Rng;
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

pub fn build(p: &Params, base_dir: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let file: String = p.require("file", "a path to a file of service times")?;
    let unit = match p.get::<String>("unit")? {
        None => 1.0,
        Some(u) => parse_duration(&format!("1{u}")).ok_or_else(|| {
            p.error(
                "unit",
                format!("expected a time unit such as ms or s, got {u:?}"),
            )
        })?,
    };
    let path = base_dir.join(&file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| p.error("file", format!("cannot read {}: {e}", path.display())))?;
    let values = parse_samples(&text, unit)
        .map_err(|(line, msg)| p.error("file", format!("{}:{line}: {msg}", path.display())))?;
    Empirical::new(values)
        .map_err(|m| p.error("file", format!("{}: {m}", path.display())))
        .map(|d| Box::new(d) as Box<dyn ServiceDistribution>)
}

fn parse_samples(text: &str, unit: f64) -> std::result::Result<Vec<f64>, (usize, String)> {
    let mut values = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let value = match line.parse::<f64>() {
            Ok(v) => Some(v * unit),
            Err(_) => parse_duration(line).filter(|_| line.ends_with(|c: char| c.is_alphabetic())),
        };
        match value {
            Some(v) if v.is_finite() && v >= 0.0 => values.push(v),
            Some(v) => return Err((i + 1, format!("service times must be >= 0, got {v}"))),
            None if values.is_empty() && i == 0 => continue, // header
            None => return Err((i + 1, format!("expected a duration, got {line:?}"))),
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
