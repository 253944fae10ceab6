//! The table behind each extension point: a kind's name, the parameter keys it takes, and its
//! builder. Unknown names are rejected when a scenario is loaded.

/// `(name, parameter keys, builder)` for every registered kind.
pub struct Registry<B: Copy + 'static>(pub &'static [(&'static str, &'static [&'static str], B)]);

impl<B: Copy + 'static> Registry<B> {
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|(name, _, _)| *name).collect()
    }

    /// The parameter keys a kind takes and its builder.
    pub fn lookup(&self, name: &str) -> Option<(&'static [&'static str], B)> {
        self.0
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, keys, build)| (*keys, *build))
    }

    /// Every parameter key some kind takes.
    pub fn all_keys(&self) -> Vec<&'static str> {
        let mut keys: Vec<&str> = self
            .0
            .iter()
            .flat_map(|(_, keys, _)| keys.iter().copied())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}
