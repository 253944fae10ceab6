//! The requests one replication draws, exactly as the simulation draws them: arrival times from
//! the arrivals stream, then each request's class and phase times from the service stream, in
//! arrival order (a closed loop: in send order), and the think times in the order responses
//! come back. The real testbed sends these very requests, so that what it measures and what the
//! simulation of the same seed and replication computes are paired request by request.

use crate::rng::{stream, Stream};
use crate::scenario::Scenario;
use crate::workload::Workload;
use serde::Serialize;

/// What a request's phase does, as the testbed needs to know it.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseOutline {
    /// `cpu`, `io` or `use`; `hold` for a `[service]` scenario's one phase (the request holds
    /// its thread for the drawn time and uses no CPU or resource).
    pub kind: &'static str,
    /// The resource a `use` phase takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassOutline {
    pub name: String,
    pub phases: Vec<PhaseOutline>,
}

/// The drawn requests, column by column (index i is the i-th request).
#[derive(Debug, Clone, Serialize)]
pub struct Drawn {
    /// Open: arrivals arrive on their own; closed: clients send when their last response came.
    pub closed: bool,
    pub classes: Vec<ClassOutline>,
    /// Arrival times, s after the start (open loop; empty for a closed loop).
    pub time: Vec<f64>,
    pub class: Vec<u32>,
    /// Each request's phase times, s, in its class's phase order.
    pub phases: Vec<Vec<f64>>,
    /// Think times, s, in the order responses come back (closed loop with think time).
    pub think: Vec<f64>,
    /// Each request's key (`arrivals.keys`: its user, from 0), from the keys stream in the
    /// order the simulation draws them (one per request, at its arrival); empty without keys.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<u32>,
    /// Whether `limit` cut the requests short of what the run would draw.
    pub truncated: bool,
}

/// Draws the requests of `replication` up to `until` s (open loop: the arrivals before it; a
/// closed loop: its `requests`, or `limit` when it has none), at most `limit` of them.
pub fn draw(s: &Scenario, replication: u64, until: f64, limit: usize) -> Drawn {
    let mut service_rng = stream(s.seed, replication, Stream::Service);
    let classes = outline(s);
    let mut out = Drawn {
        closed: s.workload.is_closed(),
        classes,
        time: Vec::new(),
        class: Vec::new(),
        phases: Vec::new(),
        think: Vec::new(),
        key: Vec::new(),
        truncated: false,
    };
    let mut times = [0.0; crate::request::MAX_PHASES];
    let mut one = |out: &mut Drawn| match &s.request {
        None => {
            out.class.push(0);
            out.phases.push(vec![s.service.sample(&mut service_rng)]);
        }
        Some(model) => {
            let (class, _) = model.draw(&mut service_rng, &mut times);
            out.class.push(class as u32);
            let n = model.classes[class].phases.len();
            out.phases.push(times[..n].to_vec());
        }
    };
    match &s.workload {
        Workload::Open(process) => {
            let mut process = process.fresh(s.seed, replication);
            let mut arrival_rng = stream(s.seed, replication, Stream::Arrivals);
            let mut now = 0.0;
            while let Some(t) = process.next_arrival(now, &mut arrival_rng) {
                if t >= until {
                    break;
                }
                if out.time.len() == limit {
                    out.truncated = true;
                    break;
                }
                out.time.push(t);
                let mut carried = [0.0];
                if process.carried_services(&mut carried) {
                    // A replayed trace's own service time.
                    out.class.push(0);
                    out.phases.push(carried.to_vec());
                } else {
                    one(&mut out);
                }
                now = t;
            }
        }
        Workload::Closed(clients) => {
            let count = clients.requests.map_or(limit, |n| {
                out.truncated = n > limit as u64;
                n.min(limit as u64) as usize
            });
            for _ in 0..count {
                one(&mut out);
            }
            if let Some(think) = &clients.think {
                let mut think_rng = stream(s.seed, replication, Stream::Think);
                out.think = (0..count).map(|_| think.sample(&mut think_rng)).collect();
            }
        }
    }
    if let Some(keys) = &s.keys {
        let mut keys_rng = stream(s.seed, replication, Stream::Keys);
        out.key = (0..out.class.len())
            .map(|_| keys.draw(&mut keys_rng))
            .collect();
    }
    out
}

/// The classes of a scenario's requests and what each phase does.
pub fn outline(s: &Scenario) -> Vec<ClassOutline> {
    match &s.request {
        None => vec![ClassOutline {
            name: "default".into(),
            phases: vec![PhaseOutline {
                kind: "hold",
                resource: None,
            }],
        }],
        Some(model) => model
            .classes
            .iter()
            .map(|c| ClassOutline {
                name: c.name.clone(),
                phases: c
                    .phases
                    .iter()
                    .map(|p| match p.kind {
                        crate::request::PhaseKind::Cpu => PhaseOutline {
                            kind: "cpu",
                            resource: None,
                        },
                        // A call takes none of the caller's own time (not sent yet).
                        crate::request::PhaseKind::Io | crate::request::PhaseKind::Call(_) => {
                            PhaseOutline {
                                kind: "io",
                                resource: None,
                            }
                        }
                        crate::request::PhaseKind::Use(r) => PhaseOutline {
                            kind: "use",
                            resource: Some(s.resources[r as usize].name.clone()),
                        },
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::Path;

    fn scenario(text: &str) -> Scenario {
        Scenario::from_json(text, Path::new("."), &crate::never_interrupted).unwrap()
    }

    #[test]
    fn open_arrivals_are_increasing_and_stop_at_until() {
        let s = scenario(
            r#"{"arrivals": {"process": "poisson", "rate": 100}, "service": {"distribution": "exponential", "mean": 0.01},
                "fleet": {"dynos": 2}, "run": {"seed": 3}}"#,
        );
        let d = draw(&s, 0, 10.0, 1_000_000);
        assert!(!d.closed && !d.truncated);
        assert!(d.time.windows(2).all(|w| w[0] < w[1]));
        assert!(*d.time.last().unwrap() < 10.0);
        // 1,000 expected: 5 standard deviations either side.
        assert!((d.time.len() as f64 - 1000.0).abs() < 5.0 * 1000f64.sqrt());
        assert_eq!(d.phases.len(), d.time.len());
        let cut = draw(&s, 0, 10.0, 10);
        assert!(cut.truncated);
        assert_eq!(cut.time, d.time[..10]);
        assert_eq!(cut.phases, d.phases[..10]);
    }
}
