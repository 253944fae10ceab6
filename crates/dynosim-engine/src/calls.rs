//! Services that call services (docs/services.md): the phases of `[request]` that call another
//! fleet of the scenario, `{ call = "NAME", timeout = T, retries = k }` and `{ fanout = "NAME",
//! count = N, wait = "all", hedge = T }`, and the `[services.NAME]` fleets they call, checked
//! as a whole: every service called exists, the calls make no cycle, every service is called.
//!
//! A call phase is read here; [`crate::request`] finds them among the phases, and
//! [`crate::services`] checks the services and the graph of calls between them. A `call` is
//! simulated by the event-driven engine's federation of fleets (`sim/federation.rs`), and so is
//! a fan-out, hedged or not.

use crate::error::{Error, Result};
use crate::units::Duration;
use serde_json::{Map, Value};

/// The most calls a fan-out sends at once, and the most retries a call makes.
pub const MAX_FANOUT: u32 = 10_000;
pub const MAX_RETRIES: i64 = 1000;

/// A phase that calls another service.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// `{ call = "NAME", timeout = T, retries = k }`: one synchronous call; the calling thread
    /// waits for its answer. `timeout` None: the caller waits as long as the answer takes.
    Sync {
        service: String,
        timeout: Option<f64>,
        retries: u32,
    },
    /// `{ fanout = "NAME", count = N, wait = ..., hedge = ... }`: `count` calls at once; the
    /// phase ends when `wait` of them have answered.
    Fanout {
        service: String,
        count: Count,
        wait: Wait,
        hedge: Option<Hedge>,
        cancel: Cancel,
    },
}

impl Call {
    /// The service called.
    pub fn service(&self) -> &str {
        match self {
            Call::Sync { service, .. } | Call::Fanout { service, .. } => service,
        }
    }

    /// The mean number of first calls the phase sends (retries and hedges left out).
    pub fn mean_calls(&self) -> f64 {
        match self {
            Call::Sync { .. } => 1.0,
            Call::Fanout { count, .. } => count.mean(),
        }
    }
}

/// A fan-out's width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// Every request this many calls.
    Fixed(u32),
    /// `{ distribution = "geometric", mean = m }`: 1, 2, 3... with P(n) = (1 − p)^(n−1) p,
    /// p = 1/m (as arrivals "batch" draws its sizes).
    Geometric { mean: f64 },
}

impl Count {
    pub fn mean(&self) -> f64 {
        match *self {
            Count::Fixed(n) => f64::from(n),
            Count::Geometric { mean } => mean,
        }
    }
}

/// How many of a fan-out's calls must answer before the phase ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    All,
    First,
    /// k of them; with a drawn count smaller than k, all of them.
    Some(u32),
}

/// When a second copy of a fan-out's unanswered call goes to another dyno.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hedge {
    /// This long after the first was sent.
    After(f64),
    /// After the callee's response time at this percentile ("p95": 95.0), as the caller sees it.
    Percentile(f64),
}

/// What a fan-out cancels of the calls it no longer needs (a hedge's loser, the calls a
/// `wait = "first"` or k-of-n fan-out did not wait for, those still out when the phase failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cancel {
    /// `cancel = false` (the default): nothing; they run on for nobody, answered late.
    #[default]
    Nothing,
    /// `cancel = "queued"`: a call that no thread has taken yet (in its router's queue, on its
    /// way, in a dyno's backlog) is dropped unserved; one already on a thread runs on.
    Queued,
    /// `cancel = true`: also a call already on its thread is stopped at once, its thread
    /// freed (as the app's own timeout stops a request).
    Running,
}

/// A call phase of a request: the key path of its table (`request.phases[1]`, without the
/// service's prefix), its class and place among the class's phases, and the call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSite {
    pub path: String,
    pub class: usize,
    pub phase: usize,
    pub call: Call,
}

/// Whether a phase's table is a call (`call` or `fanout`): [`crate::request`] leaves it to
/// this module.
pub(crate) fn is_call(table: &Map<String, Value>) -> bool {
    table.contains_key("call") || table.contains_key("fanout")
}

/// One call phase's table, `here` its key path.
pub(crate) fn parse(table: &Map<String, Value>, here: &str) -> Result<Call> {
    let key = |k: &str| format!("{here}.{k}");
    let allow = |allowed: &[&str], example: &str| -> Result<()> {
        match table.keys().find(|k| !allowed.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => Err(Error::config(
                key(k),
                format!(
                    "unknown key {k:?}; expected {} ({example})",
                    allowed.join(", ")
                ),
            )),
        }
    };
    let name = |k: &str| -> Result<String> {
        match &table[k] {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            other => Err(Error::config(
                key(k),
                format!("expected the name of a service of [services], got {other}"),
            )),
        }
    };
    match (table.contains_key("call"), table.contains_key("fanout")) {
        (true, true) => Err(Error::config(
            here,
            "a phase is a call or a fanout, not both",
        )),
        (true, false) => {
            allow(
                &["call", "timeout", "retries"],
                "{ call = \"NAME\", timeout = \"1s\", retries = 2 }",
            )?;
            let timeout = match table.get("timeout") {
                None => None,
                Some(v) => Some(positive_duration(v, &key("timeout"))?),
            };
            let retries = match table.get("retries") {
                None => 0,
                Some(v) => match v.as_i64() {
                    Some(n) if (0..=MAX_RETRIES).contains(&n) => n as u32,
                    _ => {
                        return Err(Error::config(
                            key("retries"),
                            format!("expected a whole number from 0 to {MAX_RETRIES}, got {v}"),
                        ))
                    }
                },
            };
            Ok(Call::Sync {
                service: name("call")?,
                timeout,
                retries,
            })
        }
        (false, _) => {
            allow(
                &["fanout", "count", "wait", "hedge", "cancel"],
                "{ fanout = \"NAME\", count = 10, wait = \"all\", hedge = \"p95\", cancel = \
                 \"queued\" }",
            )?;
            let count = match table.get("count") {
                None => {
                    return Err(Error::config(
                        key("count"),
                        "missing; a fanout needs count, a whole number or { distribution = \
                         \"geometric\", mean = 4 }",
                    ))
                }
                Some(v) => parse_count(v, &key("count"))?,
            };
            let wait = match table.get("wait") {
                None => Wait::All,
                Some(v) => parse_wait(v, count, &key("wait"))?,
            };
            // `hedge = false` is no hedging, as leaving it out (so that a sweep can vary
            // `hedge=false,10ms`).
            let hedge = match table.get("hedge") {
                None | Some(Value::Bool(false)) => None,
                Some(v) => Some(parse_hedge(v, &key("hedge"))?),
            };
            let cancel = match table.get("cancel") {
                None | Some(Value::Bool(false)) => Cancel::Nothing,
                Some(Value::Bool(true)) => Cancel::Running,
                Some(Value::String(s)) if s == "queued" => Cancel::Queued,
                Some(v) => {
                    return Err(Error::config(
                        key("cancel"),
                        format!(
                            "expected false (run on for nobody), \"queued\" (drop the calls no \
                             thread has taken yet) or true (stop them on their threads too), got \
                             {v}"
                        ),
                    ))
                }
            };
            Ok(Call::Fanout {
                service: name("fanout")?,
                count,
                wait,
                hedge,
                cancel,
            })
        }
    }
}

fn positive_duration(value: &Value, path: &str) -> Result<f64> {
    let d: Duration = serde_json::from_value(value.clone()).map_err(|_| {
        Error::config(
            path,
            format!("expected a duration > 0 such as \"500ms\", got {value}"),
        )
    })?;
    crate::params::check_duration(d.0, path)
}

fn parse_count(value: &Value, path: &str) -> Result<Count> {
    match value {
        Value::Object(t) => {
            match t.get("distribution").and_then(Value::as_str) {
                Some("geometric") => {}
                _ => {
                    return Err(Error::config(
                        format!("{path}.distribution"),
                        "expected \"geometric\" (a count distribution: { distribution = \
                         \"geometric\", mean = 4 })",
                    ))
                }
            }
            if let Some(k) = t
                .keys()
                .find(|k| !["distribution", "mean"].contains(&k.as_str()))
            {
                return Err(Error::config(
                    format!("{path}.{k}"),
                    "unknown key; a geometric count takes distribution and mean",
                ));
            }
            match t.get("mean").and_then(Value::as_f64) {
                Some(m) if (1.0..=f64::from(MAX_FANOUT)).contains(&m) => {
                    Ok(Count::Geometric { mean: m })
                }
                other => Err(Error::config(
                    format!("{path}.mean"),
                    format!(
                        "expected a mean number of calls from 1 to {MAX_FANOUT}, got {}",
                        other.map_or("nothing".into(), |m| m.to_string())
                    ),
                )),
            }
        }
        _ => match value.as_i64() {
            Some(n) if (1..=i64::from(MAX_FANOUT)).contains(&n) => Ok(Count::Fixed(n as u32)),
            _ => Err(Error::config(
                path,
                format!(
                    "expected a whole number of calls from 1 to {MAX_FANOUT}, or {{ distribution \
                     = \"geometric\", mean = 4 }}, got {value}"
                ),
            )),
        },
    }
}

fn parse_wait(value: &Value, count: Count, path: &str) -> Result<Wait> {
    match value {
        Value::String(s) if s == "all" => Ok(Wait::All),
        Value::String(s) if s == "first" => Ok(Wait::First),
        _ => {
            let most = match count {
                Count::Fixed(n) => n,
                Count::Geometric { .. } => MAX_FANOUT,
            };
            match value.as_i64() {
                Some(k) if (1..=i64::from(most)).contains(&k) => Ok(Wait::Some(k as u32)),
                _ => Err(Error::config(
                    path,
                    match count {
                        Count::Fixed(n) => format!(
                            "expected \"all\", \"first\" or a whole number of answers from 1 to \
                             the count, {n}; got {value}"
                        ),
                        Count::Geometric { .. } => format!(
                            "expected \"all\", \"first\" or a whole number of answers from 1 to \
                             {MAX_FANOUT}; got {value}"
                        ),
                    },
                )),
            }
        }
    }
}

fn parse_hedge(value: &Value, path: &str) -> Result<Hedge> {
    if let Value::String(s) = value {
        if let Some(p) = s.strip_prefix('p') {
            return match p.parse::<f64>() {
                Ok(q) if q > 0.0 && q < 100.0 => Ok(Hedge::Percentile(q)),
                _ => Err(Error::config(
                    path,
                    format!(
                        "expected a percentile from p1 to p99.9 (\"p95\") or a duration > 0; got \
                         {value}"
                    ),
                )),
            };
        }
    }
    let d: Duration = serde_json::from_value(value.clone()).map_err(|_| {
        Error::config(
            path,
            format!(
                "expected a duration > 0 (\"10ms\"), a percentile (\"p95\") or false (no \
                 hedging), got {value}"
            ),
        )
    })?;
    crate::params::check_duration(d.0, path).map(Hedge::After)
}

/// What the top-level fleet is called where the services are named beside it (`cost.entry.*`,
/// a time series' `service` column): no service may take the name.
pub const ENTRY: &str = "entry";

/// A service name: it stands in key paths and figures (`services.search.fleet.dynos`).
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name == ENTRY {
        return Err(Error::config(
            format!("services.{name}"),
            "\"entry\" names the top-level fleet (cost.entry.*, the time series' rows): give \
             the service another name",
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::config(
            format!("services.{name}"),
            "a service's name is 1 to 64 letters, digits, '-' or '_' (it stands in key paths \
             such as services.NAME.fleet.dynos)",
        ))
    }
}
