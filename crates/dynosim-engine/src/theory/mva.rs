//! Exact mean-value analysis of single-class closed queueing networks (docs/model.md, section 8).
//!
//! N customers circulate between a think (delay) time Z and a list of stations. The network is
//! of product form (Baskett, Chandy, Muntz and Palacios 1975), so its exact means follow from
//! the mean-value recursion (Reiser and Lavenberg 1980) or, equivalently, from the normalising
//! constants G(n) (Buzen 1973; Reiser and Kobayashi 1975 for load-dependent stations).
//!
//! Stations with one server or none (delay) use the classic recursion. A station with m > 1
//! servers is load dependent: the textbook recursion for it tracks its marginal probabilities
//! p_i(j|n), j < m, with p_i(0|n) = 1 − [X(n)D_i + Σ_{j≥1} (m − j)·p_i(j|n)]/m (Bolch et al.
//! 2006, §8.2; Menascé, Almeida and Dowdy 2004, on load-dependent devices). That update is
//! numerically unstable (Zhang and Down 2016): rounding errors grow geometrically near
//! saturation, and for one station of 8 servers behind a think time it returns a negative
//! throughput by N = 200. Here the same marginals are computed as ratios of normalising
//! constants, p_i(j|N) = f_i(j)·G₋ᵢ(N − j)/G(N) with G₋ᵢ the network without station i, in
//! logarithms and from positive terms only. The complements G₋ᵢ of all the multi-server
//! stations are built by halving the list of those stations, which costs about log₂ of their
//! number in convolutions each.

/// What a station does with the customers it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StationKind {
    /// `servers` servers and a queue: first come first served with exponential service, or
    /// processor sharing (each of n customers served at rate min(1, m/n)) with any service
    /// distribution of the same mean (BCMP types 1, 2 and 4).
    Queueing,
    /// A pure delay (infinite servers, BCMP type 3): nobody waits, each visit takes its
    /// service time. `servers` is ignored.
    Delay,
}

/// One station of a closed network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Station {
    /// Service demand per cycle, D_i = visits per cycle × mean service time per visit (s).
    pub demand: f64,
    /// Number of servers m_i (at least 1 for a queueing station).
    pub servers: u32,
    pub kind: StationKind,
}

impl Station {
    /// A queueing station of `servers` servers with demand D (s per cycle).
    pub fn queueing(demand: f64, servers: u32) -> Station {
        Station {
            demand,
            servers,
            kind: StationKind::Queueing,
        }
    }

    /// A delay station with demand D (s per cycle).
    pub fn delay(demand: f64) -> Station {
        Station {
            demand,
            servers: 0,
            kind: StationKind::Delay,
        }
    }
}

/// The exact means of a closed network with N customers.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedNetwork {
    /// X(N): cycles completed per second (each customer's think time Z plus one pass through
    /// the stations).
    pub throughput: f64,
    /// R(N) = N/X(N) − Z: the mean time of one pass through the stations, think time excluded
    /// (the sum of the residence times).
    pub response_time: f64,
    /// Q_i(N): mean customers at each station, waiting or in service.
    pub queue_lengths: Vec<f64>,
    /// Q_i(N)/X(N): mean time per cycle spent at each station, all its visits together.
    pub residence_times: Vec<f64>,
    /// X(N)·D_i/m_i: the fraction of time each server of a queueing station is busy; 0 for a
    /// delay station, which has no servers to saturate.
    pub utilisations: Vec<f64>,
}

/// The most customers [`mva_closed`] accepts.
pub const MVA_MAX_CUSTOMERS: u32 = 100_000;
/// The most stations [`mva_closed`] accepts.
pub const MVA_MAX_STATIONS: usize = 1_000;
/// The most elementary steps [`mva_closed`] takes, about 2.5 ns each on this project's machine
/// (so about 2.5 s): N per station, plus, for the M stations with 1 < m_i < N servers,
/// N·(min(m_i, N) + 18) per convolution, (⌈log₂ M⌉ + 1) convolutions each. Networks of
/// one-server and delay stations stay far below it (N·stations <= 10⁸); larger multi-server
/// networks are refused rather than left running for minutes.
pub const MVA_MAX_WORK: f64 = 1e9;

/// Exact mean-value analysis of a single-class closed network: `customers` = N customers,
/// each alternating a think time of mean `think_time` = Z with one pass through `stations`.
///
/// For a station with one server the recursion over n = 1..N is (Reiser and Lavenberg 1980)
///
/// R_i(n) = D_i·(1 + Q_i(n − 1)),   X(n) = n / (Z + Σ_i R_i(n)),   Q_i(n) = X(n)·R_i(n),
///
/// with R_i(n) = D_i at a delay station. A station with m_i servers is exact as well (module
/// documentation); its residence time is R_i(n) = D_i + (D_i/m_i)·E[(J_i − m_i + 1)⁺ | n − 1],
/// J_i the number there. So X(N) ≤ min(N/(Z + Σ_i D_i), min_i m_i/D_i), and X(N) tends to the
/// second bound as N grows (the bottleneck's capacity).
///
/// None unless 1 <= N <= [`MVA_MAX_CUSTOMERS`], there are at most [`MVA_MAX_STATIONS`]
/// stations, Z and every D_i are >= 0 and finite with a positive sum, every queueing station
/// has a server, the work is at most [`MVA_MAX_WORK`], and the throughput is finite (not so
/// with demands of 10⁻³⁰⁰ s).
pub fn mva_closed(customers: u32, think_time: f64, stations: &[Station]) -> Option<ClosedNetwork> {
    let n = customers;
    let valid = |x: f64| x >= 0.0 && x.is_finite();
    let stations_valid = stations
        .iter()
        .all(|s| valid(s.demand) && (s.kind == StationKind::Delay || s.servers >= 1));
    let total = think_time + stations.iter().map(|s| s.demand).sum::<f64>();
    if !((1..=MVA_MAX_CUSTOMERS).contains(&n)
        && stations.len() <= MVA_MAX_STATIONS
        && valid(think_time)
        && stations_valid
        && total > 0.0
        && total.is_finite())
    {
        return None;
    }
    let roles: Vec<Role> = stations.iter().map(|s| Role::of(s, n)).collect();
    let multi: Vec<u32> = roles
        .iter()
        .filter_map(|r| match r {
            Role::Multi(m) => Some(*m),
            _ => None,
        })
        .collect();
    let depth = usize::BITS - multi.len().saturating_sub(1).leading_zeros(); // ⌈log₂ M⌉
    let per_level: f64 = multi.iter().map(|&m| f64::from(m) + 18.0).sum();
    let work = f64::from(n) * (stations.len() as f64 + per_level * f64::from(depth + 1));
    if work > MVA_MAX_WORK {
        return None;
    }
    let (x, queue_lengths) = if multi.is_empty() {
        classic(n, think_time, stations, &roles)
    } else {
        by_normalising_constants(n, think_time, stations, &roles)
    };
    // Demands a few hundred orders of magnitude apart can still overflow X.
    if !(x > 0.0 && x.is_finite() && queue_lengths.iter().all(|q| q.is_finite())) {
        return None;
    }
    let residence_times: Vec<f64> = queue_lengths.iter().map(|q| q / x).collect();
    let utilisations = stations
        .iter()
        .map(|s| match s.kind {
            StationKind::Queueing => x * s.demand / f64::from(s.servers),
            StationKind::Delay => 0.0,
        })
        .collect();
    Some(ClosedNetwork {
        throughput: x,
        response_time: residence_times.iter().sum(),
        queue_lengths,
        residence_times,
        utilisations,
    })
}

/// How a station enters the computation with N customers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// No demand: never holds anyone.
    Idle,
    /// A delay, or a queueing station with at least N servers (nobody ever waits there).
    Delay,
    /// One server.
    Single,
    /// 1 < m < N servers: load dependent.
    Multi(u32),
}

impl Role {
    fn of(station: &Station, customers: u32) -> Role {
        match (station.kind, station.servers) {
            _ if station.demand == 0.0 => Role::Idle,
            (StationKind::Delay, _) => Role::Delay,
            (StationKind::Queueing, m) if m >= customers => Role::Delay,
            (StationKind::Queueing, 1) => Role::Single,
            (StationKind::Queueing, m) => Role::Multi(m),
        }
    }
}

/// The mean-value recursion for networks of single-server and delay stations: X(N) and the
/// Q_i(N).
fn classic(n: u32, z: f64, stations: &[Station], roles: &[Role]) -> (f64, Vec<f64>) {
    let mut q = vec![0.0; stations.len()];
    let mut r = vec![0.0; stations.len()];
    let mut x = 0.0;
    for customers in 1..=n {
        let mut cycle = z;
        for (i, station) in stations.iter().enumerate() {
            r[i] = match roles[i] {
                Role::Idle => 0.0,
                Role::Delay => station.demand,
                Role::Single => station.demand * (1.0 + q[i]),
                Role::Multi(_) => unreachable!("multi-server stations take the other path"),
            };
            cycle += r[i];
        }
        x = f64::from(customers) / cycle;
        for (qi, ri) in q.iter_mut().zip(&r) {
            *qi = x * ri;
        }
    }
    (x, q)
}

/// Terms below this fraction of the largest cannot change a sum of at most 10⁵ of them.
const NEGLIGIBLE: f64 = 1e-300;

/// ln(eᵃ + eᵇ), with −∞ for an empty sum.
fn ln_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// ln f(k), k = 0..=m, of a station of m servers and scaled demand d: f(k) = dᵏ/∏ min(j, m).
fn ln_weights(d: f64, m: u32) -> Vec<f64> {
    let ln_d = d.ln();
    let mut w = Vec::with_capacity(m as usize + 1);
    w.push(0.0);
    for k in 1..=m {
        w.push(w[k as usize - 1] + ln_d - f64::from(k).ln());
    }
    w
}

/// ln f(j) for any j, from ln f(0..=m) (`f`) and ln(d/m).
fn ln_weight(f: &[f64], ln_step: f64, j: usize) -> f64 {
    let m = f.len() - 1;
    match j.checked_sub(m) {
        None => f[j],
        Some(extra) => f[m] + extra as f64 * ln_step,
    }
}

/// ln G of `g` (ln G(0..=N)) convolved with a station of m servers and scaled demand d:
/// G'(n) = Σ_k f(k)·G(n − k). Beyond k = m, f(k + 1) = f(k)·d/m, so that part of the sum is
/// carried from n − 1 to n. The first m terms are summed afresh, relative to the largest: two
/// neighbours differ by the factor (d/k)·G(n − k)/G(n − k + 1), so each costs a product rather
/// than an exponential. Every factor is positive and every term at most 1, so nothing is
/// subtracted or overflows. The terms are log-concave in k (the factor falls as k grows, since
/// a closed product-form network's throughput does not fall as customers are added), so once
/// one is below 10⁻³⁰⁰ of the largest, so are all those beyond it and they are left out.
fn convolve_multi(g: &[f64], d: f64, m: u32) -> Vec<f64> {
    let f = ln_weights(d, m);
    let m = m as usize;
    let ln_step = (d / m as f64).ln();
    if g.len() > 1 && g[1] == f64::NEG_INFINITY {
        // The old network holds nobody (G(n) = 0 for n >= 1): the station alone.
        return (0..g.len()).map(|n| ln_weight(&f, ln_step, n)).collect();
    }
    // ratio[j] = G(j − 1)/G(j), the old network's throughput at population j (scaled units);
    // d_over[k] = d/k.
    let ratio: Vec<f64> = (0..g.len())
        .map(|j| if j == 0 { 0.0 } else { (g[j - 1] - g[j]).exp() })
        .collect();
    let d_over: Vec<f64> = (0..m)
        .map(|k| if k == 0 { 0.0 } else { d / k as f64 })
        .collect();
    let mut out = Vec::with_capacity(g.len());
    let mut tail = f64::NEG_INFINITY; // ln Σ_{k=m}^{n} f(k)·G(n − k)
    for n in 0..g.len() {
        if n >= m {
            tail = ln_add(f[m] + g[n - m], ln_step + tail);
        }
        // G(j) > 0 for every j here, so the largest term is finite.
        let last = n.min(m - 1);
        let term = |k: usize| f[k] + g[n - k];
        let (peak, top) = (0..=last)
            .map(|k| (k, term(k)))
            .fold((0, f64::NEG_INFINITY), |a, b| if b.1 > a.1 { b } else { a });
        // term(k)/term(k − 1) = (d/k)·ratio[n − k + 1].
        let mut sum = 1.0;
        let mut e = 1.0;
        for k in peak + 1..=last {
            e *= d_over[k] * ratio[n - k + 1];
            sum += e;
            if e < NEGLIGIBLE {
                break;
            }
        }
        e = 1.0;
        for k in (0..peak).rev() {
            e /= d_over[k + 1] * ratio[n - k];
            sum += e;
            if e < NEGLIGIBLE {
                break;
            }
        }
        out.push(ln_add(top + sum.ln(), tail));
    }
    out
}

/// The mean number at a station of m servers and scaled demand d, given ln G₋ᵢ(0..=N) of the
/// rest of the network: Σ_j j·f(j)·G₋ᵢ(N − j) / Σ_j f(j)·G₋ᵢ(N − j).
fn mean_at(complement: &[f64], d: f64, m: u32) -> f64 {
    let n = complement.len() - 1;
    let f = ln_weights(d, m);
    let ln_step = (d / f64::from(m)).ln();
    let terms: Vec<f64> = (0..=n)
        .map(|j| ln_weight(&f, ln_step, j) + complement[n - j])
        .collect();
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut weight, mut mean) = (0.0, 0.0);
    for (j, t) in terms.iter().enumerate() {
        let p = (t - top).exp();
        weight += p;
        mean += j as f64 * p;
    }
    mean / weight
}

/// X(N) and the Q_i(N) from normalising constants, for networks with multi-server stations.
fn by_normalising_constants(
    n: u32,
    z: f64,
    stations: &[Station],
    roles: &[Role],
) -> (f64, Vec<f64>) {
    let size = n as usize + 1;
    // Demands scaled by the largest per-server demand keep ln G(n) moderate.
    let scale = stations
        .iter()
        .zip(roles)
        .filter_map(|(s, r)| match r {
            Role::Single => Some(s.demand),
            Role::Multi(m) => Some(s.demand / f64::from(*m)),
            _ => None,
        })
        .fold(0.0, f64::max);
    // A station with a demand below 10⁻²⁵⁰ of that is a delay to within as much (nobody queues
    // there), and its scaled demand would underflow below.
    let roles: Vec<Role> = roles
        .iter()
        .zip(stations)
        .map(|(&r, s)| match r {
            Role::Single | Role::Multi(_) if s.demand / scale < 1e-250 => Role::Delay,
            r => r,
        })
        .collect();
    let roles = &roles[..];
    // The think time and the delay stations together are one delay: G(n) = d₀ⁿ/n!.
    let delay: f64 = z + stations
        .iter()
        .zip(roles)
        .filter(|(_, r)| **r == Role::Delay)
        .map(|(s, _)| s.demand)
        .sum::<f64>();
    let d0 = delay / scale;
    let mut base = vec![0.0; size];
    for k in 1..size {
        base[k] = if d0 > 0.0 {
            base[k - 1] + d0.ln() - (k as f64).ln()
        } else {
            f64::NEG_INFINITY
        };
    }
    for (s, r) in stations.iter().zip(roles) {
        if *r == Role::Single {
            let ln_d = (s.demand / scale).ln();
            for k in 1..size {
                base[k] = ln_add(base[k], ln_d + base[k - 1]);
            }
        }
    }
    let multi: Vec<(usize, f64, u32)> = roles
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            Role::Multi(m) => Some((i, stations[i].demand / scale, *m)),
            _ => None,
        })
        .collect();
    let full = multi
        .iter()
        .fold(base.clone(), |g, &(_, d, m)| convolve_multi(&g, d, m));
    // X(k) = G(k − 1)/G(k) for every population k, in the scaled units.
    let x: Vec<f64> = (1..size)
        .map(|k| (full[k - 1] - full[k]).exp() / scale)
        .collect();
    let xn = x[n as usize - 1];
    let mut q = vec![0.0; stations.len()];
    for (i, (s, r)) in stations.iter().zip(roles).enumerate() {
        q[i] = match r {
            Role::Idle | Role::Multi(_) => 0.0,
            Role::Delay => xn * s.demand,
            // The mean-value recursion holds for a single server whatever the other stations.
            Role::Single => x.iter().fold(0.0, |qi, xk| xk * s.demand * (1.0 + qi)),
        };
    }
    complements(base, &multi, &mut q);
    (xn, q)
}

/// Sets the mean number at each station of `multi`, given ln G of the network without any of
/// them (`without`): each one's complement is `without` convolved with the others, built by
/// halving the list so that each station is convolved about log₂ M times in all.
fn complements(without: Vec<f64>, multi: &[(usize, f64, u32)], q: &mut [f64]) {
    match multi {
        [] => {}
        [(i, d, m)] => q[*i] = mean_at(&without, *d, *m),
        _ => {
            let (left, right) = multi.split_at(multi.len() / 2);
            let with = |part: &[(usize, f64, u32)]| {
                part.iter()
                    .fold(without.clone(), |g, &(_, d, m)| convolve_multi(&g, d, m))
            };
            let with_right = with(right);
            let with_left = with(left);
            complements(with_right, left, q);
            complements(with_left, right, q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    /// The finite-source (machine-repairman) M/M/m//N queue, by its birth–death chain: N
    /// customers think for Z on average, then queue for m servers of mean time D. State j =
    /// customers at the servers; up at (N − j)/Z, down at min(j, m)/D. Returns X and E[J].
    fn machine_repairman(n: u32, z: f64, d: f64, m: u32) -> (f64, f64) {
        let mut ln_w = vec![0.0f64];
        for j in 1..=n {
            let up = f64::from(n - j + 1) / z;
            let down = f64::from(j.min(m)) / d;
            ln_w.push(ln_w[j as usize - 1] + up.ln() - down.ln());
        }
        let top = ln_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = ln_w.iter().map(|w| (w - top).exp()).collect();
        let total: f64 = p.iter().sum();
        let x = (0..=n)
            .map(|j| p[j as usize] * f64::from(j.min(m)) / d)
            .sum::<f64>()
            / total;
        let q = (0..=n).map(|j| p[j as usize] * f64::from(j)).sum::<f64>() / total;
        (x, q)
    }

    /// X(N) and the Q_i(N) from the product form itself, by enumerating every placement of N
    /// customers over the think time (index 0) and the stations.
    fn enumerate(n: u32, z: f64, stations: &[Station]) -> (f64, Vec<f64>) {
        // f(k) of each "station", think time first.
        let weight = |d: f64, servers: Option<u32>, k: u32| -> f64 {
            (1..=k)
                .map(|j| d / f64::from(servers.map_or(j, |m| j.min(m))))
                .product()
        };
        let mut list: Vec<(f64, Option<u32>)> = vec![(z, None)];
        list.extend(stations.iter().map(|s| match s.kind {
            StationKind::Delay => (s.demand, None),
            StationKind::Queueing => (s.demand, Some(s.servers)),
        }));
        // G(pop) and Σ k_i·weight over placements of pop customers.
        let g_and_q = |pop: u32| -> (f64, Vec<f64>) {
            let mut g = 0.0;
            let mut q = vec![0.0; list.len()];
            let mut place = vec![0u32; list.len()];
            fn walk(
                at: usize,
                left: u32,
                place: &mut Vec<u32>,
                list: &[(f64, Option<u32>)],
                weight: &dyn Fn(f64, Option<u32>, u32) -> f64,
                g: &mut f64,
                q: &mut Vec<f64>,
            ) {
                if at == list.len() - 1 {
                    place[at] = left;
                    let w: f64 = place
                        .iter()
                        .zip(list)
                        .map(|(&k, &(d, s))| weight(d, s, k))
                        .product();
                    *g += w;
                    for (qi, &k) in q.iter_mut().zip(place.iter()) {
                        *qi += f64::from(k) * w;
                    }
                    return;
                }
                for k in 0..=left {
                    place[at] = k;
                    walk(at + 1, left - k, place, list, weight, g, q);
                }
            }
            walk(0, pop, &mut place, &list, &weight, &mut g, &mut q);
            (g, q.iter().map(|qi| qi / g).collect())
        };
        let (g_n, q) = g_and_q(n);
        let (g_prev, _) = g_and_q(n - 1);
        (g_prev / g_n, q[1..].to_vec())
    }

    #[test]
    fn two_stations_by_hand() {
        // Z = 1, D = (1, 2), one server each. By hand:
        // N = 1: R = (1, 2), X = 1/4, Q = (1/4, 1/2).
        // N = 2: R = (5/4, 3), X = 2/(1 + 17/4) = 8/21, Q = (10/21, 24/21).
        // N = 3: R = (31/21, 90/21), X = 3/(1 + 121/21) = 63/142, Q = (93/142, 270/142).
        let stations = [Station::queueing(1.0, 1), Station::queueing(2.0, 1)];
        let expected = [
            (1.0 / 4.0, [1.0 / 4.0, 1.0 / 2.0], 3.0),
            (8.0 / 21.0, [10.0 / 21.0, 24.0 / 21.0], 17.0 / 4.0),
            (63.0 / 142.0, [93.0 / 142.0, 270.0 / 142.0], 121.0 / 21.0),
        ];
        for (n, (x, q, r)) in (1..=3).zip(expected) {
            let net = mva_closed(n, 1.0, &stations).unwrap();
            assert!(close(net.throughput, x, 1e-14), "N {n}: {net:?}");
            assert!(close(net.response_time, r, 1e-14), "N {n}: {net:?}");
            for i in 0..2 {
                assert!(close(net.queue_lengths[i], q[i], 1e-14), "N {n}: {net:?}");
                assert!(close(net.utilisations[i], x * stations[i].demand, 1e-14));
            }
            // The normalising-constant path agrees with the recursion.
            let roles = [Role::Single, Role::Single];
            let (xc, qc) = by_normalising_constants(n, 1.0, &stations, &roles);
            assert!(close(xc, x, 1e-12) && close(qc[0], q[0], 1e-12) && close(qc[1], q[1], 1e-12));
        }
    }

    #[test]
    fn one_multi_server_station_is_the_machine_repairman_queue() {
        // Including the sizes at which the textbook marginal-probability recursion breaks
        // down (m = 3, N = 1000 and m = 8, N = 200: a negative throughput).
        for (n, z, d, m) in [
            (3, 1.0, 1.0, 2),
            (10, 1.0, 0.5, 3),
            (1000, 1.0, 0.5, 3),
            (200, 1.0, 0.3, 8),
            (2000, 5.0, 0.3, 8),
            (500, 1.0, 1.0, 16),
            (40, 30.0, 1.0, 4),
            (100_000, 50.0, 0.01, 64),
        ] {
            let net = mva_closed(n, z, &[Station::queueing(d, m)]).unwrap();
            let (x, q) = machine_repairman(n, z, d, m);
            assert!(
                close(net.throughput, x, 1e-9),
                "{n} {z} {d} {m}: {net:?} vs {x}"
            );
            assert!(
                close(net.queue_lengths[0], q, 1e-9),
                "{n} {z} {d} {m}: {net:?} vs {q}"
            );
            assert!(close(net.utilisations[0], x * d / f64::from(m), 1e-9));
        }
        // N = 3, m = 2, Z = D = 1 by hand: weights 1, 3, 3, 3/2 for j = 0..3, so
        // X = (3 + 6 + 3)/8.5 and E[J] = (3 + 6 + 4.5)/8.5.
        let net = mva_closed(3, 1.0, &[Station::queueing(1.0, 2)]).unwrap();
        assert!(close(net.throughput, 12.0 / 8.5, 1e-13), "{net:?}");
        assert!(close(net.queue_lengths[0], 13.5 / 8.5, 1e-13), "{net:?}");
    }

    #[test]
    fn mixed_networks_match_the_enumerated_product_form() {
        let stations = [
            Station::queueing(0.4, 2),
            Station::queueing(0.3, 1),
            Station::delay(0.5),
            Station::queueing(0.9, 3),
            Station::queueing(0.0, 2),
            Station::queueing(0.2, 5),
        ];
        for (n, z) in [(1, 1.0), (2, 0.0), (4, 2.0), (7, 0.5), (9, 0.0)] {
            let net = mva_closed(n, z, &stations).unwrap();
            let (x, q) = enumerate(n, z, &stations);
            assert!(close(net.throughput, x, 1e-11), "N {n}: {net:?} vs {x}");
            for i in 0..stations.len() {
                assert!(
                    (net.queue_lengths[i] - q[i]).abs() <= 1e-11 * f64::from(n),
                    "N {n} station {i}: {:?} vs {q:?}",
                    net.queue_lengths
                );
            }
            // Every customer is somewhere.
            let placed: f64 = net.queue_lengths.iter().sum::<f64>() + net.throughput * z;
            assert!(close(placed, f64::from(n), 1e-12), "N {n}: {placed}");
        }
    }

    #[test]
    fn multi_server_stations_alone() {
        // No think time, nothing else: one station of m servers holds everyone, X = min(N, m)/D.
        for (n, m) in [(3, 2), (2, 3), (50, 7)] {
            let net = mva_closed(n, 0.0, &[Station::queueing(0.5, m)]).unwrap();
            let x = f64::from(n.min(m)) / 0.5;
            assert!(close(net.throughput, x, 1e-12), "N {n} m {m}: {net:?}");
            assert!(close(net.queue_lengths[0], f64::from(n), 1e-12), "{net:?}");
        }
        // Two of them in a cycle, against the product form.
        let stations = [Station::queueing(0.5, 2), Station::queueing(0.3, 3)];
        for n in [1, 3, 4, 8] {
            let net = mva_closed(n, 0.0, &stations).unwrap();
            let (x, q) = enumerate(n, 0.0, &stations);
            assert!(close(net.throughput, x, 1e-12), "N {n}: {net:?} vs {x}");
            assert!(
                close(net.queue_lengths[1], q[1], 1e-12),
                "N {n}: {net:?} vs {q:?}"
            );
        }
    }

    #[test]
    fn normalising_constants_agree_with_the_recursion_on_single_servers() {
        let stations: Vec<Station> = [0.05, 0.2, 0.11, 0.2, 0.01]
            .iter()
            .map(|&d| Station::queueing(d, 1))
            .chain([Station::delay(0.3)])
            .collect();
        let roles: Vec<Role> = stations.iter().map(|s| Role::of(s, 500)).collect();
        for n in [1, 2, 10, 50, 500] {
            let (x, q) = classic(n, 2.0, &stations, &roles);
            let (xc, qc) = by_normalising_constants(n, 2.0, &stations, &roles);
            assert!(close(x, xc, 1e-11), "N {n}: {x} vs {xc}");
            for i in 0..stations.len() {
                assert!(
                    close(q[i], qc[i], 1e-10),
                    "N {n} station {i}: {q:?} vs {qc:?}"
                );
            }
        }
    }

    #[test]
    fn throughput_stays_under_its_asymptotic_bounds_and_reaches_the_bottleneck() {
        // Bottleneck: 4 servers at 0.2 s, capacity 20/s; one server at 0.04 s, 25/s.
        let stations = [
            Station::queueing(0.2, 4),
            Station::queueing(0.04, 1),
            Station::delay(0.1),
        ];
        let (z, d) = (1.0, 0.34);
        let mut previous = 0.0;
        for n in [1, 2, 5, 10, 20, 40, 100, 1000, 10_000] {
            let x = mva_closed(n, z, &stations).unwrap().throughput;
            let bound = (f64::from(n) / (d + z)).min(20.0);
            assert!(x <= bound * (1.0 + 1e-12), "N {n}: {x} > {bound}");
            assert!(x >= previous, "N {n}: throughput fell");
            previous = x;
        }
        // One customer never waits; many saturate the bottleneck.
        assert!(close(
            mva_closed(1, z, &stations).unwrap().throughput,
            1.0 / (d + z),
            1e-14
        ));
        let many = mva_closed(10_000, z, &stations).unwrap();
        assert!(close(many.throughput, 20.0, 1e-9), "{many:?}");
        assert!(close(many.utilisations[0], 1.0, 1e-9));
        // Without think time, X(N) = N/R(N).
        let net = mva_closed(30, 0.0, &stations).unwrap();
        assert!(close(net.throughput * net.response_time, 30.0, 1e-12));
    }

    #[test]
    fn enough_servers_make_a_delay_and_more_servers_never_hurt() {
        let as_delay = mva_closed(5, 1.0, &[Station::delay(2.0), Station::queueing(1.0, 1)]);
        let many = mva_closed(
            5,
            1.0,
            &[Station::queueing(2.0, 5), Station::queueing(1.0, 1)],
        );
        let (a, b) = (as_delay.unwrap(), many.unwrap());
        assert!(
            close(a.throughput, b.throughput, 1e-14)
                && close(a.queue_lengths[0], b.queue_lengths[0], 1e-14)
        );
        assert_eq!(a.utilisations[0], 0.0);
        assert!(close(b.utilisations[0], b.throughput * 2.0 / 5.0, 1e-14));
        let x = |m| {
            mva_closed(50, 1.0, &[Station::queueing(1.0, m)])
                .unwrap()
                .throughput
        };
        assert!(x(1) < x(2) && x(2) < x(4) && x(4) < x(8));
        // A delay's servers do not matter.
        let mut odd = Station::delay(2.0);
        odd.servers = 7;
        assert_eq!(
            mva_closed(5, 1.0, &[odd]),
            mva_closed(5, 1.0, &[Station::delay(2.0)])
        );
    }

    #[test]
    fn demands_hundreds_of_orders_apart() {
        // 10⁻²⁰⁰ beside 10²⁰⁰: the small station is a delay to within 10⁻⁴⁰⁰.
        let net = mva_closed(
            50,
            0.0,
            &[Station::queueing(1e-200, 2), Station::queueing(1e200, 3)],
        )
        .unwrap();
        assert!(close(net.throughput, 3e-200, 1e-12), "{net:?}");
        assert!(close(net.queue_lengths[1], 50.0, 1e-12), "{net:?}");
        assert!(net.queue_lengths[0] >= 0.0 && net.queue_lengths[0] < 1e-300);
        let tiny = mva_closed(
            1000,
            0.0,
            &[Station::queueing(1.0, 999), Station::queueing(5e-324, 2)],
        );
        assert!(close(tiny.unwrap().throughput, 999.0, 1e-12));
        // A throughput beyond f64: None rather than infinity.
        assert_eq!(mva_closed(10, 0.0, &[Station::queueing(5e-324, 1)]), None);
    }

    #[test]
    fn mva_answers_none_outside_its_domain() {
        let one = [Station::queueing(1.0, 1)];
        assert!(mva_closed(1, 0.0, &one).is_some());
        assert_eq!(mva_closed(0, 1.0, &one), None);
        assert_eq!(mva_closed(MVA_MAX_CUSTOMERS + 1, 1.0, &one), None);
        assert!(mva_closed(MVA_MAX_CUSTOMERS, 1.0, &one).is_some());
        let too_many = vec![Station::queueing(1.0, 1); MVA_MAX_STATIONS + 1];
        assert_eq!(mva_closed(2, 1.0, &too_many), None);
        assert_eq!(mva_closed(2, -1.0, &one), None);
        assert_eq!(mva_closed(2, f64::NAN, &one), None);
        assert_eq!(mva_closed(2, f64::INFINITY, &one), None);
        assert_eq!(mva_closed(2, 1.0, &[Station::queueing(-1.0, 1)]), None);
        assert_eq!(mva_closed(2, 1.0, &[Station::queueing(f64::NAN, 1)]), None);
        assert_eq!(mva_closed(2, 1.0, &[Station::queueing(1.0, 0)]), None);
        assert_eq!(
            mva_closed(2, 1.0, &[Station::queueing(f64::MAX, 1); 2]),
            None
        );
        // Nothing takes any time: the throughput would be infinite.
        assert_eq!(mva_closed(2, 0.0, &[Station::queueing(0.0, 1)]), None);
        assert_eq!(mva_closed(2, 0.0, &[]), None);
        // Think time alone is a network too: X = N/Z.
        assert_eq!(mva_closed(4, 2.0, &[]).unwrap().throughput, 2.0);
        // Too much work: 10⁵ customers at 20 stations of 5·10⁴ servers.
        let wide = vec![Station::queueing(1.0, 50_000); 20];
        assert_eq!(mva_closed(MVA_MAX_CUSTOMERS, 1.0, &wide), None);
    }
}
