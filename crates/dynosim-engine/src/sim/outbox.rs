//! A fleet's calls to other fleets, and its answers to the calls it takes: what the
//! federation of fleets (`federation.rs`) carries between them. A request of this fleet on a
//! `call` phase waits on its thread (state `Timed`, with no event of its own pending) while
//! the call is made; a request this fleet took from a caller carries, in its `client` field,
//! the index of its caller here, and its answer (a response, or an error for good) is put
//! here for the federation to deliver.

/// Who made a call: the caller's fleet (its index in the federation), its request (slab index
/// and generation, which tell a request from a later one of the same entry), its call site
/// (which tells one call phase of the request from another), and the try (of a `call`; of a
/// fan-out, which of its calls, and whether the copy is a hedge: [`HEDGE_COPY`]), and when
/// the copy was sent (a hedged fan-out's percentile learns from each copy's own time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Caller {
    pub tier: u32,
    pub req: u32,
    pub generation: u32,
    pub site: u32,
    pub try_no: u32,
    pub sent: f64,
}

/// The bit of a fan-out's `try_no` that marks the second copy of its call (a hedge); the
/// call's place in the fan-out is in the bits below (at most `MAX_FANOUT`).
pub(super) const HEDGE_COPY: u32 = 1 << 31;

/// A free index's `tier` (no fleet has so many tiers).
const FREE: u32 = u32::MAX;

/// A call a request of this fleet makes now: its call site (an index in the scenario's
/// `calls`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Made {
    pub req: u32,
    pub generation: u32,
    pub site: u32,
}

/// An answer of this fleet to a call it took, given at `at`: a response (`ok`), or an error.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer {
    pub caller: Caller,
    pub ok: bool,
    pub at: f64,
}

/// The calls made and the answers given since the federation last looked, and the callers
/// of the requests in flight that are calls.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Whether this fleet takes calls (a service's): its requests' `client` is then their
    /// caller's index in `callers`. False for the entry fleet, whose clients are its own.
    pub serves: bool,
    pub made: Vec<Made>,
    pub answers: Vec<Answer>,
    /// The dyno the next call taken should avoid, if another is up (a hedge: the dyno of the
    /// call's first copy), or `NONE`; taken by its routing, cleared once the call has arrived.
    pub avoid: u32,
    callers: Vec<Caller>,
    free: Vec<u32>,
}

impl Outbox {
    pub fn new(serves: bool) -> Outbox {
        Outbox {
            serves,
            avoid: super::slab::NONE,
            ..Outbox::default()
        }
    }

    /// Whether nothing waits for the federation.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.made.is_empty() && self.answers.is_empty()
    }

    /// A call taken from `caller`: the index its request carries (as its `client`).
    pub fn take(&mut self, caller: Caller) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.callers[i as usize] = caller;
                i
            }
            None => {
                self.callers.push(caller);
                (self.callers.len() - 1) as u32
            }
        }
    }

    /// The request that carries `index` is answered at `at`: successfully (`ok`) or with an
    /// error.
    pub fn answer(&mut self, index: u32, ok: bool, at: f64) {
        let caller = self.callers[index as usize];
        self.release(index);
        self.answers.push(Answer { caller, ok, at });
    }

    /// Whether `index` is still `caller`'s: its request has not answered it (nor been
    /// cancelled), and the index was not given to another call since.
    pub fn holds(&self, index: u32, caller: &Caller) -> bool {
        self.callers
            .get(index as usize)
            .is_some_and(|c| c.tier != FREE && c == caller)
    }

    /// `index` is free again: its caller will have no answer through it (answered, or the
    /// call cancelled).
    pub fn release(&mut self, index: u32) {
        self.callers[index as usize].tier = FREE;
        self.free.push(index);
    }
}
