//! One request as a router logged it: the fields every format shares, plus what is particular
//! to each router. Borrowed from the line (and the parser's scratch space) so that parsing a
//! line allocates nothing; [`Request::to_owned`] keeps one.

use serde::Serialize;

/// The router whose log a line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Heroku,
    Haproxy,
    Nginx,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Heroku, Format::Haproxy, Format::Nginx];

    pub fn name(self) -> &'static str {
        match self {
            Format::Heroku => "heroku",
            Format::Haproxy => "haproxy",
            Format::Nginx => "nginx",
        }
    }
}

/// The shape of a Heroku router line, by era.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HerokuEra {
    /// 2011–2012: `GET host/path dyno=web.1 queue=0 wait=0ms service=27ms status=200 bytes=8518`
    /// (errors as `Error H12 (Request timeout) -> GET ...`).
    Legacy,
    /// Late 2012–2013: `at=info method=GET path=... connect=1ms service=18ms ...`, no request id.
    KeyValue,
    /// 2013 on: with `request_id=` (and later `protocol=https`).
    RequestId,
    /// Router 2.0: `protocol=http1.1|http2.0` and `tls=`.
    Router2,
}

/// How a Heroku line reached the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Framing {
    /// `heroku logs`: `2014-01-09T06:16:53.748849+00:00 heroku[router]: ...`
    Cli,
    /// A log drain: `<158>1 2012-... host heroku router - ...` (with or without the octet count
    /// an HTTPS drain puts first).
    Syslog,
}

/// What only Heroku's router logs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HerokuDetail<'a> {
    pub era: HerokuEra,
    pub framing: Framing,
    /// `at=info|error|warning` (empty for the legacy era).
    pub at: &'a str,
    /// The error's description, `desc="Request timeout"`.
    pub desc: Option<&'a str>,
    /// `fwd=`, the client's address(es).
    pub fwd: Option<&'a str>,
    /// `tls=true|false` (Router 2.0).
    pub tls: Option<bool>,
    /// The legacy era's `queue=` (requests waiting at the router for this app) and `wait=`
    /// (seconds this one waited there).
    pub queue: Option<u32>,
    pub wait: Option<f64>,
}

/// HAProxy's HTTP log (`option httplog`): the five timers, in milliseconds (None where HAProxy
/// wrote -1: the step was never reached), and the connection and queue counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HaproxyDetail<'a> {
    pub frontend: &'a str,
    pub backend: &'a str,
    pub server: &'a str,
    /// `Tq` (1.x) or `TR` (2.x): receiving the request.
    pub tq: Option<i64>,
    /// `Tw`: waiting in HAProxy's queues.
    pub tw: Option<i64>,
    /// `Tc`: connecting to the server.
    pub tc: Option<i64>,
    /// `Tr`: the server's response headers.
    pub tr: Option<i64>,
    /// `Tt` (1.x, from the accept date) or `Ta` (2.x, from the request date): the whole request.
    pub ta: Option<i64>,
    /// The termination state, `----` when nothing went wrong.
    pub termination: &'a str,
    pub actconn: u32,
    pub feconn: u32,
    pub beconn: u32,
    pub srv_conn: u32,
    pub retries: u32,
    pub srv_queue: u32,
    pub backend_queue: u32,
}

/// nginx's timing variables, in seconds (the last upstream's where it tried several).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NginxDetail {
    pub request_time: Option<f64>,
    pub upstream_connect_time: Option<f64>,
    pub upstream_header_time: Option<f64>,
    pub upstream_response_time: Option<f64>,
}

/// What is particular to each router.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Detail<'a> {
    Heroku(HerokuDetail<'a>),
    Haproxy(HaproxyDetail<'a>),
    Nginx(NginxDetail),
}

/// One logged request.
///
/// `time` is when the request ended (when the router wrote the line), in seconds since the
/// Unix epoch: a request started at about `time - service` on its dyno and reached the router
/// at about `time - service - connect` (minus any queueing the router logs). Times are seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request<'a> {
    pub time: f64,
    /// The timestamp had a fraction of a second.
    pub precise_time: bool,
    pub method: &'a str,
    /// The path as logged, query string included.
    pub path: &'a str,
    /// The path normalised ([`crate::route::normalise`]): no query string, ids as `:id`.
    pub route: &'a str,
    /// The Host header; empty when the router does not log it.
    pub host: &'a str,
    /// Where the request was served: Heroku's dyno (`web.12`), HAProxy's `backend/server`,
    /// nginx's `$upstream_addr`; empty when none (an error before any dyno).
    pub dyno: &'a str,
    /// Connecting to the dyno.
    pub connect: Option<f64>,
    /// The dyno's part: from the connection to the end of the response (see docs/logs.md for
    /// each router's definition).
    pub service: Option<f64>,
    pub status: Option<u16>,
    pub bytes: Option<u64>,
    /// Heroku's error code (`H12`), HAProxy's termination state when not `--`.
    pub error: Option<&'a str>,
    pub request_id: Option<&'a str>,
    /// `protocol=` (Heroku), the request line's `HTTP/1.1` (HAProxy, nginx).
    pub protocol: Option<&'a str>,
    pub detail: Detail<'a>,
}

impl Request<'_> {
    pub fn format(&self) -> Format {
        match self.detail {
            Detail::Heroku(_) => Format::Heroku,
            Detail::Haproxy(_) => Format::Haproxy,
            Detail::Nginx(_) => Format::Nginx,
        }
    }

    /// When the dyno started on it: `time - service` (None without a service time).
    pub fn start(&self) -> Option<f64> {
        self.service.map(|s| self.time - s)
    }

    /// A copy that owns its text, to keep beyond the line it came from.
    pub fn to_owned(&self) -> OwnedRequest {
        OwnedRequest {
            format: self.format(),
            time: self.time,
            method: self.method.to_string(),
            path: self.path.to_string(),
            route: self.route.to_string(),
            host: self.host.to_string(),
            dyno: self.dyno.to_string(),
            connect: self.connect,
            service: self.service,
            status: self.status,
            bytes: self.bytes,
            error: self.error.map(str::to_string),
            request_id: self.request_id.map(str::to_string),
        }
    }
}

/// The fields of a [`Request`] that every format shares, owned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OwnedRequest {
    pub format: Format,
    pub time: f64,
    pub method: String,
    pub path: String,
    pub route: String,
    pub host: String,
    pub dyno: String,
    pub connect: Option<f64>,
    pub service: Option<f64>,
    pub status: Option<u16>,
    pub bytes: Option<u64>,
    pub error: Option<String>,
    pub request_id: Option<String>,
}
