//! Random streams. Each purpose (arrivals, service, routing) has its own generator, seeded from
//! the run's seed, the replication index and the purpose, so that two routing policies run on
//! the same seed see exactly the same arrivals and service times.

use rand::SeedableRng;

/// The generator every stream uses: PCG 64-bit MCG, fast and reproducible across platforms.
pub type SimRng = rand_pcg::Pcg64Mcg;

#[derive(Debug, Clone, Copy)]
#[repr(u64)]
pub enum Stream {
    Arrivals = 1,
    Service = 2,
    Routing = 3,
    /// Closed-loop clients' think times.
    Think = 4,
    /// Which process of a dyno accepts a connection (greedy accept).
    Accept = 5,
    /// The router's connect times (`router.connect`).
    Connect = 6,
    /// The app's per-request overhead (`app.overhead`).
    Overhead = 7,
    /// Scheduled bursts (`[[arrivals.burst]]`) on top of the base arrivals: drawn apart, so the
    /// base traffic is the same with or without them. Each burst table has a substream of its
    /// own (see [`substream`]).
    Bursts = 8,
    /// The router's timeouts (`router.timeout`), drawn when it hands a request to a dyno.
    RouterTimeout = 9,
    /// The router queue's timeouts (`router.queue_timeout`), drawn at each arrival.
    QueueTimeout = 10,
    /// The clients' timeouts (`arrivals.timeout`), drawn at each arrival.
    ClientTimeout = 11,
    /// The workers' timeouts (`app.timeout`), drawn when a worker takes a request.
    AppTimeout = 12,
    /// The routers' work per request (`router.cost`).
    RouterCost = 13,
    /// How long each dyno's boot takes (`fleet.boot_time`).
    Boot = 14,
    /// When each dyno's daily restart comes (`fleet.cycling`).
    Cycling = 15,
    /// The app server's own CPU per request (`app.request_cpu`).
    RequestCpu = 16,
    /// How much each CPU phase differs from what was drawn (`fleet.cpu_jitter`).
    Jitter = 17,
    /// When the dynos' entries on a late board are refreshed (`router.view`, individual
    /// updates).
    View = 18,
    /// Each router's subset of the dynos (`router.aperture`), drawn at the start.
    Aperture = 19,
    /// The routers idle dynos report to (`jiq`): apart from the routing stream, so that the
    /// routers' own draws are those of the same traffic under another policy.
    IdleReports = 20,
    /// The key (user) each request carries (`arrivals.keys`).
    Keys = 21,
    /// The CPU a router on the dyno's machine spends per request (`router.colocated_cpu`).
    Colocated = 22,
    /// The clients' backoff delays before their retries (`arrivals.retry`).
    RetryDelays = 23,
    /// The retried tries' own timeouts (the client's and the router queue's), drawn when each
    /// is sent, apart from the first tries' (`Stream::ClientTimeout`, `Stream::QueueTimeout`).
    RetryTimeouts = 24,
    /// The times of the queries the app tries again (`[resources.NAME] retries`): each try
    /// draws its own from the phase's law.
    QueryRetries = 25,
    /// The concurrency limits' own draws (`concurrency_limit`: Vegas's probe jitter).
    Limits = 26,
}

/// SplitMix64's finaliser: a fixed bijection of 64-bit words that scrambles every bit, for
/// seeds here and for hashes that must not change with the Rust version (`bounded_hash`'s ring).
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator for one purpose of one replication.
pub fn stream(seed: u64, replication: u64, purpose: Stream) -> SimRng {
    let key = splitmix64(splitmix64(splitmix64(seed) ^ replication) ^ purpose as u64);
    SimRng::seed_from_u64(key)
}

/// The `index`-th generator of one purpose of one replication: for a purpose with several
/// independent parts (each burst table), so that adding one leaves the others' draws alone.
pub fn substream(seed: u64, replication: u64, purpose: Stream, index: u64) -> SimRng {
    let key = splitmix64(splitmix64(splitmix64(seed) ^ replication) ^ purpose as u64);
    SimRng::seed_from_u64(splitmix64(key ^ splitmix64(index.wrapping_add(1))))
}

/// The seed of service `index` (`[services.NAME]`, in name order from 0) of a run seeded
/// `seed`: each service's fleet draws from streams of its own, and the entry fleet's are the
/// run's, as without services.
pub fn service_seed(seed: u64, index: u64) -> u64 {
    // A constant apart from the shards' and the streams' purposes.
    const SERVICES: u64 = 0x5345_5256_4943_0000;
    splitmix64(splitmix64(seed) ^ splitmix64(SERVICES ^ index))
}

/// The seed of shard `shard` of a run seeded `seed` (see [`crate::shard`]): each shard's
/// streams are then `stream(shard_seed(seed, shard), replication, purpose)`, independent of
/// every other shard's and replication's.
pub fn shard_seed(seed: u64, shard: u64) -> u64 {
    // A constant apart from the streams' purposes, so that no shard's seed is a run's.
    const SHARDS: u64 = 0x5348_4152_4453_0000;
    splitmix64(splitmix64(seed) ^ splitmix64(SHARDS ^ shard))
}
