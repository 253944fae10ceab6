//! What a request does once a thread takes it: a sequence of phases, each with its own
//! distribution: `cpu` (work that needs a core, and its process's lock if any), `io` (a wait
//! that uses no CPU), `use` of a named shared resource (take a connection from its pool, be
//! served, give the connection back). Request classes (endpoints) with weights, each with its
//! own phases.

use crate::calls::{is_call, CallSite};
use crate::dist::{self, Empirical, ServiceDistribution};
use crate::error::{Error, Result};
use crate::rng::SimRng;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The `[request]` section: `phases` for one class, or `[[request.class]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    #[serde(default)]
    pub phases: Option<Vec<Value>>,
    #[serde(default)]
    pub class: Option<Vec<ClassSpec>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
    pub phases: Vec<Value>,
}

fn one() -> f64 {
    1.0
}

impl RequestSpec {
    /// The call phases of `[request]`, read and checked; `prefix` goes before their key paths in
    /// errors (`services.search.`). A class whose phases are all calls is refused: its own
    /// time, which the load checks read, would be none.
    pub(crate) fn call_sites(&self, prefix: &str) -> Result<Vec<CallSite>> {
        let spec = self;
        let mut classes: Vec<(String, &[Value])> = Vec::new();
        if let Some(phases) = &spec.phases {
            classes.push(("request.phases".into(), phases));
        }
        for (i, c) in spec.class.iter().flatten().enumerate() {
            classes.push((format!("request.class[{i}].phases"), &c.phases));
        }
        let mut out = Vec::new();
        for (class, (path, phases)) in classes.iter().enumerate() {
            let mut own = 0;
            for (phase, value) in phases.iter().enumerate() {
                let Some(table) = value.as_object().filter(|t| is_call(t)) else {
                    own += 1;
                    continue;
                };
                let here = format!("{path}[{phase}]");
                out.push(CallSite {
                    call: crate::calls::parse(table, &format!("{prefix}{here}"))?,
                    path: here,
                    class,
                    phase,
                });
            }
            if own == 0 && !phases.is_empty() {
                return Err(Error::config(
                    format!("{prefix}{path}"),
                    "every phase calls another service; a request needs a phase of its own (cpu, \
                     io or use) beside its calls, such as the caller's own CPU",
                ));
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    Cpu,
    Io,
    /// A shared resource, by its index in the scenario's resources.
    Use(u32),
    /// A call to another service (`{ call = "NAME" }`, `{ fanout = ... }`), by its index
    /// among the scenario's call sites ([`crate::Scenario::calls`]). It takes none of the
    /// caller's own time (its drawn time is 0): the thread waits, holding its slot, for the
    /// callee's answer (the engine's federation of fleets, `sim/federation.rs`).
    Call(u32),
}

#[derive(Debug)]
pub struct Phase {
    pub kind: PhaseKind,
    pub time: Box<dyn ServiceDistribution>,
    /// The app server's own CPU (`app.request_cpu`), not the app's: drawn by the simulation
    /// from a stream of its own, so the requests' phases are the same with or without it
    /// ([`RequestModel::draw`] leaves it 0).
    pub server: bool,
}

#[derive(Debug)]
pub struct Class {
    pub name: String,
    pub weight: f64,
    pub phases: Vec<Phase>,
}

/// Every class of request, with their cumulative weights for drawing one.
#[derive(Debug)]
pub struct RequestModel {
    pub classes: Vec<Class>,
    cumulative: Vec<f64>,
}

/// Phases a class may have (a request keeps its drawn times inline).
pub const MAX_PHASES: usize = 32;

impl RequestModel {
    /// `resources`: the names of the scenario's resources, for `use = "db"`.
    pub fn build(
        spec: &RequestSpec,
        resources: &[String],
        base_dir: &Path,
    ) -> Result<RequestModel> {
        // The call phases, numbered in class and phase order as [`RequestSpec::call_sites`]
        // lists them.
        let mut calls = 0u32;
        let classes = match (&spec.phases, &spec.class) {
            (Some(phases), None) => vec![Class {
                name: "default".into(),
                weight: 1.0,
                phases: build_phases(phases, "request.phases", resources, base_dir, &mut calls)?,
            }],
            (None, Some(classes)) => {
                if classes.is_empty() {
                    return Err(Error::config("request.class", "needs at least one class"));
                }
                let mut out = Vec::new();
                for (i, c) in classes.iter().enumerate() {
                    let path = format!("request.class[{i}]");
                    if !(c.weight.is_finite() && c.weight > 0.0) {
                        return Err(Error::config(
                            format!("{path}.weight"),
                            format!("must be a positive number, got {}", c.weight),
                        ));
                    }
                    if out.iter().any(|o: &Class| o.name == c.name) {
                        return Err(Error::config(
                            format!("{path}.name"),
                            format!("class {:?} is named twice", c.name),
                        ));
                    }
                    out.push(Class {
                        name: c.name.clone(),
                        weight: c.weight,
                        phases: build_phases(
                            &c.phases,
                            &format!("{path}.phases"),
                            resources,
                            base_dir,
                            &mut calls,
                        )?,
                    });
                }
                out
            }
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "request.class",
                    "give either request.phases (one class) or [[request.class]], not both",
                ))
            }
            (None, None) => {
                return Err(Error::config(
                    "request.phases",
                    "missing; [request] needs phases (or [[request.class]] tables)",
                ))
            }
        };
        let total: f64 = classes.iter().map(|c| c.weight).sum();
        let mut acc = 0.0;
        let cumulative = classes
            .iter()
            .map(|c| {
                acc += c.weight / total;
                acc
            })
            .collect();
        Ok(RequestModel {
            classes,
            cumulative,
        })
    }

    /// Draws a class (no draw with one class).
    #[inline]
    pub fn draw_class(&self, rng: &mut SimRng) -> usize {
        if self.classes.len() == 1 {
            return 0;
        }
        let u: f64 = rng.random();
        self.cumulative
            .iter()
            .position(|&c| u < c)
            .unwrap_or(self.classes.len() - 1)
    }

    /// Draws a request: its class, then each of its phases' times into the first places of
    /// `times` (at least [`MAX_PHASES`] long, or as many as the class has phases); returns the
    /// class and the sum of the times. The simulation and [`crate::drawn`] both draw through
    /// here, so they see the same requests.
    #[inline]
    pub fn draw(&self, rng: &mut SimRng, times: &mut [f64]) -> (usize, f64) {
        let class = self.draw_class(rng);
        let mut sum = 0.0;
        for (k, phase) in self.classes[class].phases.iter().enumerate() {
            if phase.server {
                times[k] = 0.0;
                continue;
            }
            let x = phase.time.sample(rng);
            times[k] = x;
            sum += x;
        }
        (class, sum)
    }

    /// Puts the app server's own CPU per request (`app.request_cpu`) before every class's
    /// phases: `make` builds its distribution, once for each class.
    pub fn prepend_server_cpu(
        &mut self,
        mut make: impl FnMut() -> Result<Box<dyn ServiceDistribution>>,
    ) -> Result<()> {
        for class in &mut self.classes {
            if class.phases.len() >= MAX_PHASES {
                return Err(Error::config(
                    "app.request_cpu",
                    format!(
                        "class {:?} already has {MAX_PHASES} phases, the most a class has with \
                         the server's own CPU",
                        class.name
                    ),
                ));
            }
            class.phases.insert(
                0,
                Phase {
                    kind: PhaseKind::Cpu,
                    time: make()?,
                    server: true,
                },
            );
        }
        Ok(())
    }

    /// Whether the classes' first phase is the server's own CPU (`app.request_cpu`).
    pub fn has_server_cpu(&self) -> bool {
        self.classes[0].phases.first().is_some_and(|p| p.server)
    }

    /// The share of requests in each class.
    pub fn shares(&self) -> Vec<f64> {
        let total: f64 = self.classes.iter().map(|c| c.weight).sum();
        self.classes.iter().map(|c| c.weight / total).collect()
    }

    /// Mean time of each kind of phase per request (cpu, io, and each resource), uncontended.
    pub fn mean_demand(&self, kind: PhaseKind) -> f64 {
        self.classes
            .iter()
            .zip(self.shares())
            .map(|(c, share)| {
                share
                    * c.phases
                        .iter()
                        .filter(|p| p.kind == kind)
                        .map(|p| p.time.mean())
                        .sum::<f64>()
            })
            .sum()
    }

    /// Mean and second moment of a request's uncontended time (the sum of its phases): the
    /// phases are independent, so E[(ΣX)²] = ΣE[X²] + Σ_{i≠j} E[X_i]E[X_j].
    pub fn moments(&self) -> (f64, f64) {
        let shares = self.shares();
        let mut mean = 0.0;
        let mut second = 0.0;
        for (c, share) in self.classes.iter().zip(shares) {
            let m: f64 = c.phases.iter().map(|p| p.time.mean()).sum();
            let s: f64 = c.phases.iter().map(|p| p.time.second_moment()).sum::<f64>() + m * m
                - c.phases.iter().map(|p| p.time.mean().powi(2)).sum::<f64>();
            mean += share * m;
            second += share * s;
        }
        (mean, second)
    }
}

fn build_phases(
    phases: &[Value],
    path: &str,
    resources: &[String],
    base_dir: &Path,
    calls: &mut u32,
) -> Result<Vec<Phase>> {
    if phases.is_empty() {
        return Err(Error::config(path, "needs at least one phase"));
    }
    if phases.len() > MAX_PHASES {
        return Err(Error::config(
            path,
            format!("at most {MAX_PHASES} phases, got {}", phases.len()),
        ));
    }
    phases
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let here = format!("{path}[{i}]");
            let table = v.as_object().ok_or_else(|| {
                Error::config(
                    &here,
                    "expected a table such as { cpu = \"3ms\" }, { io = \"1ms\" }, \
                     { use = \"db\", time = \"5ms\" } or { call = \"api\" }",
                )
            })?;
            if is_call(table) {
                // Read by crate::calls; it takes no time of the caller's own.
                *calls += 1;
                return Ok(Phase {
                    kind: PhaseKind::Call(*calls - 1),
                    time: Box::new(dist::Constant(0.0)),
                    server: false,
                });
            }
            let keys: Vec<&str> = table.keys().map(String::as_str).collect();
            match keys.as_slice() {
                ["cpu"] => Ok(Phase {
                    kind: PhaseKind::Cpu,
                    time: dist::from_value(&table["cpu"], &format!("{here}.cpu"), base_dir)?,
                    server: false,
                }),
                ["io"] => Ok(Phase {
                    kind: PhaseKind::Io,
                    time: dist::from_value(&table["io"], &format!("{here}.io"), base_dir)?,
                    server: false,
                }),
                ["time", "use"] | ["use", "time"] => {
                    let name = table["use"].as_str().ok_or_else(|| {
                        Error::config(format!("{here}.use"), "expected a resource name")
                    })?;
                    let index = resources.iter().position(|r| r == name).ok_or_else(|| {
                        Error::config(
                            format!("{here}.use"),
                            if resources.is_empty() {
                                format!(
                                    "no resource {name:?}: the scenario has no [resources.{name}]"
                                )
                            } else {
                                format!(
                                    "unknown resource {name:?}; expected one of: {}",
                                    resources.join(", ")
                                )
                            },
                        )
                    })?;
                    Ok(Phase {
                        kind: PhaseKind::Use(index as u32),
                        time: dist::from_value(&table["time"], &format!("{here}.time"), base_dir)?,
                        server: false,
                    })
                }
                ["use"] => Err(Error::config(
                    format!("{here}.time"),
                    "missing; a use phase needs the time the resource works on it",
                )),
                _ => Err(Error::config(
                    &here,
                    format!(
                        "expected one of cpu, io, use with time, call or fanout; got keys {}",
                        keys.join(", ")
                    ),
                )),
            }
        })
        .collect()
}

/// A request's time when nothing contends: a class drawn by weight, then the sum of its
/// phases. Its mean and second moment are exact; its quantiles and cdf are those of a fixed
/// sample of [`RequestTime::SAMPLE`] requests (an [`Empirical`] distribution, seed fixed, so a
/// scenario always describes itself the same way), as the sum has no closed form.
#[derive(Debug)]
pub struct RequestTime {
    mean: f64,
    second: f64,
    sample: Empirical,
}

impl RequestTime {
    pub const SAMPLE: usize = 20_000;

    pub fn new(model: &RequestModel) -> Result<RequestTime> {
        use rand::SeedableRng;
        let (mean, second) = model.moments();
        let mut rng = SimRng::seed_from_u64(0x5eed);
        let times: Vec<f64> = (0..Self::SAMPLE)
            .map(|_| {
                let class = &model.classes[model.draw_class(&mut rng)];
                class.phases.iter().map(|p| p.time.sample(&mut rng)).sum()
            })
            .collect();
        let sample = Empirical::new(times).map_err(|e| Error::config("request", e))?;
        Ok(RequestTime {
            mean,
            second,
            sample,
        })
    }
}

impl ServiceDistribution for RequestTime {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.sample.sample(rng)
    }
    fn mean(&self) -> f64 {
        self.mean
    }
    fn second_moment(&self) -> f64 {
        self.second
    }
    fn quantile(&self, p: f64) -> f64 {
        self.sample.quantile(p)
    }
    fn cdf(&self, x: f64) -> f64 {
        self.sample.cdf(x)
    }
}
