//! A line of any supported router log to a [`Request`]: the format given, or found line by
//! line (the format of the previous line is tried first, so a file of one format costs one
//! attempt a line).

use std::borrow::Cow;
use std::str::FromStr;

use crate::attempt::{Attempt, Reject};
use crate::nginx::Template;
use crate::record::{Format, Request};
use crate::{haproxy, heroku, route};

/// Which format to read lines as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatChoice {
    /// Each line in whichever format reads it.
    #[default]
    Auto,
    Only(Format),
}

impl FromStr for FormatChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(FormatChoice::Auto),
            "heroku" => Ok(FormatChoice::Only(Format::Heroku)),
            "haproxy" => Ok(FormatChoice::Only(Format::Haproxy)),
            "nginx" => Ok(FormatChoice::Only(Format::Nginx)),
            other => Err(format!(
                "unknown log format {other:?}; expected auto, heroku, haproxy or nginx"
            )),
        }
    }
}

/// A line as the parser read it.
#[allow(clippy::large_enum_variant)] // one a line, on the stack: boxing would allocate each time
pub enum Line<'a> {
    /// A request, and the bytes identifying its line (for duplicates without a request id).
    Request(Request<'a>, &'a [u8]),
    /// A line of a known log that is not a request, or a blank line: skipped.
    Other,
}

/// Reads lines; keeps the scratch space that routes and repaired text are written into, so
/// that reading a line allocates nothing.
pub struct Parser {
    choice: FormatChoice,
    nginx: Template,
    last: Format,
    route: String,
    lossy: String,
}

impl Parser {
    /// `log_format`: nginx's layout (default: combined + `$request_time
    /// $upstream_response_time`); an error says what is wrong with it.
    pub fn new(choice: FormatChoice, log_format: Option<&str>) -> Result<Parser, String> {
        let nginx = match log_format {
            Some(f) => Template::parse(f)?,
            None => Template::default(),
        };
        Ok(Parser {
            choice,
            nginx,
            last: match choice {
                FormatChoice::Only(f) => f,
                FormatChoice::Auto => Format::Heroku,
            },
            route: String::new(),
            lossy: String::new(),
        })
    }

    /// One line, without its line end. Bytes that are not UTF-8 are replaced (U+FFFD) rather
    /// than refused: a garbled byte in a user agent should not cost the request.
    pub fn parse<'a>(&'a mut self, line: &'a [u8]) -> Result<Line<'a>, Cow<'static, str>> {
        let Parser {
            choice,
            nginx,
            last,
            route,
            lossy,
        } = self;
        let text: &'a str = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(_) => {
                *lossy = String::from_utf8_lossy(line).into_owned();
                lossy.as_str()
            }
        };
        if text.trim().is_empty() {
            return Ok(Line::Other);
        }
        // The previous line's format first, then the others.
        let mut order = [*last; 3];
        let mut n = 1;
        for f in Format::ALL {
            if f != *last {
                order[n] = f;
                n += 1;
            }
        }
        let tries = if matches!(choice, FormatChoice::Only(_)) {
            1
        } else {
            3
        };
        for format in &order[..tries] {
            let attempt = match format {
                Format::Heroku => heroku::parse(text),
                Format::Haproxy => haproxy::parse(text),
                Format::Nginx => nginx.parse_line(text),
            };
            match attempt {
                Attempt::Request(mut request, identity) => {
                    *last = *format;
                    request.route = route::normalise(request.path, route);
                    return Ok(Line::Request(request, identity));
                }
                Attempt::Other => {
                    *last = *format;
                    return Ok(Line::Other);
                }
                Attempt::Reject(Reject::Malformed(why)) => return Err(why),
                Attempt::Reject(Reject::NotMine) => {}
            }
        }
        Err(match choice {
            FormatChoice::Only(Format::Heroku) => "not a Heroku log line".into(),
            FormatChoice::Only(Format::Haproxy) => {
                "not an HAProxy HTTP log line (option httplog)".into()
            }
            FormatChoice::Only(Format::Nginx) => "not a line of the nginx log_format".into(),
            FormatChoice::Auto => "not a Heroku router, HAProxy or nginx line".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEROKU: &str = "2014-01-09T06:16:53.748849+00:00 heroku[router]: at=info method=GET path=/users/42?x=1 host=a.com dyno=web.1 connect=1ms service=2ms status=200 bytes=3";
    const HAPROXY: &str = "10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 \"GET /users/7 HTTP/1.1\"";
    const NGINX: &str = "127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /users/9 HTTP/1.0\" 200 2326 \"-\" \"curl\" 0.004 0.003";

    fn format_of(p: &mut Parser, line: &str) -> Result<(Format, String), String> {
        match p.parse(line.as_bytes()) {
            Ok(Line::Request(r, _)) => Ok((r.format(), r.route.to_string())),
            Ok(Line::Other) => Err("other".into()),
            Err(why) => Err(why.into_owned()),
        }
    }

    #[test]
    fn auto_detects_each_line() {
        let mut p = Parser::new(FormatChoice::Auto, None).unwrap();
        for _ in 0..2 {
            for (line, f) in [
                (HEROKU, Format::Heroku),
                (HAPROXY, Format::Haproxy),
                (NGINX, Format::Nginx),
                (HEROKU, Format::Heroku),
                (NGINX, Format::Nginx),
                (HAPROXY, Format::Haproxy),
            ] {
                assert_eq!(format_of(&mut p, line).unwrap().0, f, "{line}");
            }
        }
        assert_eq!(format_of(&mut p, HEROKU).unwrap().1, "/users/:id");
        assert_eq!(
            format_of(&mut p, "garbage").unwrap_err(),
            "not a Heroku router, HAProxy or nginx line"
        );
        assert_eq!(format_of(&mut p, "  ").unwrap_err(), "other");
    }

    #[test]
    fn a_forced_format_reads_only_its_own() {
        let mut p = Parser::new("haproxy".parse().unwrap(), None).unwrap();
        assert_eq!(format_of(&mut p, HAPROXY).unwrap().0, Format::Haproxy);
        assert_eq!(
            format_of(&mut p, HEROKU).unwrap_err(),
            "not an HAProxy HTTP log line (option httplog)"
        );
        assert!("apache"
            .parse::<FormatChoice>()
            .unwrap_err()
            .contains("unknown log format"));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced() {
        let mut p = Parser::new(FormatChoice::Auto, None).unwrap();
        let mut line = NGINX.replace("curl", "cu?l").into_bytes();
        let at = line.iter().position(|c| *c == b'?').unwrap();
        line[at] = 0xff;
        match p.parse(&line) {
            Ok(Line::Request(r, _)) => assert_eq!(r.status, Some(200)),
            _ => panic!("refused"),
        }
    }
}
