//! The event kernel: one queue of typed events ordered by (time, priority, sequence).
//!
//! - **Time** first.
//! - **Priority** at equal times, lowest first. The engine's order (see `crate::sim`):
//!   completions (a phase, a CPU slice, a resource's service) before dyno boots before
//!   arrivals, so that a thread or slot freed at t is free for a request arriving at t.
//! - **Sequence**: events of equal time and priority run in the order they were scheduled,
//!   so that every run of a scenario and seed is the same.
//!
//! Cancellation is by key (lazy deletion): [`EventQueue::schedule`] returns the event's
//! [`EventKey`], unique in the run. A component that may need to take back what it scheduled
//! (a CPU's next completion, replaced whenever the jobs sharing the cores change) keeps the key
//! of the one event it wants; when an event comes out with another key, it is stale and is
//! dropped. Superseded events cost a pop, and the queue never has to be searched.
//!
//! An entry is 24 bytes: the time, one `u64` holding the priority (top 8 bits) above the
//! sequence number, and an event of at most 8 bytes.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug)]
struct Entry<E> {
    time: f64,
    /// Priority << 56 | sequence number: the order at equal times, and the event's key.
    key: u64,
    event: E,
}

/// An event's identity, for cancelling it (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKey(u64);

/// Sequence numbers fit below the priority's 8 bits.
const SEQ_BITS: u32 = 56;

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
            .then_with(|| other.key.cmp(&self.key))
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

    /// Schedules `event` at `time` with `priority` (lower runs first at equal times); returns
    /// its key.
    #[inline]
    pub fn schedule(&mut self, time: f64, priority: u8, event: E) -> EventKey {
        self.seq += 1;
        debug_assert!(self.seq < 1 << SEQ_BITS);
        let key = (u64::from(priority) << SEQ_BITS) | self.seq;
        self.heap.push(Entry { time, key, event });
        EventKey(key)
    }

    /// The next event, its time and its key.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, EventKey, E)> {
        self.heap.pop().map(|e| (e.time, EventKey(e.key), e.event))
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
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|(_, _, e)| e)).collect();
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
    fn keys_tell_a_kept_event_from_a_superseded_one() {
        let mut q = EventQueue::with_capacity(4);
        let first = q.schedule(1.0, 0, "first");
        let kept = q.schedule(2.0, 0, "replacement");
        assert_ne!(first, kept);
        let mut acted = Vec::new();
        while let Some((_, key, e)) = q.pop() {
            if key == kept {
                acted.push(e);
            }
        }
        assert_eq!(acted, ["replacement"]);
        assert_eq!(EventQueue::<u32>::ENTRY_BYTES, 24);
    }
}
