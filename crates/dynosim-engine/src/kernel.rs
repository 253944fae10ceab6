//! The event kernel: one queue of pending events ordered by (time, priority, sequence).
//!
//! - **Time** first.
//! - **Priority** at equal times, lowest first. The engine's order (see `crate::sim`):
//!   completions (a phase, a CPU slice, a resource's service) before dyno boots before
//!   arrivals, so that a thread or slot freed at t is free for a request arriving at t.
//! - **Sequence**: events of equal time and priority run in the order they were scheduled,
//!   so that every run of a scenario and seed is the same.
//!
//! **Events are ids.** An event is a `u32` id naming what it is for (a request's timed phase,
//! a dyno's CPU, an arrival process: the engine decides, see `crate::sim`), and an id has at
//! most one pending event. The payload lives in the component the id names, not in the queue.
//!
//! **Moving an event.** Ids below `movable` (given to [`EventQueue::new`]) may be scheduled
//! again while pending ([`EventQueue::reschedule`]: the pending event moves in place, with a
//! new sequence number, as if it had been cancelled and scheduled anew) or cancelled
//! ([`EventQueue::cancel`]). The queue keeps their positions for that. A component whose
//! next event keeps moving (a CPU shared by processor sharing: every job that joins or leaves
//! moves its next completion) thus never leaves stale events behind to pop and drop.
//!
//! **Layout.** A 4-ary min-heap of 16-byte entries (the time's bits, ordered as the times
//! are, and the id), laid out so that a node's 4 children fill one 64-byte cache line: a pop
//! from a heap of 2^20 events reads 10 lines, where a binary heap of 24-byte entries read 20
//! levels. The priority and sequence, needed only between events of equal time, sit in a
//! separate array indexed by id.

/// An entry of the heap: the time as ordered bits ([`order_bits`]), the event's id, and a
/// hint for whoever looks ahead ([`EventQueue::peek`]), in what would be padding.
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    id: u32,
    hint: u32,
}

/// An empty slot: after every real entry (no time maps to it, see [`order_bits`]), so that
/// a node's last children may be looked at without checking how many it has.
const VACANT: Entry = Entry {
    time: u64::MAX,
    id: u32::MAX,
    hint: 0,
};

/// A node's children, one cache line.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([Entry; 4]);

/// Entries live at flat indexes `ROOT..ROOT + len`; the children of index i are
/// `4 * i - 8 .. 4 * i - 4`, so that they start a [`Line`] (the root shares line 0 with 3
/// unused slots). The parent of j is `j / 4 + 2`.
const ROOT: usize = 3;

/// A position for an id with no pending event.
const NOWHERE: u32 = u32::MAX;

/// Sequence numbers fit below the priority's 8 bits.
const SEQ_BITS: u32 = 56;

/// A time's bits, mapped so that unsigned order is [`f64::total_cmp`]'s order (the order the
/// times had). NaN is refused (debug builds), so no time maps to [`VACANT`]'s `u64::MAX`.
#[inline]
fn order_bits(time: f64) -> u64 {
    debug_assert!(!time.is_nan(), "an event at NaN");
    let b = time.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// The inverse of [`order_bits`].
#[inline]
fn time_of(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 {
        bits & !(1 << 63)
    } else {
        !bits
    })
}

/// The queue of pending events.
#[derive(Debug)]
pub struct EventQueue {
    lines: Vec<Line>,
    len: usize,
    /// Priority << 56 | sequence number of each id's latest event: the order at equal times.
    keys: Vec<u64>,
    /// Flat index of each movable id's pending event, or [`NOWHERE`]; and one slot more,
    /// written for every other id (so that moving an entry stores without a branch on its
    /// id) and never read.
    pos: Vec<u32>,
    movable: u32,
    seq: u64,
    /// Debug builds: the movable event [`EventQueue::pop_in_place`] left at the root.
    held: u32,
}

impl EventQueue {
    /// A queue for `capacity` pending events; ids below `movable` may be moved or cancelled.
    pub fn new(capacity: usize, movable: u32) -> Self {
        let mut q = EventQueue {
            lines: Vec::with_capacity((capacity + ROOT) / 4 + 1),
            len: 0,
            keys: Vec::new(),
            pos: vec![NOWHERE; movable as usize + 1],
            movable,
            seq: 0,
            held: NOWHERE,
        };
        q.lines.push(Line([VACANT; 4]));
        q
    }

    #[inline]
    fn at(&self, i: usize) -> Entry {
        self.lines[i >> 2].0[i & 3]
    }

    /// Puts `e` at index `i`, noting where it is if it is movable.
    #[inline]
    fn put(&mut self, i: usize, e: Entry) {
        self.lines[i >> 2].0[i & 3] = e;
        let slot = e.id.min(self.movable) as usize;
        self.pos[slot] = i as u32;
    }

    /// Whether `a` comes before `b`.
    #[inline]
    fn before(&self, a: Entry, b: Entry) -> bool {
        if a.time != b.time {
            a.time < b.time
        } else {
            // Equal times (rare with continuous distributions): priority, then sequence.
            self.key_of(a) < self.key_of(b)
        }
    }

    #[inline]
    fn key_of(&self, e: Entry) -> u64 {
        self.keys.get(e.id as usize).copied().unwrap_or(u64::MAX)
    }

    /// A new sequence number for `id`, with `priority`.
    #[inline]
    fn stamp(&mut self, id: u32, priority: u8) {
        self.seq += 1;
        debug_assert!(self.seq < 1 << SEQ_BITS);
        let key = (u64::from(priority) << SEQ_BITS) | self.seq;
        let i = id as usize;
        if i >= self.keys.len() {
            self.keys.resize(i + 1, 0);
        }
        self.keys[i] = key;
    }

    /// Schedules event `id` at `time` with `priority` (lower runs first at equal times).
    /// `id` must have no pending event (else [`Self::reschedule`]).
    #[inline]
    pub fn schedule(&mut self, time: f64, priority: u8, id: u32) {
        self.schedule_with(time, priority, id, 0);
    }

    /// [`Self::schedule`] with a hint (see [`Self::peek`]).
    #[inline]
    pub fn schedule_with(&mut self, time: f64, priority: u8, id: u32, hint: u32) {
        debug_assert!(!self.is_pending(id), "event {id} is already pending");
        self.stamp(id, priority);
        let end = ROOT + self.len;
        if end >> 2 == self.lines.len() {
            self.lines.push(Line([VACANT; 4]));
        }
        self.len += 1;
        let e = Entry {
            time: order_bits(time),
            id,
            hint,
        };
        self.sift_up(end, e);
    }

    /// Schedules movable event `id` at `time`, moving its pending event if it has one (the
    /// moved event is ordered as a newly scheduled one). `hint`: see [`Self::peek`].
    #[inline]
    pub fn reschedule(&mut self, time: f64, priority: u8, id: u32, hint: u32) {
        debug_assert!(id < self.movable);
        #[cfg(debug_assertions)]
        if self.held == id {
            self.held = NOWHERE;
        }
        let p = self.pos[id as usize];
        if p == NOWHERE {
            return self.schedule_with(time, priority, id, hint);
        }
        self.stamp(id, priority);
        let e = Entry {
            time: order_bits(time),
            id,
            hint,
        };
        let i = p as usize;
        if i > ROOT && self.before(e, self.at(i / 4 + 2)) {
            self.sift_up(i, e);
        } else {
            self.sift_down(i, e);
        }
    }

    /// Takes back movable event `id`'s pending event, if any.
    #[inline]
    pub fn cancel(&mut self, id: u32) {
        debug_assert!(id < self.movable);
        #[cfg(debug_assertions)]
        if self.held == id {
            self.held = NOWHERE;
        }
        let p = self.pos[id as usize];
        if p == NOWHERE {
            return;
        }
        self.pos[id as usize] = NOWHERE;
        let i = p as usize;
        let last = self.take_last();
        if i < ROOT + self.len {
            // The last entry fills the hole, up or down from there.
            if i > ROOT && self.before(last, self.at(i / 4 + 2)) {
                self.sift_up(i, last);
            } else {
                self.sift_down(i, last);
            }
        }
    }

    /// Whether `id` has a pending event (movable ids only; false for the others).
    pub fn is_pending(&self, id: u32) -> bool {
        id < self.movable && self.pos[id as usize] != NOWHERE
    }

    /// Removes the last entry (leaving its slot vacant) and returns it.
    #[inline]
    fn take_last(&mut self) -> Entry {
        self.len -= 1;
        let end = ROOT + self.len;
        let last = self.at(end);
        self.lines[end >> 2].0[end & 3] = VACANT;
        last
    }

    /// Moves `e` from hole `i` towards the root until its parent comes before it.
    #[inline]
    fn sift_up(&mut self, mut i: usize, e: Entry) {
        while i > ROOT {
            let parent = i / 4 + 2;
            let p = self.at(parent);
            if !self.before(e, p) {
                break;
            }
            self.put(i, p);
            i = parent;
        }
        self.put(i, e);
    }

    /// The index of the first of `i`'s children, among `first .. first + 4`, vacant slots
    /// coming last.
    #[inline(always)]
    fn least_child(&self, first: usize) -> usize {
        let c = &self.lines[first >> 2].0;
        // By time alone, without branches (the processor cannot predict which child is
        // least): exact unless another child has the least time too, a tie (rare with
        // continuous times; vacant slots cannot tie for least, a real child being first).
        let (t0, t1, t2, t3) = (c[0].time, c[1].time, c[2].time, c[3].time);
        let (low01, low23) = (t0.min(t1), t2.min(t3));
        let right = low23 < low01;
        let tie = (low01 == low23) | (right & (t2 == t3)) | (!right & (t0 == t1));
        if tie {
            return self.least_child_of_equals(first);
        }
        first
            + if right {
                2 + usize::from(t3 < t2)
            } else {
                usize::from(t1 < t0)
            }
    }

    /// [`Self::least_child`] when times tie: by the full order.
    #[cold]
    #[inline(never)]
    fn least_child_of_equals(&self, first: usize) -> usize {
        let c = &self.lines[first >> 2].0;
        let a = if self.before(c[1], c[0]) { 1 } else { 0 };
        let b = if self.before(c[3], c[2]) { 3 } else { 2 };
        first + if self.before(c[b], c[a]) { b } else { a }
    }

    /// Moves `e` from hole `i` towards the leaves until no child comes before it.
    #[inline]
    fn sift_down(&mut self, mut i: usize, e: Entry) {
        let end = ROOT + self.len;
        loop {
            let first = 4 * i - 8;
            if first >= end {
                break;
            }
            let c = self.least_child(first);
            let child = self.at(c);
            if !self.before(child, e) {
                break;
            }
            self.put(i, child);
            i = c;
        }
        self.put(i, e);
    }

    /// The next event: its time and id.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, u32)> {
        if self.len == 0 {
            return None;
        }
        let top = self.at(ROOT);
        let slot = top.id.min(self.movable) as usize;
        self.pos[slot] = NOWHERE;
        let last = self.take_last();
        if self.len > 0 {
            // The hole goes down to a leaf along the least children, then the last entry
            // comes up from there (it belongs near the leaves: fewer comparisons).
            let end = ROOT + self.len;
            let mut i = ROOT;
            loop {
                let first = 4 * i - 8;
                if first >= end {
                    break;
                }
                let c = self.least_child(first);
                let child = self.at(c);
                self.put(i, child);
                i = c;
            }
            self.sift_up(i, last);
        }
        Some((time_of(top.time), top.id))
    }

    /// [`Self::pop`], except that a movable event stays where it is, at the root: the caller
    /// must move it ([`Self::reschedule`]) or take it back ([`Self::cancel`]) before the
    /// next pop, as a CPU does after its completion. Moving it from the root is one sift
    /// down, where a pop and a new schedule were a sift down, a sift up and another.
    #[inline]
    pub fn pop_in_place(&mut self) -> Option<(f64, u32)> {
        if self.len == 0 {
            return None;
        }
        let top = self.at(ROOT);
        if top.id < self.movable {
            debug_assert!(
                self.held == NOWHERE,
                "event {} was left at the root",
                self.held
            );
            #[cfg(debug_assertions)]
            {
                self.held = top.id;
            }
            return Some((time_of(top.time), top.id));
        }
        self.pop()
    }

    /// The next event's id, and the hint it was scheduled with (0 if none): a number the
    /// engine gives a movable event for reading ahead (a CPU's: the request expected to
    /// finish first). It never affects the order of events.
    #[inline]
    pub fn peek(&self) -> Option<(u32, u32)> {
        (self.len > 0).then(|| {
            let e = self.at(ROOT);
            (e.id, e.hint)
        })
    }

    /// When the next event is due.
    #[inline]
    pub fn next_time(&self) -> Option<f64> {
        (self.len > 0).then(|| time_of(self.at(ROOT).time))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes one pending event takes (for memory estimates): its entry and its key.
    pub const ENTRY_BYTES: usize = size_of::<Entry>() + size_of::<u64>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn drain(q: &mut EventQueue) -> Vec<u32> {
        std::iter::from_fn(|| q.pop().map(|(_, id)| id)).collect()
    }

    #[test]
    fn events_come_out_by_time_then_priority_then_schedule_order() {
        let mut q = EventQueue::new(8, 0);
        q.schedule(2.0, 0, 0); // late
        q.schedule(1.0, 2, 1); // arrival at 1
        q.schedule(1.0, 0, 2); // first completion at 1
        q.schedule(1.0, 1, 3); // boot at 1
        q.schedule(1.0, 0, 4); // second completion at 1
        q.schedule(0.5, 9, 5); // early
        assert_eq!(drain(&mut q), [5, 2, 4, 3, 1, 0]);
        assert_eq!(EventQueue::ENTRY_BYTES, 24);
    }

    #[test]
    fn a_moved_event_is_ordered_as_if_scheduled_anew() {
        let mut q = EventQueue::new(8, 2);
        q.schedule(1.0, 0, 0);
        q.schedule(1.0, 0, 5);
        q.reschedule(1.0, 0, 0, 0); // same time, now after 5
        q.schedule(3.0, 0, 1);
        q.reschedule(0.5, 0, 1, 0); // earlier
        assert!(q.is_pending(0) && q.is_pending(1));
        assert_eq!(drain(&mut q), [1, 5, 0]);
        assert!(!q.is_pending(0) && !q.is_pending(1));
        q.schedule(1.0, 0, 0);
        q.schedule(2.0, 0, 7);
        q.cancel(0);
        q.cancel(1); // nothing pending: nothing happens
        assert_eq!(drain(&mut q), [7]);
    }

    #[test]
    fn an_event_left_at_the_root_moves_or_goes_from_there() {
        let mut q = EventQueue::new(8, 2);
        q.schedule(1.0, 0, 0);
        q.schedule(2.0, 0, 5);
        q.schedule(3.0, 0, 1);
        assert_eq!(q.pop_in_place(), Some((1.0, 0)));
        assert!(q.is_pending(0));
        q.reschedule(2.5, 0, 0, 0);
        // An event that cannot move is taken out as by `pop`.
        assert_eq!(q.pop_in_place(), Some((2.0, 5)));
        assert_eq!(q.pop_in_place(), Some((2.5, 0)));
        q.cancel(0);
        assert_eq!(q.pop_in_place(), Some((3.0, 1)));
        q.cancel(1);
        assert_eq!(q.pop_in_place(), None);
        assert!(q.is_empty());
    }

    /// Against a reference: a sorted list with lazy deletion, as the queue was before.
    #[test]
    fn random_schedules_moves_and_cancels_match_a_sorted_reference() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let movable = 16u32;
        let mut q = EventQueue::new(4, movable);
        // (time, priority, seq, id) of live events.
        let mut reference: Vec<(f64, u8, u64, u32)> = Vec::new();
        let mut seq = 0;
        let mut next_fixed = movable;
        let mut now = 0.0;
        for step in 0..20_000 {
            let op = rng.random_range(0..10);
            // Times on a coarse grid, so that many are equal.
            let t = now + f64::from(rng.random_range(0..8u32)) * 0.25;
            let prio = rng.random_range(0..3u8);
            seq += 1;
            if op < 4 {
                let id = next_fixed;
                next_fixed += 1;
                q.schedule(t, prio, id);
                reference.push((t, prio, seq, id));
            } else if op < 7 {
                let id = rng.random_range(0..movable);
                q.reschedule(t, prio, id, 0);
                reference.retain(|e| e.3 != id);
                reference.push((t, prio, seq, id));
            } else if op < 8 {
                let id = rng.random_range(0..movable);
                q.cancel(id);
                seq -= 1;
                reference.retain(|e| e.3 != id);
            } else {
                seq -= 1;
                reference.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                let got = q.pop();
                assert_eq!(got.map(|g| g.1), want.map(|w| w.3), "step {step}");
                if let Some((t, _)) = got {
                    assert_eq!(t, want.unwrap().0);
                    now = t;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
    }

    #[test]
    fn order_bits_keep_the_order_of_times() {
        let times = [-1.5, -0.0, 0.0, 1e-300, 0.25, 1.0, 3e8, f64::INFINITY];
        for w in times.windows(2) {
            assert!(order_bits(w[0]) < order_bits(w[1]));
        }
        for t in times {
            assert_eq!(time_of(order_bits(t)).to_bits(), t.to_bits());
        }
        assert!(order_bits(f64::INFINITY) < VACANT.time);
    }
}
