//! The seed scenario (the built-in `rapgenius`) on the direct engine against a hand-written
//! floor: the least work that simulates the same system with the same draws.
//!
//! `cargo run --release -p dynosim-engine --example seed_floor -- [--rounds N] [--minutes M]
//! [--policies random,intelligent] [--engine direct|events]`
//!
//! `--engine` (default `direct`) sets the seed scenario's `run.engine`: `events` measures the
//! event-driven engine against the same floor.
//!
//! The floor draws what the engine draws, from the same streams and in the same order (Poisson
//! gaps from `Exp1` on the arrivals stream, service times from the scenario's own sampler in
//! blocks of 256, dynos from a uniform draw on the routing stream), then does only the queueing:
//! for random routing a Lindley recursion per dyno (`start = max(arrival, free)`), for
//! intelligent routing the Kiefer–Wolfowitz recursion over all dynos (a binary heap of free
//! times). It keeps one sum and one count, where the engine keeps histograms, per-dyno
//! utilisation, queue depths, the window and the checks of a run. The two agree on the mean
//! queue time, which is printed as a check that both simulate the same system.
//!
//! Engine and floor alternate, round by round, in one process, so that a machine's drift
//! (another process, the clock) falls on both alike; each round prints one JSON line:
//! `{"policy", "round", "requests", "engine_seconds", "floor_seconds", "engine_queue_mean",
//! "floor_queue_mean"}`. `bench/seed_floor.py` runs this and compares with a recorded
//! baseline. The example uses only what the engine has offered since before the timeouts
//! (9f79ec0), so that it builds at that commit too and the two can be measured side by side.
use dynosim_engine::rng::{stream, SimRng, Stream};
use dynosim_engine::{never_interrupted, run_replication, Scenario};
use rand::distr::{Distribution, Uniform};
use rand_distr::Exp1;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

const BLOCK: usize = 256;

fn scenario(policy: &str, minutes: f64, engine: &str) -> Scenario {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/dynosim/scenarios/rapgenius.toml"
    );
    let text = std::fs::read_to_string(path).expect("the built-in scenario file");
    let mut doc: serde_json::Value = toml::from_str(&text).expect("valid TOML");
    doc["router"]["policy"] = policy.into();
    doc["run"]["duration"] = (minutes * 60.0).into();
    doc["run"]["warmup"] = 0.into();
    doc["run"]["engine"] = engine.into();
    Scenario::from_json(&doc.to_string(), Path::new("."), &never_interrupted)
        .expect("the seed scenario")
}

/// The floor's answer: requests simulated, and the mean queue time.
struct Floor {
    requests: u64,
    queue_mean: f64,
}

/// One replication (replication 0) of the seed scenario done by hand.
fn floor(s: &Scenario, rate: f64, policy: &str) -> Floor {
    let mut arrival_rng: SimRng = stream(s.seed, 0, Stream::Arrivals);
    let mut service_rng = stream(s.seed, 0, Stream::Service);
    let mut routing_rng = stream(s.seed, 0, Stream::Routing);
    let dynos = s.dynos as usize;
    let end = s.duration;
    let mean_gap = 1.0 / rate;
    let pick = Uniform::new(0, dynos).expect("dynos > 0");
    let random = policy == "random";
    let mut free = vec![0.0_f64; dynos];
    // Intelligent: free times as bit patterns (times >= 0 order as their bits), dyno beside.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = (0..dynos).map(|d| Reverse((0, d))).collect();
    let (mut requests, mut waited) = (0u64, 0.0);
    let mut times = [0.0; BLOCK];
    let mut services = [0.0; BLOCK];
    let mut routes = [0usize; BLOCK];
    let mut now = 0.0;
    loop {
        for t in times.iter_mut() {
            let gap: f64 = Exp1.sample(&mut arrival_rng);
            now += gap * mean_gap;
            *t = now;
        }
        s.service.sample_into(&mut service_rng, &mut services);
        if random {
            for r in routes.iter_mut() {
                *r = pick.sample(&mut routing_rng);
            }
        }
        for i in 0..BLOCK {
            let (t, service) = (times[i], services[i]);
            if t >= end {
                return Floor {
                    requests,
                    queue_mean: waited / requests as f64,
                };
            }
            let start = if random {
                let f = &mut free[routes[i]];
                let start = if *f > t { *f } else { t };
                *f = start + service;
                start
            } else {
                let Reverse((bits, d)) = heap.pop().expect("a dyno");
                let f = f64::from_bits(bits);
                let start = if f > t { f } else { t };
                heap.push(Reverse(((start + service).to_bits(), d)));
                start
            };
            waited += start - t;
            requests += 1;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let rounds: usize = value("--rounds", "7")
        .parse()
        .expect("--rounds: a whole number");
    let minutes: f64 = value("--minutes", "60")
        .parse()
        .expect("--minutes: a number");
    let policies = value("--policies", "random,intelligent");
    let engine = value("--engine", "direct");
    for policy in policies.split(',') {
        let s = scenario(policy, minutes, &engine);
        let rate = s.arrival_rate();
        // One of each first, unmeasured: page faults and the allocator's first requests.
        black_box(run_replication(&s, 0, &never_interrupted).expect("a run"));
        black_box(floor(&s, rate, policy).requests);
        for round in 0..rounds {
            // Alternate which goes first, so that neither always follows the other.
            let mut engine_seconds = 0.0;
            let mut floor_seconds = 0.0;
            let mut result = None;
            let mut answer = None;
            for turn in 0..2 {
                if (turn == 0) == (round % 2 == 0) {
                    let t = Instant::now();
                    result = Some(black_box(
                        run_replication(&s, 0, &never_interrupted).expect("a run"),
                    ));
                    engine_seconds = t.elapsed().as_secs_f64();
                } else {
                    let t = Instant::now();
                    answer = Some(black_box(floor(&s, rate, policy)));
                    floor_seconds = t.elapsed().as_secs_f64();
                }
            }
            let (result, answer) = (result.expect("ran"), answer.expect("ran"));
            println!(
                "{{\"policy\": \"{policy}\", \"round\": {round}, \"requests\": {}, \
                 \"floor_requests\": {}, \"engine_seconds\": {engine_seconds:.6}, \
                 \"floor_seconds\": {floor_seconds:.6}, \"engine_queue_mean\": {:.9}, \
                 \"floor_queue_mean\": {:.9}}}",
                result.simulated_requests, answer.requests, result.queue.mean, answer.queue_mean
            );
        }
    }
}
