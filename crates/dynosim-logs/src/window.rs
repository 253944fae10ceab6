//! `--window START..END`: the requests that arrived in a part of the log, each end a time
//! (seconds since the epoch) or an offset from the log's first arrival.

/// One end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// A time, seconds since the epoch.
    At(f64),
    /// Seconds after the log's first arrival.
    After(f64),
}

/// Requests arriving in `[start, end)`; an end left out is open.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Window {
    pub start: Option<Bound>,
    pub end: Option<Bound>,
}

impl Window {
    /// Whether an end is an offset, which needs the log's first arrival.
    pub fn relative(&self) -> bool {
        matches!(self.start, Some(Bound::After(_))) || matches!(self.end, Some(Bound::After(_)))
    }

    /// The window in seconds since the epoch, given the log's first arrival.
    pub fn resolve(&self, first: f64) -> (f64, f64) {
        let at = |b: Option<Bound>, open: f64| match b {
            None => open,
            Some(Bound::At(t)) => t,
            Some(Bound::After(s)) => first + s,
        };
        (
            at(self.start, f64::NEG_INFINITY),
            at(self.end, f64::INFINITY),
        )
    }
}

/// A resolved end for a message: its time (ISO 8601), or "open".
pub fn bound_text(t: f64) -> String {
    if t.is_finite() {
        crate::time::iso8601(t)
    } else {
        "open".into()
    }
}

/// When a request reached the router: its line's time (its end) less its connect and service
/// times (each 0 when the line has none).
#[inline]
pub fn arrival(r: &crate::record::Request<'_>) -> f64 {
    r.time - r.connect.unwrap_or(0.0) - r.service.unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_times_or_offsets_and_may_be_open() {
        let w = Window {
            start: Some(Bound::After(60.0)),
            end: Some(Bound::At(1000.0)),
        };
        assert!(w.relative());
        assert_eq!(w.resolve(100.0), (160.0, 1000.0));
        let open = Window::default();
        assert!(!open.relative());
        assert_eq!(open.resolve(5.0), (f64::NEG_INFINITY, f64::INFINITY));
    }
}
