//! The engine's one error type. Every variant renders as a single line meant for the user.

use std::fmt;

/// What went wrong, with the key path of the scenario where it applies.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The scenario is malformed or a value is out of range. `path` is the dotted key path
    /// (`service.percentiles[3]`), empty for the document as a whole.
    Config { path: String, message: String },
    /// Offered load at or above capacity: queues would grow without bound. `bottleneck` is
    /// the part whose load it is ([`crate::Scenario::bottleneck`]): "threads", whose
    /// figures the other two fields are, or cores, an interpreter lock, a resource, a pool.
    Unstable {
        offered_load: f64,
        busy_slots_needed: f64,
        slots: u64,
        bottleneck: &'static str,
    },
    /// The run was stopped because queues grew past the memory guard.
    Overloaded { queued: usize, at_time: f64 },
    /// The caller asked the run to stop (Ctrl-C).
    Interrupted,
}

impl Error {
    pub fn config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { path, message } if path.is_empty() => write!(f, "{message}"),
            Error::Config { path, message } => write!(f, "{path}: {message}"),
            Error::Unstable {
                offered_load,
                bottleneck,
                ..
            } if *bottleneck != "threads" => {
                let (what, remedy) = match *bottleneck {
                    "cores" => ("the dynos' cores", "Add dynos or cores (fleet.cores)"),
                    "interpreter lock" => (
                        "the processes' interpreter locks (one computes at a time)",
                        "Add dynos or processes",
                    ),
                    "resource" => (
                        "a shared resource's servers",
                        "Add servers to the resource (resources.NAME.servers)",
                    ),
                    "pool" => (
                        "a resource's connection pools",
                        "Enlarge the pools (resources.NAME.pool.size)",
                    ),
                    other => (other, "Lower the load"),
                };
                write!(
                    f,
                    "unstable system: offered load on {what} is {offered_load:.3} of their \
                     capacity (arrival rate x mean demand / servers); queues would grow without \
                     bound. {remedy}."
                )
            }
            Error::Unstable {
                offered_load,
                busy_slots_needed,
                slots,
                ..
            } => {
                write!(
                    f,
                    "unstable system: offered load is {offered_load:.3} of capacity \
                     (arrival rate x mean service time = {busy_slots_needed:.2} busy slots \
                     needed, {slots} available); queues would grow without bound. Add dynos or \
                     slots"
                )?;
                // Past 2^53 slots the count would be meaningless (and past u64, wrong).
                if *busy_slots_needed < 9e15 {
                    write!(f, " (at least {})", busy_slots_needed.floor() as u64 + 1)?;
                }
                write!(f, ".")
            }
            Error::Overloaded { queued, at_time } => write!(
                f,
                "overloaded: {queued} requests waiting at t = {at_time:.1} s; the run was \
                 stopped to bound memory"
            ),
            Error::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
