//! A replication's trace (`dynosim run --timeseries`, `animate`): a frame of the fleet's state
//! every `interval` seconds up to `until`. This keeps the frames and the response times since
//! the last one; a frame's other figures are read from the other concerns when it is due
//! (`Simulation::snapshot_until`, in `mod.rs`).

use crate::error::{Error, Result};
use crate::result::{Frame, Trace};
use crate::scenario::Scenario;
use crate::stats::TimeStats;

#[derive(Debug)]
pub(super) struct TraceRecorder {
    interval: f64,
    until: f64,
    /// Whether each frame lists every dyno's depth, or only the fleet's totals.
    pub per_dyno: bool,
    next: f64,
    frames: Vec<Frame>,
    /// The response times of the answers since the last frame.
    responses: TimeStats,
}

impl TraceRecorder {
    /// A recorder of `scenario`'s frames every `interval` up to `until`; refuses a trace that
    /// would not fit in memory.
    pub fn new(
        scenario: &Scenario,
        interval: f64,
        until: f64,
        per_dyno: bool,
    ) -> Result<TraceRecorder> {
        if !(interval > 0.0 && until >= 0.0 && interval.is_finite() && until.is_finite()) {
            return Err(Error::config(
                "trace",
                "interval must be positive and until >= 0",
            ));
        }
        let frames = (until / interval).floor() + 1.0;
        let per_frame = if per_dyno {
            f64::from(scenario.dyno_slots())
        } else {
            1.0
        };
        if frames * per_frame > 5e7 {
            return Err(Error::config(
                "trace",
                format!(
                    "{frames} frames x {} dynos is too large a trace; use a longer interval",
                    scenario.dynos
                ),
            ));
        }
        Ok(TraceRecorder {
            interval,
            until,
            per_dyno,
            next: 0.0,
            frames: Vec::with_capacity(frames as usize),
            responses: TimeStats::default(),
        })
    }

    /// The next frame's time, if it is due before an event at `time` (the state is constant
    /// between events).
    #[inline]
    pub fn due(&self, time: f64) -> Option<f64> {
        (self.next <= self.until && self.next < time).then_some(self.next)
    }

    /// A request was answered after `seconds`.
    #[inline]
    pub fn responded(&mut self, seconds: f64) {
        self.responses.record(seconds);
    }

    /// The 95th percentile of the response times since the last frame (None: none), which
    /// the next frame starts counting afresh.
    pub fn take_p95(&mut self) -> Option<f64> {
        let responses = std::mem::take(&mut self.responses);
        (responses.count() > 0).then(|| responses.summary().p95)
    }

    /// Records the frame due; the next is due an interval later.
    pub fn push(&mut self, frame: Frame) {
        self.frames.push(frame);
        self.next = (self.frames.len() as f64) * self.interval;
    }

    pub fn into_trace(self) -> Trace {
        Trace {
            interval: self.interval,
            frames: self.frames,
            services: None,
        }
    }

    /// A recorder of another fleet's frames (a service's) at the same times.
    pub fn like(&self, scenario: &Scenario) -> Result<TraceRecorder> {
        TraceRecorder::new(scenario, self.interval, self.until, self.per_dyno)
    }
}
