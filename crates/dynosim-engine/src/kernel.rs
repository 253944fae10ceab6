//! The event kernel: one queue of typed events ordered by (time, priority, sequence).
//!
//! - **Time** first.
//! - **Priority** at equal times, lowest first. The engine's order (see `crate::sim`):
//!   completions (a phase, a CPU slice, a resource's service) before dyno boots before
//!   arrivals, so that a thread or slot freed at t is free for a request arriving at t.
//! - **Sequence**: events of equal time and priority run in the order they were scheduled,
//!   so that every run of a scenario and seed is the same.
//!
//! Cancellation is by generation counters (lazy deletion): a component that may need to take
//! back what it scheduled (a CPU's next completion, replaced whenever the jobs sharing the
//! cores change) keeps a [`Generation`] and puts its value in the event; when the event comes
//! out, it is acted on only if the generation is still current. Superseded events cost a pop,
//! and the queue never has to be searched.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug)]
struct Entry<E> {
    time: f64,
    priority: u8,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.priority.cmp(&self.priority))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The queue of pending events.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> EventQueue<E> {
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            seq: 0,
        }
    }

    /// Schedules `event` at `time` with `priority` (lower runs first at equal times).
    #[inline]
    pub fn schedule(&mut self, time: f64, priority: u8, event: E) {
        self.seq += 1;
        self.heap.push(Entry {
            time,
            priority,
            seq: self.seq,
            event,
        });
    }

    /// The next event and its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, E)> {
        self.heap.pop().map(|e| (e.time, e.event))
    }

    /// When the next event is due.
    #[inline]
    pub fn next_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.time)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Bytes one pending event takes (for memory estimates).
    pub const ENTRY_BYTES: usize = size_of::<Entry<E>>();
}

/// A component's handle on the one event it may have pending: [`Generation::renew`] makes
/// every event scheduled with an earlier value stale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Generation(u32);

impl Generation {
    /// Cancels whatever was scheduled before; returns the value for the next event.
    #[inline]
    pub fn renew(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }

    /// Whether an event carrying `value` is still wanted.
    #[inline]
    pub fn is_current(&self, value: u32) -> bool {
        self.0 == value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_priority_then_schedule_order() {
        let mut q = EventQueue::with_capacity(8);
        q.schedule(2.0, 0, "late");
        q.schedule(1.0, 2, "arrival at 1");
        q.schedule(1.0, 0, "first completion at 1");
        q.schedule(1.0, 1, "boot at 1");
        q.schedule(1.0, 0, "second completion at 1");
        q.schedule(0.5, 9, "early");
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(
            order,
            [
                "early",
                "first completion at 1",
                "second completion at 1",
                "boot at 1",
                "arrival at 1",
                "late"
            ]
        );
    }

    #[test]
    fn a_renewed_generation_makes_earlier_events_stale() {
        let mut g = Generation::default();
        let first = g.renew();
        assert!(g.is_current(first));
        let second = g.renew();
        assert!(!g.is_current(first));
        assert!(g.is_current(second));
    }
}
