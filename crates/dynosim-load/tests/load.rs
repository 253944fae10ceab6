//! The load generator against small servers started here on 127.0.0.1:0 (std threads). Only
//! orderings and inequalities that cannot flake are asserted about time.

use dynosim_load::{
    run, Breaker, BreakerHook, ErrorKind, LoadError, Mode, Next, Options, Outcome, Record, Request,
    Retry, RetryHook, Stopped,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// f64 epoch times round to a quarter of a microsecond.
const EPS: f64 = 1e-6;

/// Starts a server whose `handle` serves each connection on a thread of its own.
fn server(handle: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let handle = handle.clone();
            std::thread::spawn(move || handle(stream));
        }
    });
    addr
}

/// Reads a request's head; returns it as text ("" if the client went away).
fn read_head(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn path_of(head: &str) -> String {
    head.split(' ').nth(1).unwrap_or_default().to_string()
}

fn header_of(head: &str, name: &str) -> Option<String> {
    head.split("\r\n").find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn requests(paths: &[&str]) -> Vec<Request> {
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| Request {
            at: i as f64 * 0.001,
            path: p.to_string(),
            headers: vec![],
        })
        .collect()
}

fn options(target: SocketAddr) -> Options {
    Options {
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(30),
        ..Options::new(target)
    }
}

fn never() -> bool {
    false
}

/// A record's moments come in order, as far as it got.
fn assert_ordered(r: &Record) {
    let times = [r.scheduled, r.sent, r.connected, r.first_byte, r.done];
    let reached: Vec<f64> = times.into_iter().filter(|t| !t.is_nan()).collect();
    assert!(
        reached.windows(2).all(|w| w[0] <= w[1] + EPS),
        "out of order: {r:?}"
    );
}

/// Answers `/status/N` with status N; echoes the request's X-Echo in X-Echoed; `/eof` has
/// no Content-Length (the body ends with the connection); `/chunked` is chunked.
fn answering_server() -> SocketAddr {
    server(|mut s| {
        let head = read_head(&mut s);
        let path = path_of(&head);
        let echo = header_of(&head, "x-echo").unwrap_or_default();
        let response = if let Some(code) = path.strip_prefix("/status/") {
            format!(
                "HTTP/1.1 {code} Whatever\r\nX-Echoed: {echo}\r\nContent-Length: 5\r\n\r\nhello"
            )
        } else if path == "/eof" {
            "HTTP/1.0 200 OK\r\nx-echoed: eof\r\n\r\nuntil the end".to_string()
        } else if path == "/chunked" {
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".into()
        } else {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string()
        };
        let _ = s.write_all(response.as_bytes());
    })
}

fn check_answers(threads: usize) {
    let target = answering_server();
    let mut reqs = requests(&["/status/200", "/status/503", "/eof", "/chunked", "/nowhere"]);
    reqs[0].headers = vec![("X-Echo".into(), "first".into())];
    reqs[1].headers = vec![("x-echo".into(), "second".into())];
    let opts = Options {
        capture: vec!["x-ECHOED".into(), "X-Absent".into()],
        threads,
        ..options(target)
    };
    let report = run(&reqs, &Mode::Open, &opts, &never).unwrap();
    assert_eq!(report.stopped, None);
    assert_eq!(report.unsent, 0);
    let r = &report.records;
    assert_eq!(
        r.iter().map(|r| r.index).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(
        r.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 503, 200, 200, 404]
    );
    assert!(r.iter().all(|r| r.error.is_none()), "{r:?}");
    assert_eq!(r[0].headers, [Some("first".to_string()), None]);
    assert_eq!(r[1].headers, [Some("second".to_string()), None]);
    assert_eq!(r[2].headers, [Some("eof".to_string()), None]);
    assert_eq!(r[4].headers, [None, None]);
    let head0 = "HTTP/1.1 200 Whatever\r\nX-Echoed: first\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(r[0].bytes, head0.len() as u64 + 5);
    assert_eq!(
        r[2].bytes,
        "HTTP/1.0 200 OK\r\nx-echoed: eof\r\n\r\nuntil the end".len() as u64
    );
    for rec in r {
        assert_ordered(rec);
        assert!(!rec.done.is_nan());
        assert!((rec.scheduled - report.start - rec.index as f64 * 0.001).abs() < EPS);
    }
    let late = report.lateness.unwrap();
    assert_eq!(late.count, 5);
    assert!(0.0 <= late.p50 && late.p50 <= late.p99 && late.p99 <= late.max);
}

#[test]
fn statuses_and_captured_headers() {
    check_answers(1);
}

#[test]
fn statuses_and_captured_headers_on_several_threads() {
    check_answers(2);
}

/// Open loop sends every request at its time, without waiting for answers: the server
/// answers none until all of them are in flight at once.
#[test]
fn open_loop_follows_the_schedule() {
    let n = 40;
    let barrier = Arc::new(Barrier::new(n));
    let target = server(move |mut s| {
        read_head(&mut s);
        barrier.wait();
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    });
    // Out of order on purpose: the schedule is the times, not the list's order.
    let mut reqs: Vec<Request> = (0..n)
        .map(|i| Request {
            at: ((i * 7) % n) as f64 * 0.002,
            path: format!("/{i}"),
            headers: vec![],
        })
        .collect();
    reqs.swap(0, 5);
    let report = run(&reqs, &Mode::Open, &options(target), &never).unwrap();
    assert_eq!(report.records.len(), n);
    for (rec, req) in report.records.iter().zip(&reqs) {
        assert_eq!(rec.error, None, "{rec:?}");
        assert_eq!(rec.status, 200);
        assert_eq!(rec.client, 0);
        assert!((rec.scheduled - (report.start + req.at)).abs() < EPS);
        assert!(rec.sent >= rec.scheduled - EPS, "sent early: {rec:?}");
        assert_ordered(rec);
    }
    let mut by_time: Vec<&Record> = report.records.iter().collect();
    by_time.sort_by(|a, b| a.scheduled.total_cmp(&b.scheduled));
    assert!(
        by_time.windows(2).all(|w| w[0].sent <= w[1].sent + EPS),
        "sent out of schedule order"
    );
    let late = report.lateness.unwrap();
    assert!(late.p50 >= 0.0 && late.max >= late.p99 && late.p99 >= late.p50);
}

/// A closed loop never has more requests in flight than clients (the server counts
/// connections from accept to just before it answers), and each client thinks between
/// a response and its next request.
#[test]
fn closed_loop_keeps_to_its_clients_and_thinks() {
    let open = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (o, m) = (open.clone(), most.clone());
    let target = server(move |mut s| {
        let now = o.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(now, Ordering::SeqCst);
        read_head(&mut s);
        std::thread::sleep(Duration::from_millis(3));
        o.fetch_sub(1, Ordering::SeqCst);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    let n = 30;
    let clients = 3;
    let think: Vec<f64> = (0..n).map(|k| 0.002 * (k % 3 + 1) as f64).collect();
    let reqs = requests(&vec!["/"; n]);
    let mode = Mode::Closed {
        clients,
        think: think.clone(),
    };
    let report = run(&reqs, &mode, &options(target), &never).unwrap();
    assert_eq!(report.records.len(), n);
    assert!(report
        .records
        .iter()
        .all(|r| r.error.is_none() && r.status == 200));
    let most = most.load(Ordering::SeqCst);
    assert!((1..=clients).contains(&most), "{most} in flight at once");
    for client in 0..clients as u32 {
        let mut mine: Vec<&Record> = report
            .records
            .iter()
            .filter(|r| r.client == client)
            .collect();
        mine.sort_by(|a, b| a.sent.total_cmp(&b.sent));
        for w in mine.windows(2) {
            assert_ordered(w[0]);
            // One at a time, and at least the shortest think time between them.
            assert!(
                w[1].scheduled - w[0].done >= 0.002 - EPS,
                "{:?} then {:?}",
                w[0],
                w[1]
            );
            assert!(w[1].sent >= w[1].scheduled - EPS);
        }
    }
    assert!(report.records.iter().all(|r| (r.client as usize) < clients));
}

/// Servers that misbehave give error kinds, never a panic.
#[test]
fn failures_become_error_kinds() {
    let target = server(|mut s| {
        let head = read_head(&mut s);
        match path_of(&head).as_str() {
            "/garbage" => drop(s.write_all(b"hello there, this is no HTTP\r\n\r\n")),
            "/bad-status" => drop(s.write_all(b"HTTP/1.1 OK 200\r\n\r\n")),
            "/truncated" => {
                drop(s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
            }
            "/half-head" => drop(s.write_all(b"HTTP/1.1 200 OK\r\nContent-")),
            "/empty" => {}
            "/hang" => std::thread::sleep(Duration::from_secs(3)),
            _ => drop(s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")),
        }
    });
    // A reset: the server closes with the request unread, so the kernel answers with RST.
    let reset = server(|s| {
        std::thread::sleep(Duration::from_millis(100));
        drop(s);
    });
    let paths = [
        "/garbage",
        "/bad-status",
        "/truncated",
        "/half-head",
        "/empty",
        "/hang",
        "/fine",
    ];
    let opts = Options {
        timeout: Duration::from_millis(300),
        ..options(target)
    };
    let report = run(&requests(&paths), &Mode::Open, &opts, &never).unwrap();
    let kinds: Vec<Option<ErrorKind>> = report.records.iter().map(|r| r.error).collect();
    use ErrorKind::*;
    assert_eq!(
        kinds,
        [
            Some(BadResponse),
            Some(BadResponse),
            Some(Io),
            Some(BadResponse),
            Some(Io),
            Some(Timeout),
            None
        ]
    );
    assert_eq!(
        report.records[2].status, 200,
        "the status came before the body broke"
    );
    assert_eq!(report.records[6].status, 204);
    for r in &report.records {
        assert_ordered(r);
        assert_eq!(r.done.is_nan(), r.error.is_some());
    }

    let report = run(&requests(&["/"]), &Mode::Open, &options(reset), &never).unwrap();
    assert_eq!(report.records[0].error, Some(Io));

    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let report = run(
        &requests(&["/", "/"]),
        &Mode::Open,
        &options(refused),
        &never,
    )
    .unwrap();
    assert!(report
        .records
        .iter()
        .all(|r| r.error == Some(Refused) && r.connected.is_nan()));
    let mode = Mode::Closed {
        clients: 2,
        think: vec![],
    };
    let report = run(&requests(&["/"; 5]), &mode, &options(refused), &never).unwrap();
    assert_eq!(report.records.len(), 5);
    assert!(report.records.iter().all(|r| r.error == Some(Refused)));
}

#[test]
fn only_loopback_targets() {
    for target in [
        "10.0.0.1:80",
        "192.168.1.1:8080",
        "0.0.0.0:80",
        "[::ffff:127.0.0.1]:80",
        "8.8.8.8:53",
    ] {
        let target: SocketAddr = target.parse().unwrap();
        let err = run(&requests(&["/"]), &Mode::Open, &options(target), &never).unwrap_err();
        assert_eq!(err, LoadError::NotLoopback(target));
        assert!(err.to_string().contains("loopback"));
    }
    // Any 127.x and ::1 are fine (refused here: nothing listens).
    for target in ["127.0.0.2:9", "[::1]:9"] {
        let target: SocketAddr = target.parse().unwrap();
        assert!(run(&requests(&["/"]), &Mode::Open, &options(target), &never).is_ok());
    }
}

#[test]
fn bad_arguments_are_config_errors() {
    let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let config = |reqs: &[Request], mode: &Mode, opts: &Options| {
        matches!(run(reqs, mode, opts, &never), Err(LoadError::Config(_)))
    };
    let opts = options(target);
    let mut bad = requests(&["/"]);
    bad[0].at = f64::NAN;
    assert!(config(&bad, &Mode::Open, &opts));
    bad[0].at = -1.0;
    assert!(config(&bad, &Mode::Open, &opts));
    assert!(config(&requests(&["no-slash"]), &Mode::Open, &opts));
    let two = requests(&["/", "/"]);
    assert!(config(
        &two,
        &Mode::Closed {
            clients: 0,
            think: vec![]
        },
        &opts
    ));
    assert!(config(
        &two,
        &Mode::Closed {
            clients: 1,
            think: vec![0.1]
        },
        &opts
    ));
    assert!(config(
        &two,
        &Mode::Closed {
            clients: 1,
            think: vec![0.1, -1.0]
        },
        &opts
    ));
    let capture = Options {
        capture: vec!["bad name".into()],
        ..options(target)
    };
    assert!(config(&two, &Mode::Open, &capture));
    let zero = Options {
        timeout: Duration::ZERO,
        ..options(target)
    };
    assert!(config(&two, &Mode::Open, &zero));
    // Nothing to send is no error.
    let report = run(&[], &Mode::Open, &opts, &never).unwrap();
    assert!(report.records.is_empty() && report.lateness.is_none());
}

/// The deadline ends the run: requests in flight end with `deadline`, later ones are unsent.
#[test]
fn deadline_ends_the_run() {
    let target = server(|mut s| {
        read_head(&mut s);
        std::thread::sleep(Duration::from_secs(5));
    });
    let mut reqs = requests(&["/"; 4]);
    reqs[3].at = 1000.0;
    let opts = Options {
        timeout: Duration::from_secs(60),
        deadline: Duration::from_secs(1),
        ..options(target)
    };
    let began = Instant::now();
    let report = run(&reqs, &Mode::Open, &opts, &never).unwrap();
    assert!(began.elapsed() < Duration::from_secs(30));
    assert_eq!(report.stopped, Some(Stopped::Deadline));
    assert_eq!(report.records.len() + report.unsent, 4);
    assert!(report.unsent >= 1 && report.records.iter().all(|r| r.index < 3));
    assert!(report
        .records
        .iter()
        .all(|r| r.error == Some(ErrorKind::Deadline)));
}

/// `stop()` ends a closed loop too: the request in flight ends with `interrupted`.
#[test]
fn stop_ends_the_run() {
    let seen = Arc::new(AtomicBool::new(false));
    let s2 = seen.clone();
    let target = server(move |mut s| {
        read_head(&mut s);
        s2.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(5));
    });
    let stop = || seen.load(Ordering::SeqCst);
    let mode = Mode::Closed {
        clients: 1,
        think: vec![],
    };
    let began = Instant::now();
    let report = run(&requests(&["/"; 10]), &mode, &options(target), &stop).unwrap();
    assert!(began.elapsed() < Duration::from_secs(30));
    assert_eq!(report.stopped, Some(Stopped::Interrupted));
    assert_eq!(report.records.len(), 1);
    assert_eq!(report.unsent, 9);
    assert_eq!(report.records[0].error, Some(ErrorKind::Interrupted));
    assert!(!report.records[0].connected.is_nan());
}

/// Retries every 5xx and timeout up to `attempts` tries in all, after `delay`; records what
/// it was asked.
struct Tries {
    attempts: u32,
    delay: f64,
    firsts: AtomicUsize,
    asked: std::sync::Mutex<Vec<(u32, f64, Outcome)>>,
}

impl Retry for Tries {
    fn first(&self, _now: f64) {
        self.firsts.fetch_add(1, Ordering::SeqCst);
    }
    fn after(&self, attempt: u32, last_delay: f64, outcome: Outcome, _now: f64) -> Next {
        self.asked
            .lock()
            .unwrap()
            .push((attempt, last_delay, outcome));
        let failed = match outcome {
            Outcome::Answered(status) => status >= 500,
            Outcome::Failed(_) => true,
        };
        match (failed, attempt < self.attempts) {
            (false, _) => Next::Keep("success"),
            (true, false) => Next::Keep("exhausted"),
            (true, true) => Next::Retry(self.delay),
        }
    }
}

/// Answers 503 to a request's first two tries and 200 to its third, telling them apart by the
/// id header's suffix; `/ok` is answered 200 at once.
fn flaky_server() -> SocketAddr {
    server(|mut s| {
        let head = read_head(&mut s);
        let id = header_of(&head, "x-id").unwrap_or_default();
        let third = id.ends_with(".3");
        let code = if path_of(&head) == "/ok" || third {
            200
        } else {
            503
        };
        let response = format!("HTTP/1.1 {code} X\r\nX-Got: {id}\r\nContent-Length: 0\r\n\r\n");
        let _ = s.write_all(response.as_bytes());
    })
}

fn check_retries(mode: Mode) {
    let target = flaky_server();
    let mut reqs = requests(&["/flaky", "/ok", "/flaky"]);
    for (i, r) in reqs.iter_mut().enumerate() {
        r.headers = vec![("X-Id".into(), i.to_string())];
    }
    let tries = Arc::new(Tries {
        attempts: 3,
        delay: 0.05,
        firsts: AtomicUsize::new(0),
        asked: Default::default(),
    });
    let opts = Options {
        capture: vec!["x-got".into()],
        retry: Some(RetryHook(tries.clone())),
        id_header: Some("x-id".into()),
        ..options(target)
    };
    let report = run(&reqs, &mode, &opts, &never).unwrap();
    assert_eq!(report.unsent, 0);
    let r = &report.records;
    let got: Vec<(u32, u32, u16, Option<String>)> = r
        .iter()
        .map(|r| (r.index, r.attempt, r.status, r.headers[0].clone()))
        .collect();
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        got,
        [
            (0, 1, 503, s("0")),
            (0, 2, 503, s("0.2")),
            (0, 3, 200, s("0.3")),
            (1, 1, 200, s("1")),
            (2, 1, 503, s("2")),
            (2, 2, 503, s("2.2")),
            (2, 3, 200, s("2.3")),
        ]
    );
    assert_eq!(tries.firsts.load(Ordering::SeqCst), 3);
    let kept: Vec<Option<&str>> = r.iter().map(|r| r.kept).collect();
    let (k, no) = (Some("success"), None);
    assert_eq!(kept, [no, no, k, k, no, no, k]);
    // Asked after every try; each retry's last delay is the backoff before it.
    let asked = tries.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 7);
    assert!(asked.contains(&(2, 0.05, Outcome::Answered(503))));
    assert!(asked.contains(&(3, 0.05, Outcome::Answered(200))));
    for tries in r.chunk_by(|a, b| a.index == b.index) {
        for (k, t) in tries.iter().enumerate() {
            assert_ordered(t);
            assert_eq!(t.origin, tries[0].sent, "{t:?}");
            if k > 0 {
                // Sent no sooner than its backoff after the try before it ended.
                assert!(t.sent >= tries[k - 1].done + 0.05 - EPS, "{tries:?}");
            }
        }
    }
    assert_eq!(report.lateness.unwrap().count, 3);
}

#[test]
fn retries_send_again_after_their_backoff_with_the_try_in_the_id() {
    check_retries(Mode::Open);
}

#[test]
fn a_closed_loops_clients_retry_before_they_think() {
    check_retries(Mode::Closed {
        clients: 2,
        think: vec![],
    });
}

#[test]
fn no_retry_past_the_deadline() {
    // Every try hangs: the first times out (0.2 s), the retries are cut by the deadline.
    let target = server(|mut s| {
        let _ = read_head(&mut s);
        std::thread::sleep(Duration::from_secs(5));
    });
    let tries = Arc::new(Tries {
        attempts: 100,
        delay: 0.0,
        firsts: AtomicUsize::new(0),
        asked: Default::default(),
    });
    let opts = Options {
        timeout: Duration::from_millis(200),
        deadline: Duration::from_millis(700),
        retry: Some(RetryHook(tries.clone())),
        ..options(target)
    };
    let report = run(&requests(&["/hang"]), &Mode::Open, &opts, &never).unwrap();
    assert_eq!(report.stopped, Some(Stopped::Deadline));
    let r = &report.records;
    assert!(r.len() < 100 && r.len() >= 2, "{r:?}");
    assert_eq!(r.last().unwrap().error, Some(ErrorKind::Deadline));
    assert!(r.iter().all(|t| t.kept.is_none()));
    assert!(r[..r.len() - 1]
        .iter()
        .all(|t| t.error == Some(ErrorKind::Timeout)));
}

/// A breaker that refuses every try once it was told of two failures; records what it was
/// told.
#[derive(Default)]
struct Trips {
    asked: AtomicUsize,
    told: std::sync::Mutex<Vec<(f64, f64, bool)>>,
}

impl Breaker for Trips {
    fn allows(&self, _now: f64) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.told.lock().unwrap().iter().filter(|t| t.2).count() < 2
    }
    fn record(&self, sent: f64, now: f64, failed: bool) {
        self.told.lock().unwrap().push((sent, now, failed));
    }
}

/// One client, one request after the other: the breaker is asked before each and told each
/// outcome (a status of 500 or more a failure); once it refuses, nothing more is sent and the
/// tries it refused end at once with `breaker_open`.
#[test]
fn a_breaker_is_asked_before_each_try_and_told_each_outcome() {
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let target = server(move |mut s| {
        counted.fetch_add(1, Ordering::SeqCst);
        let head = read_head(&mut s);
        let code = path_of(&head).trim_start_matches("/status/").to_string();
        let _ = s.write_all(format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n").as_bytes());
    });
    let breaker = Arc::new(Trips::default());
    let opts = Options {
        breaker: Some(BreakerHook(breaker.clone())),
        ..options(target)
    };
    let paths = [
        "/status/500",
        "/status/200",
        "/status/503",
        "/status/200",
        "/status/200",
    ];
    let mode = Mode::Closed {
        clients: 1,
        think: vec![],
    };
    let report = run(&requests(&paths), &mode, &opts, &never).unwrap();
    let r = &report.records;
    let got: Vec<(u16, Option<ErrorKind>)> = r.iter().map(|r| (r.status, r.error)).collect();
    let refused = (0, Some(ErrorKind::BreakerOpen));
    assert_eq!(
        got,
        [(500, None), (200, None), (503, None), refused, refused]
    );
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    assert_eq!(breaker.asked.load(Ordering::SeqCst), 5);
    let told = breaker.told.lock().unwrap().clone();
    assert_eq!(
        told.iter().map(|t| t.2).collect::<Vec<_>>(),
        [true, false, true]
    );
    for (t, record) in told.iter().zip(r) {
        assert!(t.1 >= t.0, "{told:?}");
        assert!(
            (t.0 + report.start - record.sent).abs() < EPS,
            "{told:?} {record:?}"
        );
    }
    for record in &r[3..] {
        assert!(record.sent.is_finite() && record.connected.is_nan() && record.done.is_nan());
        assert_eq!(record.error.unwrap().name(), "breaker_open");
    }
    // The client waited for the refused ones too: each after the one before it.
    assert!(r.windows(2).all(|w| w[1].sent >= w[0].sent));
}

/// With retries, a try the breaker refused is a failed try: its client's retries are asked
/// after it with `breaker_open`, and a retry meets the breaker again.
#[test]
fn a_refused_try_is_retried_and_refused_again() {
    let target = answering_server();
    let breaker = Arc::new(Trips::default());
    let tries = Arc::new(Tries {
        attempts: 2,
        delay: 0.0,
        firsts: AtomicUsize::new(0),
        asked: Default::default(),
    });
    let opts = Options {
        breaker: Some(BreakerHook(breaker.clone())),
        retry: Some(RetryHook(tries.clone())),
        ..options(target)
    };
    let mode = Mode::Closed {
        clients: 1,
        think: vec![],
    };
    let report = run(
        &requests(&["/status/500", "/status/200"]),
        &mode,
        &opts,
        &never,
    )
    .unwrap();
    let got: Vec<(u32, u32, u16, Option<ErrorKind>)> = report
        .records
        .iter()
        .map(|r| (r.index, r.attempt, r.status, r.error))
        .collect();
    let refused = Some(ErrorKind::BreakerOpen);
    assert_eq!(
        got,
        [
            (0, 1, 500, None),
            (0, 2, 500, None),
            (1, 1, 0, refused),
            (1, 2, 0, refused)
        ]
    );
    let asked = tries.asked.lock().unwrap().clone();
    assert_eq!(asked[2], (1, 0.0, Outcome::Failed(ErrorKind::BreakerOpen)));
    assert_eq!(asked[3], (2, 0.0, Outcome::Failed(ErrorKind::BreakerOpen)));
    assert_eq!(breaker.told.lock().unwrap().len(), 2);
}
