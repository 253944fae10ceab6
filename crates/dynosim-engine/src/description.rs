//! What a scenario is, resolved, without running it: the figures `describe` shows (the
//! offered load and its bottleneck, the app, the fleet's lifecycle, the resources...), each
//! value as the engine will use it (defaults filled in, distributions by their means). The
//! Python side and the testbed read these rather than the scenario's raw keys.

use crate::app::Model;
use crate::resource_spec::{Discipline, PoolScope};
use crate::scenario::{CpuSharing, Scenario};
use crate::workload::Workload;
use serde_json::{json, Value};

impl Scenario {
    /// The scenario described, as a JSON object (see the module's documentation).
    pub fn description(&self) -> Value {
        let s = self;
        let mut described = json!({
            "name": s.name,
            "policy": s.policy_name,
            "dynos": s.dynos,
            "slots": s.slots,
            "routers": s.routers,
            "arrival_rate": s.arrival_rate(),
            "service_mean": s.service.mean(),
            "service_second_moment": s.service.second_moment(),
            "offered_load": s.offered_load(),
            // The part of the system whose load offered_load is (threads, cores...).
            "bottleneck": s.bottleneck().0,
            // Whether the load lets a run go ahead: a closed loop always does, whatever its
            // load.
            "stable": s.check_load().is_ok(),
            "closed_loop": s.workload.is_closed(),
            "busy_slots_needed": s.busy_slots_needed(),
            "relaxation_time": s.relaxation_time(),
            "duration": s.duration,
            "warmup": s.warmup,
            "replications": s.replications,
            // Engine state, bytes: one replication's, a whole run's at once (replications in
            // parallel), and a trace's (one replication on the event-driven engine), all
            // worked out before anything is allocated.
            "replication_bytes": s.replication_bytes(),
            "run_bytes": s.run_bytes(),
            "trace_bytes": s.trace_bytes(),
            "seed": s.seed,
            "dyno_type": s.dyno_type.name,
            "cores": s.dyno_type.cores,
            "memory_quota": s.dyno_type.quota,
            // How dynos boot and stop, in seconds: the boot time's mean, and the rest.
            "fleet": {
                "boot_time": s.boot_time.mean(),
                "boot_timeout": s.lifecycle.boot_timeout,
                "stop_delay": s.lifecycle.stop_delay,
                "shutdown_grace": s.lifecycle.shutdown_grace,
            },
            "app": {
                "server": s.app.server,
                "model": match s.app.model {
                    Model::Sync => "sync",
                    Model::Threaded => "threaded",
                    Model::Async => "async",
                },
                "processes": s.app.processes,
                "per_process": s.app.per_process,
                "os_threads": s.app.os_threads,
                // "gil", "gvl" or "none".
                "lock": s.app.lock.name(),
                "switch_interval": s.app.switch_interval,
                "timeslice": s.app.timeslice,
                // The server's own CPU per request, mean seconds (0: not modelled).
                "request_cpu": s.request.as_ref().filter(|r| r.has_server_cpu())
                    .map_or(0.0, |r| r.classes[0].phases[0].time.mean()),
                // Mean seconds, 0 when not modelled.
                "overhead": s.app.overhead.as_ref().map_or(0.0, |o| o.mean()),
            },
            "connect": s.connect.as_ref().map_or(0.0, |c| c.mean()),
            // router.view: how late the loads the routers read are; `read` is false for a
            // policy that reads no load (random, round_robin), which the view leaves alone.
            "view": {
                "update": s.view.update.name(),
                "interval": s.view.interval,
                "read": s.reads_board(),
            },
            // A router on the dyno's machine: its mean CPU per request on the dyno's cores
            // (0: it runs elsewhere).
            "colocated_cpu": s.colocated_cpu.as_ref().map_or(0.0, |c| c.mean()),
            "cpu": {
                "sharing": match s.cpu.sharing { CpuSharing::Slices => "slices", CpuSharing::Ps => "ps" },
                "quantum": s.cpu.quantum,
                "jitter": s.cpu.jitter,
            },
            "resources": s.resources.iter().map(|r| json!({
                "name": r.name,
                "servers": r.servers,
                "discipline": match r.discipline { Discipline::Fcfs => "fcfs", Discipline::Ps => "ps" },
                "pool": r.pool.map(|(size, per)| json!({
                    "size": size,
                    "per": match per { PoolScope::Process => "process", PoolScope::Dyno => "dyno", PoolScope::App => "app" },
                })),
            })).collect::<Vec<_>>(),
            // With [[faults]]: the stability verdict's rule (first, last, window, interval).
            "stability": s.stability,
            "closed_clients": match &s.workload {
                Workload::Closed(c) => Some(c.count),
                Workload::Open(_) => None,
            },
            "closed_requests": match &s.workload {
                Workload::Closed(c) => c.requests,
                Workload::Open(_) => None,
            },
        });
        let (services, calls) = s.describe_calls();
        let more = json!({
            // [services.NAME] (name, calls/s sent to it, its fleet) and every call phase
            // (caller: null for the top level; callee; its settings): see crate::calls.
            "services": services,
            "calls": calls,
        });
        if let (Value::Object(d), Value::Object(m)) = (&mut described, more) {
            d.extend(m);
        }
        described
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::{Scenario, DEFAULT_LIFECYCLE};

    fn described(fleet: &str) -> serde_json::Value {
        let text = format!(
            r#"{{"arrivals": {{"process": "poisson", "rate": 10}},
                "service": {{"distribution": "exponential", "mean": 0.05}},
                "fleet": {{"dynos": 2, "slots": 1{fleet}}}}}"#
        );
        Scenario::from_json(&text, std::path::Path::new("."), &|| false)
            .unwrap()
            .description()
    }

    #[test]
    fn the_fleet_lifecycle_is_described_resolved() {
        let d = described("");
        let fleet = &d["fleet"];
        assert_eq!(fleet["boot_timeout"], DEFAULT_LIFECYCLE.boot_timeout);
        assert_eq!(fleet["stop_delay"], DEFAULT_LIFECYCLE.stop_delay);
        assert_eq!(fleet["shutdown_grace"], DEFAULT_LIFECYCLE.shutdown_grace);
        let d = described(
            r#", "boot_time": {"distribution": "uniform", "min": "20s", "max": "60s"},
                "boot_timeout": "90s", "stop_delay": "2s", "shutdown_grace": "10s""#,
        );
        let fleet = &d["fleet"];
        assert_eq!(
            (
                fleet["boot_time"].as_f64(),
                fleet["boot_timeout"].as_f64(),
                fleet["stop_delay"].as_f64(),
                fleet["shutdown_grace"].as_f64()
            ),
            (Some(40.0), Some(90.0), Some(2.0), Some(10.0))
        );
        assert!(d["app"].get("boot_time").is_none(), "one name for it");
    }
}
