//! The reference of every scenario key: its type, unit, default and meaning. `dynosim keys`
//! prints it and docs/scenario.md is generated from it.
//!
//! It is kept true by the tests below: the keys of each section here (and the sections inside
//! it, `[app.memory]` in `[app]`) are the fields of that section's serde struct in
//! [`crate::scenario`] and the modules it uses, the kinds of each extension point are its
//! registry's names, the keys of each kind are the ones its registry entry takes, and a default
//! written here is what the engine builds when the key is left out. A key added to a struct or
//! a registry without a line here fails `cargo test`.

use serde_json::{json, Value};

/// Where a section's keys are read and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Engine,
    /// The Python front end: prices and labelled variants, never seen by the engine.
    FrontEnd,
}

/// A section of the scenario file (`[service]`), or the top level (`name` ""). A section
/// inside another is named by its path (`app.memory`); `NAME` stands for a name the scenario
/// chooses (`resources.NAME` is `[resources.db]`).
#[derive(Debug)]
pub struct Section {
    pub name: &'static str,
    pub meaning: &'static str,
    /// The key naming the section's kind (`distribution`), whose values are the [`Kind`]s.
    pub kind_key: Option<&'static str>,
    pub reader: Reader,
    /// An array of tables (`[[cases]]`) rather than a table.
    pub array: bool,
}

/// One registered kind of an extension point: a distribution, a policy, an arrival process.
#[derive(Debug)]
pub struct Kind {
    pub section: &'static str,
    pub name: &'static str,
    pub meaning: &'static str,
}

/// What a key is when the scenario leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    Required,
    /// Left out, the feature it sets is off (no rounding, no clipping...).
    Off,
    /// This value (JSON text, as it would be written in a scenario).
    Value(&'static str),
    /// Required unless the other key of the pair is given (Weibull's `scale` or `median`).
    EitherThisOr(&'static str),
    /// A value that depends on other keys (a preset, the dyno type), described in words.
    Described(&'static str),
}

/// A key: `section.name`, taken by every kind of the section (`kind` None) or by one kind.
#[derive(Debug)]
pub struct Key {
    pub section: &'static str,
    pub kind: Option<&'static str>,
    pub name: &'static str,
    /// The type as a user writes it: "duration", "whole number", "[duration, duration]"...
    pub value: &'static str,
    pub unit: &'static str,
    pub default: Default,
    /// A valid value (JSON text); the tests build scenarios from them.
    pub example: &'static str,
    pub meaning: &'static str,
}

impl Key {
    /// `service.shape`; a top-level key is its name alone.
    pub fn path(&self) -> String {
        if self.section.is_empty() {
            self.name.to_string()
        } else {
            format!("{}.{}", self.section, self.name)
        }
    }
}

/// How durations and rates are written, wherever a key takes one.
pub const FORMATS: &[(&str, &str)] = &[
    (
        "duration",
        "a number of seconds, or a string with a unit: \"306ms\", \"1.5s\", \"5min\", \"1h\" \
         (units: ns, us or µs, ms, s, min, h, d)",
    ),
    (
        "rate",
        "a number of requests per second, or a string: \"9000/min\", \"150/s\", \"150 per second\"",
    ),
    (
        "size",
        "a number of bytes, or a string with a unit: \"512MB\", \"1.5GB\", \"512MiB\" \
         (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)",
    ),
    (
        "time distribution",
        "a duration (every sample that time), or a table naming a distribution of `[service]` \
         with its parameters: `{ distribution = \"exponential\", mean = \"20ms\" }`",
    ),
];

pub const SECTIONS: &[Section] = &[
    Section {
        name: "",
        meaning: "The top level of the file: what the scenario is called.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals",
        meaning: "How requests arrive: an open process (requests arrive whatever the latency, as \
                  real traffic does), or a closed loop of clients (`process = \"closed\"`, as \
                  ab, hey and wrk send them).",
        kind_key: Some("process"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals.burst",
        meaning: "A scheduled burst on top of an open arrival process: `clients` clients (a \
                  fleet of servers run from cron) set for `at`, each firing after its own \
                  drawn `jitter` and sending `requests` requests at once; again every `every` \
                  if given. Its draws are apart from the base process's (a random stream per \
                  burst table), so the base traffic is the same with or without it. A burst \
                  that fires once is transient and leaves the stability check alone.",
        kind_key: None,
        reader: Reader::Engine,
        array: true,
    },
    Section {
        name: "arrivals.keys",
        meaning: "The key each request carries: the user who sent it, one of `users`, drawn by \
                  their popularity (Zipf's law or uniform). Policies that hash requests \
                  (`bounded_hash`) send a user's requests to the same dyno; the others ignore \
                  it. Drawn from a random stream of its own, so the traffic and every other \
                  draw are the same with or without keys.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals.retry",
        meaning: "The clients' retries: a request that failed (its client's own timeout, an \
                  error the router or the app answered) is sent again after a backoff, up to \
                  `attempts` tries in all, while the clients' retry budget allows. A retry is \
                  the same request (its class, its drawn work, its key) through the router \
                  again; the try that failed is not cancelled, and what a dyno does for it \
                  after the client gave up is wasted. arrivals.rate and the figures count \
                  user requests; `retries` counts the tries. See docs/feedback.md.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals.retry.budget",
        meaning: "A retry budget that every client's retries draw on together, usually written \
                  inline: `budget = { kind = \"grpc\", max_tokens = 10, token_ratio = 0.1 }` \
                  (gRPC's retryThrottling) or `{ kind = \"finagle\", percent = 20, min_per_s = \
                  10, ttl = \"10s\" }` (Finagle's RetryBudget). A retry it refuses is not sent \
                  (retries.denied) and the request fails.",
        kind_key: Some("kind"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "arrivals.breaker",
        meaning: "The clients' circuit breaker, one for every client (one client library in a \
                  front end), after resilience4j's CircuitBreaker and with its defaults: it \
                  records each try's outcome (any error the client gets, its own timeout \
                  included, is a failure) in a sliding window; once `min_calls` are in it and \
                  `failure_rate` percent of them failed (or `slow_call_rate` percent were \
                  slow) it opens: for `open_for` every try fails at once (error breaker_open, \
                  never sent). Then it is half-open: `half_open_calls` tries go through, and \
                  it closes, or opens again if they fail as often. A retry of a try it failed \
                  meets it again. `[arrivals.breaker]` alone is resilience4j's defaults. \
                  Figures: breaker.open_fraction, breaker.opened, breaker.rejected. See \
                  docs/feedback.md.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "router.retry_budget",
        meaning: "Envoy's retry budget for the router's retries after a timeout or an error \
                  (router.retry_on \"timeout\" or \"5xx\"), usually written inline: \
                  `retry_budget = { percent = 20, min_concurrency = 3 }`. A retry it refuses \
                  is not sent (retries.denied) and the client gets the error.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "router.concurrency_limit",
        meaning: "A concurrency limit at each router, over the requests it has in flight to the fleet (one limiter a router, as each proxy runs its own): a request sent when as many are in flight as the limit is answered 503 at once (errors.limit_rejected; clients retry it under \"5xx\" or \"refused\"). Written inline: `concurrency_limit = { algorithm = \"gradient2\" }`. An adaptive limit moves with each request's latency (from the router's send to the dyno's answer; its own timeout or the client's is a drop), as Netflix's concurrency-limits does, with its defaults. Figures: limit.rejected, limit.rejected_per_s, limit.router_mean. See docs/feedback.md.",
        kind_key: Some("algorithm"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "service",
        meaning: "How long the app works on a request (its service time), once a slot takes it: \
                  one time a request, using no CPU or resource. A scenario has `[service]` or \
                  `[request]`, not both.",
        kind_key: Some("distribution"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "request",
        meaning: "What a request does once a thread takes it, phase by phase (instead of \
                  `[service]`): `phases` for one kind of request, or `[[request.class]]` tables \
                  for several.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "request.class",
        meaning: "A class of requests (an endpoint) with its own phases, drawn by weight; the \
                  results give each class's count and response times (`classes` in the JSON).",
        kind_key: None,
        reader: Reader::Engine,
        array: true,
    },
    Section {
        name: "fleet",
        meaning: "The dynos: how many, their type (cores and memory quota), and for a scenario \
                  without `[app]` the requests each holds at once.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "app",
        meaning: "The app server every dyno runs: processes, threads, how they take requests \
                  (from a preset), and its memory. Without `[app]`, a dyno has `fleet.slots` \
                  slots and no memory model.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "app.concurrency_limit",
        meaning: "A concurrency limit at each dyno, in front of its app server (as Envoy's adaptive_concurrency filter, or a middleware that answers before the queue), over the requests the dyno holds (waiting for a thread or on one): a request that reaches the dyno when as many are in flight as the limit is answered 503 at once (errors.limit_rejected; the router retries it on another dyno under router.retry_on \"5xx\", clients under \"5xx\" or \"refused\"). Written inline: `concurrency_limit = { algorithm = \"fixed\", limit = 8 }`. An adaptive limit moves with each request's latency at the dyno (the app's own timeouts are drops), as Netflix's concurrency-limits does, with its defaults. Figures: limit.rejected, limit.rejected_per_s, limit.app_mean. See docs/feedback.md.",
        kind_key: Some("algorithm"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "fleet.deploy",
        meaning: "A deploy (`[[fleet.deploy]]`, one table each, in time order): every dyno is \
                  replaced by a new one, at once (the app is down for a boot) or with preboot \
                  (the new dynos boot first and take the traffic when all are up).",
        kind_key: None,
        reader: Reader::Engine,
        array: true,
    },
    Section {
        name: "app.memory",
        meaning: "What each part of a dyno holds in memory (all 0, memory not modelled, unless \
                  given). Over the dyno's quota (`fleet.memory`) it swaps (R14) and CPU work \
                  slows by `app.swap_slowdown`; at `app.restart_at` × the quota it is restarted \
                  (R15): its requests fail and it boots again.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "resources.NAME",
        meaning: "A shared back end named NAME (a database, a cache: `[resources.db]`), used by \
                  the phases `{ use = \"NAME\", time = ... }` of `[request]`: its servers work on \
                  the uses first come, first served or by processor sharing.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "resources.NAME.pool",
        meaning: "A pool of connections in front of the resource, usually written inline: \
                  `pool = { size = 5, per = \"process\" }`. A use waits for a free connection of \
                  its pool and holds it while served. Without a pool, every use goes straight to \
                  the servers.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "router",
        meaning: "How requests are routed to dynos. Without `[router]`: random routing, one \
                  router.",
        kind_key: Some("policy"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "router.view",
        meaning: "How late the loads the routers read are, usually written inline: `view = { \
                  update = \"periodic\", interval = \"2s\" }`. Without it (or with update \
                  exact) each router reads its own counts, up to date. Otherwise every router \
                  reads one board of the fleet's loads (each dyno's requests in flight from all \
                  routers) as it was at an earlier time, so that its own recent requests are \
                  not on it (the herd effect; Mitzenmacher, \"How useful is old information?\"). \
                  Read by the policies that read loads (least_connections, power_of_d, \
                  retry_if_busy, intelligent, first, least_request, bounded_hash); random and \
                  round_robin read none, and the view \
                  changes nothing for them. Runs on the event-driven engine. See docs/model.md.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "autoscale",
        meaning: "The fleet's autoscaler: a rule that reads one metric as the platform shows \
                  it (aggregated over the rule's `window`, seen after its `delay`) and asks for \
                  a fleet size within [`min`, `max`] every `interval`. Dynos it adds boot for \
                  `fleet.boot_time`; dynos it removes stop as `fleet.stop_delay` and \
                  `fleet.shutdown_grace` say. `fleet.dynos`, the fleet at the start, lies \
                  within [min, max]; capacity (the offered load, the stability check) is \
                  counted on `max` dynos, and only the event-driven engine runs it. Without \
                  `[autoscale]` the fleet keeps `fleet.dynos` dynos. The rules, and which \
                  defaults come from the vendors: docs/autoscaling.md.",
        kind_key: Some("rule"),
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "faults",
        meaning: "A trigger (`[[faults]]`, one table each): for `for` from `at` the app's or a \
                  resource's work slows (`slowdown`), or the app or a resource refuses or hangs \
                  (`outage`); or at `at` dynos crash and boot again (`dynos_lost`). Times from \
                  the run's start, warm-up included, inside the measured window. A run with \
                  faults reports the stability verdict (`stability.*`: did goodput come back \
                  after the last fault?). Runs on the event-driven engine. See \
                  docs/feedback.md.",
        kind_key: Some("kind"),
        reader: Reader::Engine,
        array: true,
    },
    Section {
        name: "services.NAME",
        meaning: "Another fleet, named NAME, that requests call (`{ call = \"NAME\" }` or \
                  `{ fanout = \"NAME\", count = N }` among the phases of `[request]`): each of \
                  its tables holds the keys of the top-level table of the same name \
                  (`[services.search.fleet]` those of `[fleet]`). The top-level fleet is the \
                  entry service; `[arrivals]`, `[run]` and `[resources]` are the scenario's \
                  (a resource is shared by every fleet whose phases use it). Every service \
                  must be called, and the calls may not go round in a cycle. Calls and \
                  fan-outs, hedged or not, are simulated (each service's figures under \
                  services.NAME in the results). See docs/services.md.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "run",
        meaning: "How long to simulate, how many times, from which seed.",
        kind_key: None,
        reader: Reader::Engine,
        array: false,
    },
    Section {
        name: "cost",
        meaning: "Dyno prices, for what a fleet costs. Every run's report prices its dyno-seconds \
             (`cost.dyno_hours` and `cost.dollars`, the `$` column of `run` and `compare`; a \
             dyno-second costs the monthly price over a 730-hour month, as Heroku bills by the \
             second), `tune` ranks settings by dollars a day, and `capacity` and `demo` give \
             dollars a month. Checked on load by every command, as every section is.",
        kind_key: None,
        reader: Reader::FrontEnd,
        array: false,
    },
    Section {
        name: "cases",
        meaning: "Labelled variants of the scenario, run side by side by `dynosim run` \
                  (other commands use the scenario without them).",
        kind_key: None,
        reader: Reader::FrontEnd,
        array: true,
    },
];

pub const KINDS: &[Kind] = &[
    Kind {
        section: "arrivals",
        name: "poisson",
        meaning: "independent arrivals (a Poisson process) at a constant rate, or at a rate \
                  that varies in time: a piecewise-linear schedule or a daily sine (drawn by \
                  thinning)",
    },
    Kind {
        section: "arrivals",
        name: "batch",
        meaning: "batches of requests arriving at the same instant, the batches a Poisson \
                  process (a page fanning out into calls, a retry storm): counts vary more \
                  than Poisson's by the batch size",
    },
    Kind {
        section: "arrivals",
        name: "on_off",
        meaning: "a Markov-modulated on/off source: Poisson arrivals at `rate` while on, none \
                  while off, on and off periods exponential with means `on` and `off`; \
                  between Poisson and scheduled bursts in burstiness",
    },
    Kind {
        section: "arrivals",
        name: "replay",
        meaning: "a trace replayed (trace-driven simulation): the arrival times of real \
                  requests read from a file, and with a second column each request's own \
                  service time, in place of [service] (`dynosim logs replay` writes one from \
                  a router log)",
    },
    Kind {
        section: "arrivals",
        name: "closed",
        meaning: "a closed loop of clients, as ab, hey and wrk load a server: each client sends a \
                  request, waits for its response (or its failure), thinks, and sends the next. \
                  The rate is what the app sustains, so the run is never refused as unstable; \
                  the results have `closed_loop`, what the load generator would report",
    },
    Kind {
        section: "service",
        name: "constant",
        meaning: "every request takes the same time",
    },
    Kind {
        section: "service",
        name: "exponential",
        meaning: "exponential service times (M/M/c in queueing theory)",
    },
    Kind {
        section: "service",
        name: "lognormal",
        meaning: "the logarithm of the service time is normal",
    },
    Kind {
        section: "service",
        name: "weibull",
        meaning: "P(S > t) = exp(-(t/λ)^k); a shape k below 1 gives a heavy tail",
    },
    Kind {
        section: "service",
        name: "gamma",
        meaning: "the gamma distribution: with a whole shape k, the sum of k exponential stages",
    },
    Kind {
        section: "service",
        name: "empirical",
        meaning: "service times read from a file, resampled with replacement",
    },
    Kind {
        section: "service",
        name: "quantiles",
        meaning: "a table of percentiles, such as a monitoring tool reports: ln(time) is \
                  interpolated linearly in the normal quantile of the percentile, so each piece \
                  is a lognormal and the tails extend the end pieces",
    },
    Kind {
        section: "service",
        name: "uniform",
        meaning: "every time between min and max equally likely: a timeout checked on a period \
                  (gunicorn's --timeout 30 kills between 30 and 31 s), or patience with known bounds",
    },
    Kind {
        section: "router",
        name: "random",
        meaning: "a uniformly random dyno (Heroku since 2010; the seed study's \"naive\")",
    },
    Kind {
        section: "router",
        name: "round_robin",
        meaning: "each router cycles through the dynos from a random start",
    },
    Kind {
        section: "router",
        name: "least_connections",
        meaning: "the dyno with the fewest in-flight requests from this router, random tie-break",
    },
    Kind {
        section: "router",
        name: "power_of_d",
        meaning: "`d` distinct random dynos, the least loaded wins",
    },
    Kind {
        section: "router",
        name: "retry_if_busy",
        meaning: "a random dyno; if it is busy, another random draw (the seed study's \
                  \"choice of two\")",
    },
    Kind {
        section: "router",
        name: "intelligent",
        meaning: "only to a dyno with a free slot, else wait in the router's FIFO queue \
                  (M/G/c; HAProxy maxconn with a queue)",
    },
    Kind {
        section: "router",
        name: "jiq",
        meaning: "Join-Idle-Queue (Lu et al. 2011): dynos that become idle report to one \
                  router, which lists them; a request goes to the first dyno on its router's \
                  list, else to a random dyno (routing.idle_hits: the fraction sent from a list)",
    },
    Kind {
        section: "router",
        name: "p2c_ewma",
        meaning: "Finagle's and Linkerd's power of two choices by peak-EWMA latency: two \
                  distinct random dynos, the lower of this router's latency estimate × (its \
                  requests in flight + 1) wins; the estimate is learned from its own responses",
    },
    Kind {
        section: "router",
        name: "first",
        meaning: "HAProxy's `balance first`: the lowest-numbered dyno with a free slot (by this \
                  router's count), else wait in the router's FIFO queue; fills dynos in turn",
    },
    Kind {
        section: "router",
        name: "least_request",
        meaning: "Envoy's LEAST_REQUEST: `choice_count` random draws with replacement, the \
                  fewest of this router's requests wins; with `active_request_bias`, Envoy's \
                  weighted round robin (EDF) by 1/(active + 1)^bias",
    },
    Kind {
        section: "router",
        name: "bounded_hash",
        meaning: "consistent hashing with bounded loads (HAProxy's hash-balance-factor, \
                  Envoy): a request goes to its key's dyno on a hash ring, or when that dyno \
                  would hold more than its share of factor × this router's requests, to the \
                  next one clockwise that would not; needs arrivals.keys",
    },
    Kind {
        section: "autoscale",
        name: "heroku",
        meaning: "Heroku's autoscaling: the p95 response time over the past hour against \
                  `target`, one dyno up or down per event, events at least `cooldown` apart, \
                  down more slowly than up",
    },
    Kind {
        section: "autoscale",
        name: "judoscale",
        meaning: "Judoscale: the p95 queue time of the last 10 s kept between \
                  `downscale_below` and `upscale_above`, up at once by `step`, down one dyno \
                  per `downscale_delay` below the range",
    },
    Kind {
        section: "autoscale",
        name: "hirefire",
        meaning: "HireFire's queue-time or response-time manager: at each checkup a percentile \
                  or the average of the times since the last one, against a maximum and a \
                  minimum, after a number of breaches in a row (the sensitivity)",
    },
    Kind {
        section: "autoscale",
        name: "hpa",
        meaning: "the Kubernetes Horizontal Pod Autoscaler (autoscaling/v2 with `behavior`): \
                  ⌈dynos up × metric / target⌉ outside the tolerance, then stabilization \
                  windows and rate-limiting policies",
    },
    Kind {
        section: "autoscale",
        name: "target_tracking",
        meaning: "AWS target tracking: keeps a mean per dyno (CPU, or busy threads) at \
                  `target`, out in proportion after `scale_out_datapoints` one-minute \
                  datapoints above it, in slowly after `scale_in_datapoints` below",
    },
    Kind {
        section: "autoscale",
        name: "schedule",
        meaning: "a size per time of day, the same every day from the run's start at \
                  midnight; reads no metric",
    },
    Kind {
        section: "arrivals.retry.budget",
        name: "grpc",
        meaning: "gRPC's retryThrottling (gRFC A6): a token count from `max_tokens`, 1 taken by \
                  each failed try, `token_ratio` given back by each success; retries go only \
                  while the count is above half of max_tokens",
    },
    Kind {
        section: "arrivals.retry.budget",
        name: "finagle",
        meaning: "Finagle's RetryBudget: each request deposits, each retry withdraws 100 / \
                  `percent` requests' worth; deposits expire after `ttl`; `min_per_s` retries \
                  a second are always allowed",
    },
    Kind {
        section: "router.concurrency_limit",
        name: "fixed",
        meaning: "FixedLimit: the limit never moves; `limit` is required",
    },
    Kind {
        section: "router.concurrency_limit",
        name: "aimd",
        meaning: "AIMDLimit: + 1 per answer while at least half the limit is in flight, × backoff_ratio on a drop or an answer slower than `timeout`",
    },
    Kind {
        section: "router.concurrency_limit",
        name: "gradient2",
        meaning: "Gradient2Limit: limit × clamp(rtt_tolerance × long-average latency / latency, 0.5, 1) + queue_size, smoothed; no growth while under half the limit is in flight",
    },
    Kind {
        section: "router.concurrency_limit",
        name: "vegas",
        meaning: "VegasLimit (TCP Vegas): the queue ⌈limit × (1 − least latency / latency)⌉ against α and β: + β while it is at most log10(limit), + log10(limit) below α, − log10(limit) above β or on a drop",
    },
    Kind {
        section: "app.concurrency_limit",
        name: "fixed",
        meaning: "FixedLimit: the limit never moves; `limit` is required",
    },
    Kind {
        section: "app.concurrency_limit",
        name: "aimd",
        meaning: "AIMDLimit: + 1 per answer while at least half the limit is in flight, × backoff_ratio on a drop or an answer slower than `timeout`",
    },
    Kind {
        section: "app.concurrency_limit",
        name: "gradient2",
        meaning: "Gradient2Limit: limit × clamp(rtt_tolerance × long-average latency / latency, 0.5, 1) + queue_size, smoothed; no growth while under half the limit is in flight",
    },
    Kind {
        section: "app.concurrency_limit",
        name: "vegas",
        meaning: "VegasLimit (TCP Vegas): the queue ⌈limit × (1 − least latency / latency)⌉ against α and β: + β while it is at most log10(limit), + log10(limit) below α, − log10(limit) above β or on a drop",
    },
    Kind {
        section: "faults",
        name: "slowdown",
        meaning: "work that begins in the window takes `factor` times as long: the app's \
                  (`[service]`, `io`, `cpu`) or one resource's service",
    },
    Kind {
        section: "faults",
        name: "outage",
        meaning: "the app (or a resource) refuses every request (use) that begins in the \
                  window: an error at once, 500 (`mode = \"refuse\"`); or holds it until the \
                  window ends (`mode = \"hang\"`)",
    },
    Kind {
        section: "faults",
        name: "dynos_lost",
        meaning: "`count` dynos up at `at` crash (the requests they hold fail, errors.crashed) \
                  and boot again, each after its fleet.boot_time, as the platform restarts a \
                  crashed dyno",
    },
];

/// The keys of a `concurrency_limit` table, the same at the router and at the app: one list,
/// its section named where it is used.
macro_rules! concurrency_limit_keys {
    ($section:literal) => {
        &[
            Key {
                section: $section,
                kind: None,
                name: "algorithm",
                value: "name",
                unit: "",
                default: Default::Required,
                example: r#""aimd""#,
                meaning: "the rule: fixed, aimd, gradient2 or vegas (Netflix's FixedLimit, AIMDLimit, Gradient2Limit, VegasLimit)",
            },
            Key {
                section: $section,
                kind: Some("fixed"),
                name: "limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Required,
                example: "8",
                meaning: "requests in flight at most; one more is rejected",
            },
            Key {
                section: $section,
                kind: Some("aimd"),
                name: "initial_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("20"),
                example: "30",
                meaning: "the limit before any answer (AIMDLimit's initialLimit), from min_limit to max_limit",
            },
            Key {
                section: $section,
                kind: Some("aimd"),
                name: "min_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("20"),
                example: "10",
                meaning: "the limit never falls below this (minLimit)",
            },
            Key {
                section: $section,
                kind: Some("aimd"),
                name: "max_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("200"),
                example: "100",
                meaning: "the limit never rises above this (maxLimit)",
            },
            Key {
                section: $section,
                kind: Some("aimd"),
                name: "backoff_ratio",
                value: "number from 0.5 to below 1",
                unit: "",
                default: Default::Value("0.9"),
                example: "0.75",
                meaning: "the limit's factor on a drop (backoffRatio)",
            },
            Key {
                section: $section,
                kind: Some("aimd"),
                name: "timeout",
                value: "duration above 0",
                unit: "s",
                default: Default::Value(r#""5s""#),
                example: r#""2s""#,
                meaning: "an answer slower than this counts as a drop (AIMDLimit's timeout)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "initial_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("20"),
                example: "30",
                meaning: "the limit before any answer (Gradient2Limit's initialLimit), from min_limit to max_limit",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "min_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("20"),
                example: "10",
                meaning: "the limit never falls below this (minLimit)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "max_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("200"),
                example: "100",
                meaning: "the limit never rises above this (maxConcurrency)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "smoothing",
                value: "number above 0, at most 1",
                unit: "",
                default: Default::Value("0.2"),
                example: "0.5",
                meaning: "the new estimate's weight against the old (smoothing)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "queue_size",
                value: "whole number, 0 to 1000000",
                unit: "requests",
                default: Default::Value("4"),
                example: "2",
                meaning: "what the limit may grow by at each answer while latency stays low (queueSize)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "long_window",
                value: "whole number, 1 to 1000000",
                unit: "answers",
                default: Default::Value("600"),
                example: "100",
                meaning: "the long average's span: an exponential average of factor 2 / (long_window + 1), after a plain mean of the first 10 (longWindow)",
            },
            Key {
                section: $section,
                kind: Some("gradient2"),
                name: "rtt_tolerance",
                value: "number, at least 1",
                unit: "",
                default: Default::Value("1.5"),
                example: "2.0",
                meaning: "how much slower than the long average an answer may be before the limit falls (rttTolerance)",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "initial_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("20"),
                example: "30",
                meaning: "the limit before any answer (VegasLimit's initialLimit), at most max_limit",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "max_limit",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Value("1000"),
                example: "100",
                meaning: "the limit never rises above this (maxConcurrency); it never falls below 1",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "smoothing",
                value: "number above 0, at most 1",
                unit: "",
                default: Default::Value("1.0"),
                example: "0.5",
                meaning: "the new estimate's weight against the old (smoothing)",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "alpha",
                value: "whole number, 1 to 1000000",
                unit: "requests",
                default: Default::Described("3 × log10(limit), log10 floored and at least 1"),
                example: "3",
                meaning: "below this queue the limit grows by log10(limit) (alpha)",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "beta",
                value: "whole number, 1 to 1000000, at least alpha",
                unit: "requests",
                default: Default::Described("6 × log10(limit), log10 floored and at least 1"),
                example: "6",
                meaning: "above this queue the limit falls by log10(limit) (beta)",
            },
            Key {
                section: $section,
                kind: Some("vegas"),
                name: "probe_multiplier",
                value: "whole number, 1 to 1000000",
                unit: "answers",
                default: Default::Value("30"),
                example: "10",
                meaning: "a probe for the least latency every U(0.5, 1) × probe_multiplier × limit answers (probeMultiplier)",
            },
        ]
    };
}

/// Every key, in the order docs/scenario.md lists them.
pub fn keys() -> impl Iterator<Item = &'static Key> + Clone {
    KEYS_BEFORE_LIMITS
        .iter()
        .chain(ROUTER_LIMIT_KEYS)
        .chain(APP_LIMIT_KEYS)
        .chain(KEYS_AFTER_LIMITS)
}

/// `[router.concurrency_limit]`.
static ROUTER_LIMIT_KEYS: &[Key] = concurrency_limit_keys!("router.concurrency_limit");
/// `[app.concurrency_limit]`.
static APP_LIMIT_KEYS: &[Key] = concurrency_limit_keys!("app.concurrency_limit");

/// The keys up to the concurrency limits' tables, in the order docs/scenario.md lists them.
const KEYS_BEFORE_LIMITS: &[Key] = &[
    // --- the top level
    Key {
        section: "",
        kind: None,
        name: "name",
        value: "string",
        unit: "",
        default: Default::Described("the file's name"),
        example: r#""my-app""#,
        meaning: "the scenario's name, shown in tables and outputs",
    },
    Key {
        section: "",
        kind: None,
        name: "description",
        value: "string",
        unit: "",
        default: Default::Off,
        example: r#""our app at peak""#,
        meaning: "one line, shown by `dynosim scenarios`",
    },
    // --- [arrivals]
    Key {
        section: "arrivals",
        kind: None,
        name: "process",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""poisson""#,
        meaning: "the arrival process",
    },
    Key {
        section: "arrivals",
        kind: Some("poisson"),
        name: "rate",
        value: "rate, schedule or sine table",
        unit: "req/s",
        default: Default::Required,
        example: r#""9000/min""#,
        meaning: "the arrival rate: a rate (constant); a schedule of `[time, rate]` points, \
                  `[[\"0s\", \"50/s\"], [\"10min\", \"200/s\"], [\"20min\", \"50/s\"]]`, \
                  the first at 0s, times never decreasing (a time given twice is a step), \
                  rates >= 0 (the last > 0), linear between points and constant after the \
                  last; or a daily \
                  sine `{ mean = \"100/s\", amplitude = \"50/s\", period = \"24h\", peak = \
                  \"14h\" }`, mean + amplitude × cos(2π (t − peak) / period), amplitude at \
                  most the mean, period 24h and peak 0s when left out (t counts from the run's \
                  start, warm-up included). The stability check uses the long-run rate: a \
                  schedule's last rate, the sine's mean; a sustained overload stops the run at \
                  run.max_waiting instead",
    },
    Key {
        section: "arrivals",
        kind: Some("batch"),
        name: "rate",
        value: "rate",
        unit: "batches/s",
        default: Default::Required,
        example: r#""20/s""#,
        meaning: "the rate of batches (requests arrive at rate × the mean batch size)",
    },
    Key {
        section: "arrivals",
        kind: Some("batch"),
        name: "size",
        value: "whole number, 1 to 10^6, or a table",
        unit: "requests",
        default: Default::Required,
        example: "4",
        meaning: "requests in a batch: a number (every batch), or `{ distribution = \
                  \"geometric\", mean = 4 }` (1, 2, 3... with P(n) = (1 − p)^(n−1) p, p = \
                  1/mean)",
    },
    Key {
        section: "arrivals",
        kind: Some("on_off"),
        name: "rate",
        value: "rate",
        unit: "req/s",
        default: Default::Required,
        example: r#""500/s""#,
        meaning: "the arrival rate while on (the long-run rate is rate × on / (on + off))",
    },
    Key {
        section: "arrivals",
        kind: Some("on_off"),
        name: "on",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""10s""#,
        meaning: "the mean time on (exponential)",
    },
    Key {
        section: "arrivals",
        kind: Some("on_off"),
        name: "off",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""40s""#,
        meaning: "the mean time off (exponential)",
    },
    Key {
        section: "arrivals",
        kind: Some("replay"),
        name: "file",
        value: "path",
        unit: "",
        default: Default::Required,
        example: r#""arrivals.csv""#,
        meaning: "a text file of requests, one a line: `arrival` or `arrival,service`, seconds \
                  from the trace's start (or durations with units), in any order; relative to \
                  the scenario file. With service times, leave out [service] and [request]: \
                  each request keeps its own. Read once and shared by the replications, which \
                  replay the same requests (only what is drawn, such as random routing, \
                  differs); arrivals after run.warmup + run.duration are not replayed. The \
                  load it offers is its requests over its span; a load at or above 1 needs \
                  run.allow_overload (the trace ends, so its queues do)",
    },
    Key {
        section: "arrivals",
        kind: Some("closed"),
        name: "clients",
        value: "whole number, 1 to 10,000,000",
        unit: "clients",
        default: Default::Value("1"),
        example: "100",
        meaning: "clients sending at once, each one request at a time (ab's -c)",
    },
    Key {
        section: "arrivals",
        kind: Some("closed"),
        name: "think",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#"{"distribution": "exponential", "mean": "500ms"}"#,
        meaning: "how long a client waits between a response and its next request",
    },
    Key {
        section: "arrivals",
        kind: Some("closed"),
        name: "requests",
        value: "whole number, 1 to 10^10",
        unit: "requests",
        default: Default::Off,
        example: "1000",
        meaning: "requests to send in all, over every client (ab's -n): the run ends when they \
                  are answered, and run.duration does not apply (requests sent during \
                  run.warmup are not measured in the queueing figures). Left out, the clients \
                  send until run.warmup + run.duration",
    },
    Key {
        section: "arrivals",
        kind: None,
        name: "timeout",
        value: "time distribution, or \"off\"",
        unit: "s",
        default: Default::Off,
        example: r#""10s""#,
        meaning: "the client's timeout (hey's -t, ab's -s), from when it sends: it gives up \
                  (errors.client_timeout) and a closed-loop client sends its next request. A \
                  request still held at the router is dropped from its queue; one sent to a dyno \
                  is worked on to its end, but the router stops counting it, as a proxy closes \
                  its connection to the dyno when the client has gone (HAProxy's option \
                  abortonclose, nginx): a load-aware router may send that dyno another request. \
                  A distribution gives each request its own patience",
    },
    // --- [[arrivals.burst]]
    Key {
        section: "arrivals.burst",
        kind: None,
        name: "at",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""1min""#,
        meaning: "when the clients are set to fire, from the run's start (warm-up included); \
                  before the run's end",
    },
    Key {
        section: "arrivals.burst",
        kind: None,
        name: "clients",
        value: "whole number, 1 to 10,000,000",
        unit: "clients",
        default: Default::Required,
        example: "600",
        meaning: "clients firing at once",
    },
    Key {
        section: "arrivals.burst",
        kind: None,
        name: "requests",
        value: "whole number, 1 to 10^6",
        unit: "requests",
        default: Default::Value("1"),
        example: "2",
        meaning: "requests each client sends when it fires, all at that instant",
    },
    Key {
        section: "arrivals.burst",
        kind: None,
        name: "jitter",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#"{"distribution": "exponential", "mean": "5s"}"#,
        meaning: "each client's delay after `at`, drawn once per client and firing (clocks \
                  and start-up times differ)",
    },
    Key {
        section: "arrivals.burst",
        kind: None,
        name: "every",
        value: "duration",
        unit: "s",
        default: Default::Off,
        example: r#""5min""#,
        meaning: "the burst fires again this long after each firing (a cron schedule); once \
                  when left out. A repeating burst adds clients × requests / every to the \
                  long-run rate",
    },
    // --- [arrivals.retry]
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "attempts",
        value: "whole number, 1 to 100",
        unit: "tries",
        default: Default::Value("3"),
        example: "4",
        meaning: "tries in all, the first included (1: no retries); 3, the AWS SDKs' standard \
                  mode and the Google SRE book's ceiling",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "on",
        value: "list of \"timeout\", \"5xx\", \"refused\"",
        unit: "",
        default: Default::Value(r#"["timeout", "5xx"]"#),
        example: r#"["timeout", "refused"]"#,
        meaning: "which failed tries are retried: \"timeout\" the client's own arrivals.timeout; \
                  \"5xx\" any error the router or the app answered (refusals too); \"refused\" \
                  an error answered before any dyno worked on the request (a full router, no \
                  dyno up, every dyno refusing, a shed), which is always safe to retry",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "backoff",
        value: "\"exponential\" or \"constant\"",
        unit: "",
        default: Default::Value(r#""exponential""#),
        example: r#""exponential""#,
        meaning: "the delay before retry k: base × multiplier^(k−1), at most cap \
                  (exponential), or base every time (constant); then spread by jitter",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "base",
        value: "duration",
        unit: "s",
        default: Default::Value(r#""100ms""#),
        example: r#""200ms""#,
        meaning: "the first retry's delay before jitter (0: retry at once)",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "cap",
        value: "duration",
        unit: "s",
        default: Default::Value(r#""20s""#),
        example: r#""10s""#,
        meaning: "no delay exceeds it (the AWS SDKs' 20 s; base when base is longer)",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "multiplier",
        value: "number, 1 to 100",
        unit: "",
        default: Default::Value("2"),
        example: "3",
        meaning: "each retry's nominal delay over the one before (exponential backoff only)",
    },
    Key {
        section: "arrivals.retry",
        kind: None,
        name: "jitter",
        value: "\"full\", \"equal\", \"decorrelated\" or \"none\"",
        unit: "",
        default: Default::Value(r#""full""#),
        example: r#""equal""#,
        meaning: "how each delay d is drawn (Marc Brooker, \"Exponential Backoff And Jitter\", \
                  AWS Architecture Blog): full U(0, d); equal d/2 + U(0, d/2); decorrelated \
                  min(cap, U(base, 3 × the last delay)); none d itself. From a random stream \
                  of its own",
    },
    // --- [arrivals.retry.budget]
    Key {
        section: "arrivals.retry.budget",
        kind: None,
        name: "kind",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""grpc""#,
        meaning: "the budget's rule: grpc or finagle",
    },
    Key {
        section: "arrivals.retry.budget",
        kind: Some("grpc"),
        name: "max_tokens",
        value: "number, 1 to 1000",
        unit: "tokens",
        default: Default::Value("10"),
        example: "100",
        meaning: "the token count's start and ceiling; retries stop at half of it (gRPC's \
                  maxTokens; 10 in the gRFC's example)",
    },
    Key {
        section: "arrivals.retry.budget",
        kind: Some("grpc"),
        name: "token_ratio",
        value: "number above 0, at most 1",
        unit: "tokens",
        default: Default::Value("0.1"),
        example: "0.2",
        meaning: "tokens each successful try gives back (a failed one takes 1): in a storm at \
                  most about 1 + token_ratio tries a request (gRPC's tokenRatio)",
    },
    Key {
        section: "arrivals.retry.budget",
        kind: Some("finagle"),
        name: "percent",
        value: "number, 0 to 100",
        unit: "%",
        default: Default::Value("20"),
        example: "10",
        meaning: "retries allowed per 100 requests sent over the last ttl (Finagle's \
                  percentCanRetry, as a percentage)",
    },
    Key {
        section: "arrivals.retry.budget",
        kind: Some("finagle"),
        name: "min_per_s",
        value: "number >= 0",
        unit: "retries/s",
        default: Default::Value("10"),
        example: "5",
        meaning: "retries a second always allowed, whatever the requests (Finagle's \
                  minRetriesPerSec)",
    },
    Key {
        section: "arrivals.retry.budget",
        kind: Some("finagle"),
        name: "ttl",
        value: "duration, 1 s to 60 s",
        unit: "s",
        default: Default::Value(r#""10s""#),
        example: r#""20s""#,
        meaning: "how long a deposit counts (Finagle's ttl, in ten slices of ttl/10)",
    },
    // --- [arrivals.breaker]
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "failure_rate",
        value: "percentage above 0, at most 100",
        unit: "%",
        default: Default::Value("50"),
        example: "25",
        meaning: "it opens when at least this percentage of the window's calls failed \
                  (resilience4j's failureRateThreshold)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "slow_call_rate",
        value: "percentage above 0, at most 100",
        unit: "%",
        default: Default::Value("100"),
        example: "80",
        meaning: "it opens when at least this percentage of the window's calls were slow \
                  (slowCallRateThreshold)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "slow_call_duration",
        value: "duration above 0",
        unit: "s",
        default: Default::Value(r#""60s""#),
        example: r#""5s""#,
        meaning: "a call answered (or failed) later than this after it was sent is slow \
                  (slowCallDurationThreshold)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "window_type",
        value: "\"count_based\" or \"time_based\"",
        unit: "",
        default: Default::Value(r#""count_based""#),
        example: r#""time_based""#,
        meaning: "the sliding window: the last `window` calls, or the calls of the last \
                  `window` seconds in buckets of one second (slidingWindowType)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "window",
        value: "whole number, 1 to 1000000",
        unit: "calls or s",
        default: Default::Value("100"),
        example: "50",
        meaning: "the sliding window's size: calls (count_based) or seconds (time_based) \
                  (slidingWindowSize)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "min_calls",
        value: "whole number, 1 to 1000000",
        unit: "calls",
        default: Default::Value("100"),
        example: "20",
        meaning: "calls in the window before a rate is judged; a count_based window judges \
                  once full at the latest (minimumNumberOfCalls)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "open_for",
        value: "duration above 0",
        unit: "s",
        default: Default::Value(r#""60s""#),
        example: r#""30s""#,
        meaning: "how long it stays open, failing every try at once, before it is half-open \
                  (waitDurationInOpenState; half-open at that instant, as with \
                  automaticTransitionFromOpenToHalfOpenEnabled)",
    },
    Key {
        section: "arrivals.breaker",
        kind: None,
        name: "half_open_calls",
        value: "whole number, 1 to 1000000",
        unit: "calls",
        default: Default::Value("10"),
        example: "5",
        meaning: "tries let through when half-open; once they have answered it closes, or \
                  opens again if they reach a threshold (permittedNumberOfCallsInHalfOpenState)",
    },
    // --- [arrivals.keys]
    Key {
        section: "arrivals.keys",
        kind: None,
        name: "users",
        value: "whole number, 1 to 10^9",
        unit: "users",
        default: Default::Required,
        example: "1000",
        meaning: "how many users send the requests; each request's key is one of them",
    },
    Key {
        section: "arrivals.keys",
        kind: None,
        name: "popularity",
        value: "\"zipf\" or \"uniform\"",
        unit: "",
        default: Default::Value(r#""zipf""#),
        example: r#""zipf""#,
        meaning: "how often each user sends: \"zipf\", user k (from 1) in proportion to \
                  1/k^exponent (a few users send most requests); \"uniform\", all alike",
    },
    Key {
        section: "arrivals.keys",
        kind: None,
        name: "exponent",
        value: "number > 0",
        unit: "",
        default: Default::Value("1.0"),
        example: "0.8",
        meaning: "Zipf's exponent s (popularity = \"zipf\" only): 1 is Zipf's law, larger \
                  concentrates the requests on fewer users",
    },
    // --- [service]
    Key {
        section: "service",
        kind: None,
        name: "distribution",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""weibull""#,
        meaning: "the service-time distribution",
    },
    Key {
        section: "service",
        kind: None,
        name: "round_up",
        value: "duration",
        unit: "s",
        default: Default::Off,
        example: r#""1ms""#,
        meaning: "round every sample up to a multiple of this",
    },
    Key {
        section: "service",
        kind: None,
        name: "clip",
        value: "[duration, duration]",
        unit: "s",
        default: Default::Off,
        example: r#"["10ms", "30s"]"#,
        meaning: "then clip every sample to [min, max]",
    },
    Key {
        section: "service",
        kind: Some("constant"),
        name: "value",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""50ms""#,
        meaning: "the time every request takes",
    },
    Key {
        section: "service",
        kind: Some("exponential"),
        name: "mean",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""100ms""#,
        meaning: "mean service time",
    },
    Key {
        section: "service",
        kind: Some("lognormal"),
        name: "median",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""50ms""#,
        meaning: "median service time",
    },
    Key {
        section: "service",
        kind: Some("lognormal"),
        name: "sigma",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "1.0",
        meaning: "standard deviation of ln S",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "shape",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "0.8",
        meaning: "shape k",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "scale",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("median"),
        example: r#""79ms""#,
        meaning: "scale λ",
    },
    Key {
        section: "service",
        kind: Some("weibull"),
        name: "median",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("scale"),
        example: r#""50ms""#,
        meaning: "median service time, instead of the scale",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "shape",
        value: "number > 0",
        unit: "",
        default: Default::Required,
        example: "2.0",
        meaning: "shape k; 1 is exponential",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "scale",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("mean"),
        example: r#""50ms""#,
        meaning: "scale θ (mean = k θ)",
    },
    Key {
        section: "service",
        kind: Some("gamma"),
        name: "mean",
        value: "duration",
        unit: "s",
        default: Default::EitherThisOr("scale"),
        example: r#""100ms""#,
        meaning: "mean service time, instead of the scale",
    },
    Key {
        section: "service",
        kind: Some("empirical"),
        name: "file",
        value: "path",
        unit: "",
        default: Default::Required,
        example: r#""service-times.txt""#,
        meaning: "a text file of service times, one a line (`46ms`, or a bare number in `unit`); \
                  relative to the scenario file",
    },
    Key {
        section: "service",
        kind: Some("empirical"),
        name: "unit",
        value: "time unit",
        unit: "",
        default: Default::Value(r#""s""#),
        example: r#""ms""#,
        meaning: "the unit of bare numbers in the file",
    },
    Key {
        section: "service",
        kind: Some("quantiles"),
        name: "percentiles",
        value: "[[percent, duration], ...]",
        unit: "%, s",
        default: Default::Required,
        example: r#"[[50, "46ms"], [90, "923ms"], [99, "3144ms"]]"#,
        meaning: "at least two pairs, percentiles strictly between 0 and 100 and increasing, \
                  times not decreasing",
    },
    Key {
        section: "service",
        kind: Some("uniform"),
        name: "min",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""30s""#,
        meaning: "the shortest time",
    },
    Key {
        section: "service",
        kind: Some("uniform"),
        name: "max",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""31s""#,
        meaning: "the longest time, at least min",
    },
    // --- [request]
    Key {
        section: "request",
        kind: None,
        name: "phases",
        value: "list of phases",
        unit: "",
        default: Default::EitherThisOr("[[request.class]]"),
        example: r#"[{"cpu": "3ms"}, {"io": "1ms"}, {"use": "db", "time": "5ms"}]"#,
        meaning: "what a request does, in order, 1 to 32 phases: `{ cpu = T }` computes on a \
                  core (with the process's interpreter lock, if any), `{ io = T }` waits using no \
                  CPU, `{ use = \"NAME\", time = T }` takes a connection from the pool of \
                  `[resources.NAME]` and is served by its servers for T; each T is a time \
                  distribution. `{ call = \"NAME\", timeout = T, retries = k }` calls \
                  `[services.NAME]` and waits for its answer (timeout: a duration > 0, none \
                  when left out; retries: 0 to 1000, 0 when left out); `{ fanout = \"NAME\", \
                  count = N, wait = \"all\", hedge = T }` sends N calls at once (N: 1 to \
                  10,000, or `{ distribution = \"geometric\", mean = m }`) and ends when \
                  `wait` have answered (\"all\", the default; \"first\"; or k, 1 to N); \
                  `hedge` (a duration > 0, or a percentile of the callee's response time such \
                  as \"p95\"; false or left out: none) sends a second copy of a call still \
                  unanswered after it, to another dyno; the first answer wins. `cancel` \
                  (false, the default: the calls a fan-out no longer needs run on for nobody; \
                  \"queued\": those no thread has taken yet are dropped; true: those on their \
                  threads are stopped too) applies to a hedge's loser and the calls `wait` \
                  left. Calls and fan-outs are simulated: see docs/services.md",
    },
    // --- [[request.class]]
    Key {
        section: "request.class",
        kind: None,
        name: "name",
        value: "string",
        unit: "",
        default: Default::Required,
        example: r#""listing""#,
        meaning: "the class's name in the results; each class has its own",
    },
    Key {
        section: "request.class",
        kind: None,
        name: "weight",
        value: "number > 0",
        unit: "",
        default: Default::Value("1"),
        example: "0.8",
        meaning: "the class's share of requests, relative to the other classes' weights",
    },
    Key {
        section: "request.class",
        kind: None,
        name: "phases",
        value: "list of phases",
        unit: "",
        default: Default::Required,
        example: r#"[{"cpu": {"distribution": "exponential", "mean": "20ms"}}, {"use": "db", "time": "50ms"}]"#,
        meaning: "what a request of this class does, as `request.phases`",
    },
    // --- [fleet]
    Key {
        section: "fleet",
        kind: None,
        name: "dynos",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Required,
        example: "10",
        meaning: "how many dynos",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "slots",
        value: "whole number, 1 to 100,000",
        unit: "requests",
        default: Default::Described("1, for a scenario without [app]"),
        example: "2",
        meaning: "concurrent requests per dyno (Unicorn, Puma or Gunicorn workers sharing its \
                  accept queue), for a scenario without `[app]`, whose processes and threads \
                  set it instead (giving both is an error)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "type",
        value: "name",
        unit: "",
        default: Default::Value(r#""standard-1x""#),
        example: r#""standard-2x""#,
        meaning: "the dyno type, for its cores and memory quota: eco, basic, standard-1x and \
                  2013-1x (1 core, 512MB), standard-2x (2 cores, 1024MB), performance-m (2 cores, \
                  2.5GB), performance-l (8 cores, 14GB). It is also what `[cost]` prices unless \
                  `cost.dyno_type` says otherwise",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "cores",
        value: "whole number, 1 to 1024",
        unit: "cores",
        default: Default::Described("the dyno type's"),
        example: "4",
        meaning: "cores per dyno, instead of the type's: `cpu` phases share them (processor \
                  sharing), and gunicorn's preset and `app.malloc_arena_max` count them",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "memory",
        value: "size, at least 1 MB",
        unit: "bytes",
        default: Default::Described("the dyno type's"),
        example: r#""1GB""#,
        meaning: "the memory quota per dyno, instead of the type's (see `[app.memory]`)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "boot_time",
        value: "time distribution",
        unit: "s",
        default: Default::Described("10 s, or `app.boot_time`"),
        example: r#"{"distribution": "uniform", "min": "20s", "max": "60s"}"#,
        meaning: "from a dyno's start to its first request: each boot draws its own time. A \
                  dyno restarted for memory (R15) is down meanwhile, the fleet one dyno short. \
                  Heroku's dynos serve 20-60 s after they start (Judoscale's figure). \
                  `app.boot_time` is its old name",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "boot_timeout",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""60s""#),
        example: r#""90s""#,
        meaning: "a boot that takes longer crashes at this time (Heroku's R10, 60 s there) and \
                  the dyno boots again. With `[autoscale]`, a `fleet.boot_time` whose every \
                  draw reaches it is refused, as is one so rarely within it that a boot would \
                  expect more than 100,000 crashes in the run",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "cpu_sharing",
        value: "\"slices\" or \"ps\"",
        unit: "",
        default: Default::Value(r#""slices""#),
        example: r#""ps""#,
        meaning: "how a dyno's runnable threads share its cores: slices (round robin in \
                  slices of `cpu_quantum` while more want to run than there are cores, and \
                  the locks handed over as CPython and CRuby do) or ps (processor sharing, a \
                  lock handed round far faster than a phase lasts: for theory)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "cpu_quantum",
        value: "duration >= 1µs",
        unit: "s",
        default: Default::Value(r#""3ms""#),
        example: r#""1ms""#,
        meaning: "the OS scheduler's time slice (Linux EEVDF on 2 to 8 cores, rounded to its \
                  tick: about 3 ms)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "cpu_jitter",
        value: "number from 0 to 10",
        unit: "",
        default: Default::Described("0.05 with slices (measured on the testbed), 0 with ps"),
        example: "0",
        meaning: "how much a CPU phase's time varies around what was drawn on a real machine: \
                  the coefficient of variation of a mean-1 lognormal factor (0: as drawn)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "stop_delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""1s""#),
        example: r#""2s""#,
        meaning: "from a dyno being stopped, when the routers stop sending it requests, to its \
                  SIGTERM, when its server stops accepting (a request reaching it after that \
                  raced it going down). Heroku's is about a second",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "shutdown_grace",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""30s""#),
        example: r#""10s""#,
        meaning: "from a stopped dyno's SIGTERM to its SIGKILL: the time it has to finish the \
                  requests it holds; those it still holds then fail (Heroku's 30 s)",
    },
    Key {
        section: "fleet",
        kind: None,
        name: "cycling",
        value: "duration > 0",
        unit: "s",
        default: Default::Off,
        example: r#""24h""#,
        meaning: "daily restarts: each dyno is replaced this long after it came up, plus a random \
                  offset of up to 216 min (Heroku's \"24h\"); the fleet's dynos are of random \
                  ages at the start",
    },
    Key {
        section: "fleet.deploy",
        kind: None,
        name: "at",
        value: "duration >= 0",
        unit: "s",
        default: Default::Required,
        example: r#""30s""#,
        meaning: "when the deploy comes, from the run's start (before its end)",
    },
    Key {
        section: "fleet.deploy",
        kind: None,
        name: "preboot",
        value: "true or false",
        unit: "",
        default: Default::Value("false"),
        example: "true",
        meaning: "the new dynos boot beside the old ones and take the traffic when all are up; \
                  false: every dyno restarts at once",
    },
    // --- [app]
    Key {
        section: "app",
        kind: None,
        name: "server",
        value: "name",
        unit: "",
        default: Default::Value(r#""generic""#),
        example: r#""gunicorn""#,
        meaning: "a preset, which sets model, processes, threads and lock: generic (1 threaded \
                  process of 1 thread), thin (1 sync process), unicorn (2 sync processes), puma \
                  (2 processes of 5 threads), gunicorn (2 × cores + 1 processes, see \
                  worker_class); all but generic have an interpreter lock",
    },
    Key {
        section: "app",
        kind: None,
        name: "worker_class",
        value: "name",
        unit: "",
        default: Default::Described("\"sync\" for gunicorn; only gunicorn takes one"),
        example: r#""gevent""#,
        meaning: "gunicorn's worker class: sync (one request per process), gthread (threaded), \
                  gevent or eventlet (async)",
    },
    Key {
        section: "app",
        kind: None,
        name: "model",
        value: "name",
        unit: "",
        default: Default::Described("the preset's"),
        example: r#""async""#,
        meaning: "how a process takes requests: sync (one at a time), threaded (`threads` at \
                  once, each on an OS thread of its own), async (up to `worker_connections` at \
                  once on one OS thread)",
    },
    Key {
        section: "app",
        kind: None,
        name: "processes",
        value: "whole number, 1 to 10,000",
        unit: "processes",
        default: Default::Described(
            "the preset's: 1 (generic, thin), 2 (unicorn, puma), 2 × \
                                     cores + 1 (gunicorn)",
        ),
        example: "3",
        meaning: "processes (workers) per dyno, sharing its accept queue and its cores; a \
                  dyno holds processes × requests per process at once",
    },
    Key {
        section: "app",
        kind: None,
        name: "threads",
        value: "whole number, 1 to 100,000",
        unit: "threads",
        default: Default::Described("the preset's: 5 (puma), else 1"),
        example: "4",
        meaning: "threads per process, each holding a request, for the threaded model (a sync \
                  server has 1)",
    },
    Key {
        section: "app",
        kind: None,
        name: "worker_connections",
        value: "whole number, 1 to 1,000,000",
        unit: "requests",
        default: Default::Value("1000"),
        example: "100",
        meaning: "requests one process holds at once, for the async model; with greedy \
                  accept, the connections a process takes at once (running and queued)",
    },
    Key {
        section: "app",
        kind: None,
        name: "accept",
        value: "shared or greedy",
        unit: "",
        default: Default::Described("greedy for gunicorn's gthread and gevent, else shared"),
        example: "\"shared\"",
        meaning: "how the processes take connections: shared (a process accepts only with a \
                  thread free; requests wait in the dyno's one accept queue) or greedy (each \
                  process accepts up to worker_connections and queues them for its own \
                  threads: a request goes at once to a process drawn at random and waits \
                  there, even while another has a thread free)",
    },
    Key {
        section: "app",
        kind: None,
        name: "lock",
        value: "\"gil\", \"gvl\" or \"none\"",
        unit: "",
        default: Default::Described(
            "the preset's: gil (gunicorn), gvl (puma, unicorn, thin), none (generic)",
        ),
        example: r#""gvl""#,
        meaning: "the interpreter lock a process's threads share: gil (CPython: a waiting \
                  thread asks the holder to drop it after `switch_interval`), gvl (CRuby: a \
                  FIFO queue, the holder yields after `timeslice`), none (free-threaded \
                  Python, the JVM, Go). true (the preset's lock, or gil) and false (none) are \
                  still read",
    },
    Key {
        section: "app",
        kind: None,
        name: "switch_interval",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""5ms""#),
        example: r#""1ms""#,
        meaning: "CPython's sys.setswitchinterval: how long a thread waits for the GIL before \
                  the holder is asked to drop it (with `lock = \"gil\"`)",
    },
    Key {
        section: "app",
        kind: None,
        name: "timeslice",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""100ms""#),
        example: r#""10ms""#,
        meaning: "CRuby's RUBY_THREAD_TIMESLICE: how long a thread holds the GVL while others \
                  wait, in whole 10 ms ticks (with `lock = \"gvl\"`)",
    },
    Key {
        section: "app",
        kind: None,
        name: "request_cpu",
        value: "time distribution",
        unit: "s",
        default: Default::Off,
        example: r#""1ms""#,
        meaning: "the app server's own CPU per request (accept, parse, write, log), under the \
                  lock, before the request's phases; `dynosim testbed --calibrate` measures it",
    },
    Key {
        section: "app",
        kind: None,
        name: "malloc_arena_max",
        value: "whole number, 1 to 100,000",
        unit: "arenas",
        default: Default::Described("8 × cores (glibc's default)"),
        example: "2",
        meaning: "glibc's MALLOC_ARENA_MAX: the malloc arenas a process may have. A request \
                  that finds every arena of its process in use makes a new one (of \
                  `app.memory.arena` bytes, kept until the dyno restarts), up to this many",
    },
    Key {
        section: "app",
        kind: None,
        name: "boot_time",
        value: "duration > 0",
        unit: "s",
        default: Default::Described("10 s"),
        example: r#""30s""#,
        meaning: "the old name of `fleet.boot_time`, kept: a duration; give one of the two",
    },
    Key {
        section: "app",
        kind: None,
        name: "timeout",
        value: "time distribution, or \"off\"",
        unit: "s",
        default: Default::Off,
        example: r#""30s""#,
        meaning: "the worker timeout (gunicorn's --timeout, 30 s by default there; Unicorn's \
                  timeout, 60 s): a sync worker whose request runs longer is killed, its \
                  request fails (errors.app_timeout), and a new worker takes requests after \
                  app.worker_boot_time. It never fires for threaded and async workers (gthread, \
                  gevent, Puma): they report alive from another thread, and a long request does \
                  not kill them",
    },
    Key {
        section: "app",
        kind: None,
        name: "backlog",
        value: "whole number >= 1",
        unit: "requests",
        default: Default::Off,
        example: "2048",
        meaning: "the listen backlog: requests a dyno's accept queue holds at most (gunicorn's \
                  --backlog, 2048 by default there; the kernel's somaxconn caps it). One more is \
                  refused, and the router tries another dyno (router.retries). Left out: no \
                  limit",
    },
    Key {
        section: "app",
        kind: None,
        name: "worker_boot_time",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""1s""#),
        example: r#""5s""#,
        meaning: "how long a worker killed by app.timeout takes to be replaced (the master forks \
                  a new one, which loads the app unless preloaded); the dyno is one worker short \
                  meanwhile",
    },
    Key {
        section: "app",
        kind: None,
        name: "wait_timeout",
        value: "duration > 0",
        unit: "s",
        default: Default::Off,
        example: r#""20s""#,
        meaning: "Rack::Timeout's wait_timeout: a request older than this when a thread takes it \
                  (its age from its router's arrival, X-Request-Start) is dropped unserved, \
                  answered 503 (errors.wait_timeout), its thread free at once: no work for a \
                  client that has likely gone. Below the clients' timeout it removes the \
                  retry storm's overloaded state (docs/feedback.md). May go with fleet.slots",
    },
    Key {
        section: "app",
        kind: None,
        name: "service_timeout",
        value: "duration > 0",
        unit: "s",
        default: Default::Off,
        example: r#""15s""#,
        meaning: "Rack::Timeout's service_timeout: a request that has run this long on its \
                  thread (since the thread took it) is stopped by a timeout raised inside it, \
                  answered 500 (errors.service_timeout; retried as a 5xx), and its thread is \
                  free at once for the next request: unlike router.timeout (H12), which answers \
                  the client but leaves the dyno working, and app.timeout, which kills the \
                  worker. A query already handed to a [resources] server runs on there (the \
                  database is not told); a pool's connection goes back at once. Event-driven \
                  engine only. May go with fleet.slots",
    },
    Key {
        section: "app",
        kind: None,
        name: "overhead",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""1ms""#,
        meaning: "the worker's own time per request after its response has gone (writing and \
                  closing the connection, logging, accepting the next): it holds the thread \
                  (and the request's memory), not the client or the router. `dynosim testbed` \
                  measures it as `testbed.overhead.between_requests`",
    },
    Key {
        section: "app",
        kind: None,
        name: "swap_slowdown",
        value: "number >= 0",
        unit: "",
        default: Default::Value("20"),
        example: "10",
        meaning: "how much CPU work slows over the memory quota (R14): by 1 + swap_slowdown × \
                  (memory / quota − 1); by default 10% over makes it 3× slower",
    },
    Key {
        section: "app",
        kind: None,
        name: "arena_contention",
        value: "number >= 0",
        unit: "",
        default: Default::Value("0"),
        example: "0.3",
        meaning: "how much a process's CPU work slows when its busy threads outnumber its malloc \
                  arenas: by 1 + arena_contention × (busy − arenas) / busy (0: not at all)",
    },
    Key {
        section: "app",
        kind: None,
        name: "restart_at",
        value: "number > 1",
        unit: "× quota",
        default: Default::Described("the dyno type's: 3 (2013-1x), else 2"),
        example: "2.5",
        meaning: "the multiple of the memory quota at which a dyno is restarted (R15)",
    },
    // --- [app.memory]
    Key {
        section: "app.memory",
        kind: None,
        name: "dyno",
        value: "size",
        unit: "bytes",
        default: Default::Value("0"),
        example: r#""40MB""#,
        meaning: "held by each dyno whatever it runs",
    },
    Key {
        section: "app.memory",
        kind: None,
        name: "process",
        value: "size",
        unit: "bytes",
        default: Default::Value("0"),
        example: r#""110MB""#,
        meaning: "held by each process (the app, loaded)",
    },
    Key {
        section: "app.memory",
        kind: None,
        name: "thread",
        value: "size",
        unit: "bytes",
        default: Default::Value("0"),
        example: r#""8MB""#,
        meaning: "held by each OS thread of a process",
    },
    Key {
        section: "app.memory",
        kind: None,
        name: "request",
        value: "size",
        unit: "bytes",
        default: Default::Value("0"),
        example: r#""1MB""#,
        meaning: "held by each request while a thread holds it",
    },
    Key {
        section: "app.memory",
        kind: None,
        name: "arena",
        value: "size",
        unit: "bytes",
        default: Default::Value("0"),
        example: r#""2MB""#,
        meaning: "held by each malloc arena a process makes beyond its first (see \
                  `app.malloc_arena_max`)",
    },
    // --- [resources.NAME]
    Key {
        section: "resources.NAME",
        kind: None,
        name: "servers",
        value: "whole number, 1 to 100,000",
        unit: "servers",
        default: Default::Value("1"),
        example: "2",
        meaning: "the resource's own servers (a database's cores)",
    },
    Key {
        section: "resources.NAME",
        kind: None,
        name: "discipline",
        value: "name",
        unit: "",
        default: Default::Value(r#""fcfs""#),
        example: r#""ps""#,
        meaning: "how the servers share the uses: fcfs (first come, first served: a use waits \
                  for a free server) or ps (processor sharing: every use is served at once, \
                  each at min(1, servers / uses) of a server's speed)",
    },
    Key {
        section: "resources.NAME",
        kind: None,
        name: "timeout",
        value: "duration > 0, or \"off\"",
        unit: "s",
        default: Default::Off,
        example: r#""2s""#,
        meaning: "PostgreSQL's statement_timeout: a query the resource has held this long (from \
                  when it took it, after the pool's connection: its wait for a server, a hang \
                  of an outage and its service all count) is stopped by the resource, its \
                  server free at once, and the query fails: the app tries it again (retries) \
                  or answers 500 (errors.resource_timeout; retried by clients as a 5xx). A \
                  hang outage then ends at the timeout. Stops the queries of requests the app \
                  gave up on too (app.service_timeout)",
    },
    Key {
        section: "resources.NAME",
        kind: None,
        name: "retries",
        value: "whole number, 0 to 1,000",
        unit: "retries",
        default: Default::Value("0"),
        example: "2",
        meaning: "times the app tries a failed query again (after the resource's timeout, or \
                  an outage's refusal), at once, on the connection it holds, each try's time \
                  drawn afresh from the phase's; counted in retries.app and retries.count. \
                  The request fails when its last try does",
    },
    // --- [resources.NAME.pool]
    Key {
        section: "resources.NAME.pool",
        kind: None,
        name: "size",
        value: "whole number, 1 to 1,000,000",
        unit: "connections",
        default: Default::Required,
        example: "5",
        meaning: "connections in each pool",
    },
    Key {
        section: "resources.NAME.pool",
        kind: None,
        name: "per",
        value: "name",
        unit: "",
        default: Default::Value(r#""process""#),
        example: r#""dyno""#,
        meaning: "whose pool it is: process (each process has its own, as an ORM's), dyno (one \
                  a dyno) or app (one for the whole fleet, as a PgBouncer)",
    },
    // --- [router]
    Key {
        section: "router",
        kind: None,
        name: "policy",
        value: "name, or a list of names",
        unit: "",
        default: Default::Value(r#""random""#),
        example: r#""random""#,
        meaning: "the routing policy; a list runs each on the same traffic, side by side",
    },
    Key {
        section: "router",
        kind: None,
        name: "routers",
        value: "whole number, 1 to 100,000",
        unit: "routers",
        default: Default::Value("1"),
        example: "2",
        meaning: "independent routers; each request lands on one at random, and each knows \
                  only the requests it sent (Heroku's Bamboo routers)",
    },
    Key {
        section: "router",
        kind: None,
        name: "connect",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""0.8ms""#,
        meaning: "from the routing decision to the request's arrival at its dyno (the router's \
                  work, the connection, the app server's accept and parse); the router counts \
                  the request against the dyno from its decision, and the queue time includes \
                  it. `dynosim testbed` measures it as `testbed.overhead.to_app_when_idle`",
    },
    Key {
        section: "router",
        kind: None,
        name: "colocated_cpu",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""0.3ms""#,
        meaning: "a router on the dyno's own machine (nginx or HAProxy beside the app server; \
                  on the testbed, HAProxy and the load generator): its CPU per request on the \
                  dyno's cores, half when it sends the request there and half when it relays \
                  the response. One thread of its own on each dyno, outside the app's processes \
                  and their lock: it delays requests only by taking cores, and counts in \
                  dyno.cpu_utilisation. Needs [request] phases; `dynosim testbed --calibrate` \
                  measures it",
    },
    Key {
        section: "router",
        kind: None,
        name: "timeout",
        value: "time distribution, or \"off\"",
        unit: "s",
        default: Default::Value(r#""30s""#),
        example: r#""off""#,
        meaning: "Heroku's H12: counted from when the router hands the request to a dyno; at \
                  the deadline the client gets a 503 (errors.h12) and the router stops counting \
                  the request against the dyno, which is not told and works on to the end \
                  (wasted.thread_seconds, wasted.cpu_seconds). HAProxy's `timeout server`",
    },
    Key {
        section: "router",
        kind: None,
        name: "queue_timeout",
        value: "time distribution, or \"off\"",
        unit: "s",
        default: Default::Off,
        example: r#""5s""#,
        meaning: "HAProxy's `timeout queue`: a request held at the router (by a policy that \
                  holds, such as intelligent) this long is answered 503 (errors.queue_timeout) \
                  and leaves the queue. A distribution gives each request its own patience \
                  (M/M/c+M, Erlang-A, with an exponential one)",
    },
    Key {
        section: "router",
        kind: None,
        name: "max_in_flight",
        value: "whole number >= 1, \"N/dyno\", or \"off\"",
        unit: "requests",
        default: Default::Off,
        example: r#""200/dyno""#,
        meaning: "requests a router holds at once (waiting at it, or sent to a dyno and not yet \
                  answered or timed out); one more is answered at once with an error \
                  (errors.h11: Heroku's backlog cap, 200 per dyno today, 50 in 2013). \"N/dyno\" \
                  is N times fleet.dynos",
    },
    Key {
        section: "router",
        kind: None,
        name: "cost",
        value: "time distribution",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#"{"distribution": "exponential", "mean": "80us"}"#,
        meaning: "each router's own work per request before its routing decision: the routers \
                  (router.routers of them) become FIFO servers with a queue of their own, and \
                  the app's requests can go no faster than routers / cost (a routing layer's \
                  ceiling). The wait and the work count in the queue time",
    },
    Key {
        section: "router",
        kind: None,
        name: "shed_latency",
        value: "duration > 0",
        unit: "s",
        default: Default::Off,
        example: r#""100ms""#,
        meaning: "load shedding (with router.cost): a request that would wait longer than this \
                  for its router is answered at once with an error (errors.shed; Heroku's \
                  load-shedding 500s)",
    },
    Key {
        section: "router",
        kind: None,
        name: "retries",
        value: "whole number, 0 to 1000",
        unit: "dynos",
        default: Default::Value("10"),
        example: "2",
        meaning: "dynos the router tries after one refuses the connection (its app.backlog is \
                  full), as Heroku's router does, each time another dyno than the one that just \
                  refused (as HAProxy's redispatch draws) while another is up; when all refuse, \
                  the client gets an error (errors.h13). The router's timeout runs from the \
                  first try",
    },
    Key {
        section: "router",
        kind: None,
        name: "retry_delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""10ms""#,
        meaning: "the router's wait before each retry after a refusal",
    },
    Key {
        section: "router",
        kind: None,
        name: "retry_on",
        value: "list of \"refused\", \"timeout\", \"5xx\"",
        unit: "",
        default: Default::Value(r#"["refused"]"#),
        example: r#"["refused", "timeout"]"#,
        meaning: "what the router retries on another dyno, within router.retries tries beyond \
                  the first (as HAProxy's retry-on with option redispatch, nginx's \
                  proxy_next_upstream): \"refused\" a dyno refused the connection (its \
                  app.backlog was full; Heroku's router, and the default); \"timeout\" \
                  router.timeout came first (H12): another dyno gets the request while the first \
                  works on, for nobody; \"5xx\" the dyno answered an error or died with the \
                  request (an outage, app.wait_timeout, app.service_timeout, app.timeout's kill, R15, a crash). A \
                  retry keeps its client's deadline, and router.timeout runs again from it. \
                  retries.router counts them. See docs/feedback.md",
    },
    // --- [router.retry_budget]
    Key {
        section: "router.retry_budget",
        kind: None,
        name: "percent",
        value: "number, 0 to 100",
        unit: "%",
        default: Default::Value("20"),
        example: "10",
        meaning: "retries in flight at a router at most this percentage of its requests in \
                  flight (Envoy's budget_percent, default 20)",
    },
    Key {
        section: "router.retry_budget",
        kind: None,
        name: "min_concurrency",
        value: "whole number, 0 to 1000000",
        unit: "retries",
        default: Default::Value("3"),
        example: "5",
        meaning: "retries in flight a router always allows, whatever its load (Envoy's \
                  min_retry_concurrency, default 3)",
    },
];

/// The keys after the concurrency limits' tables.
const KEYS_AFTER_LIMITS: &[Key] = &[
    // --- [router.view]
    Key {
        section: "router.view",
        kind: None,
        name: "update",
        value: "exact, periodic, delayed or individual",
        unit: "",
        default: Default::Value(r#""exact""#),
        example: r#""periodic""#,
        meaning: "exact: each router's own counts, up to date; periodic: a board of every \
                  dyno's load refreshed all at once every interval (the first refresh at 0); \
                  delayed: the loads exactly interval ago; individual: each dyno refreshes its \
                  own entry at exponential intervals of mean interval",
    },
    Key {
        section: "router.view",
        kind: None,
        name: "interval",
        value: "duration > 0",
        unit: "s",
        default: Default::Described("required unless update is exact, which takes none"),
        example: r#""2s""#,
        meaning: "how late the loads are: the refresh period (periodic), the delay (delayed), \
                  or each dyno's mean time between refreshes (individual)",
    },
    Key {
        section: "router",
        kind: None,
        name: "aperture",
        value: "whole number, 1 to fleet.dynos",
        unit: "dynos",
        default: Default::Off,
        example: "4",
        meaning: "Finagle's random aperture: each router sends only to its own random subset \
                  of this many dynos, and its policy picks among them alone. Each router draws \
                  an order of the dynos at the start; its subset is the first this many up in \
                  it (a dyno going down is replaced by the next up). Each dyno then serves \
                  K ~ Binomial(routers, aperture / dynos) routers",
    },
    Key {
        section: "router",
        kind: None,
        name: "kind",
        value: "\"haproxy\" or \"nginx\"",
        unit: "",
        default: Default::Value(r#""haproxy""#),
        example: r#""nginx""#,
        meaning: "the real router `dynosim testbed` runs in front of the dynos (docs/testbed.md); \
                  the simulation does not read it. nginx runs random, round_robin, \
                  least_connections and power_of_d with d = 2 (distinct draws), one worker \
                  process per router",
    },
    Key {
        section: "router",
        kind: None,
        name: "zone",
        value: "true or false",
        unit: "",
        default: Default::Value("false"),
        example: "false",
        meaning: "nginx only: its worker processes share their counters in a shared memory \
                  `zone`, so they are one router with one view (router.routers = 1); false: \
                  each worker counts only its own requests, one router each",
    },
    Key {
        section: "router",
        kind: None,
        name: "workers",
        value: "whole number, 1 to 64",
        unit: "processes",
        default: Default::Described("router.routers"),
        example: "2",
        meaning: "nginx only: its worker processes (`worker_processes`); without a zone each is \
                  one of router.routers, so the two are equal",
    },
    Key {
        section: "router",
        kind: Some("power_of_d"),
        name: "d",
        value: "whole number >= 1",
        unit: "dynos",
        default: Default::Value("2"),
        example: "3",
        meaning: "how many distinct dynos to compare",
    },
    Key {
        section: "router",
        kind: Some("power_of_d"),
        name: "distinct",
        value: "true or false",
        unit: "",
        default: Default::Value("true"),
        example: "false",
        meaning: "draw d different dynos; false: d independent draws that may repeat a dyno, \
                  as HAProxy's balance random(d) does",
    },
    Key {
        section: "router",
        kind: Some("retry_if_busy"),
        name: "tries",
        value: "whole number >= 1",
        unit: "draws",
        default: Default::Value("2"),
        example: "3",
        meaning: "random draws before taking a busy dyno anyway",
    },
    Key {
        section: "router",
        kind: Some("jiq"),
        name: "jiq_report_d",
        value: "whole number >= 1",
        unit: "routers",
        default: Default::Value("1"),
        example: "2",
        meaning: "routers a dyno that becomes idle samples: it reports to the one with the \
                  shortest idle list (JIQ-SQ(d)); 1: to a router drawn at random (JIQ-Random)",
    },
    Key {
        section: "router",
        kind: Some("jiq"),
        name: "jiq_report_delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""5ms""#,
        meaning: "from a dyno becoming idle to its report reaching the router; until then it \
                  is on no list",
    },
    Key {
        section: "router",
        kind: Some("p2c_ewma"),
        name: "decay",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""10s""#),
        example: r#""5s""#,
        meaning: "how fast the latency estimate forgets: a response shorter than the estimate \
                  is averaged in with weight 1 − exp(−Δt / decay), Δt since the last update \
                  (Linkerd's 10 s)",
    },
    Key {
        section: "router",
        kind: Some("p2c_ewma"),
        name: "default_rtt",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""30ms""#),
        example: r#""100ms""#,
        meaning: "the latency estimate of a dyno not heard from yet, when it comes up \
                  (Linkerd's 30 ms)",
    },
    Key {
        section: "router",
        kind: Some("least_request"),
        name: "choice_count",
        value: "whole number, 1 to 100",
        unit: "draws",
        default: Default::Value("2"),
        example: "3",
        meaning: "random draws with replacement (a dyno may be drawn twice); the one with the \
                  fewest of this router's requests wins, a tie keeps the earlier draw. 1 is \
                  random routing (Envoy asks for at least 2). Not read with \
                  active_request_bias",
    },
    Key {
        section: "router",
        kind: Some("least_request"),
        name: "active_request_bias",
        value: "number, 0 to 10",
        unit: "",
        default: Default::Off,
        example: "1.0",
        meaning: "Envoy's weighted mode: an earliest-deadline-first round robin in which a \
                  dyno's weight is 1/(active + 1)^bias, its active requests counted when it \
                  was last picked; 0 is plain round robin. Left out: the draws of \
                  choice_count",
    },
    Key {
        section: "router",
        kind: Some("bounded_hash"),
        name: "factor",
        value: "number >= 1 in hundredths, or \"inf\"",
        unit: "",
        default: Default::Value("1.25"),
        example: "1.5",
        meaning: "the load bound: a dyno takes a request only while it holds fewer than \
                  its share of ceil(factor × (this router's requests in flight + 1)), so none \
                  holds more than ceil(factor × average) (HAProxy's hash-balance-factor 125 \
                  is 1.25; its manual calls 1.25 to 2 reasonable). \"inf\": plain consistent \
                  hashing, every key to its own dyno whatever its load",
    },
    Key {
        section: "router",
        kind: Some("bounded_hash"),
        name: "ring",
        value: "\"dynosim\" or \"haproxy\"",
        unit: "",
        default: Default::Value("\"dynosim\""),
        example: r#""haproxy""#,
        meaning: "where users and dynos fall on the hash ring. \"dynosim\": 100 points a dyno, \
                  a key to the first point clockwise. \"haproxy\": HAProxy 2.x's ring exactly \
                  (hash-type consistent, servers of weight 1 numbered from 1 in the fleet's \
                  order, the key's decimal text hashed with sdbm and avalanche, the nearest \
                  point either way): the placement a real HAProxy gives the same users, which the testbed \
                  uses",
    },
    // --- [autoscale]
    Key {
        section: "autoscale",
        kind: None,
        name: "rule",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""judoscale""#,
        meaning: "the autoscaling rule",
    },
    Key {
        section: "autoscale",
        kind: None,
        name: "min",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Value("1"),
        example: "2",
        meaning: "the fewest dynos it asks for (scaling to zero is not modelled)",
    },
    Key {
        section: "autoscale",
        kind: None,
        name: "max",
        value: "whole number, min to 10,000,000",
        unit: "dynos",
        default: Default::Required,
        example: "20",
        meaning: "the most dynos it asks for; every answer is clamped to [min, max]",
    },
    Key {
        section: "autoscale",
        kind: None,
        name: "interval",
        value: "duration > 0",
        unit: "s",
        default: Default::Described(
            "the rule's: 1min (heroku, hirefire, target_tracking, schedule), 10s (judoscale), \
             15s (hpa)",
        ),
        example: r#""30s""#,
        meaning: "time between two evaluations, the first `interval` after the run's start; \
                  at most 1,000,000 evaluations in a replication's run (warmup and duration)",
    },
    // autoscale.rule = "heroku"
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "target",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""1s""#),
        example: r#""500ms""#,
        meaning: "the p95 response time to stay under: at or above it, one dyno is added \
                  (the CLI's default, 1000 ms)",
    },
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "window",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""1h""#),
        example: r#""30min""#,
        meaning: "the response times the p95 is taken over (Heroku: the past hour)",
    },
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""1min""#,
        meaning: "from the end of the window to when the rule sees it (assumed: the router's \
                  logs are the platform's own)",
    },
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "cooldown",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""1min""#),
        example: r#""2min""#,
        meaning: "the least time between two events, up or down (Heroku's: a minute)",
    },
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "downscale_ratio",
        value: "number > 0, at most 1",
        unit: "× target",
        default: Default::Value("0.9"),
        example: "0.8",
        meaning: "a dyno is removed only while the p95 is below this × target (assumed: \
                  Heroku does not publish how it scales down)",
    },
    Key {
        section: "autoscale",
        kind: Some("heroku"),
        name: "downscale_delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""5min""#),
        example: r#""10min""#,
        meaning: "how long the p95 stays below downscale_ratio × target before a dyno is \
                  removed, and between two removals (assumed)",
    },
    // autoscale.rule = "judoscale"
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "upscale_above",
        value: "duration > 0",
        unit: "s",
        default: Default::Described("100 ms"),
        example: r#""200ms""#,
        meaning: "the p95 queue time above which `step` dynos are added at once (assumed: \
                  Dynoscale's default; Judoscale publishes none); either bound given alone \
                  sets the other at half or twice it",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "downscale_below",
        value: "duration > 0, below upscale_above",
        unit: "s",
        default: Default::Described("50 ms"),
        example: r#""20ms""#,
        meaning: "the p95 queue time below which a dyno is removed, after downscale_delay \
                  (assumed, as upscale_above)",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "window",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""10s""#),
        example: r#""20s""#,
        meaning: "the queue times the p95 is taken over (Judoscale aggregates every 10 s)",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""10s""#),
        example: r#""5s""#,
        meaning: "from the end of the window to when the rule sees it (assumed: one report of \
                  the adapters, which report every 10 s)",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "step",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Value("1"),
        example: "2",
        meaning: "dynos added per upscale (the upscale jump); a downscale removes one",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "cooldown",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""3min""#),
        example: r#""1min""#,
        meaning: "the least time between two upscales (the upscale frequency; 3 min, \
                  Judoscale's older fixed rule); it never holds back the first",
    },
    Key {
        section: "autoscale",
        kind: Some("judoscale"),
        name: "downscale_delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""10min""#),
        example: r#""5min""#,
        meaning: "time below the range before the first downscale, and between two \
                  (Judoscale's default)",
    },
    // autoscale.rule = "hirefire"
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "metric",
        value: "queue or response",
        unit: "",
        default: Default::Value(r#""queue""#),
        example: r#""response""#,
        meaning: "the times read: queue times or response times (HireFire's QueueTime and \
                  ResponseTime managers)",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "aggregation",
        value: "percentile or average",
        unit: "",
        default: Default::Value(r#""percentile""#),
        example: r#""percentile""#,
        meaning: "how the times become one figure: their `percentile`, or their mean",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "percentile",
        value: "number > 0, below 100",
        unit: "%",
        default: Default::Value("99"),
        example: "95",
        meaning: "the percentile read, with aggregation = \"percentile\" only",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "upscale_above",
        value: "duration > 0",
        unit: "s",
        default: Default::Described("250 ms"),
        example: r#""500ms""#,
        meaning: "the maximum: a figure above it is a breach up; either bound given alone sets \
                  the other at 2.5 times less or more",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "downscale_below",
        value: "duration > 0, below upscale_above",
        unit: "s",
        default: Default::Described("100 ms"),
        example: r#""200ms""#,
        meaning: "the minimum: a figure below it is a breach down",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "upscale_step",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Value("5"),
        example: "2",
        meaning: "dynos added per upscale",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "downscale_step",
        value: "whole number, 1 to 10,000,000",
        unit: "dynos",
        default: Default::Value("1"),
        example: "2",
        meaning: "dynos removed per downscale",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "upscale_sensitivity",
        value: "whole number, 1 to 1000",
        unit: "checkups",
        default: Default::Value("1"),
        example: "2",
        meaning: "breaches up in a row before an upscale (a checkup breaching the other way or \
                  neither starts the count again)",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "downscale_sensitivity",
        value: "whole number, 1 to 1000",
        unit: "checkups",
        default: Default::Value("2"),
        example: "3",
        meaning: "breaches down in a row before a downscale",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "upscale_timeout",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""1min""#),
        example: r#""2min""#,
        meaning: "the least time between two upscales; 0 turns it off",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "downscale_timeout",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""1min""#),
        example: r#""5min""#,
        meaning: "the least time between two downscales; 0 turns it off",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "window",
        value: "duration > 0",
        unit: "s",
        default: Default::Described("the interval"),
        example: r#""2min""#,
        meaning: "the times the figure is taken over (by default those since the last \
                  checkup)",
    },
    Key {
        section: "autoscale",
        kind: Some("hirefire"),
        name: "delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""10s""#,
        meaning: "from the end of the window to when the rule sees it (HireFire's metrics are \
                  \"accurate to the second\" at the checkup)",
    },
    // autoscale.rule = "hpa"
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "metric",
        value: "cpu, utilisation or queue.p95",
        unit: "",
        default: Default::Value(r#""cpu""#),
        example: r#""utilisation""#,
        meaning: "the metric: the mean over up dynos of their CPU use (a fraction of their \
                  cores) or of their busy threads (a fraction of their threads), or the \
                  fleet's p95 queue time",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "target",
        value: "a whole percent as a fraction, above 0, at most 1; a duration for queue.p95",
        unit: "",
        default: Default::Required,
        example: "0.6",
        meaning: "the metric's target: a fraction for cpu and utilisation (0.6 for 60%; the \
                  utilisation is compared in whole percent, truncated, as the controller \
                  does), a queue time (\"100ms\") for queue.p95",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "tolerance",
        value: "number >= 0, below 1",
        unit: "",
        default: Default::Value("0.1"),
        example: "0.05",
        meaning: "sets up_tolerance and down_tolerance both",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "up_tolerance",
        value: "number >= 0",
        unit: "",
        default: Default::Described("tolerance's (0.1)"),
        example: "0.2",
        meaning: "no scale-up while metric / target is at most 1 + this \
                  (behavior.scaleUp.tolerance)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "down_tolerance",
        value: "number >= 0, below 1",
        unit: "",
        default: Default::Described("tolerance's (0.1)"),
        example: "0.05",
        meaning: "no scale-down while metric / target is at least 1 - this \
                  (behavior.scaleDown.tolerance)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "window",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""15s""#),
        example: r#""30s""#,
        meaning: "the observations the metric is taken over (metrics-server's resolution, 15 s)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""15s""#),
        example: r#""0s""#,
        meaning: "from the end of the window to when the rule sees it (assumed: one scrape of \
                  metrics-server)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "up_stabilization",
        value: "duration, 0 to 1h",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""1min""#,
        meaning: "a scale-up goes no higher than the lowest recommendation of this window \
                  (the scale-up stabilization window)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "down_stabilization",
        value: "duration, 0 to 1h",
        unit: "s",
        default: Default::Value(r#""5min""#),
        example: r#""10min""#,
        meaning: "a scale-down goes no lower than the highest recommendation of this window \
                  (the scale-down stabilization window)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "up_policies",
        value: "list of { type, value, period }",
        unit: "",
        default: Default::Value(
            r#"[{"type": "percent", "value": 100, "period": "15s"}, {"type": "pods", "value": 4, "period": "15s"}]"#,
        ),
        example: r#"[{"type": "pods", "value": 2, "period": "1min"}]"#,
        meaning: "limits on the dynos added per period: type pods (that many) or percent (that \
                  % of the fleet at the period's start), value a whole number >= 1, period up \
                  to 30min",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "down_policies",
        value: "list of { type, value, period }",
        unit: "",
        default: Default::Value(r#"[{"type": "percent", "value": 100, "period": "15s"}]"#),
        example: r#"[{"type": "percent", "value": 10, "period": "1min"}, {"type": "pods", "value": 4, "period": "1min"}]"#,
        meaning: "limits on the dynos removed per period, as up_policies",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "up_select",
        value: "max, min or disabled",
        unit: "",
        default: Default::Value(r#""max""#),
        example: r#""min""#,
        meaning: "the scale-up policy that applies: the one allowing the most change, the \
                  least, or none (no scale-up)",
    },
    Key {
        section: "autoscale",
        kind: Some("hpa"),
        name: "down_select",
        value: "max, min or disabled",
        unit: "",
        default: Default::Value(r#""max""#),
        example: r#""min""#,
        meaning: "the scale-down policy that applies, as up_select",
    },
    // autoscale.rule = "target_tracking"
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "metric",
        value: "cpu or utilisation",
        unit: "",
        default: Default::Value(r#""cpu""#),
        example: r#""utilisation""#,
        meaning: "the mean over up dynos of their CPU use (a fraction of their cores) or of \
                  their busy threads (a fraction of their threads)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "target",
        value: "number > 0, at most 1",
        unit: "",
        default: Default::Required,
        example: "0.5",
        meaning: "the metric's target (0.5 for 50%)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "window",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""1min""#),
        example: r#""2min""#,
        meaning: "the span of one datapoint (AWS recommends 1-minute metrics)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "delay",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""0s""#),
        example: r#""1min""#,
        meaning: "from the end of the window to when the rule sees it (assumed: CloudWatch's \
                  delay is not published)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "scale_out_datapoints",
        value: "whole number, 1 to 1440",
        unit: "datapoints",
        default: Default::Value("3"),
        example: "2",
        meaning: "datapoints in a row above the target before a scale-out (users' reports: 3 \
                  of 3)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "scale_in_datapoints",
        value: "whole number, 1 to 1440",
        unit: "datapoints",
        default: Default::Value("15"),
        example: "10",
        meaning: "datapoints in a row below scale_in_ratio × target before a scale-in (users' \
                  reports: 15 of 15)",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "scale_in_ratio",
        value: "number > 0, at most 1",
        unit: "× target",
        default: Default::Value("0.9"),
        example: "0.8",
        meaning: "a scale-in needs the metric below this × target (AWS: \"usually more than \
                  10% lower\")",
    },
    Key {
        section: "autoscale",
        kind: Some("target_tracking"),
        name: "scale_in_cooldown",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""5min""#),
        example: r#""10min""#,
        meaning: "the least time between two scale-ins (300 s for ECS services); it does not \
                  hold back a scale-out",
    },
    // autoscale.rule = "schedule"
    Key {
        section: "autoscale",
        kind: Some("schedule"),
        name: "schedule",
        value: "[[time of day, dynos], ...]",
        unit: "s, dynos",
        default: Default::Required,
        example: r#"[["0s", 2], ["8h", 10], ["20h", 4]]"#,
        meaning: "the fleet's size from each time of day on: times from \"0s\" to before \
                  \"24h\", increasing; sizes whole numbers within [min, max]. Before the first \
                  time, the day's last size holds",
    },
    // --- [[faults]]
    Key {
        section: "faults",
        kind: None,
        name: "at",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""50s""#,
        meaning: "when it starts, from the run's start (warm-up included): after run.warmup \
                  and before the run's end",
    },
    Key {
        section: "faults",
        kind: None,
        name: "kind",
        value: "name",
        unit: "",
        default: Default::Required,
        example: r#""slowdown""#,
        meaning: "what happens: slowdown, outage or dynos_lost",
    },
    Key {
        section: "faults",
        kind: Some("slowdown"),
        name: "for",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""5s""#,
        meaning: "how long it lasts; it must end before the run does",
    },
    Key {
        section: "faults",
        kind: Some("slowdown"),
        name: "factor",
        value: "number above 0, at most 10^6",
        unit: "×",
        default: Default::Required,
        example: "3",
        meaning: "how many times longer work that begins in the window takes (a slow \
                  database: 3; slowdowns that overlap multiply)",
    },
    Key {
        section: "faults",
        kind: Some("slowdown"),
        name: "target",
        value: "\"app\" or a resource's name",
        unit: "",
        default: Default::Value(r#""app""#),
        example: r#""app""#,
        meaning: "whose work slows: the app's (its [service] hold, io and cpu phases) or \
                  resource NAME's service",
    },
    Key {
        section: "faults",
        kind: Some("outage"),
        name: "for",
        value: "duration",
        unit: "s",
        default: Default::Required,
        example: r#""5s""#,
        meaning: "how long it lasts; it must end before the run does",
    },
    Key {
        section: "faults",
        kind: Some("outage"),
        name: "target",
        value: "\"app\" or a resource's name",
        unit: "",
        default: Default::Value(r#""app""#),
        example: r#""app""#,
        meaning: "what is out: the app (every request a thread takes in the window) or \
                  resource NAME (every use that begins in it)",
    },
    Key {
        section: "faults",
        kind: Some("outage"),
        name: "mode",
        value: "\"refuse\" or \"hang\"",
        unit: "",
        default: Default::Value(r#""refuse""#),
        example: r#""hang""#,
        meaning: "refuse: the request fails at once with an error (errors.outage), its thread \
                  free again; hang: it waits for the outage's end, holding its thread (and a \
                  pool connection), then goes on",
    },
    Key {
        section: "faults",
        kind: Some("dynos_lost"),
        name: "count",
        value: "whole number >= 1",
        unit: "dynos",
        default: Default::Required,
        example: "1",
        meaning: "dynos that crash, the first ones up (all of them if fewer are up)",
    },
    // --- [run]
    // --- [services.NAME]
    Key {
        section: "services.NAME",
        kind: None,
        name: "fleet",
        value: "table",
        unit: "",
        default: Default::Required,
        example: r#"{"dynos": 4}"#,
        meaning: "the service's dynos: the keys of `[fleet]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "service",
        value: "table",
        unit: "",
        default: Default::EitherThisOr("request"),
        example: r#"{"distribution": "exponential", "mean": "20ms"}"#,
        meaning: "its service time: the keys of `[service]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "request",
        value: "table",
        unit: "",
        default: Default::EitherThisOr("service"),
        example: r#"{"phases": [{"cpu": "2ms"}, {"io": "5ms"}]}"#,
        meaning: "its requests' phases: the keys of `[request]` (its phases may call other services)",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "app",
        value: "table",
        unit: "",
        default: Default::Off,
        example: r#"{"server": "gunicorn", "processes": 2}"#,
        meaning: "its app server: the keys of `[app]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "router",
        value: "table",
        unit: "",
        default: Default::Described("random routing, one router"),
        example: r#"{"policy": "least_connections"}"#,
        meaning: "how the calls to it are routed to its dynos: the keys of `[router]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "autoscale",
        value: "table",
        unit: "",
        default: Default::Off,
        example: r#"{"rule": "heroku", "min": 2, "max": 8}"#,
        meaning: "its autoscaler: the keys of `[autoscale]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "faults",
        value: "list of tables",
        unit: "",
        default: Default::Off,
        example: r#"[{"kind": "slowdown", "at": "40s", "for": "10s", "factor": 3}]"#,
        meaning: "its faults: tables as `[[faults]]`",
    },
    Key {
        section: "services.NAME",
        kind: None,
        name: "cost",
        value: "table",
        unit: "",
        default: Default::Off,
        example: r#"{"dyno_type": "standard-2x"}"#,
        meaning: "its dyno prices, as `[cost]` (read by the front end)",
    },
    Key {
        section: "run",
        kind: None,
        name: "duration",
        value: "duration > 0",
        unit: "s",
        default: Default::Value(r#""5min""#),
        example: r#""1min""#,
        meaning: "measured simulated time per replication, after the warm-up (a closed loop \
                  with `arrivals.requests` runs until they are answered instead)",
    },
    Key {
        section: "run",
        kind: None,
        name: "warmup",
        value: "duration >= 0",
        unit: "s",
        default: Default::Value(r#""30s""#),
        example: r#""10s""#,
        meaning: "simulated first and not measured, so that queues reach their usual state",
    },
    Key {
        section: "run",
        kind: None,
        name: "replications",
        value: "whole number, 1 to 100,000",
        unit: "",
        default: Default::Value("5"),
        example: "3",
        meaning:
            "independent replications, for 95% confidence intervals (capacity needs 2 or more)",
    },
    Key {
        section: "run",
        kind: None,
        name: "seed",
        value: "whole number, 0 to 2^64-1",
        unit: "",
        default: Default::Value("1"),
        example: "7",
        meaning: "the seed every random stream derives from: same scenario and seed, same numbers",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_waiting",
        value: "whole number >= 1",
        unit: "requests",
        default: Default::Value("5000000"),
        example: "100000",
        meaning: "requests waiting at once (router and dyno queues together) beyond which a run \
                  is stopped as overloaded",
    },
    Key {
        section: "run",
        kind: None,
        name: "allow_overload",
        value: "true or false",
        unit: "",
        default: Default::Value("false"),
        example: "true",
        meaning: "simulate an offered load at or above capacity for the run's time (a step of \
                  `dynosim ramp`, a burst) instead of refusing it as unstable: the queues grow, \
                  and the run stops as overloaded past `run.max_waiting`",
    },
    Key {
        section: "run",
        kind: None,
        name: "shards",
        value: "\"auto\" or a whole number, 1 to fleet.dynos",
        unit: "",
        default: Default::Value(r#""auto""#),
        example: "1",
        meaning: "parts a fleet is split into, simulated apart and merged (docs/engines.md, \
                  \"Shards\"): only a fleet whose dynos are independent (Poisson arrivals of a \
                  constant rate, router.policy = \"random\", nothing shared); \"auto\": shards \
                  of 10,000 dynos for fleets of 100,000 or more, otherwise 1 (whole). The \
                  figures are the same in distribution, not the same numbers, as 1",
    },
    Key {
        section: "run",
        kind: None,
        name: "threads",
        value: "\"auto\" or a whole number, 1 to 1024",
        unit: "threads",
        default: Default::Value(r#""auto""#),
        example: "2",
        meaning: "how many replications and shards run at once (\"auto\": one per core); it \
                  never changes the figures",
    },
    Key {
        section: "run",
        kind: None,
        name: "recovery_window",
        value: "duration",
        unit: "s",
        default: Default::Described(
            "\"10min\" (with [[faults]]; the run's end after the last fault, if that is sooner)",
        ),
        example: r#""10min""#,
        meaning: "with [[faults]]: how long after the last fault ends goodput may take to come \
                  back to 95% of its level before the first, three intervals in a row, for the \
                  replication to count as recovered (stability.recovered)",
    },
    Key {
        section: "run",
        kind: None,
        name: "recovery_interval",
        value: "\"auto\" or a duration of whole seconds",
        unit: "s",
        default: Default::Described(
            "\"auto\": long enough for about 1,600 answers at the arrival rate, at least 10 s",
        ),
        example: r#""15s""#,
        meaning: "with [[faults]]: the intervals the stability verdict judges goodput over, \
                  from the last fault's end",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_requests",
        value: "number >= 1",
        unit: "requests",
        default: Default::Value("1e10"),
        example: "1e11",
        meaning:
            "the work budget: a run expected to simulate more requests than this (arrival rate \
                  × (warm-up + duration) × replications) is refused before it starts",
    },
    Key {
        section: "run",
        kind: None,
        name: "max_memory",
        value: "size, at least 1 MB",
        unit: "bytes",
        default: Default::Value("8e9"),
        example: "\"16GB\"",
        meaning:
            "memory one replication's engine state may take; a fleet that needs more (dynos × \
                  slots, routers × dynos for load-aware routers) is refused before anything is \
                  allocated, and replications run side by side only as far as it allows",
    },
    Key {
        section: "run",
        kind: None,
        name: "engine",
        value: "name",
        unit: "",
        default: Default::Value(r#""auto""#),
        example: r#""events""#,
        meaning: "the engine that simulates: auto (the direct engine when it can run the \
                  scenario, else the event-driven one), direct (an error for a scenario it cannot \
                  run) or events; both give the same figures where both can run (docs/engines.md)",
    },
    // --- [cost]
    Key {
        section: "cost",
        kind: None,
        name: "dyno_type",
        value: "name",
        unit: "",
        default: Default::Described("fleet.type, else \"standard-1x\""),
        example: r#""standard-2x""#,
        meaning: "price the fleet as this dyno type: eco, basic, standard-1x, standard-2x, \
                  performance-m, performance-l, 2013-1x, or one from `prices`",
    },
    Key {
        section: "cost",
        kind: None,
        name: "prices",
        value: "table of name = number",
        unit: "$/month",
        default: Default::Off,
        example: r#"{"my-dyno": 40}"#,
        meaning: "add dyno types or change their prices",
    },
    // --- [[cases]]
    Key {
        section: "cases",
        kind: None,
        name: "label",
        value: "string",
        unit: "",
        default: Default::Required,
        example: r#""intelligent, 20 dynos""#,
        meaning: "the case's name in tables and outputs",
    },
    Key {
        section: "cases",
        kind: None,
        name: "set",
        value: "table of key.path = value",
        unit: "",
        default: Default::Described("no change"),
        example: r#"{"router.policy": "intelligent", "fleet.dynos": 20}"#,
        meaning: "the keys this case changes, as with `--set`",
    },
];

/// The whole reference as JSON: `formats`, `sections`, `kinds` and `keys`, in order.
pub fn to_json() -> Value {
    let default = |d: Default| match d {
        Default::Required => Value::Null,
        Default::Off => Value::Null,
        Default::Value(v) => Value::String(v.to_string()),
        Default::EitherThisOr(other) => Value::String(format!("required unless {other} is given")),
        Default::Described(text) => Value::String(text.to_string()),
    };
    json!({
        "formats": FORMATS.iter().map(|(name, text)| json!({"name": name, "meaning": text})).collect::<Vec<_>>(),
        "sections": SECTIONS.iter().map(|s| json!({
            "name": s.name,
            "meaning": s.meaning,
            "kind_key": s.kind_key,
            "read_by": match s.reader { Reader::Engine => "engine", Reader::FrontEnd => "front end" },
            "array": s.array,
        })).collect::<Vec<_>>(),
        "kinds": KINDS.iter().map(|k| json!({
            "section": k.section, "name": k.name, "meaning": k.meaning,
        })).collect::<Vec<_>>(),
        "keys": keys().map(|k| json!({
            "path": k.path(),
            "section": k.section,
            "kind": k.kind,
            "name": k.name,
            "type": k.value,
            "unit": k.unit,
            "required": k.default == Default::Required,
            "default": default(k.default),
            "example": k.example,
            "meaning": k.meaning,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::scenario::{Scenario, ScenarioSpec};
    use serde_json::Map;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// The name the tests give `NAME` in `resources.NAME`: the phases' examples use it.
    const RESOURCE: &str = "db";

    fn engine_sections() -> impl Iterator<Item = &'static Section> {
        SECTIONS
            .iter()
            .filter(|s| s.reader == Reader::Engine && !s.name.is_empty())
    }

    fn section(name: &str) -> &'static Section {
        SECTIONS
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no section {name:?}"))
    }

    fn example(key: &Key) -> Value {
        serde_json::from_str(key.example)
            .unwrap_or_else(|e| panic!("{}: example is not JSON: {e}", key.path()))
    }

    /// A section's path in a document: `app.memory` → app, memory; `resources.NAME` →
    /// resources, db.
    fn parts(section: &str) -> Vec<&str> {
        section
            .split('.')
            .filter(|p| !p.is_empty())
            .map(|p| if p == "NAME" { RESOURCE } else { p })
            .collect()
    }

    /// The table of `section` in a document (an array section's first table), made if missing.
    fn table_mut<'a>(doc: &'a mut Map<String, Value>, section: &str) -> &'a mut Map<String, Value> {
        let mut node = doc;
        let mut path = String::new();
        for part in parts(section) {
            path = if path.is_empty() {
                part.to_string()
            } else {
                format!("{path}.{part}")
            };
            let array = SECTIONS
                .iter()
                .any(|s| s.array && parts(s.name).join(".") == path);
            let entry = node.entry(part.to_string()).or_insert_with(|| {
                if array {
                    json!([{}])
                } else {
                    json!({})
                }
            });
            let entry = if array {
                &mut entry.as_array_mut().expect("an array of tables")[0]
            } else {
                entry
            };
            node = entry.as_object_mut().expect("a table");
        }
        node
    }

    /// The table of `section` in a serialized scenario, if it is there.
    fn table<'a>(doc: &'a Value, section: &str) -> Option<&'a Map<String, Value>> {
        let mut node = doc;
        for part in parts(section) {
            node = node.get(part)?;
            if let Value::Array(items) = node {
                node = items.first()?;
            }
        }
        node.as_object()
    }

    /// Sets the required keys of `section` (kind-independent ones) to their examples.
    fn add_required(doc: &mut Map<String, Value>, section: &str) {
        let table = table_mut(doc, section);
        for key in keys()
            .filter(|k| k.section == section && k.kind.is_none() && k.default == Default::Required)
        {
            table.insert(key.name.into(), example(key));
        }
    }

    /// The sections `section` lies in, outermost first, and itself: `resources.NAME.pool` →
    /// resources.NAME, resources.NAME.pool (`resources` alone is no section).
    fn enclosing(section: &str) -> Vec<&'static Section> {
        engine_sections()
            .filter(|s| section == s.name || section.starts_with(&format!("{}.", s.name)))
            .collect()
    }

    /// The smallest valid scenario holding `section`: [arrivals], [fleet], the required keys of
    /// `section` and the sections it lies in, the first kind's parameters (from the examples)
    /// of each section with kinds, and the service time: [service], or for a section of
    /// [request] or [resources], [request] with its example phases and the resource they use
    /// ([[request.class]] instead of request.phases when that is the section).
    fn minimal(with: &str) -> Map<String, Value> {
        let services = with.starts_with("services");
        let phases = with.starts_with("request") || with.starts_with("resources") || services;
        let mut wanted = vec!["arrivals", "fleet"];
        if phases {
            wanted.extend(["request", "resources.NAME"]);
        } else {
            wanted.push("service");
        }
        let mut doc = Map::new();
        for name in wanted.into_iter().chain([with]) {
            for s in enclosing(name) {
                add_required(&mut doc, s.name);
            }
        }
        // A section that means nothing alone: the key it goes with.
        if with == "router.retry_budget" {
            table_mut(&mut doc, "router").insert("retry_on".into(), serde_json::json!(["timeout"]));
        }
        if phases && !with.starts_with("request.class") {
            let key = keys()
                .find(|k| k.section == "request" && k.name == "phases")
                .expect("request.phases");
            table_mut(&mut doc, "request").insert(key.name.into(), example(key));
        }
        // A service is called, and has a service time.
        if services {
            let phases = table_mut(&mut doc, "request")["phases"]
                .as_array_mut()
                .expect("phases");
            phases.push(json!({"call": RESOURCE}));
            let key = keys()
                .find(|k| k.section == "services.NAME" && k.name == "service")
                .expect("services.NAME.service");
            table_mut(&mut doc, "services.NAME").insert(key.name.into(), example(key));
        }
        for s in engine_sections().filter(|s| s.kind_key.is_some()) {
            if let Some(kind) = table(&Value::Object(doc.clone()), s.name)
                .and_then(|t| t.get(s.kind_key.unwrap()))
                .and_then(Value::as_str)
                .map(str::to_string)
            {
                set_kind(&mut doc, s, &kind);
            }
        }
        doc
    }

    /// Every engine section at once, each with its required keys: no valid scenario ([service]
    /// and [request] together, fleet.slots and [app]) but one that serde reads.
    fn every_section() -> Map<String, Value> {
        let mut doc = Map::new();
        for s in engine_sections() {
            add_required(&mut doc, s.name);
        }
        doc
    }

    fn spec_json(doc: &Map<String, Value>) -> Value {
        let spec: ScenarioSpec = serde_json::from_value(Value::Object(doc.clone()))
            .unwrap_or_else(|e| panic!("{e}: {doc:?}"));
        serde_json::to_value(&spec).expect("serializes")
    }

    fn keys_of(table: &Map<String, Value>) -> BTreeSet<String> {
        table.keys().cloned().collect()
    }

    fn documented(section: &str, kind: Option<&str>) -> BTreeSet<String> {
        keys()
            .filter(|k| k.section == section && k.kind == kind)
            .map(|k| k.name.to_string())
            .collect()
    }

    /// The engine sections directly inside `section`, by their own name (`memory` in `app`;
    /// at the top level `resources`, whose tables are named by the scenario).
    fn inner_sections(section: &str) -> BTreeSet<String> {
        engine_sections()
            .filter_map(|s| {
                if section.is_empty() {
                    return s.name.split('.').next().map(str::to_string);
                }
                let rest = s.name.strip_prefix(section)?.strip_prefix('.')?;
                (!rest.contains('.')).then(|| rest.to_string())
            })
            .collect()
    }

    /// Sections the scenario keeps as a plain table (no struct, so no fields to compare), read
    /// by a registry's builder: the keys every kind takes, besides its own.
    const PLAIN_TABLES: &[(&str, &[&str])] = &[("autoscale", crate::autoscale::COMMON_KEYS)];

    /// Every field of the scenario's structs has a line here (or is a section inside), and
    /// every line is a field: the structs serialize every field they have, None as null
    /// (flattened kind parameters aside, checked against the registries below). A plain table's
    /// keys are the ones its builder takes from every kind.
    #[test]
    fn section_keys_are_the_fields_of_the_scenario_structs() {
        let spec = spec_json(&every_section());
        for s in SECTIONS.iter().filter(|s| s.reader == Reader::Engine) {
            let table =
                table(&spec, s.name).unwrap_or_else(|| panic!("[{}] not serialized", s.name));
            if let Some((_, common)) = PLAIN_TABLES.iter().find(|(name, _)| *name == s.name) {
                let common: BTreeSet<String> = common.iter().map(|k| k.to_string()).collect();
                assert_eq!(
                    documented(s.name, None),
                    common,
                    "[{}]: the keys every kind takes against the schema",
                    s.name
                );
                assert!(inner_sections(s.name).is_empty(), "[{}]", s.name);
                if let Some(kind_key) = s.kind_key {
                    assert!(common.contains(kind_key), "{}.{kind_key}", s.name);
                }
                continue;
            }
            let fields = keys_of(table);
            // A flattened kind key is a field too; the kind's parameters are checked below.
            if let Some(kind_key) = s.kind_key {
                assert!(fields.contains(kind_key), "{}.{kind_key}", s.name);
            }
            let mut expected = documented(s.name, None);
            expected.extend(inner_sections(s.name));
            assert_eq!(
                fields, expected,
                "[{}]: fields of its struct against the schema",
                s.name
            );
        }
        // Every table of [resources] is a resource: one struct, documented once.
        assert_eq!(
            keys_of(spec["resources"].as_object().expect("a table of resources")),
            BTreeSet::from([RESOURCE.to_string()])
        );
    }

    /// The front end's sections are accepted (and ignored) by the engine's schema.
    #[test]
    fn front_end_sections_pass_through_the_engine() {
        for section in SECTIONS.iter().filter(|s| s.reader == Reader::FrontEnd) {
            let mut doc = minimal("service");
            let mut table = Map::new();
            for key in keys().filter(|k| k.section == section.name) {
                table.insert(key.name.into(), example(key));
            }
            let value = if section.array {
                Value::Array(vec![Value::Object(table)])
            } else {
                Value::Object(table)
            };
            doc.insert(section.name.into(), value);
            spec_json(&doc);
        }
    }

    /// `extra`: kinds the section takes that are not in the registry, with their keys
    /// (`arrivals.process = "closed"`, built by [`crate::workload`]).
    fn check_registry<B: Copy>(
        section: &str,
        registry: &Registry<B>,
        extra: &[(&'static str, &'static [&'static str])],
    ) {
        let mut names: BTreeSet<&str> = registry.names().into_iter().collect();
        for (name, _) in extra {
            assert!(names.insert(name), "{section} {name:?} is in the registry");
        }
        let kinds: BTreeSet<&str> = KINDS
            .iter()
            .filter(|k| k.section == section)
            .map(|k| k.name)
            .collect();
        assert_eq!(kinds, names, "[{section}]: kinds against the registry");
        let entries = registry.0.iter().map(|(name, keys, _)| (*name, *keys));
        for (name, keys) in entries.chain(extra.iter().copied()) {
            let taken: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
            assert_eq!(
                documented(section, Some(name)),
                taken,
                "{section} {name:?}: keys against the registry"
            );
        }
    }

    #[test]
    fn kinds_and_their_keys_are_the_registries() {
        check_registry(
            "arrivals",
            &crate::arrivals::REGISTRY,
            &[("closed", crate::workload::CLOSED_KEYS)],
        );
        check_registry("service", &crate::dist::REGISTRY, &[]);
        check_registry("router", &crate::policy::REGISTRY, &[]);
        check_registry("autoscale", &crate::autoscale::REGISTRY, &[]);
        check_registry(
            "arrivals.retry.budget",
            &crate::retry::budget::REGISTRY,
            &[],
        );
        check_registry("faults", &crate::fault::REGISTRY, &[]);
        check_registry("router.concurrency_limit", &crate::limit::REGISTRY, &[]);
        check_registry("app.concurrency_limit", &crate::limit::REGISTRY, &[]);
        assert!(keys().all(|k| k.kind.is_none()
            || KINDS
                .iter()
                .any(|kind| Some(kind.name) == k.kind && kind.section == k.section)));
        for s in SECTIONS.iter().filter(|s| s.kind_key.is_some()) {
            assert!(
                KINDS.iter().any(|k| k.section == s.name),
                "[{}] has kinds",
                s.name
            );
        }
    }

    /// A directory with the file the `empirical` example names.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> TempDir {
            let dir =
                std::env::temp_dir().join(format!("dynosim-schema-{test}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            std::fs::write(dir.join("service-times.txt"), "46\n120\n7\n").expect("sample file");
            // Arrival times (one column: [service] draws the times), some in every window.
            let arrivals: String = (0..400).map(|t| format!("{t}\n")).collect();
            std::fs::write(dir.join("arrivals.csv"), arrivals).expect("trace file");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn build(doc: &Map<String, Value>, dir: &Path) -> crate::error::Result<Scenario> {
        let text = Value::Object(doc.clone()).to_string();
        Scenario::from_json(&text, dir, &crate::never_interrupted)
    }

    /// What the engine built, all of it: two scenarios that print the same run the same.
    fn built(doc: &Map<String, Value>, dir: &Path, what: &str) -> String {
        match build(doc, dir) {
            Ok(scenario) => format!("{scenario:?}"),
            Err(e) => panic!("{what}: {e}: {doc:?}"),
        }
    }

    /// A default written here is what the engine builds when the key is left out; a required
    /// key left out is an error; a key that is off when left out is null in the spec. Each in
    /// the smallest scenario with the key's section and in each full one with it (a default
    /// may matter only there: `app.worker_connections` with the async model).
    #[test]
    fn defaults_are_the_engines() {
        let dir = TempDir::new("defaults");
        let full = full_documents();
        for key in keys() {
            let s = section(key.section);
            if s.reader != Reader::Engine || s.name.is_empty() {
                continue;
            }
            let mut docs = vec![minimal(key.section)];
            docs.extend(
                full.iter()
                    .filter(|d| table(&Value::Object((*d).clone()), key.section).is_some())
                    .cloned(),
            );
            for (i, doc) in docs.into_iter().enumerate() {
                check_default(key, s, doc, &dir.0, i == 0);
            }
        }
    }

    /// Checks `key`'s default in `doc` (the key's kind set, the key removed). Unless `smallest`,
    /// a document that other keys make invalid without this one (`app.worker_class` needs the
    /// server gunicorn) is passed over.
    fn check_default(
        key: &Key,
        s: &Section,
        mut doc: Map<String, Value>,
        dir: &Path,
        smallest: bool,
    ) {
        if let Some(kind) = key.kind {
            set_kind(&mut doc, s, kind);
        }
        table_mut(&mut doc, key.section).remove(key.name);
        let path = key.path();
        match key.default {
            Default::Value(_) if !smallest && build(&doc, dir).is_err() => {}
            Default::Value(v) => {
                let left_out = built(&doc, dir, &path);
                let value = serde_json::from_str(v).expect("JSON");
                table_mut(&mut doc, key.section).insert(key.name.into(), value);
                assert_eq!(built(&doc, dir, &path), left_out, "{path}: default {v}");
            }
            Default::Off => {
                build(&doc, dir).unwrap_or_else(|e| panic!("{path} left out: {e}"));
                let spec = spec_json(&doc);
                let value = table(&spec, key.section).and_then(|t| t.get(key.name));
                assert!(value.is_none_or(Value::is_null), "{path}: {value:?}");
            }
            Default::Required => {
                assert!(
                    build(&doc, dir).is_err(),
                    "{path} is documented as required"
                );
            }
            Default::EitherThisOr(_) | Default::Described(_) => {}
        }
    }

    /// Sets a section's kind and that kind's parameters (from their examples), dropping the
    /// parameters of the kind it had.
    fn set_kind(doc: &mut Map<String, Value>, section: &Section, kind: &str) {
        let kind_key = section.kind_key.expect("a section with kinds");
        let table = table_mut(doc, section.name);
        let inner = inner_sections(section.name);
        table.retain(|name, _| {
            (inner.contains(name) && !KIND_EXCLUDES.contains(&(section.name, kind, name)))
                || keys().any(|k| k.section == section.name && k.kind.is_none() && k.name == name)
        });
        table.insert(kind_key.into(), json!(kind));
        for key in keys().filter(|k| k.section == section.name && k.kind == Some(kind)) {
            if let Default::EitherThisOr(other) = key.default {
                if table.contains_key(other) {
                    continue;
                }
            }
            table.insert(key.name.into(), example(key));
        }
        for (_, _, needed) in KIND_NEEDS
            .iter()
            .filter(|(s, k, _)| *s == section.name && *k == kind)
        {
            for s in enclosing(needed) {
                add_required(doc, s.name);
            }
        }
    }

    /// Sections inside a section that one of its kinds does not take: (section, kind, inner
    /// section). Bursts go on top of an open process, not a closed loop.
    const KIND_EXCLUDES: &[(&str, &str, &str)] = &[("arrivals", "closed", "burst")];

    /// Sections a kind cannot do without: (section, kind, needed section), whose required keys
    /// [`set_kind`] adds. A policy that hashes keys needs requests that carry them.
    const KIND_NEEDS: &[(&str, &str, &str)] = &[("router", "bounded_hash", "arrivals.keys")];

    /// Keys a valid scenario cannot have together with a section. `fleet.boot_time` goes with
    /// [app] here only because [app] brings `app.boot_time`, its old name, which cannot be
    /// given beside it: the documents without [app] set the new name, the others the old.
    /// `router.colocated_cpu` works on the dyno's cores, which a [service] scenario has not.
    const EXCLUDES: &[(&str, &str)] = &[
        ("fleet.slots", "app"),
        ("router.colocated_cpu", "service"),
        ("request.phases", "request.class"),
        ("fleet.boot_time", "app"),
    ];

    /// Valid scenarios that between them hold every engine section and every key, each key set
    /// to its example: [service] with fleet.slots; [request] phases with [app] and
    /// [resources]; [[request.class]] with [app] and [resources]. Each is `minimal` of a
    /// section, with every section but those left out.
    fn full_documents() -> Vec<Map<String, Value>> {
        let variants: [(&str, &[&str]); 5] = [
            ("service", &["request", "resources", "app", "services"]),
            (
                "resources.NAME.pool",
                &["service", "request.class", "services"],
            ),
            ("request.class", &["service", "services"]),
            // A service of every key, but one of [service] and [request] (below).
            ("services.NAME", &["service", "request.class"]),
            ("services.NAME", &["service", "request.class"]),
        ];
        variants
            .into_iter()
            .map(|(with, left_out)| {
                let mut doc = minimal(with);
                let present: Vec<&Section> = engine_sections()
                    .filter(|s| {
                        !left_out
                            .iter()
                            .any(|l| s.name == *l || s.name.starts_with(&format!("{l}.")))
                    })
                    .collect();
                for s in &present {
                    for key in keys().filter(|k| k.section == s.name && k.kind.is_none()) {
                        let excluded = EXCLUDES.iter().any(|(path, other)| {
                            key.path() == *path && present.iter().any(|p| p.name == *other)
                        });
                        let table = table_mut(&mut doc, s.name);
                        if !excluded {
                            table.insert(key.name.into(), example(key));
                        }
                    }
                }
                for s in present.iter().filter(|s| s.kind_key.is_some()) {
                    let kind = table_mut(&mut doc, s.name)[s.kind_key.unwrap()]
                        .as_str()
                        .expect("a name")
                        .to_string();
                    set_kind(&mut doc, s, &kind);
                }
                doc
            })
            .enumerate()
            .map(|(i, mut doc)| {
                // A late view and an aperture do not go together for the policies that rank
                // the dynos (the board is one for all routers): the first document has the
                // aperture, the others the view.
                let router = table_mut(&mut doc, "router");
                if i == 0 {
                    router.remove("view");
                } else {
                    router.remove("aperture");
                }
                // The services' documents: the entry's phases call the service, which has
                // [request] (the fourth) or [service] (the fifth).
                if i >= 3 {
                    table_mut(&mut doc, "request")["phases"]
                        .as_array_mut()
                        .expect("phases")
                        .push(json!({"call": RESOURCE}));
                    let other = if i == 3 { "service" } else { "request" };
                    table_mut(&mut doc, "services.NAME").remove(other);
                }
                doc
            })
            .collect()
    }

    /// Every example is a valid value: scenarios of each kind with every key's example build.
    #[test]
    fn examples_build_a_scenario_of_every_kind() {
        let dir = TempDir::new("examples");
        let docs = full_documents();
        let mut covered: BTreeSet<String> = BTreeSet::new();
        for doc in &docs {
            let value = Value::Object(doc.clone());
            for s in engine_sections() {
                let Some(table) = table(&value, s.name) else {
                    continue;
                };
                covered.extend(table.keys().map(|k| format!("{}.{k}", s.name)));
                for kind in KINDS.iter().filter(|k| k.section == s.name) {
                    let mut doc = doc.clone();
                    set_kind(&mut doc, s, kind.name);
                    covered.extend(
                        documented(s.name, Some(kind.name))
                            .into_iter()
                            .map(|k| format!("{}.{k}", s.name)),
                    );
                    if let Err(e) = build(&doc, &dir.0) {
                        panic!("{} {:?} from the examples: {e}: {doc:?}", s.name, kind.name);
                    }
                }
            }
        }
        for key in keys().filter(|k| section(k.section).reader == Reader::Engine) {
            if !key.section.is_empty() {
                assert!(
                    covered.contains(&key.path()),
                    "{}: no scenario sets it",
                    key.path()
                );
            }
        }
    }

    /// The defaults of [autoscale] that depend on the rule: `interval`, described rule by rule,
    /// is each rule's, and hirefire's `window` is its interval.
    #[test]
    fn autoscale_described_defaults_are_the_rules() {
        let dir = TempDir::new("autoscale");
        let key = keys()
            .find(|k| k.path() == "autoscale.interval")
            .expect("autoscale.interval");
        let Default::Described(text) = key.default else {
            panic!("autoscale.interval: {:?}", key.default);
        };
        // "the rule's: 1min (heroku, hirefire), 10s (judoscale)"
        let mut described: BTreeMap<&str, f64> = BTreeMap::new();
        let list = text.strip_prefix("the rule's: ").expect(text);
        for part in list.split("), ") {
            let (value, rules) = part.split_once(" (").expect(text);
            let seconds = serde_json::from_value::<crate::units::Duration>(json!(value))
                .unwrap_or_else(|e| panic!("{value}: {e}"))
                .0;
            for rule in rules.trim_end_matches(')').split(", ") {
                assert!(described.insert(rule, seconds).is_none(), "{rule} twice");
            }
        }
        let s = section("autoscale");
        let kinds: BTreeSet<&str> = KINDS
            .iter()
            .filter(|k| k.section == s.name)
            .map(|k| k.name)
            .collect();
        assert_eq!(described.keys().copied().collect::<BTreeSet<_>>(), kinds);
        for kind in kinds {
            let mut doc = minimal("autoscale");
            set_kind(&mut doc, s, kind);
            table_mut(&mut doc, s.name).remove("interval");
            let scenario = build(&doc, &dir.0).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let a = scenario.autoscale.as_ref().expect("an autoscaler");
            assert_eq!(a.interval(), described[kind], "{kind}: interval");
        }
        let mut doc = minimal("autoscale");
        set_kind(&mut doc, s, "hirefire");
        let table = table_mut(&mut doc, s.name);
        table.remove("window");
        table.insert("interval".into(), json!("5min"));
        let scenario = build(&doc, &dir.0).unwrap_or_else(|e| panic!("hirefire: {e}"));
        let a = scenario.autoscale.as_ref().expect("an autoscaler");
        assert_eq!(
            a.reading().map(|r| r.window),
            Some(300.0),
            "hirefire: window"
        );
    }
}
