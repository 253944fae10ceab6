//! HAProxy's HTTP log format (`option httplog`), from 1.x (`Tq/Tw/Tc/Tr/Tt` from the accept
//! date) to 2.x (`TR/Tw/Tc/Tr/Ta` from the request date), behind a syslog prefix or raw:
//!
//! ```text
//! Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in \
//!   static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"
//! ```
//!
//! The request ended at the date plus the last timer; its service time is the last timer less
//! the first three (receiving the request, queueing, connecting): the server's response and
//! its transfer, as Heroku's `service=`.

use crate::attempt::{Attempt, Reject};
use crate::number::parse_u64;
use crate::record::{Detail, HaproxyDetail, Request};
use crate::time::parse_clf;

pub fn parse(line: &str) -> Attempt<'_> {
    let Some((date_open, date_close)) = accept_date(line) else {
        // A line of HAProxy's own (`haproxy[123]: Proxy http-in started.`) is not a request;
        // one whose date is cut short is.
        return match haproxy_message(line) {
            Some(m) if m.contains(" [") => {
                Attempt::Reject(Reject::Malformed("a truncated or bad accept date".into()))
            }
            Some(_) => Attempt::Other,
            None => Attempt::Reject(Reject::NotMine),
        };
    };
    let client_start = line[..date_open - 1].rfind(' ').map_or(0, |i| i + 1);
    let message = &line[client_start..];
    match fields(line, date_open, date_close) {
        Ok(r) => Attempt::Request(r, message.as_bytes()),
        Err(why) => Attempt::Reject(Reject::Malformed(why.into())),
    }
}

/// What follows a syslog tag `haproxy[PID]: `.
fn haproxy_message(line: &str) -> Option<&str> {
    let i = line.find("haproxy[")?;
    let (pid, message) = line[i + 8..].split_once("]: ")?;
    parse_u64(pid.as_bytes()).map(|_| message)
}

/// The `[...]` holding the accept (or request) date, after a client address: the offsets of
/// the brackets.
fn accept_date(line: &str) -> Option<(usize, usize)> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'[', &b[from..]) {
        let open = from + i;
        from = open + 1;
        if open == 0 || b[open - 1] != b' ' {
            continue;
        }
        let close = memchr::memchr(b']', &b[open..]).map(|j| open + j)?;
        // dd/Mon/yyyy:hh:mm:ss.mmm, no zone (a zone, as in nginx's lines, is not HAProxy's)
        let date = &b[open + 1..close];
        if date.len() >= 20 && !date.contains(&b' ') && parse_clf(date).is_some() {
            return Some((open, close));
        }
    }
    None
}

struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    fn next(&mut self, what: &'static str) -> Result<&'a str, &'static str> {
        let rest = self.rest.trim_start_matches(' ');
        if rest.is_empty() {
            return Err(what);
        }
        let end = memchr::memchr(b' ', rest.as_bytes()).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Ok(&rest[..end])
    }
}

/// A timer or counter: `-1` is None, a leading `+` (logasap, a retry) is dropped.
fn signed(s: &str) -> Option<Option<i64>> {
    if s == "-1" {
        return Some(None);
    }
    parse_u64(s.strip_prefix('+').unwrap_or(s).as_bytes())
        .map(|v| Some(v.min(i64::MAX as u64) as i64))
}

fn slashed<const N: usize>(s: &str, what: &'static str) -> Result<[Option<i64>; N], &'static str> {
    let mut out = [None; N];
    let mut parts = s.split('/');
    for slot in out.iter_mut() {
        *slot = signed(parts.next().ok_or(what)?).ok_or(what)?;
    }
    if parts.next().is_some() {
        return Err(what);
    }
    Ok(out)
}

fn count(v: Option<i64>) -> u32 {
    v.unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32
}

fn fields(line: &str, date_open: usize, date_close: usize) -> Result<Request<'_>, &'static str> {
    let stamp =
        parse_clf(&line.as_bytes()[date_open + 1..date_close]).ok_or("a bad accept date")?;
    let mut t = Tokens {
        rest: &line[date_close + 1..],
    };
    const SHORT: &str = "fewer fields than HAProxy's HTTP log format (option httplog)";
    let frontend = t.next(SHORT)?;
    let backend_server = t.next(SHORT)?;
    let (backend, server) = backend_server.split_once('/').ok_or("no backend/server")?;
    let [tq, tw, tc, tr, ta] = slashed::<5>(
        t.next(SHORT)?,
        "timers are not Tq/Tw/Tc/Tr/Ta (option httplog)",
    )?;
    let status = t.next(SHORT)?;
    let status = match signed(status) {
        Some(None) => None,
        Some(Some(s @ 100..=999)) => Some(s as u16),
        _ => return Err("the status is not an HTTP status"),
    };
    let bytes = t.next(SHORT)?;
    let bytes = parse_u64(bytes.strip_prefix('+').unwrap_or(bytes).as_bytes())
        .ok_or("bytes read is not a number")?;
    let _request_cookie = t.next(SHORT)?;
    let _response_cookie = t.next(SHORT)?;
    let termination = t.next(SHORT)?;
    if !(2..=4).contains(&termination.len()) {
        return Err("the termination state is not 2 to 4 characters");
    }
    let [actconn, feconn, beconn, srv_conn, retries] = slashed::<5>(
        t.next(SHORT)?,
        "connection counts are not actconn/feconn/beconn/srv_conn/retries",
    )?;
    let [srv_queue, backend_queue] = slashed::<2>(
        t.next(SHORT)?,
        "queue counts are not srv_queue/backend_queue",
    )?;
    let mut rest = t.rest.trim_start_matches(' ');
    while let Some(capture) = rest.strip_prefix('{') {
        let close = capture
            .find('}')
            .ok_or("an unclosed {captured headers} block")?;
        rest = capture[close + 1..].trim_start_matches(' ');
    }
    let request = rest.strip_prefix('"').ok_or("no quoted request line")?;
    let request = request.strip_suffix('"').unwrap_or(request); // HAProxy truncates long ones
    let mut parts = request.splitn(3, ' ');
    let (method, target, protocol) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), p) => (m, t, p),
        _ => ("", "", None), // <BADREQ>
    };
    let host = ["http://", "https://"]
        .iter()
        .find_map(|s| target.strip_prefix(s))
        .map_or("", |after| &after[..after.find('/').unwrap_or(after.len())]);
    let service = match (tq, tw, tc, ta) {
        (Some(q), Some(w), Some(c), Some(a)) => Some((a - q - w - c).max(0) as f64 / 1000.0),
        _ => None,
    };
    let error = termination.get(..2).filter(|s| *s != "--");
    Ok(Request {
        time: stamp.seconds + ta.unwrap_or(0) as f64 / 1000.0,
        precise_time: stamp.subsecond,
        method,
        path: target,
        route: "",
        host,
        dyno: if server.starts_with('<') {
            ""
        } else {
            backend_server
        },
        connect: tc.map(|c| c as f64 / 1000.0),
        service,
        status,
        bytes: Some(bytes),
        error,
        request_id: None,
        protocol,
        detail: Detail::Haproxy(HaproxyDetail {
            frontend,
            backend,
            server,
            tq,
            tw,
            tc,
            tr,
            ta,
            termination,
            actconn: count(actconn),
            feconn: count(feconn),
            beconn: count(beconn),
            srv_conn: count(srv_conn),
            retries: count(retries),
            srv_queue: count(srv_queue),
            backend_queue: count(backend_queue),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_iso8601;

    const DOC: &str = "Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} \"GET /index.html HTTP/1.1\"";

    fn request(line: &str) -> Request<'_> {
        match parse(line) {
            Attempt::Request(r, _) => r,
            Attempt::Other => panic!("other"),
            Attempt::Reject(Reject::NotMine) => panic!("not mine: {line}"),
            Attempt::Reject(Reject::Malformed(why)) => panic!("{why}: {line}"),
        }
    }

    #[test]
    fn the_documented_example() {
        let r = request(DOC);
        let accept = parse_iso8601(b"2009-02-06T12:14:14.655Z")
            .unwrap()
            .0
            .seconds;
        assert!((r.time - (accept + 0.109)).abs() < 1e-6);
        assert_eq!(
            (r.method, r.path, r.protocol),
            ("GET", "/index.html", Some("HTTP/1.1"))
        );
        assert_eq!(
            (r.dyno, r.status, r.bytes, r.error),
            ("static/srv1", Some(200), Some(2750), None)
        );
        // 109 - 10 - 0 - 30
        assert_eq!((r.connect, r.service), (Some(0.030), Some(0.069)));
        match r.detail {
            Detail::Haproxy(d) => {
                assert_eq!(
                    (d.tq, d.tw, d.tc, d.tr, d.ta),
                    (Some(10), Some(0), Some(30), Some(69), Some(109))
                );
                assert_eq!(
                    (d.actconn, d.feconn, d.beconn, d.srv_conn, d.retries),
                    (1, 1, 1, 1, 0)
                );
                assert_eq!(
                    (d.frontend, d.backend, d.server, d.termination),
                    ("http-in", "static", "srv1", "----")
                );
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn queued_timeouts_and_missing_steps() {
        let r = request("10.0.0.1:4000 [06/Feb/2009:12:14:14.655] fe be/<NOSRV> 0/30000/-1/-1/30001 503 212 - - sQ-- 10/10/10/0/0 0/7 \"GET /slow HTTP/1.1\"");
        assert_eq!(
            (r.dyno, r.service, r.connect, r.error, r.status),
            ("", None, None, Some("sQ"), Some(503))
        );
        match r.detail {
            Detail::Haproxy(d) => assert_eq!(
                (d.tw, d.backend_queue, d.server),
                (Some(30000), 7, "<NOSRV>")
            ),
            _ => unreachable!(),
        }
        let r = request("10.0.0.1:4000 [06/Feb/2009:12:14:14.655] fe be/s1 0/0/1/-1/+5 -1 +0 - - CD-- 1/1/1/1/+1 0/0 \"POST https://api.example.com/v1/x?y=1 HTTP/2.0\"");
        assert_eq!(
            (r.status, r.service, r.host, r.error),
            (None, Some(0.004), "api.example.com", Some("CD"))
        );
    }

    #[test]
    fn not_haproxy_and_its_own_lines() {
        assert!(matches!(
            parse("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info"),
            Attempt::Reject(Reject::NotMine)
        ));
        assert!(matches!(
            parse("Feb  6 12:14:14 localhost haproxy[14389]: Proxy http-in started."),
            Attempt::Other
        ));
    }

    #[test]
    fn truncated_lines_are_malformed() {
        for n in [70, 90, 100, 110, 118, 125, 140] {
            let cut = &DOC[..n];
            assert!(
                matches!(parse(cut), Attempt::Reject(Reject::Malformed(_))),
                "{cut}"
            );
        }
    }
}
