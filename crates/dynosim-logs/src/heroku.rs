//! Heroku router lines, every era and both framings (see [`crate::record::HerokuEra`] and
//! [`crate::record::Framing`]).

use crate::attempt::{Attempt, Reject};
use crate::number::{parse_ms_duration, parse_u64};
use crate::record::{Detail, Framing, HerokuDetail, HerokuEra, Request};
use crate::time::{parse_iso8601, Stamp};

/// One Heroku line: a request of its router, a line of another source (`app[web.1]`,
/// `heroku[web.1]`: skipped), or not Heroku's at all.
pub fn parse(line: &str) -> Attempt<'_> {
    let (stamp, framing, router, message) = match framing(line) {
        Some(f) => f,
        None => return Attempt::Reject(Reject::NotMine),
    };
    if !router {
        return Attempt::Other;
    }
    match message_fields(message) {
        Ok(fields) => Attempt::Request(fields.into_request(stamp, framing), message.as_bytes()),
        Err(reason) => Attempt::Reject(Reject::Malformed(reason.into())),
    }
}

/// The timestamp, the framing, whether the source is the router, and the message.
fn framing(line: &str) -> Option<(Stamp, Framing, bool, &str)> {
    let mut rest = line;
    // An HTTPS drain's octet count: `271 <158>1 ...`.
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && rest[digits..].starts_with(" <") {
        rest = &rest[digits + 1..];
    }
    if let Some(syslog) = rest.strip_prefix('<') {
        // <PRI>VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID MSG (RFC 5424)
        let close = syslog.find('>')?;
        if close == 0 || close > 3 || !syslog[..close].bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let after = &syslog[close + 1..];
        let version = after.bytes().take_while(u8::is_ascii_digit).count();
        let after = after[version..].strip_prefix(' ')?;
        let (stamp, n) = parse_iso8601(after.as_bytes())?;
        let mut fields = after[n..].strip_prefix(' ')?.splitn(5, ' ');
        let _host = fields.next()?;
        let app = fields.next()?;
        let proc_id = fields.next()?;
        let _msg_id = fields.next()?;
        let message = fields.next().unwrap_or("");
        return Some((
            stamp,
            Framing::Syslog,
            app == "heroku" && proc_id == "router",
            message,
        ));
    }
    // heroku logs: TIMESTAMP SOURCE[PROC]: MESSAGE
    let (stamp, n) = parse_iso8601(rest.as_bytes())?;
    let after = rest[n..].strip_prefix(' ')?;
    let tag_end = after
        .find(": ")
        .or_else(|| after.ends_with(':').then(|| after.len() - 1))?;
    let tag = &after[..tag_end];
    let open = tag.find('[')?;
    if !tag.ends_with(']') || open == 0 || tag[..open].contains(' ') {
        return None;
    }
    let message = after.get(tag_end + 2..).unwrap_or("");
    Some((stamp, Framing::Cli, tag == "heroku[router]", message))
}

#[derive(Default)]
struct Fields<'a> {
    era: Option<HerokuEra>,
    at: &'a str,
    code: Option<&'a str>,
    desc: Option<&'a str>,
    method: Option<&'a str>,
    path: Option<&'a str>,
    host: &'a str,
    request_id: Option<&'a str>,
    fwd: Option<&'a str>,
    dyno: &'a str,
    connect: Option<f64>,
    service: Option<f64>,
    status: Option<Option<u16>>,
    bytes: Option<u64>,
    protocol: Option<&'a str>,
    tls: Option<bool>,
    queue: Option<u32>,
    wait: Option<f64>,
}

impl<'a> Fields<'a> {
    fn into_request(self, stamp: Stamp, framing: Framing) -> Request<'a> {
        let era = self.era.unwrap_or(
            if self.tls.is_some()
                || self
                    .protocol
                    .is_some_and(|p| p.starts_with("http1") || p.starts_with("http2"))
            {
                HerokuEra::Router2
            } else if self.request_id.is_some() {
                HerokuEra::RequestId
            } else {
                HerokuEra::KeyValue
            },
        );
        Request {
            time: stamp.seconds,
            precise_time: stamp.subsecond,
            method: self.method.unwrap_or(""),
            path: self.path.unwrap_or(""),
            route: "",
            host: self.host,
            dyno: self.dyno,
            connect: self.connect,
            service: self.service,
            status: self.status.flatten(),
            bytes: self.bytes,
            error: self.code,
            request_id: self.request_id,
            protocol: self.protocol,
            detail: Detail::Heroku(HerokuDetail {
                era,
                framing,
                at: self.at,
                desc: self.desc,
                fwd: self.fwd,
                tls: self.tls,
                queue: self.queue,
                wait: self.wait,
            }),
        }
    }

    /// One `key=value` pair; unknown keys are ignored.
    fn set(&mut self, key: &str, value: &'a str) -> Result<(), &'static str> {
        match key {
            "at" => self.at = value,
            "code" => self.code = (!value.is_empty()).then_some(value),
            "desc" => self.desc = Some(value),
            "method" => self.method = Some(value),
            "path" => self.path = Some(value),
            "host" => self.host = value,
            "request_id" => self.request_id = (!value.is_empty()).then_some(value),
            "fwd" => self.fwd = Some(value),
            "dyno" => self.dyno = value,
            "connect" => self.connect = duration(value, "connect= is not a duration")?,
            "service" => self.service = duration(value, "service= is not a duration")?,
            "wait" => self.wait = duration(value, "wait= is not a duration")?,
            "status" => {
                self.status = Some(if value.is_empty() {
                    None
                } else {
                    match parse_u64(value.as_bytes()) {
                        Some(s @ 100..=999) => Some(s as u16),
                        _ => return Err("status= is not an HTTP status"),
                    }
                })
            }
            "bytes" => {
                self.bytes = if value.is_empty() {
                    None
                } else {
                    Some(parse_u64(value.as_bytes()).ok_or("bytes= is not a whole number")?)
                }
            }
            "protocol" => self.protocol = Some(value),
            "tls" => self.tls = Some(value == "true"),
            "queue" => {
                self.queue = parse_u64(value.as_bytes()).map(|q| q.min(u64::from(u32::MAX)) as u32)
            }
            _ => {}
        }
        Ok(())
    }
}

fn duration(value: &str, error: &'static str) -> Result<Option<f64>, &'static str> {
    if value.is_empty() {
        return Ok(None);
    }
    parse_ms_duration(value.as_bytes()).map(Some).ok_or(error)
}

/// The fields of a router message, either era.
fn message_fields(message: &str) -> Result<Fields<'_>, &'static str> {
    let mut fields = Fields::default();
    let pairs = if message.starts_with("at=") {
        message
    } else {
        legacy_head(message, &mut fields)?
    };
    let mut kv = Pairs { rest: pairs };
    while let Some((key, value)) = kv.next() {
        fields.set(key, value)?;
    }
    if fields.method.map_or(true, str::is_empty) {
        return Err("no method=");
    }
    if fields.path.is_none() {
        return Err("no path=");
    }
    if fields.status.is_none() {
        return Err("no status= (a truncated line?)");
    }
    Ok(fields)
}

/// The legacy era's `[Error H12 (Request timeout) -> ]GET host/path`, then its pairs.
fn legacy_head<'a>(message: &'a str, fields: &mut Fields<'a>) -> Result<&'a str, &'static str> {
    let mut rest = message;
    if let Some(error) = rest.strip_prefix("Error ") {
        let (code, after) = error
            .split_once(' ')
            .ok_or("an error line without its request")?;
        fields.code = Some(code);
        let (desc, after) = match after.strip_prefix('(') {
            Some(d) => d
                .split_once(") -> ")
                .ok_or("an error line without its request")?,
            None => (
                "",
                after
                    .strip_prefix("-> ")
                    .ok_or("an error line without its request")?,
            ),
        };
        fields.desc = (!desc.is_empty()).then_some(desc);
        fields.at = "error";
        rest = after;
    }
    let (method, after) = rest
        .split_once(' ')
        .ok_or("neither at= nor a legacy request line")?;
    if method.is_empty() || !method.bytes().all(|c| c.is_ascii_uppercase()) {
        return Err("neither at= nor a legacy request line");
    }
    let (target, pairs) = after.split_once(' ').unwrap_or((after, ""));
    let (host, path) = match target.find('/') {
        Some(i) => (&target[..i], &target[i..]),
        None => (target, "/"),
    };
    fields.era = Some(HerokuEra::Legacy);
    fields.method = Some(method);
    fields.host = host;
    fields.path = Some(path);
    Ok(pairs)
}

/// `key=value` pairs separated by spaces; a value may be quoted (`fwd="1.2.3.4, 5.6.7.8"`,
/// `path="/a b"`): it then ends at a quote followed by a space or the end of the line.
struct Pairs<'a> {
    rest: &'a str,
}

impl<'a> Pairs<'a> {
    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        loop {
            let rest = self.rest.trim_start_matches(' ');
            if rest.is_empty() {
                self.rest = rest;
                return None;
            }
            let word_end = memchr::memchr2(b' ', b'=', rest.as_bytes()).unwrap_or(rest.len());
            if rest.as_bytes().get(word_end) != Some(&b'=') {
                self.rest = &rest[word_end..]; // a bare word: skipped
                continue;
            }
            let key = &rest[..word_end];
            let after = &rest[word_end + 1..];
            if let Some(quoted) = after.strip_prefix('"') {
                let b = quoted.as_bytes();
                let mut from = 0;
                let close = loop {
                    match memchr::memchr(b'"', &b[from..]) {
                        Some(i) if matches!(b.get(from + i + 1), None | Some(b' ')) => {
                            break Some(from + i)
                        }
                        Some(i) => from += i + 1,
                        None => break None,
                    }
                };
                return Some(match close {
                    Some(c) => {
                        self.rest = &quoted[c + 1..];
                        (key, &quoted[..c])
                    }
                    None => {
                        self.rest = "";
                        (key, quoted)
                    }
                });
            }
            let end = memchr::memchr(b' ', after.as_bytes()).unwrap_or(after.len());
            self.rest = &after[end..];
            return Some((key, &after[..end]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(line: &str) -> Request<'_> {
        match parse(line) {
            Attempt::Request(r, _) => r,
            Attempt::Other => panic!("other: {line}"),
            Attempt::Reject(Reject::NotMine) => panic!("not mine: {line}"),
            Attempt::Reject(Reject::Malformed(why)) => panic!("{why}: {line}"),
        }
    }

    fn era(r: &Request) -> HerokuEra {
        match r.detail {
            Detail::Heroku(d) => d.era,
            _ => unreachable!(),
        }
    }

    #[test]
    fn cli_form_2014() {
        let r = request("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/api/users/1538823671/count_pending_messages host=mygame.heroku.com fwd=\"208.54.86.162\" dyno=web.12 connect=12ms service=21ms status=200 bytes=78");
        assert!((r.time - 1_389_248_213.748849).abs() < 1e-6);
        assert_eq!(
            (r.method, r.host, r.dyno),
            ("GET", "mygame.heroku.com", "web.12")
        );
        assert_eq!(r.path, "/api/users/1538823671/count_pending_messages");
        assert_eq!(
            (r.connect, r.service, r.status, r.bytes),
            (Some(0.012), Some(0.021), Some(200), Some(78))
        );
        assert_eq!(era(&r), HerokuEra::KeyValue);
        assert_eq!(r.request_id, None);
    }

    #[test]
    fn drain_with_octet_count_and_request_id() {
        let r = request("271 <158>1 2013-04-23T01:07:19.030189+00:00 host heroku router - at=info method=GET path=/api/v1/dependencies?gems=termios host=bundler-api.herokuapp.com request_id=64b787daac5b76918c0a2345e503464f fwd=\"54.245.255.174\" dyno=web.2 connect=18ms service=5ms status=200 bytes=84");
        assert_eq!(r.request_id, Some("64b787daac5b76918c0a2345e503464f"));
        assert_eq!(era(&r), HerokuEra::RequestId);
        assert_eq!(r.service, Some(0.005));
        match r.detail {
            Detail::Heroku(d) => assert_eq!(d.framing, Framing::Syslog),
            _ => unreachable!(),
        }
    }

    #[test]
    fn legacy_2012() {
        let r = request("339 <158>1 2012-11-02T20:51:42+00:00 d.030f3924-0da0-4be1-8a33-6b476c52e3ea heroku router - GET bundler-api.herokuapp.com/api/v1/dependencies?gems=rack,thin dyno=web.5 queue=0 wait=0ms service=27ms status=200 bytes=8518");
        assert_eq!(era(&r), HerokuEra::Legacy);
        assert_eq!(
            (r.method, r.host, r.path),
            (
                "GET",
                "bundler-api.herokuapp.com",
                "/api/v1/dependencies?gems=rack,thin"
            )
        );
        assert_eq!(
            (r.service, r.status, r.bytes, r.connect),
            (Some(0.027), Some(200), Some(8518), None)
        );
        assert!(!r.precise_time);
        let e = request("2012-06-01T10:00:00+00:00 heroku[router]: Error H12 (Request timeout) -> GET myapp.herokuapp.com/slow dyno=web.1 queue=0 wait=0ms service=30000ms status=503 bytes=0");
        assert_eq!(
            (e.error, e.service, e.status),
            (Some("H12"), Some(30.0), Some(503))
        );
        match e.detail {
            Detail::Heroku(d) => assert_eq!(d.desc, Some("Request timeout")),
            _ => unreachable!(),
        }
    }

    #[test]
    fn router2_quoted_path_with_spaces() {
        let r = request("2025-08-08T07:00:16.470875+00:00 heroku[router]: at=info method=GET path=\"/api/Schlachter 1951/books\" host=www.123-bibel.de request_id=4b0adc25-f648-c9c5-0b09-537cc99a4b84 fwd=\"84.183.36.173\" dyno=web.1 connect=0ms service=3ms status=200 bytes=2256 protocol=http2.0 tls=true tls_version=tls1.3");
        assert_eq!(r.path, "/api/Schlachter 1951/books");
        assert_eq!(era(&r), HerokuEra::Router2);
        assert_eq!(r.protocol, Some("http2.0"));
    }

    #[test]
    fn errors_with_empty_and_missing_values() {
        let r = request("2012-10-11T03:47:20+00:00 heroku[router]: at=error code=H12 desc=\"Request timeout\" method=GET path=/ host=myapp.herokuapp.com fwd=\"204.204.204.204\" dyno=web.1 connect= service=30000ms status=503 bytes=0");
        assert_eq!(
            (r.error, r.connect, r.service),
            (Some("H12"), None, Some(30.0))
        );
        let r = request("2014-01-09T06:16:54.000001+00:00 heroku[router]: at=error code=H10 desc=\"App crashed\" method=GET path=\"/\" host=myapp.herokuapp.com request_id=abc fwd=\"1.2.3.4\" dyno= connect= service= status=503 bytes= protocol=https");
        assert_eq!(
            (r.error, r.dyno, r.service, r.bytes, r.status),
            (Some("H10"), "", None, None, Some(503))
        );
        let r = request("2014-01-09T06:16:54.000001+00:00 heroku[router]: at=error code=H13 desc=\"Connection closed without response\" method=POST path=\"/upload\" host=a.com fwd=\"1.2.3.4\" dyno=web.3 connect=1ms status=503 bytes=0");
        assert_eq!(
            (r.error, r.service, r.connect),
            (Some("H13"), None, Some(0.001))
        );
    }

    #[test]
    fn other_sources_and_strangers() {
        assert!(matches!(
            parse("2014-01-09T06:16:53.748849+00:00 app[web.1]: Started GET \"/\""),
            Attempt::Other
        ));
        assert!(matches!(
            parse("<190>1 2021-02-25T13:04:29.326809+00:00 host app web.1 - hello"),
            Attempt::Other
        ));
        assert!(matches!(
            parse("2014-01-09T06:16:53.748849+00:00 heroku[web.1]: State changed from up to down"),
            Attempt::Other
        ));
        for stranger in [
            "",
            "hello",
            "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 2326",
            "2014-01-09 no tag",
        ] {
            assert!(
                matches!(parse(stranger), Attempt::Reject(Reject::NotMine)),
                "{stranger}"
            );
        }
    }

    #[test]
    fn truncated_and_garbled_router_lines_are_malformed() {
        for (line, why) in [
            ("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/ host=a dyno=web.1 connect=1ms serv", "no status="),
            ("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/ service=fast status=200", "service= is not a duration"),
            ("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info path=/ status=200", "no method="),
            ("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/ status=2000", "status= is not an HTTP status"),
            ("2014-01-09T06:16:53.748849+00:00 heroku[router]: something else", "neither at= nor a legacy request line"),
        ] {
            match parse(line) {
                Attempt::Reject(Reject::Malformed(r)) => assert!(r.contains(why), "{r} for {line}"),
                _ => panic!("accepted: {line}"),
            }
        }
    }

    #[test]
    fn unknown_keys_and_bare_words_are_ignored() {
        let r = request("2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info sample#x=1 method=GET path=/ junk status=204 bytes=0 future_key=\"a b\"");
        assert_eq!((r.method, r.status, r.bytes), ("GET", Some(204), Some(0)));
    }
}
