//! Services that call services (docs/services.md): the `[services.NAME]` fleets of a scenario,
//! each validated by the top level's own code, and the graph of the calls between them
//! ([`crate::calls`]) checked as a whole: every call names a service, no cycle, every service
//! called. Each service gets the rate of calls the traffic equations give it, and is described.

use crate::calls::{Call, CallSite, Cancel, Count, Hedge, Wait};
use crate::error::{Error, Result};
use crate::request::RequestSpec;
use crate::scenario::{ArrivalsSpec, RunSpec, Scenario, ScenarioSpec, Service};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The services of `spec` (`[services.NAME]`), each validated with the top level's code (its
/// errors' key paths under `services.NAME.`), after the calls between them are checked: every
/// call names a service, no cycle, every service called. `entry` is the top-level fleet, built.
pub(crate) fn build(
    spec: &ScenarioSpec,
    entry: &Scenario,
    base_dir: &Path,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<Service>> {
    let empty = BTreeMap::new();
    let tiers = spec.services.as_ref().unwrap_or(&empty);
    for name in tiers.keys() {
        crate::calls::check_name(name)?;
    }
    // Each tier's call sites (their key paths within the tier): the entry's, then the services'.
    let mut calls: Vec<(Option<&str>, Vec<CallSite>)> = vec![(None, entry.calls.clone())];
    for (name, tier) in tiers {
        let prefix = format!("services.{name}.");
        let sites = match &tier.request {
            Some(r) => r.call_sites(&prefix)?,
            None => Vec::new(),
        };
        calls.push((Some(name.as_str()), sites));
    }
    let full = |tier: Option<&str>, site: &CallSite| match tier {
        None => site.path.clone(),
        Some(name) => format!("services.{name}.{}", site.path),
    };
    let key = |site: &CallSite| match site.call {
        Call::Sync { .. } => "call",
        Call::Fanout { .. } => "fanout",
    };
    for (tier, sites) in &calls {
        for site in sites {
            let called = site.call.service();
            if !tiers.contains_key(called) {
                let known = if tiers.is_empty() {
                    format!("the scenario has no [services.{called}]")
                } else {
                    format!(
                        "expected one of: {}",
                        tiers.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(Error::config(
                    format!("{}.{}", full(*tier, site), key(site)),
                    format!("unknown service {called:?}; {known}"),
                ));
            }
        }
    }
    let order = topological(&calls, |tier, site| {
        format!("{}.{}", full(tier, site), key(site))
    })?;
    // The traffic equations on the graph, in order: each service's rate is its callers'
    // rates times their mean calls to it a request.
    let mut rates: BTreeMap<&str, f64> = BTreeMap::new();
    let entry_rate = entry.arrival_rate();
    for tier in std::iter::once(None).chain(order.iter().map(|n| Some(n.as_str()))) {
        let rate = match tier {
            None => entry_rate,
            Some(name) => rates.get(name).copied().unwrap_or(0.0),
        };
        let (scenario_shares, sites) = match tier {
            None => (class_shares(entry), &calls[0].1),
            Some(name) => {
                let sites = &calls
                    .iter()
                    .find(|(t, _)| *t == Some(name))
                    .expect("a tier")
                    .1;
                (shares_of(tiers[name].request.as_ref()), sites)
            }
        };
        for site in sites {
            let share = scenario_shares.get(site.class).copied().unwrap_or(1.0);
            *rates.entry(site.call.service()).or_insert(0.0) +=
                rate * share * site.call.mean_calls();
        }
    }
    let mut services = Vec::new();
    for (name, tier) in tiers {
        let rate = rates.get(name.as_str()).copied().unwrap_or(0.0);
        if rate <= 0.0 {
            return Err(Error::config(
                format!("services.{name}"),
                format!(
                    "no phase calls it: add {{ call = \"{name}\" }} or {{ fanout = \"{name}\", \
                     count = N }} to the phases of [request] of the top level or of a service \
                     called (a service called by nobody gets no requests)"
                ),
            ));
        }
        let own = ScenarioSpec {
            name: Some(name.clone()),
            description: None,
            arrivals: ArrivalsSpec {
                process: "poisson".into(),
                burst: None,
                timeout: None,
                keys: spec.arrivals.keys.clone(),
                retry: None,
                breaker: None,
                params: Map::from_iter([("rate".to_string(), json!(rate))]),
            },
            service: tier.service.clone(),
            request: tier.request.clone(),
            fleet: tier.fleet.clone(),
            app: tier.app.clone(),
            // The scenario's resources are shared by every fleet that uses them.
            resources: tier.request.as_ref().and(spec.resources.clone()),
            router: tier.router.clone(),
            autoscale: tier.autoscale.clone(),
            run: RunSpec {
                // The fleets run together, unsplit; the stability verdict is judged where
                // the faults are.
                shards: None,
                recovery_window: tier.faults.as_ref().and(spec.run.recovery_window),
                recovery_interval: tier.faults.as_ref().and(spec.run.recovery_interval.clone()),
                ..spec.run.clone()
            },
            faults: tier.faults.clone(),
            cost: None,
            cases: None,
            services: None,
        };
        let mut scenario = Scenario::validate(&own, base_dir, interrupted)
            .map_err(|e| in_service(e, name, rate))?;
        // Its own random streams (see `crate::rng::service_seed`).
        scenario.seed = crate::rng::service_seed(spec.run.seed, services.len() as u64);
        services.push(Service {
            name: name.clone(),
            scenario,
            rate,
        });
    }
    Ok(services)
}

/// The tables a service has of its own: an error in them is at `services.NAME.` and the key.
const SERVICE_TABLES: &[&str] = &[
    "service",
    "request",
    "fleet",
    "app",
    "router",
    "autoscale",
    "faults",
];

/// An error from validating service `name` as a scenario: in its own tables, at its key path
/// under `services.NAME.`; in the scenario's (run, resources) or the arrivals it was given,
/// said to be the service's.
fn in_service(error: Error, name: &str, rate: f64) -> Error {
    match error {
        Error::Config { path, message } => {
            let head = path.split(['.', '[']).next().unwrap_or("");
            if SERVICE_TABLES.contains(&head) {
                Error::config(format!("services.{name}.{path}"), message)
            } else {
                Error::config(
                    path,
                    format!(
                        "{message} (for service {name:?}, at the {rate} calls/s its callers \
                         send it)"
                    ),
                )
            }
        }
        other => other,
    }
}

/// The stability verdict of fleets that call one another: a fault in any fleet is judged at
/// every fleet, the entry's (the whole request's goodput) and each service's. Each fleet's rule
/// spans the first fault's start to the last fault's end over all the fleets; a fleet without
/// faults of its own gets the rule of one with them (the same window, `run.recovery_window`),
/// with an interval of its own (`run.recovery_interval`, or sized by its own rate when that is
/// "auto" or left out). Nothing changes for a scenario without faults.
pub(crate) fn judge_faults_together(entry: &mut Scenario, spec: &ScenarioSpec) {
    let rules = std::iter::once(entry.stability.as_ref())
        .chain(entry.services.iter().map(|s| s.scenario.stability.as_ref()))
        .flatten();
    let Some(template) = rules.clone().next().copied() else {
        return;
    };
    let first = rules.clone().map(|r| r.first).fold(f64::INFINITY, f64::min);
    let last = rules.map(|r| r.last).fold(f64::NEG_INFINITY, f64::max);
    let auto = match &spec.run.recovery_interval {
        None => true,
        Some(Value::String(s)) => s == "auto",
        Some(_) => false,
    };
    let judge = |scenario: &mut Scenario, rate: f64| {
        let rule = scenario.stability.get_or_insert(crate::stability::Rule {
            interval: if auto {
                crate::stability::auto_interval(rate, template.window)
            } else {
                template.interval
            },
            ..template
        });
        rule.first = first;
        rule.last = last;
    };
    let rate = entry.arrival_rate();
    judge(entry, rate);
    for service in &mut entry.services {
        judge(&mut service.scenario, service.rate);
    }
}

/// Sets each fleet's [`Scenario::call_hold`]: the mean time a request's thread waits on its
/// calls, at least, so that a fleet's offered load and its stability check count the threads its
/// calls hold. A call without `timeout` and a fan-out that waits for all its calls without
/// `hedge` wait at least as long as the callee takes uncontended (its own service time and its
/// own calls'; a fan-out's slowest call is no quicker than one); a call with a timeout, a hedged
/// fan-out and one that waits for fewer than all can be quicker than the callee's mean, and
/// count nothing. Weighted by each class's share. The call graph has no cycle (checked), so as
/// many passes as there are services settle every value.
pub(crate) fn set_call_holds(entry: &mut Scenario) {
    let names: Vec<String> = entry.services.iter().map(|s| s.name.clone()).collect();
    let hold_of = |scenario: &Scenario, holds: &[f64], services: &[Service]| -> f64 {
        let shares = class_shares(scenario);
        scenario
            .calls
            .iter()
            .map(|site| {
                let waits_whole = match &site.call {
                    Call::Sync { timeout, .. } => timeout.is_none(),
                    Call::Fanout { wait, hedge, .. } => *wait == Wait::All && hedge.is_none(),
                };
                let Some(i) = names.iter().position(|n| n == site.call.service()) else {
                    return 0.0;
                };
                if !waits_whole {
                    return 0.0;
                }
                let share = shares.get(site.class).copied().unwrap_or(1.0);
                share * (services[i].scenario.service.mean() + holds[i])
            })
            .sum()
    };
    let mut holds = vec![0.0; entry.services.len()];
    for _ in 0..entry.services.len() {
        let next: Vec<f64> = entry
            .services
            .iter()
            .map(|s| hold_of(&s.scenario, &holds, &entry.services))
            .collect();
        holds = next;
    }
    for (service, hold) in entry.services.iter_mut().zip(&holds) {
        service.scenario.call_hold = *hold;
    }
    entry.call_hold = hold_of(entry, &holds, &entry.services);
}

/// The share of requests in each class of a built scenario (one class: all).
fn class_shares(scenario: &Scenario) -> Vec<f64> {
    scenario
        .request
        .as_ref()
        .map_or_else(|| vec![1.0], |r| r.shares())
}

/// The share of each class of a `[request]` as written (weights checked later, by the
/// service's own validation; a weight that is not a positive number counts as 0 here).
fn shares_of(spec: Option<&RequestSpec>) -> Vec<f64> {
    let Some(classes) = spec.and_then(|r| r.class.as_ref()) else {
        return vec![1.0];
    };
    let weight = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let total: f64 = classes.iter().map(|c| weight(c.weight)).sum();
    classes
        .iter()
        .map(|c| {
            if total > 0.0 {
                weight(c.weight) / total
            } else {
                0.0
            }
        })
        .collect()
}

/// The services in an order where every caller comes before what it calls (the entry, `None`,
/// calls first); a cycle is an error at the call that closes it, naming the cycle.
fn topological(
    calls: &[(Option<&str>, Vec<CallSite>)],
    path_of: impl Fn(Option<&str>, &CallSite) -> String,
) -> Result<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let names: Vec<&str> = calls.iter().filter_map(|(t, _)| *t).collect();
    let index = |name: &str| calls.iter().position(|(t, _)| *t == Some(name));
    let mut marks = vec![Mark::New; calls.len()];
    let mut finished: Vec<String> = Vec::new();
    // Depth first from the entry, then from every service (those nobody calls too).
    let starts = std::iter::once(0).chain(names.iter().filter_map(|n| index(n)));
    for start in starts {
        if marks[start] != Mark::New {
            continue;
        }
        // (tier, next call site to follow)
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::Open;
        while let Some(&(tier, next)) = stack.last() {
            let sites = &calls[tier].1;
            if next == sites.len() {
                marks[tier] = Mark::Done;
                if let Some(name) = calls[tier].0 {
                    finished.push(name.to_string());
                }
                stack.pop();
                continue;
            }
            let site = &sites[next];
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            let callee = index(site.call.service()).expect("checked: every callee exists");
            match marks[callee] {
                Mark::Done => {}
                Mark::New => {
                    marks[callee] = Mark::Open;
                    stack.push((callee, 0));
                }
                Mark::Open => {
                    let from = stack.iter().position(|&(t, _)| t == callee).expect("open");
                    let mut cycle: Vec<&str> = stack[from..]
                        .iter()
                        .map(|&(t, _)| calls[t].0.unwrap_or("(entry)"))
                        .collect();
                    cycle.push(site.call.service());
                    return Err(Error::config(
                        path_of(calls[tier].0, site),
                        format!(
                            "the calls go round in a cycle: {}; a service may not call itself, \
                             directly or through others",
                            cycle.join(" → ")
                        ),
                    ));
                }
            }
        }
    }
    finished.reverse();
    Ok(finished)
}

impl Scenario {
    /// The services and the call graph, for [`Scenario::description`]: `services`, one entry
    /// per service (its name, the calls/s its callers send it, its fleet), and `calls`, one per
    /// call phase (caller, callee, kind and settings, mean calls a request of the caller's).
    pub fn describe_calls(&self) -> (Value, Value) {
        let services: Vec<Value> = self
            .services
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "rate": s.rate,
                    "dynos": s.scenario.dynos,
                    "slots": s.scenario.slots,
                    "policy": s.scenario.policy_name,
                    "service_mean": s.scenario.service.mean(),
                    "offered_load": s.scenario.offered_load(),
                    "bottleneck": s.scenario.bottleneck().0,
                })
            })
            .collect();
        let tiers = std::iter::once((None, self)).chain(
            self.services
                .iter()
                .map(|s| (Some(s.name.as_str()), &s.scenario)),
        );
        let mut calls = Vec::new();
        for (caller, scenario) in tiers {
            for site in &scenario.calls {
                let class = scenario
                    .request
                    .as_ref()
                    .map(|r| r.classes[site.class].name.clone());
                let mut entry = json!({
                    "caller": caller,
                    "class": class,
                    "phase": site.phase,
                    "callee": site.call.service(),
                    "mean_calls": site.call.mean_calls(),
                });
                let more = match &site.call {
                    Call::Sync {
                        timeout, retries, ..
                    } => json!({"kind": "call", "timeout": timeout, "retries": retries}),
                    Call::Fanout {
                        count,
                        wait,
                        hedge,
                        cancel,
                        ..
                    } => json!({
                        "kind": "fanout",
                        "count": match count {
                            Count::Fixed(n) => json!(n),
                            Count::Geometric { mean } => json!({"distribution": "geometric", "mean": mean}),
                        },
                        "wait": match wait {
                            Wait::All => json!("all"),
                            Wait::First => json!("first"),
                            Wait::Some(k) => json!(k),
                        },
                        "hedge": match hedge {
                            None => Value::Null,
                            Some(Hedge::After(t)) => json!(t),
                            Some(Hedge::Percentile(p)) => json!(format!("p{p}")),
                        },
                        "cancel": match cancel {
                            Cancel::Nothing => json!(false),
                            Cancel::Queued => json!("queued"),
                            Cancel::Running => json!(true),
                        },
                    }),
                };
                if let (Value::Object(e), Value::Object(m)) = (&mut entry, more) {
                    e.extend(m);
                }
                calls.push(entry);
            }
        }
        (Value::Array(services), Value::Array(calls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(doc: &Value) -> Result<Scenario> {
        Scenario::from_json(&doc.to_string(), Path::new("."), &crate::never_interrupted)
    }

    /// A web tier that calls an API, which fans out to a search tier: the three-tier scenario
    /// of docs/services.md.
    fn three_tier() -> Value {
        json!({
            "arrivals": {"process": "poisson", "rate": "100/s"},
            "fleet": {"dynos": 4},
            "app": {"server": "gunicorn", "processes": 4},
            "request": {"phases": [
                {"cpu": "5ms"},
                {"call": "api", "timeout": "2s", "retries": 1},
            ]},
            "services": {
                "api": {
                    "fleet": {"dynos": 3, "slots": 8},
                    "request": {"phases": [
                        {"cpu": "2ms"},
                        {"fanout": "search", "count": 10, "wait": "all", "hedge": "p95"},
                    ]},
                    "router": {"policy": "least_connections"},
                },
                "search": {
                    "fleet": {"dynos": 10, "slots": 4},
                    "service": {"distribution": "exponential", "mean": "10ms"},
                },
            },
        })
    }

    /// The error line of a scenario that must be refused.
    fn refused(doc: &Value) -> String {
        match build(doc) {
            Ok(_) => panic!("accepted: {doc}"),
            Err(e) => e.to_string(),
        }
    }

    fn set(doc: &mut Value, pointer: &str, value: Value) {
        *doc.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("no {pointer}")) = value;
    }

    #[test]
    fn a_three_tier_scenario_is_read_with_its_call_graph_and_rates() {
        let s = build(&three_tier()).expect("valid");
        assert_eq!(
            s.calls,
            vec![CallSite {
                path: "request.phases[1]".into(),
                class: 0,
                phase: 1,
                call: Call::Sync {
                    service: "api".into(),
                    timeout: Some(2.0),
                    retries: 1
                },
            }]
        );
        let names: Vec<&str> = s.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["api", "search"]);
        let (api, search) = (&s.services[0], &s.services[1]);
        assert_eq!(
            api.scenario.calls[0].call,
            Call::Fanout {
                service: "search".into(),
                count: Count::Fixed(10),
                wait: Wait::All,
                hedge: Some(Hedge::Percentile(95.0)),
                cancel: Cancel::Nothing,
            }
        );
        // The traffic equations: 100/s at the entry, one call each to api, ten to search.
        assert_eq!(api.rate, 100.0);
        assert_eq!(search.rate, 1000.0);
        assert_eq!(api.scenario.dynos, 3);
        assert_eq!(api.scenario.policy_name, "least_connections");
        assert_eq!(search.scenario.service.mean(), 0.01);
        // A call takes none of the caller's own time (its thread waits for the callee).
        assert!((s.service.mean() - 0.005).abs() < 1e-12);
        assert!(s.has_calls());
        // The api's hedged fan-out runs.
        s.check_stable().expect("a hedged fan-out runs");
        let described = s.description();
        assert_eq!(described["services"][1]["name"], "search");
        assert_eq!(described["services"][1]["rate"], 1000.0);
        assert_eq!(described["calls"][0]["caller"], Value::Null);
        assert_eq!(described["calls"][1]["caller"], "api");
        assert_eq!(described["calls"][1]["callee"], "search");
        assert_eq!(described["calls"][1]["hedge"], "p95");
        // A chain of calls runs too.
        let mut doc = three_tier();
        set(
            &mut doc,
            "/services/api/request/phases/1",
            json!({"call": "search", "timeout": "50ms"}),
        );
        let s = build(&doc).expect("valid");
        s.check_stable().expect("a chain of calls runs");
    }

    #[test]
    fn a_scenario_without_services_runs_as_before() {
        let mut doc = three_tier();
        doc.as_object_mut().unwrap().remove("services");
        set(&mut doc, "/request/phases/1", json!({"io": "10ms"}));
        let s = build(&doc).expect("valid");
        assert!(!s.has_calls());
        s.check_stable().expect("runs");
    }

    /// A thread waiting on a call is a thread held: the offered load counts the calls' time
    /// where it is bounded below, and a fleet whose threads the calls exhaust is refused.
    #[test]
    fn the_threads_held_through_calls_count_in_the_offered_load() {
        let mut doc = three_tier();
        // The three-tier as written: the entry's call has a timeout and the api's fan-out a
        // hedge, so neither counts (their time can be shorter than the callee's mean).
        let s = build(&doc).expect("valid");
        assert_eq!(s.call_hold, 0.0);
        assert_eq!(s.services[0].scenario.call_hold, 0.0);
        // Without them: the api's fan-out holds its thread at least one search call (10 ms),
        // the entry's call at least the api's 2 ms and that.
        set(&mut doc, "/request/phases/1", json!({"call": "api"}));
        set(
            &mut doc,
            "/services/api/request/phases/1",
            json!({"fanout": "search", "count": 10, "wait": "all"}),
        );
        let s = build(&doc).expect("valid");
        let api = &s.services[0].scenario;
        assert!((api.call_hold - 0.010).abs() < 1e-12, "{}", api.call_hold);
        assert!((s.call_hold - 0.012).abs() < 1e-12, "{}", s.call_hold);
        // 100/s × (5 ms + 12 ms) over 4 dynos × 4 processes.
        assert!((s.busy_slots_needed() - 1.7).abs() < 1e-9);
        s.check_stable().expect("runs");
        // One thread a dyno: 1.7 busy of 4 still runs; a search call of 50 ms makes it
        // 100 × (5 + 2 + 50) ms = 5.7 busy threads of 4, refused as unstable, on threads.
        set(&mut doc, "/app/processes", json!(1));
        build(&doc).expect("valid").check_stable().expect("runs");
        set(
            &mut doc,
            "/services/search/service",
            json!({"distribution": "exponential", "mean": "50ms"}),
        );
        set(&mut doc, "/services/search/fleet/dynos", json!(40));
        match build(&doc).expect("valid").check_stable() {
            Err(Error::Unstable {
                bottleneck,
                busy_slots_needed,
                ..
            }) => {
                assert_eq!(bottleneck, "threads");
                assert!(
                    (busy_slots_needed - 5.7).abs() < 1e-9,
                    "{busy_slots_needed}"
                );
            }
            other => panic!("expected unstable, got {other:?}"),
        }
    }

    #[test]
    fn class_weights_share_the_calls() {
        let mut doc = three_tier();
        set(
            &mut doc,
            "/request",
            json!({"class": [
                {"name": "page", "weight": 3, "phases": [{"cpu": "1ms"}, {"call": "api"}]},
                {"name": "ping", "weight": 1, "phases": [{"cpu": "1ms"}]},
            ]}),
        );
        let s = build(&doc).expect("valid");
        assert_eq!(s.services[0].rate, 75.0);
        assert_eq!(s.services[1].rate, 750.0);
    }

    #[test]
    fn a_call_to_an_unknown_service_is_refused() {
        let mut doc = three_tier();
        set(&mut doc, "/request/phases/1/call", json!("apu"));
        assert_eq!(
            refused(&doc),
            "request.phases[1].call: unknown service \"apu\"; expected one of: api, search"
        );
        doc.as_object_mut().unwrap().remove("services");
        assert_eq!(
            refused(&doc),
            "request.phases[1].call: unknown service \"apu\"; the scenario has no \
             [services.apu]"
        );
    }

    #[test]
    fn a_cycle_of_calls_is_refused_and_named() {
        let mut doc = three_tier();
        doc["services"]["search"]["request"] = json!({"phases": [{"cpu": "1ms"}, {"call": "api"}]});
        doc["services"]["search"]
            .as_object_mut()
            .unwrap()
            .remove("service");
        assert_eq!(
            refused(&doc),
            "services.search.request.phases[1].call: the calls go round in a cycle: api → \
             search → api; a service may not call itself, directly or through others"
        );
        let mut doc = three_tier();
        set(
            &mut doc,
            "/services/api/request/phases/1",
            json!({"call": "api"}),
        );
        assert!(refused(&doc).starts_with(
            "services.api.request.phases[1].call: the calls go round in a cycle: api → api;"
        ));
    }

    #[test]
    fn wait_is_one_to_the_count() {
        for (wait, ok) in [
            (json!(1), true),
            (json!(10), true),
            (json!("first"), true),
            (json!(0), false),
            (json!(11), false),
            (json!("most"), false),
            (json!(2.5), false),
        ] {
            let mut doc = three_tier();
            set(
                &mut doc,
                "/services/api/request/phases/1/wait",
                wait.clone(),
            );
            match build(&doc) {
                Ok(_) => assert!(ok, "{wait} accepted"),
                Err(e) => {
                    assert!(!ok, "{wait}: {e}");
                    assert_eq!(
                        e.to_string(),
                        format!(
                            "services.api.request.phases[1].wait: expected \"all\", \
                             \"first\" or a whole number of answers from 1 to the count, 10; \
                             got {wait}"
                        )
                    );
                }
            }
        }
        // A drawn count: any k from 1 (a request that draws fewer waits for all it sent).
        let mut doc = three_tier();
        set(
            &mut doc,
            "/services/api/request/phases/1/count",
            json!({"distribution": "geometric", "mean": 4}),
        );
        set(&mut doc, "/services/api/request/phases/1/wait", json!(20));
        let s = build(&doc).expect("valid");
        assert_eq!(s.services[1].rate, 400.0);
    }

    #[test]
    fn hedge_is_a_duration_or_a_percentile() {
        for (hedge, expected) in [
            (json!("10ms"), Ok(Some(Hedge::After(0.01)))),
            (json!("p99.9"), Ok(Some(Hedge::Percentile(99.9)))),
            (json!(0.002), Ok(Some(Hedge::After(0.002)))),
            // No hedging, as leaving it out (a sweep's `hedge=false,10ms`).
            (json!(false), Ok(None)),
            (json!(true), Err("or false (no hedging), got true")),
            (json!("p100"), Err("expected a percentile from p1 to p99.9")),
            (json!("p"), Err("expected a percentile")),
            (json!("0s"), Err("must be a positive duration, got 0 s")),
            (json!(-1), Err("must be a positive duration")),
            (
                json!("soon"),
                Err("expected a duration > 0 (\"10ms\"), a percentile"),
            ),
        ] {
            let mut doc = three_tier();
            set(
                &mut doc,
                "/services/api/request/phases/1/hedge",
                hedge.clone(),
            );
            match (build(&doc), expected) {
                (Ok(s), Ok(h)) => match &s.services[0].scenario.calls[0].call {
                    Call::Fanout { hedge, .. } => assert_eq!(*hedge, h),
                    other => panic!("{other:?}"),
                },
                (Err(e), Err(text)) => {
                    let e = e.to_string();
                    assert!(
                        e.starts_with("services.api.request.phases[1].hedge: ") && e.contains(text),
                        "{hedge}: {e}"
                    );
                }
                (got, want) => panic!("{hedge}: {:?} against {want:?}", got.map(|_| ())),
            }
        }
    }

    #[test]
    fn cancel_is_false_queued_or_true() {
        for (cancel, expected) in [
            (None, Ok(Cancel::Nothing)),
            (Some(json!(false)), Ok(Cancel::Nothing)),
            (Some(json!("queued")), Ok(Cancel::Queued)),
            (Some(json!(true)), Ok(Cancel::Running)),
            (Some(json!("yes")), Err("got \"yes\"")),
            (Some(json!("running")), Err("got \"running\"")),
            (Some(json!(1)), Err("got 1")),
        ] {
            let mut doc = three_tier();
            if let Some(c) = &cancel {
                doc["services"]["api"]["request"]["phases"][1]["cancel"] = c.clone();
            }
            match (build(&doc), expected) {
                (Ok(s), Ok(c)) => {
                    match &s.services[0].scenario.calls[0].call {
                        Call::Fanout { cancel, .. } => assert_eq!(*cancel, c),
                        other => panic!("{other:?}"),
                    }
                    let described = s.description();
                    let want = match c {
                        Cancel::Nothing => json!(false),
                        Cancel::Queued => json!("queued"),
                        Cancel::Running => json!(true),
                    };
                    assert_eq!(described["calls"][1]["cancel"], want);
                }
                (Err(e), Err(text)) => {
                    let e = e.to_string();
                    assert!(
                        e.starts_with(
                            "services.api.request.phases[1].cancel: expected false (run on for \
                             nobody), \"queued\""
                        ) && e.ends_with(text)
                            && !e.contains('\n'),
                        "{cancel:?}: {e}"
                    );
                }
                (got, want) => panic!("{cancel:?}: {:?} against {want:?}", got.map(|_| ())),
            }
        }
        // A `call` takes no `cancel` (it has its `timeout`).
        let mut doc = three_tier();
        doc["request"]["phases"][1]["cancel"] = json!(true);
        assert!(refused(&doc).starts_with("request.phases[1].cancel: unknown key \"cancel\""));
    }

    #[test]
    fn retries_and_timeout_are_checked() {
        for (key, value, error) in [
            ("retries", json!(1001), "request.phases[1].retries: expected a whole number from 0 to 1000, got 1001"),
            ("retries", json!(-1), "request.phases[1].retries: expected a whole number from 0 to 1000, got -1"),
            ("timeout", json!("0ms"), "request.phases[1].timeout: must be a positive duration, got 0 s"),
            ("timeout", json!("forever"), "request.phases[1].timeout: expected a duration > 0 such as \"500ms\", got \"forever\""),
        ] {
            let mut doc = three_tier();
            set(&mut doc, &format!("/request/phases/1/{key}"), value);
            assert_eq!(refused(&doc), error);
        }
        let mut doc = three_tier();
        set(&mut doc, "/request/phases/1/retries", json!(1000));
        build(&doc).expect("1000 retries");
    }

    #[test]
    fn a_call_phase_takes_only_its_own_keys() {
        let mut doc = three_tier();
        doc["request"]["phases"][1]["wait"] = json!("all");
        assert!(refused(&doc).starts_with(
            "request.phases[1].wait: unknown key \"wait\"; expected call, timeout, retries"
        ));
        let mut doc = three_tier();
        doc["request"]["phases"][1]["fanout"] = json!("api");
        assert_eq!(
            refused(&doc),
            "request.phases[1]: a phase is a call or a fanout, not both"
        );
        let mut doc = three_tier();
        doc["services"]["api"]["request"]["phases"][1]
            .as_object_mut()
            .unwrap()
            .remove("count");
        assert!(refused(&doc).starts_with("services.api.request.phases[1].count: missing;"));
        let mut doc = three_tier();
        set(&mut doc, "/services/api/request/phases/1/count", json!(0));
        assert!(refused(&doc).starts_with(
            "services.api.request.phases[1].count: expected a whole number of calls from 1"
        ));
    }

    #[test]
    fn every_service_is_called_and_well_named() {
        let mut doc = three_tier();
        set(
            &mut doc,
            "/services/api/request/phases/1",
            json!({"io": "1ms"}),
        );
        assert!(refused(&doc).starts_with("services.search: no phase calls it:"));
        let mut doc = three_tier();
        let search = doc["services"]["search"].clone();
        doc["services"]["search.v2"] = search;
        assert!(refused(&doc).starts_with("services.search.v2: a service's name is"));
    }

    #[test]
    fn a_service_is_checked_as_a_fleet_at_its_own_key_paths() {
        let mut doc = three_tier();
        set(&mut doc, "/services/search/fleet/dynos", json!(0));
        assert_eq!(
            refused(&doc),
            "services.search.fleet.dynos: must be a whole number >= 1 and <= 10000000, got 0"
        );
        let mut doc = three_tier();
        set(&mut doc, "/services/api/router/policy", json!("nope"));
        assert!(refused(&doc).starts_with("services.api.router.policy: unknown routing policy"));
        let mut doc = three_tier();
        doc["services"]["api"]["resources"] = json!({});
        assert!(
            refused(&doc).starts_with("services.api.resources: unknown field `resources`"),
            "{}",
            refused(&doc)
        );
    }

    #[test]
    fn a_request_of_calls_alone_is_refused_until_calls_are_simulated() {
        let mut doc = three_tier();
        set(&mut doc, "/request/phases", json!([{"call": "api"}]));
        assert!(refused(&doc).starts_with("request.phases: every phase calls another service;"));
    }
}
