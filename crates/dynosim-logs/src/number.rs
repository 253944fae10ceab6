//! Numbers from byte slices, without going through `str` or allocating.

/// A whole number, ASCII digits only (at most 19 of them).
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

/// A decimal number such as `0.123`, `12`, `-1` or `1.5e3`: the fast path reads digits and
/// one point, anything else goes through the standard library.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let (negative, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut whole: u64 = 0;
    let mut i = 0;
    while i < digits.len() && digits[i].is_ascii_digit() && i < 15 {
        whole = whole * 10 + u64::from(digits[i] - b'0');
        i += 1;
    }
    let mut value = whole as f64;
    if i < digits.len() && digits[i] == b'.' {
        let start = i + 1;
        let mut j = start;
        let mut frac: u64 = 0;
        while j < digits.len() && digits[j].is_ascii_digit() && j - start < 15 {
            frac = frac * 10 + u64::from(digits[j] - b'0');
            j += 1;
        }
        if j == digits.len() && (i > 0 || j > start) {
            value += frac as f64 / 10f64.powi((j - start) as i32);
            return Some(if negative { -value } else { value });
        }
    } else if i == digits.len() && i > 0 {
        return Some(if negative { -value } else { value });
    }
    // Rare shapes (exponents, long digit strings): the standard library, which also refuses
    // "inf" and "nan" spelt out only if we ask it to.
    let text = std::str::from_utf8(b).ok()?;
    let v: f64 = text.parse().ok()?;
    v.is_finite().then_some(v)
}

/// A Heroku duration, `12ms` (also `12`, `1.5ms`, `2s`), in seconds; None when empty or
/// unreadable.
#[inline]
pub fn parse_ms_duration(b: &[u8]) -> Option<f64> {
    if let Some(ms) = b.strip_suffix(b"ms") {
        if let Some(v) = parse_u64(ms) {
            return Some(v as f64 / 1000.0);
        }
        return parse_f64(ms).filter(|v| *v >= 0.0).map(|v| v / 1000.0);
    }
    if let Some(s) = b.strip_suffix(b"s") {
        return parse_f64(s).filter(|v| *v >= 0.0);
    }
    parse_f64(b).filter(|v| *v >= 0.0).map(|v| v / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"8518"), Some(8518));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"12a"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"99999999999999999999"), None);
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_f64(b"0.123"), Some(0.123));
        assert_eq!(parse_f64(b"12"), Some(12.0));
        assert_eq!(parse_f64(b"-1"), Some(-1.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"-"), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"1.2.3"), None);
        assert_eq!(parse_f64(b"inf"), None);
        assert_eq!(parse_f64(b"nan"), None);
    }

    #[test]
    fn heroku_durations() {
        assert_eq!(parse_ms_duration(b"21ms"), Some(0.021));
        assert_eq!(parse_ms_duration(b"30000ms"), Some(30.0));
        assert_eq!(parse_ms_duration(b"1.5ms"), Some(0.0015));
        assert_eq!(parse_ms_duration(b"2s"), Some(2.0));
        assert_eq!(parse_ms_duration(b"7"), Some(0.007));
        assert_eq!(parse_ms_duration(b""), None);
        assert_eq!(parse_ms_duration(b"ms"), None);
        assert_eq!(parse_ms_duration(b"-3ms"), None);
    }
}
