//! A fast hash for the summary's tables and duplicate detection. Not for adversarial keys: a
//! log is the user's own.

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash's word-at-a-time mixing, finished with MurmurHash3's avalanche so that the low bits
/// (which the tables index by) depend on every byte.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FastHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }

    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Names (dynos, routes, error codes) numbered from 0 in the order first seen, up to a bound:
/// a newcomer past it gets no number.
#[derive(Debug, Clone)]
pub struct Ids {
    ids: FastMap<String, u32>,
    names: Vec<String>,
    max: usize,
}

impl Ids {
    pub fn new(max: usize) -> Ids {
        Ids {
            ids: FastMap::default(),
            names: Vec::new(),
            max,
        }
    }

    /// `name`'s number (a new one for a newcomer), or None for a newcomer past the bound.
    #[inline]
    pub fn id(&mut self, name: &str) -> Option<u32> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        if self.names.len() >= self.max {
            return None;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        Some(id)
    }

    /// The names numbered, in their numbers' order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A 64-bit digest of some byte strings.
pub fn digest(parts: &[&[u8]]) -> u64 {
    let mut h = FastHasher::default();
    for p in parts {
        h.write(p);
        h.write_usize(p.len());
    }
    h.finish()
}

/// A hasher for keys that are already digests.
#[derive(Default, Clone, Copy)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_number_names_in_the_order_first_seen_up_to_the_bound() {
        let mut ids = Ids::new(2);
        assert_eq!(ids.id("web.2"), Some(0));
        assert_eq!(ids.id("web.1"), Some(1));
        assert_eq!(ids.id("web.2"), Some(0), "the same name, the same number");
        assert_eq!(ids.id("web.3"), None, "past the bound");
        assert_eq!(ids.id("web.1"), Some(1), "those numbered keep theirs");
        assert_eq!(ids.names(), ["web.2", "web.1"]);
        assert_eq!(ids.len(), 2);
    }
}
