//! Timestamps as logs write them, to seconds since the Unix epoch (UTC), and back to ISO 8601.
//! Parsed from bytes by hand: a log line's timestamp is parsed millions of times.

/// A parsed timestamp: seconds since the epoch, and whether it has a fraction of a second
/// (whole-second timestamps make identical lines legitimately common).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp {
    pub seconds: f64,
    pub subsecond: bool,
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = (y - era * 400) as u64;
    let mp = ((month + 9) % 12) as u64;
    let doy = (153 * mp + 2) / 5 + day as u64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe as i64 - 719_468
}

/// The date of a day counted from 1970-01-01: (year, month, day).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe as i64 + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// `n` ASCII digits at the start of `b` as a number.
#[inline]
fn digits(b: &[u8], n: usize) -> Option<u32> {
    if b.len() < n {
        return None;
    }
    let mut v = 0u32;
    for &c in &b[..n] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

/// Seconds since the epoch of a validated civil date and time of day.
fn epoch(year: i64, month: u32, day: u32, h: u32, m: u32, s: u32) -> Option<i64> {
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // 60: a leap second, as syslog may write it.
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + i64::from(h * 3600 + m * 60 + s))
}

/// A fraction of a second after the '.' (or ','): its value and the digits it took.
fn fraction(b: &[u8]) -> (f64, usize) {
    let mut n = 0;
    let mut v: u64 = 0;
    while n < b.len() && b[n].is_ascii_digit() {
        if n < 9 {
            v = v * 10 + u64::from(b[n] - b'0');
        }
        n += 1;
    }
    let scale = 10f64.powi(n.min(9) as i32);
    (v as f64 / scale, n)
}

/// An RFC 3339 / ISO 8601 timestamp at the start of `b`, `2014-01-09T06:16:53.748849+00:00`
/// (also `Z`, `+0000`, a space for the `T`, or no zone, taken as UTC), and the bytes it took.
pub fn parse_iso8601(b: &[u8]) -> Option<(Stamp, usize)> {
    let year = digits(b, 4)?;
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let month = digits(&b[5..], 2)?;
    let day = digits(&b[8..], 2)?;
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let h = digits(&b[11..], 2)?;
    let m = digits(&b[14..], 2)?;
    let s = digits(&b[17..], 2)?;
    let mut at = 19;
    let (frac, subsecond) = if matches!(b.get(at), Some(b'.' | b',')) {
        let (f, n) = fraction(&b[at + 1..]);
        if n == 0 {
            return None;
        }
        at += 1 + n;
        (f, true)
    } else {
        (0.0, false)
    };
    let offset = match b.get(at) {
        Some(b'Z' | b'z') => {
            at += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            let oh = digits(&b[at + 1..], 2)?;
            let (om, n) = if b.get(at + 3) == Some(&b':') {
                (digits(&b[at + 4..], 2)?, 6)
            } else {
                (digits(&b[at + 3..], 2)?, 5)
            };
            if oh > 23 || om > 59 {
                return None;
            }
            at += n;
            let o = i64::from(oh * 3600 + om * 60);
            if sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => 0,
    };
    let secs = epoch(i64::from(year), month, day, h, m, s)? - offset;
    Some((
        Stamp {
            seconds: secs as f64 + frac,
            subsecond,
        },
        at,
    ))
}

fn month_of(b: &[u8]) -> Option<u32> {
    let name = b.get(..3)?;
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(name))
        .map(|i| i as u32 + 1)
}

/// The Common Log Format's date, `10/Oct/2000:13:55:36 -0700` (nginx's `$time_local`), or
/// HAProxy's `06/Feb/2009:12:14:14.655` (milliseconds, no zone: taken as UTC). The whole of
/// `b` must be the date.
pub fn parse_clf(b: &[u8]) -> Option<Stamp> {
    let day = digits(b, 2)?;
    if b.get(2) != Some(&b'/') || b.get(6) != Some(&b'/') || b.get(11) != Some(&b':') {
        return None;
    }
    let month = month_of(&b[3..])?;
    let year = digits(&b[7..], 4)?;
    if b.get(14) != Some(&b':') || b.get(17) != Some(&b':') {
        return None;
    }
    let h = digits(&b[12..], 2)?;
    let m = digits(&b[15..], 2)?;
    let s = digits(&b[18..], 2)?;
    let mut at = 20;
    let (frac, subsecond) = if b.get(at) == Some(&b'.') {
        let (f, n) = fraction(&b[at + 1..]);
        if n == 0 {
            return None;
        }
        at += 1 + n;
        (f, true)
    } else {
        (0.0, false)
    };
    let offset = if at == b.len() {
        0
    } else {
        if b.get(at) != Some(&b' ') || b.len() != at + 6 {
            return None;
        }
        let sign = b[at + 1];
        let oh = digits(&b[at + 2..], 2)?;
        let om = digits(&b[at + 4..], 2)?;
        if !matches!(sign, b'+' | b'-') || oh > 23 || om > 59 {
            return None;
        }
        let o = i64::from(oh * 3600 + om * 60);
        if sign == b'-' {
            -o
        } else {
            o
        }
    };
    let secs = epoch(i64::from(year), month, day, h, m, s)? - offset;
    Some(Stamp {
        seconds: secs as f64 + frac,
        subsecond,
    })
}

/// nginx's `$msec`: seconds since the epoch with a fraction, `1391794831.755`.
pub fn parse_epoch(b: &[u8]) -> Option<Stamp> {
    let (whole, frac) = match memchr::memchr(b'.', b) {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    let secs = crate::number::parse_u64(whole)?;
    if secs > 1 << 40 {
        return None;
    }
    let (f, subsecond) = match frac {
        Some(fr) => {
            let (f, n) = fraction(fr);
            if n == 0 || n != fr.len() {
                return None;
            }
            (f, true)
        }
        None => (0.0, false),
    };
    Some(Stamp {
        seconds: secs as f64 + f,
        subsecond,
    })
}

/// Seconds since the epoch as ISO 8601 in UTC with microseconds,
/// `2014-01-09T06:16:53.748849+00:00` (what Python's `datetime.fromisoformat` reads).
pub fn iso8601(seconds: f64) -> String {
    let micros = (seconds * 1e6).round() as i64;
    let secs = micros.div_euclid(1_000_000);
    let us = micros.rem_euclid(1_000_000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let tod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{us:06}+00:00",
        tod / 3600,
        tod % 3600 / 60,
        tod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(s: &str) -> Option<f64> {
        parse_iso8601(s.as_bytes()).map(|(st, _)| st.seconds)
    }

    #[test]
    fn civil_days_round_trip_over_centuries() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn heroku_timestamps() {
        // 2014-01-09T06:16:53Z is 1389248213 (date -d @1389248213 -u).
        assert_eq!(iso("2014-01-09T06:16:53+00:00"), Some(1_389_248_213.0));
        let (st, n) = parse_iso8601(b"2014-01-09T06:16:53.748849+00:00 heroku").unwrap();
        assert_eq!(n, 32);
        assert!(st.subsecond);
        assert!((st.seconds - 1_389_248_213.748849).abs() < 1e-6);
        assert_eq!(iso("2014-01-09T06:16:53Z"), Some(1_389_248_213.0));
        assert_eq!(iso("2014-01-08T22:16:53-08:00"), Some(1_389_248_213.0));
        assert_eq!(iso("2014-01-09T07:16:53+0100"), Some(1_389_248_213.0));
        assert!(
            !parse_iso8601(b"2012-11-02T20:51:42+00:00")
                .unwrap()
                .0
                .subsecond
        );
    }

    #[test]
    fn impossible_dates_are_refused() {
        for bad in [
            "2014-02-30T00:00:00Z",
            "2014-13-01T00:00:00Z",
            "2014-01-09T24:00:00Z",
            "2014-01-09T06:16:5",
            "2014-01-09T06:16:53.Z",
            "2014-01-09X06:16:53Z",
            "201a-01-09T06:16:53Z",
        ] {
            assert_eq!(iso(bad), None, "{bad}");
        }
        assert!(iso("2012-02-29T00:00:00Z").is_some());
        assert!(iso("2013-02-29T00:00:00Z").is_none());
    }

    #[test]
    fn clf_and_haproxy_dates() {
        // Apache's documented example: 10/Oct/2000:13:55:36 -0700 is 20:55:36 UTC.
        let st = parse_clf(b"10/Oct/2000:13:55:36 -0700").unwrap();
        assert_eq!(st.seconds, iso("2000-10-10T20:55:36Z").unwrap());
        assert!(!st.subsecond);
        let st = parse_clf(b"06/Feb/2009:12:14:14.655").unwrap();
        assert!((st.seconds - (iso("2009-02-06T12:14:14Z").unwrap() + 0.655)).abs() < 1e-6);
        assert!(st.subsecond);
        assert_eq!(parse_clf(b"06/Foo/2009:12:14:14"), None);
        assert_eq!(parse_clf(b"06/Feb/2009:12:14:14 +07"), None);
    }

    #[test]
    fn epoch_seconds_and_formatting() {
        let st = parse_epoch(b"1389248213.748").unwrap();
        assert!((st.seconds - 1_389_248_213.748).abs() < 1e-6);
        assert_eq!(parse_epoch(b"1389248213.7x"), None);
        assert_eq!(
            iso8601(1_389_248_213.748849),
            "2014-01-09T06:16:53.748849+00:00"
        );
        assert_eq!(iso8601(-0.5), "1969-12-31T23:59:59.500000+00:00");
    }
}
