//! nginx access logs, read through a `log_format` template: literal pieces and `$variables`.
//!
//! The default is `combined` followed by `$request_time $upstream_response_time` (either or
//! both may be missing, so plain `combined` reads too); any other layout is given as its
//! `log_format` string. A variable's value runs to the next occurrence of the literal that
//! follows it in the template (nginx escapes `"` inside values as `\x22`, so a quoted
//! variable ends at its closing quote).

use std::borrow::Cow;

use crate::attempt::{Attempt, Reject};
use crate::number::{parse_f64, parse_u64};
use crate::record::{Detail, NginxDetail, Request};
use crate::time::{parse_clf, parse_epoch, parse_iso8601, Stamp};

/// `combined`, then the two timing variables this tool needs.
pub const DEFAULT_FORMAT: &str =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \
\"$http_referer\" \"$http_user_agent\" $request_time $upstream_response_time";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    TimeLocal,
    TimeIso8601,
    Msec,
    Request,
    RequestMethod,
    RequestUri,
    Status,
    BodyBytesSent,
    BytesSent,
    RequestTime,
    UpstreamResponseTime,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    UpstreamAddr,
    Host,
    RequestId,
    ServerProtocol,
    Ignored,
}

impl Var {
    fn of(name: &str) -> Var {
        match name {
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "msec" => Var::Msec,
            "request" => Var::Request,
            "request_method" => Var::RequestMethod,
            "request_uri" | "uri" => Var::RequestUri,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "bytes_sent" => Var::BytesSent,
            "request_time" => Var::RequestTime,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "upstream_connect_time" => Var::UpstreamConnectTime,
            "upstream_header_time" => Var::UpstreamHeaderTime,
            "upstream_addr" => Var::UpstreamAddr,
            "host" | "http_host" | "server_name" => Var::Host,
            "request_id" => Var::RequestId,
            "server_protocol" => Var::ServerProtocol,
            _ => Var::Ignored,
        }
    }

    fn is_time(self) -> bool {
        matches!(self, Var::TimeLocal | Var::TimeIso8601 | Var::Msec)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(String),
    Var(Var, String),
}

/// A parsed `log_format`.
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Piece>,
    /// A line may end at any piece from this one on (the default's optional timings).
    optional_from: usize,
    /// Failing before this piece means the line is not of this layout at all (auto-detection
    /// goes on to the next format); after it, the line is malformed.
    claimed_after: usize,
    has_upstream_time: bool,
}

impl Default for Template {
    fn default() -> Self {
        let mut t = Template::parse(DEFAULT_FORMAT).expect("the default log_format is valid");
        // `"$http_user_agent" $request_time`: the closing quote and the space become two
        // pieces, so that a line may end after the quote (plain combined).
        let timing = t
            .pieces
            .iter()
            .position(|p| matches!(p, Piece::Var(Var::RequestTime, _)))
            .expect("the default has $request_time");
        t.pieces.splice(
            timing - 1..timing,
            [Piece::Literal("\"".into()), Piece::Literal(" ".into())],
        );
        t.optional_from = timing;
        t
    }
}

impl Template {
    /// A template from a `log_format` string: the format itself (`'$remote_addr - ...'`) or
    /// nginx's directive (`log_format main '$remote_addr ' '"$request" ...';`).
    pub fn parse(text: &str) -> Result<Template, String> {
        let format = directive_format(text.trim());
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = format.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '$' {
                literal.push(c);
                continue;
            }
            let name = if format[i + 1..].starts_with('{') {
                let close = format[i + 2..]
                    .find('}')
                    .ok_or_else(|| format!("an unclosed ${{ at character {}", i + 1))?;
                let name = &format[i + 2..i + 2 + close];
                for _ in 0..close + 2 {
                    chars.next();
                }
                name
            } else {
                let len = format[i + 1..]
                    .bytes()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    .count();
                for _ in 0..len {
                    chars.next();
                }
                &format[i + 1..i + 1 + len]
            };
            if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                literal.push('$'); // a lone dollar is text
                continue;
            }
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            } else if let Some(Piece::Var(_, before)) = pieces.last() {
                return Err(format!(
                    "${before} and ${name} have nothing between them, so where one ends cannot be told"
                ));
            }
            pieces.push(Piece::Var(Var::of(name), name.to_string()));
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        let vars: Vec<Var> = pieces
            .iter()
            .filter_map(|p| {
                if let Piece::Var(v, _) = p {
                    Some(*v)
                } else {
                    None
                }
            })
            .collect();
        let time = pieces
            .iter()
            .position(|p| matches!(p, Piece::Var(v, _) if v.is_time()))
            .ok_or("it has no time: give $time_local, $time_iso8601 or $msec")?;
        if !vars.contains(&Var::Request) && !vars.contains(&Var::RequestUri) {
            return Err(
                "it has no request: give $request, or $request_method and $request_uri".into(),
            );
        }
        Ok(Template {
            optional_from: pieces.len(),
            claimed_after: time + 1,
            has_upstream_time: vars.contains(&Var::UpstreamResponseTime),
            pieces,
        })
    }

    /// One line as a request.
    pub fn parse_line<'a>(&self, line: &'a str) -> Attempt<'a> {
        let mut v = Values::default();
        let mut pos = 0;
        let fail =
            |i: usize, why: Cow<'static, str>| {
                if i < self.claimed_after {
                    Attempt::Reject(Reject::NotMine)
                } else if i >= self.optional_from {
                    Attempt::Reject(Reject::Malformed(
                    format!("{why}; after the user agent, the default layout expects $request_time \
                             $upstream_response_time: give the log_format").into(),
                ))
                } else {
                    Attempt::Reject(Reject::Malformed(why))
                }
            };
        for (i, piece) in self.pieces.iter().enumerate() {
            if i >= self.optional_from && pos == line.len() {
                break;
            }
            match piece {
                Piece::Literal(lit) => {
                    if !line[pos..].starts_with(lit.as_str()) {
                        return fail(
                            i,
                            format!("expected {lit:?} at character {}", pos + 1).into(),
                        );
                    }
                    pos += lit.len();
                }
                Piece::Var(var, name) => {
                    let end = match self.pieces.get(i + 1) {
                        Some(Piece::Literal(next)) => {
                            match memchr::memmem::find(&line.as_bytes()[pos..], next.as_bytes()) {
                                Some(n) => pos + n,
                                None if i + 1 >= self.optional_from => line.len(),
                                None => {
                                    return fail(i, format!("the line ends inside ${name}").into())
                                }
                            }
                        }
                        _ => line.len(),
                    };
                    if let Err(why) = v.set(*var, &line[pos..end]) {
                        return fail(i, format!("${name}: {why}").into());
                    }
                    pos = end;
                }
            }
        }
        if pos != line.len() {
            return Attempt::Reject(Reject::Malformed(
                if self.optional_from < self.pieces.len() {
                    "unexpected text after the layout of combined + $request_time $upstream_response_time; give the log_format"
                } else {
                    "unexpected text after the last field of the log_format"
                }
                .into(),
            ));
        }
        let Some(stamp) = v.time else {
            return Attempt::Reject(Reject::Malformed("no time".into()));
        };
        let (method, path, protocol) = match v.request {
            Some(r) => {
                let mut parts = r.splitn(3, ' ');
                match (parts.next(), parts.next(), parts.next()) {
                    (Some(m), Some(p), proto) => (m, p, proto),
                    _ => ("", "", None), // a request nginx could not read (TLS on a plain port)
                }
            }
            None => (v.method.unwrap_or(""), v.uri.unwrap_or(""), v.protocol),
        };
        let upstream = v.upstream_response_time;
        let service = match (upstream, v.upstream_connect_time) {
            (Some(Some(r)), Some(Some(c))) => Some((r - c).max(0.0)),
            (Some(r), _) => r,
            // No upstream timing in the line: nginx's own time for the request.
            (None, _) => v.request_time.flatten(),
        };
        Attempt::Request(
            Request {
                time: stamp.seconds,
                precise_time: stamp.subsecond,
                method,
                path,
                route: "",
                host: v.host,
                dyno: v.upstream_addr,
                connect: v.upstream_connect_time.flatten(),
                service,
                status: v.status,
                bytes: v.bytes,
                error: None,
                request_id: v.request_id,
                protocol: protocol.or(v.protocol),
                detail: Detail::Nginx(NginxDetail {
                    request_time: v.request_time.flatten(),
                    upstream_connect_time: v.upstream_connect_time.flatten(),
                    upstream_header_time: v.upstream_header_time.flatten(),
                    upstream_response_time: upstream.flatten(),
                }),
            },
            line.as_bytes(),
        )
    }

    /// Whether the layout has `$upstream_response_time` (else service is `$request_time`).
    pub fn has_upstream_time(&self) -> bool {
        self.has_upstream_time
    }
}

/// The format string of a `log_format` directive, its quoted parts joined; anything else as is.
fn directive_format(text: &str) -> Cow<'_, str> {
    let Some(rest) = text.strip_prefix("log_format") else {
        return strip_quotes(text);
    };
    let mut out = String::new();
    let mut rest = rest.trim_start();
    // the name, and nginx 1.11's optional escape=
    while !rest.is_empty() && !rest.starts_with(['\'', '"']) {
        rest = rest
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r)
            .trim_start();
    }
    while let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let body = &rest[1..];
        let Some(close) = body.find(q) else {
            out.push_str(body);
            break;
        };
        out.push_str(&body[..close]);
        rest = body[close + 1..].trim_start();
    }
    Cow::Owned(out)
}

fn strip_quotes(text: &str) -> Cow<'_, str> {
    for q in ['\'', '"'] {
        if text.len() >= 2 && text.starts_with(q) && text.ends_with(q) {
            return Cow::Borrowed(&text[1..text.len() - 1]);
        }
    }
    Cow::Borrowed(text)
}

#[derive(Default)]
struct Values<'a> {
    time: Option<Stamp>,
    request: Option<&'a str>,
    method: Option<&'a str>,
    uri: Option<&'a str>,
    protocol: Option<&'a str>,
    status: Option<u16>,
    bytes: Option<u64>,
    request_time: Option<Option<f64>>,
    upstream_response_time: Option<Option<f64>>,
    upstream_connect_time: Option<Option<f64>>,
    upstream_header_time: Option<Option<f64>>,
    upstream_addr: &'a str,
    host: &'a str,
    request_id: Option<&'a str>,
}

/// The last of nginx's list of upstream values (`0.012, 0.020 : 0.030`, `10.0.0.1:80,
/// 10.0.0.2:80`: one per upstream tried), the one that answered; `-` is none.
fn last_upstream(s: &str) -> &str {
    let cut = [s.rfind(", ").map(|i| i + 2), s.rfind(" : ").map(|i| i + 3)]
        .into_iter()
        .flatten()
        .max();
    s[cut.unwrap_or(0)..].trim()
}

fn seconds(s: &str) -> Result<Option<f64>, &'static str> {
    let s = last_upstream(s);
    if s == "-" || s.is_empty() {
        return Ok(None);
    }
    parse_f64(s.as_bytes())
        .filter(|v| *v >= 0.0)
        .map(Some)
        .ok_or("not a time in seconds")
}

impl<'a> Values<'a> {
    fn set(&mut self, var: Var, value: &'a str) -> Result<(), &'static str> {
        match var {
            Var::TimeLocal => {
                self.time = Some(
                    parse_clf(value.as_bytes())
                        .ok_or("not a date like 10/Oct/2000:13:55:36 -0700")?,
                )
            }
            Var::TimeIso8601 => {
                self.time = Some(
                    parse_iso8601(value.as_bytes())
                        .filter(|(_, n)| *n == value.len())
                        .ok_or("not an ISO 8601 time")?
                        .0,
                )
            }
            Var::Msec => {
                self.time =
                    Some(parse_epoch(value.as_bytes()).ok_or("not seconds since the epoch")?)
            }
            Var::Request => self.request = Some(value),
            Var::RequestMethod => self.method = Some(value),
            Var::RequestUri => self.uri = Some(value),
            Var::ServerProtocol => self.protocol = Some(value),
            Var::Status => {
                self.status = match parse_u64(value.as_bytes()) {
                    Some(s @ 100..=999) => Some(s as u16),
                    _ => return Err("not an HTTP status"),
                }
            }
            Var::BodyBytesSent | Var::BytesSent => {
                self.bytes = Some(parse_u64(value.as_bytes()).ok_or("not a whole number of bytes")?)
            }
            Var::RequestTime => self.request_time = Some(seconds(value)?),
            Var::UpstreamResponseTime => self.upstream_response_time = Some(seconds(value)?),
            Var::UpstreamConnectTime => self.upstream_connect_time = Some(seconds(value)?),
            Var::UpstreamHeaderTime => self.upstream_header_time = Some(seconds(value)?),
            Var::UpstreamAddr => {
                self.upstream_addr = if value == "-" {
                    ""
                } else {
                    last_upstream(value)
                }
            }
            Var::Host => self.host = if value == "-" { "" } else { value },
            Var::RequestId => {
                self.request_id = (value != "-" && !value.is_empty()).then_some(value)
            }
            Var::Ignored => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMBINED: &str = "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326 \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"";

    fn request<'a>(t: &Template, line: &'a str) -> Request<'a> {
        match t.parse_line(line) {
            Attempt::Request(r, _) => r,
            Attempt::Other => panic!("other"),
            Attempt::Reject(Reject::NotMine) => panic!("not mine: {line}"),
            Attempt::Reject(Reject::Malformed(why)) => panic!("{why}: {line}"),
        }
    }

    #[test]
    fn default_reads_combined_with_and_without_timings() {
        let t = Template::default();
        let r = request(&t, COMBINED);
        assert_eq!(
            (r.method, r.path, r.protocol, r.status, r.bytes),
            (
                "GET",
                "/apache_pb.gif",
                Some("HTTP/1.0"),
                Some(200),
                Some(2326)
            )
        );
        assert_eq!(r.service, None);
        let line = format!("{COMBINED} 0.250 0.200");
        let r = request(&t, &line);
        assert_eq!(r.service, Some(0.2));
        let line = format!("{COMBINED} 0.250 -");
        assert_eq!(
            request(&t, &line).service,
            None,
            "no upstream: static or cached"
        );
        let line = format!("{COMBINED} 0.250");
        assert_eq!(
            request(&t, &line).service,
            Some(0.25),
            "no upstream timing at all: nginx's own"
        );
        let line = format!("{COMBINED} 0.250 0.100, 0.120");
        assert_eq!(
            request(&t, &line).service,
            Some(0.12),
            "the upstream that answered"
        );
    }

    #[test]
    fn default_refuses_other_layouts_with_a_reason() {
        let t = Template::default();
        let line = format!("{COMBINED} \"10.0.0.9\" 0.250 0.200");
        assert!(
            matches!(t.parse_line(&line), Attempt::Reject(Reject::Malformed(why)) if why.contains("log_format"))
        );
        assert!(matches!(
            t.parse_line("2014-01-09T06:16:53Z heroku[router]: at=info"),
            Attempt::Reject(Reject::NotMine)
        ));
        let cut = &COMBINED[..60];
        assert!(
            matches!(t.parse_line(cut), Attempt::Reject(Reject::Malformed(_))),
            "{cut}"
        );
    }

    #[test]
    fn a_users_log_format() {
        let t = Template::parse(
            "log_format upstream_time '$remote_addr - $remote_user [$time_local] '\n '\"$request\" $status $body_bytes_sent '\n '\"$http_referer\" \"$http_user_agent\" rt=$request_time uct=\"$upstream_connect_time\" uht=\"$upstream_header_time\" urt=\"$upstream_response_time\" host=$host up=$upstream_addr id=$request_id';",
        )
        .unwrap();
        let line = "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"POST /users/42 HTTP/1.1\" 201 17 \"-\" \"curl/8.0\" rt=0.300 uct=\"0.010\" uht=\"0.200\" urt=\"0.250\" host=api.example.com up=10.1.0.5:8080 id=f00d";
        let r = request(&t, line);
        assert_eq!(
            (r.host, r.dyno, r.request_id),
            ("api.example.com", "10.1.0.5:8080", Some("f00d"))
        );
        assert_eq!(r.connect, Some(0.01));
        assert!((r.service.unwrap() - 0.24).abs() < 1e-12, "urt less uct");
        assert_eq!(r.status, Some(201));
    }

    #[test]
    fn msec_and_split_request_fields() {
        let t =
            Template::parse("$msec $request_method $request_uri $status $request_time").unwrap();
        let r = request(&t, "1389248213.748 GET /a?b=1 200 0.005");
        assert!((r.time - 1_389_248_213.748).abs() < 1e-6);
        assert!(r.precise_time);
        assert_eq!(
            (r.method, r.path, r.service),
            ("GET", "/a?b=1", Some(0.005))
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(Template::parse("$remote_addr $request $status")
            .unwrap_err()
            .contains("no time"));
        assert!(Template::parse("[$time_local] $status")
            .unwrap_err()
            .contains("no request"));
        assert!(Template::parse("[$time_local] $request$status")
            .unwrap_err()
            .contains("nothing between"));
        assert!(Template::parse("[$time_local] ${request")
            .unwrap_err()
            .contains("unclosed"));
    }
}
