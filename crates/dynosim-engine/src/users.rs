//! The key each request carries (`arrivals.keys`): the user who sent it, one of a fixed number
//! of users, drawn by their popularity. A policy that hashes requests (`bounded_hash`) reads it
//! through [`crate::policy::RouterView::key`]; the others do not look at it. The keys come from
//! a random stream of their own ([`crate::rng::Stream::Keys`]), so every other draw of a
//! scenario, and the results of every policy that does not read keys, are the same with or
//! without them.

use crate::error::{Error, Result};
use crate::params::whole;
use crate::rng::SimRng;
use rand::Rng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

/// `arrivals.keys` as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeysSpec {
    /// How many users send the requests.
    pub users: i64,
    /// How a request's user is drawn: "zipf" (the default) or "uniform".
    #[serde(default)]
    pub popularity: Option<String>,
    /// Zipf's exponent s: user k (from 1) sends a share proportional to 1/k^s.
    #[serde(default)]
    pub exponent: Option<f64>,
}

/// The most users: keys are kept as 32-bit numbers.
pub const MAX_USERS: i64 = 1_000_000_000;
/// `arrivals.keys.exponent` when left out: Zipf's law proper.
pub const DEFAULT_EXPONENT: f64 = 1.0;

/// How popular each user is.
#[derive(Debug, Clone)]
pub enum Popularity {
    Uniform,
    /// Zipf's law over the users, with its exponent.
    Zipf(Zipf<f64>, f64),
}

/// The users who send the requests, and how often each does.
#[derive(Debug, Clone)]
pub struct UserKeys {
    pub users: u32,
    pub popularity: Popularity,
}

impl UserKeys {
    /// Checks `arrivals.keys`: a whole number of users from 1 to [`MAX_USERS`], a popularity
    /// by name, and an exponent > 0 for Zipf's law alone.
    pub fn build(spec: &KeysSpec) -> Result<UserKeys> {
        let path = |key: &str| format!("arrivals.keys.{key}");
        let users: u32 = whole(spec.users, &path("users"), 1, MAX_USERS)?;
        let popularity = match spec.popularity.as_deref().unwrap_or("zipf") {
            "zipf" => {
                let s = spec.exponent.unwrap_or(DEFAULT_EXPONENT);
                if !(s.is_finite() && s > 0.0) {
                    return Err(Error::config(
                        path("exponent"),
                        format!("must be a number > 0 (Zipf's s: 1 is Zipf's law), got {s}"),
                    ));
                }
                let zipf = Zipf::new(f64::from(users), s).map_err(|e| {
                    Error::config(path("exponent"), format!("Zipf's law refused it: {e}"))
                })?;
                Popularity::Zipf(zipf, s)
            }
            "uniform" => {
                if spec.exponent.is_some() {
                    return Err(Error::config(
                        path("exponent"),
                        "is Zipf's exponent; popularity = \"uniform\" takes none",
                    ));
                }
                Popularity::Uniform
            }
            other => {
                return Err(Error::config(
                    path("popularity"),
                    format!("unknown popularity {other:?}; expected \"zipf\" or \"uniform\""),
                ))
            }
        };
        Ok(UserKeys { users, popularity })
    }

    /// A request's user, from 0 (the most popular under Zipf's law) to `users` − 1.
    #[inline]
    pub fn draw(&self, rng: &mut SimRng) -> u32 {
        match &self.popularity {
            Popularity::Uniform => rng.random_range(0..self.users),
            // Zipf's samples are whole numbers from 1 to `users`.
            Popularity::Zipf(zipf, _) => zipf.sample(rng) as u32 - 1,
        }
    }

    /// The share of the requests that user `k` (from 0) sends.
    pub fn share(&self, k: u32) -> f64 {
        match &self.popularity {
            Popularity::Uniform => 1.0 / f64::from(self.users),
            Popularity::Zipf(_, s) => {
                let h: f64 = (1..=self.users).map(|i| f64::from(i).powf(-s)).sum();
                f64::from(k + 1).powf(-s) / h
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn keys(users: i64, popularity: &str, exponent: Option<f64>) -> Result<UserKeys> {
        UserKeys::build(&KeysSpec {
            users,
            popularity: Some(popularity.into()),
            exponent,
        })
    }

    /// Each user's share of a million draws against its probability, for the first users and
    /// the last, within 4.9 binomial standard errors (a false alarm about once in a million
    /// comparisons).
    #[test]
    fn users_are_drawn_by_their_popularity() {
        let n = 1_000_000u64;
        for (k, label) in [
            (keys(50, "zipf", None).unwrap(), "zipf s=1"),
            (keys(50, "zipf", Some(1.4)).unwrap(), "zipf s=1.4"),
            (keys(50, "uniform", None).unwrap(), "uniform"),
        ] {
            let mut rng = SimRng::seed_from_u64(17);
            let mut counts = vec![0u64; 50];
            for _ in 0..n {
                counts[k.draw(&mut rng) as usize] += 1;
            }
            let total: f64 = (0..50).map(|u| k.share(u)).sum();
            assert!(
                (total - 1.0).abs() < 1e-12,
                "{label}: shares sum to {total}"
            );
            for user in [0u32, 1, 2, 9, 49] {
                let p = k.share(user);
                let se = (p * (1.0 - p) / n as f64).sqrt();
                let got = counts[user as usize] as f64 / n as f64;
                assert!(
                    (got - p).abs() <= 4.9 * se,
                    "{label}: user {user} drawn {got}, expected {p} ± {se}"
                );
            }
        }
    }

    #[test]
    fn bad_keys_name_the_key() {
        for (result, path, fragment) in [
            (keys(0, "zipf", None), "arrivals.keys.users", ">= 1"),
            (keys(5, "zipf", Some(0.0)), "arrivals.keys.exponent", "> 0"),
            (
                keys(5, "zipf", Some(f64::NAN)),
                "arrivals.keys.exponent",
                "> 0",
            ),
            (
                keys(5, "uniform", Some(1.0)),
                "arrivals.keys.exponent",
                "uniform",
            ),
            (
                keys(5, "pareto", None),
                "arrivals.keys.popularity",
                "\"zipf\"",
            ),
        ] {
            let e = result.expect_err(path).to_string();
            assert!(e.contains(path) && e.contains(fragment), "{e}");
        }
    }
}
