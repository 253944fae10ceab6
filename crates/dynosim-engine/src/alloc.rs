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

/// Asks the processor to bring `x`'s cache line in, without waiting for it: a hint that
/// changes no value (on other targets, nothing). For state a large fleet will need at the
/// next event, so that its cache miss overlaps the work on this one; a plain read there
/// (`black_box`) held up the instructions after it until the line came.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    prefetch_line((x as *const T).cast());
}

#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address (callers pass addresses inside a valid reference's object anyway). SSE is part
    // of x86_64's baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] of every cache line `x` spans (a struct of more than a line, or one that
/// straddles two).
#[inline(always)]
pub fn prefetch_all<T: ?Sized>(x: &T) {
    let start = (x as *const T).cast::<u8>();
    let last = std::mem::size_of_val(x).max(1) - 1;
    let lines = ((start as usize & 63) + last) / 64;
    for i in 0..=lines {
        prefetch_line(start.wrapping_add(i * 64));
    }
}
