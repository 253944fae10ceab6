//! Shared resources (a database): servers that work on requests first come, first served or
//! by processor sharing, behind an optional pool of connections per process, per dyno or per
//! app (a pgbouncer).

use crate::error::{Error, Result};
use crate::params::{check_duration, whole};
use crate::units::Duration;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    /// The resource's own servers (a database's cores).
    #[serde(default = "one")]
    pub servers: i64,
    /// fcfs or ps.
    #[serde(default = "fcfs")]
    pub discipline: String,
    #[serde(default)]
    pub pool: Option<PoolSpec>,
    /// PostgreSQL's statement_timeout: a duration, or "off" (the default).
    #[serde(default)]
    pub timeout: Option<serde_json::Value>,
    /// Times the app tries a failed query again (0: never, the default).
    #[serde(default)]
    pub retries: i64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    pub size: i64,
    /// process, dyno or app.
    #[serde(default = "process")]
    pub per: String,
}

fn one() -> i64 {
    1
}
fn fcfs() -> String {
    "fcfs".into()
}
fn process() -> String {
    "process".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discipline {
    Fcfs,
    Ps,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolScope {
    Process,
    Dyno,
    App,
}

#[derive(Debug, Clone)]
pub struct Resource {
    pub name: String,
    pub servers: u32,
    pub discipline: Discipline,
    /// Connections per pool, and whose pool it is.
    pub pool: Option<(u32, PoolScope)>,
    /// `timeout` (statement_timeout): a query a server has held this long is stopped, its
    /// server freed, and it fails (None: never).
    pub timeout: Option<f64>,
    /// `retries`: times the app tries a failed query again (after a timeout, or a refusal of
    /// an outage) before the request fails.
    pub retries: u32,
}

impl Resource {
    pub fn build(name: &str, spec: &ResourceSpec) -> Result<Resource> {
        let path = format!("resources.{name}");
        let servers = whole(spec.servers, &format!("{path}.servers"), 1, 100_000)?;
        let discipline = match spec.discipline.as_str() {
            "fcfs" => Discipline::Fcfs,
            "ps" => Discipline::Ps,
            other => {
                return Err(Error::config(
                    format!("{path}.discipline"),
                    format!("unknown discipline {other:?}; expected fcfs or ps"),
                ))
            }
        };
        let pool = match &spec.pool {
            None => None,
            Some(p) => {
                let size = whole(p.size, &format!("{path}.pool.size"), 1, 1_000_000)?;
                let scope = match p.per.as_str() {
                    "process" => PoolScope::Process,
                    "dyno" => PoolScope::Dyno,
                    "app" => PoolScope::App,
                    other => {
                        return Err(Error::config(
                            format!("{path}.pool.per"),
                            format!("unknown scope {other:?}; expected process, dyno or app"),
                        ))
                    }
                };
                Some((size, scope))
            }
        };
        let timeout = match &spec.timeout {
            None | Some(serde_json::Value::Bool(false)) => None,
            Some(serde_json::Value::String(off)) if off == "off" => None,
            Some(v) => {
                let key = format!("{path}.timeout");
                let d = Duration::deserialize(v).map_err(|e| {
                    Error::config(
                        &key,
                        format!(
                            "{}, or \"off\"",
                            crate::params::strip_serde_position(&e.to_string())
                        ),
                    )
                })?;
                Some(check_duration(d.0, &key)?)
            }
        };
        let retries = whole(spec.retries, &format!("{path}.retries"), 0, 1_000)?;
        Ok(Resource {
            name: name.to_string(),
            servers,
            discipline,
            pool,
            timeout,
            retries,
        })
    }
}
