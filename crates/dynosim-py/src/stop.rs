//! How a call into Rust stops: it runs with the GIL released on a worker thread while the
//! calling thread watches for Ctrl-C, and stops too on [`interrupt`] (every run, from any
//! thread) or on [`cancel`] of the token its thread set.

use pyo3::prelude::*;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counts calls to [`interrupt`]: a run stops when the count moves past the value it started
/// with, whichever thread it runs on.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// Stops every run in progress, on any thread (they raise the interrupted error). Signals
/// reach only the main thread; a caller that runs the engine on worker threads (a sweep)
/// calls this when Ctrl-C arrives.
#[pyfunction]
fn interrupt() {
    INTERRUPTS.fetch_add(1, Ordering::Relaxed);
}

/// Each cancel token's flag (see [`set_cancel_token`]): set by [`cancel`], dropped by
/// [`forget_token`].
static TOKENS: Mutex<BTreeMap<u64, Arc<AtomicBool>>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// The token of the runs this thread starts (0: none).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

fn token_flag(token: u64) -> Arc<AtomicBool> {
    let mut tokens = TOKENS.lock().unwrap_or_else(|e| e.into_inner());
    tokens.entry(token).or_default().clone()
}

/// The engine calls this thread makes from now on (runs, traces, validations) stop when
/// [`cancel`] is called with `token`, from any thread; 0 stops none. A server runs each
/// client's work on a thread of its own with a token, so that a newer request of that client
/// stops the older one, and no other client's.
#[pyfunction]
fn set_cancel_token(token: u64) {
    TOKEN.with(|t| t.set(token));
}

/// Stops the runs of `token` in progress and those it starts later (they raise the
/// interrupted error), until [`forget_token`].
#[pyfunction]
fn cancel(token: u64) {
    token_flag(token).store(true, Ordering::Relaxed);
}

/// Drops `token`'s flag: a token done with (cancelled or not) costs nothing more.
#[pyfunction]
fn forget_token(token: u64) {
    TOKENS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&token);
}

/// Runs `work` with the GIL released, on another thread, while this one watches for Ctrl-C
/// (signals reach only the main thread); `work` polls the flag it is given. The exception a
/// signal handler raised (KeyboardInterrupt, or the CLI's own for SIGTERM) is raised as it
/// is, whether or not `work` noticed the stop in time: dropping it lost the signal when the
/// work finished first (a quick validation), and Ctrl-C went unheeded.
pub fn without_gil<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&(dyn Fn() -> bool + Sync)) -> T + Send,
) -> PyResult<T> {
    let stop = AtomicBool::new(false);
    let generation = INTERRUPTS.load(Ordering::Relaxed);
    let token = TOKEN.with(Cell::get);
    let cancelled = (token != 0).then(|| token_flag(token));
    let stopped = || {
        stop.load(Ordering::Relaxed)
            || INTERRUPTS.load(Ordering::Relaxed) != generation
            || cancelled
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let (result, signalled) = py.detach(|| {
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| work(&stopped));
            let mut signalled = None;
            while !worker.is_finished() {
                std::thread::sleep(Duration::from_millis(2));
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    stop.store(true, Ordering::Relaxed);
                    signalled.get_or_insert(e);
                }
            }
            (worker.join().expect("the engine does not panic"), signalled)
        })
    });
    match signalled {
        Some(e) => Err(e),
        None => Ok(result),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(interrupt, m)?)?;
    m.add_function(wrap_pyfunction!(set_cancel_token, m)?)?;
    m.add_function(wrap_pyfunction!(cancel, m)?)?;
    m.add_function(wrap_pyfunction!(forget_token, m)?)?;
    Ok(())
}
