//! Engine state: what it costs per dyno, slot and waiting request, and allocation that fails
//! with an error instead of aborting the process.

use crate::error::{Error, Result};
use crate::units::format_bytes;

/// What one replication's state costs, by what sizes it (bytes, as f64: no product overflows).
#[derive(Debug, Clone, Copy, Default)]
pub struct StateBytes {
    /// Per dyno, whatever its slots (queues, measures).
    pub per_dyno: f64,
    /// Per slot of every dyno.
    pub per_slot: f64,
    /// Per router and dyno (the event-driven engine's per-router loads).
    pub per_router_dyno: f64,
    /// Per request waiting (the queues grow to at most `run.max_waiting` of them).
    pub per_waiting: f64,
}

/// `n` copies of `value`, or an error rather than an abort when the allocation fails (the
/// estimate above passed, but the machine has less memory than `run.max_memory` says).
pub fn filled<T: Clone>(n: usize, value: T) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::config(
            "run.max_memory",
            format!(
                "could not allocate {} of engine state: this machine has less free memory \
                 than run.max_memory allows",
                format_bytes((n * std::mem::size_of::<T>()) as f64)
            ),
        )
    })?;
    v.resize(n, value);
    Ok(v)
}
