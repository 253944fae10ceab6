//! Duplicate lines (a drain that delivered twice, two captures that overlap) in bounded
//! memory: the digests of the most recent requests, in two generations. A duplicate is caught
//! when it comes within [`WINDOW`] distinct requests of its first copy (at least; up to twice
//! that); copies further apart are counted twice. 64-bit digests: two different requests
//! collide with a probability of about 10⁻⁷ over a billion lines.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use crate::hash::Identity;

/// Requests remembered at least (and at most twice as many): about 32 MB.
pub const WINDOW: usize = 1 << 20;

pub struct RecentSet {
    current: HashSet<u64, BuildHasherDefault<Identity>>,
    previous: HashSet<u64, BuildHasherDefault<Identity>>,
    window: usize,
}

impl RecentSet {
    pub fn new(window: usize) -> RecentSet {
        RecentSet {
            current: HashSet::default(),
            previous: HashSet::default(),
            window: window.max(1),
        }
    }

    /// Whether `key` is new (and remembers it); false for a repeat.
    pub fn insert(&mut self, key: u64) -> bool {
        if self.current.contains(&key) || self.previous.contains(&key) {
            return false;
        }
        if self.current.len() >= self.window {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_within_the_window_are_caught() {
        let mut s = RecentSet::new(4);
        assert!(s.insert(1));
        assert!(!s.insert(1));
        for k in 2..=8 {
            assert!(s.insert(k));
        }
        // 8 remembered at most: 5..=8 current, 1..=4 previous until the next rollover
        assert!(!s.insert(4));
        assert!(s.insert(9)); // rolls over: 1..=4 forgotten
        assert!(s.insert(1), "beyond the window a copy counts again");
    }
}
