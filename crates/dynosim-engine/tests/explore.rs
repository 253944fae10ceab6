use dynosim_engine::{never_interrupted, run, Scenario};
use std::path::Path;
use std::time::Instant;

fn stat(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    (m, (v / n).sqrt())
}

fn go(label: &str, json: &str) {
    let s = Scenario::from_json(json, Path::new(".")).unwrap();
    let t = Instant::now();
    let r = run(&s, &never_interrupted).unwrap();
    let reqs: u64 = r.per_replication.iter().map(|x| x.simulated_requests).sum();
    let pq: Vec<f64> = r
        .per_replication
        .iter()
        .map(|x| x.queued_fraction)
        .collect();
    let w: Vec<f64> = r.per_replication.iter().map(|x| x.queue.mean).collect();
    let wq: Vec<f64> = r
        .per_replication
        .iter()
        .map(|x| x.queue_of_queued.mean)
        .collect();
    let resp: Vec<f64> = r.per_replication.iter().map(|x| x.response.mean).collect();
    let (a, b, c, d) = (stat(&pq), stat(&w), stat(&wq), stat(&resp));
    println!("{label}: {:.2}s {reqs} req; ES={} ES2={} pq {:.5}±{:.5} ({:.2}%) w {:.5}±{:.5} ({:.2}%) wq {:.5}±{:.5} ({:.2}%) resp {:.5}±{:.5} ({:.2}%)",
        t.elapsed().as_secs_f64(), s.service.mean(), s.service.second_moment(),
        a.0, a.1, 100.0*a.1/a.0, b.0, b.1, 100.0*b.1/b.0, c.0, c.1, 100.0*c.1/c.0, d.0, d.1, 100.0*d.1/d.0);
}

#[test]
fn explore() {
    let args: Vec<String> = std::env::var("EXPLORE")
        .unwrap()
        .split(';')
        .map(String::from)
        .collect();
    for a in args {
        let (label, json) = a.split_once('|').unwrap();
        go(label, json);
    }
}
