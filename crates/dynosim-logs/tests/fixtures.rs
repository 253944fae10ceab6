//! The fixtures of tests/fixtures/logs through the summary, against figures worked out by hand
//! (see the fixtures' README for what each line is).

use dynosim_logs::summary::{summarise, Options, Summary};
use dynosim_logs::{FormatChoice, LogError, ReadOptions};

fn fixture(name: &str) -> String {
    format!(
        "{}/../../tests/fixtures/logs/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn summary_with(names: &[&str], options: Options) -> Result<Summary, LogError> {
    let paths: Vec<String> = names.iter().map(|n| fixture(n)).collect();
    summarise(&paths, options, &|| false)
}

fn summary(name: &str) -> Summary {
    summary_with(&[name], Options::default()).unwrap()
}

fn counts(c: &dynosim_logs::summary::FastSortedCounts) -> Vec<(&str, u64)> {
    c.0.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

/// Equal within what f64 seconds since the epoch hold (about 0.2 µs in 2014).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn heroku_log_worked_example() {
    let s = summary("heroku.log");
    assert_eq!(
        (
            s.read.lines,
            s.read.requests,
            s.read.malformed,
            s.read.duplicates,
            s.read.other_lines
        ),
        (13, 9, 1, 1, 2)
    );
    assert_eq!(s.read.malformed_lines.len(), 1);
    assert_eq!(s.read.malformed_lines[0].line, 12);
    assert!(
        s.read.malformed_lines[0].reason.contains("no status="),
        "{}",
        s.read.malformed_lines[0].reason
    );
    assert_eq!(s.first.as_deref(), Some("2014-01-09T06:16:50.100000+00:00"));
    assert_eq!(s.last.as_deref(), Some("2014-01-09T06:16:57.700000+00:00"));
    assert_eq!(s.span_seconds, Some(7.6), "rounded to the microsecond");
    assert!(close(s.rate_per_s.unwrap(), 9.0 / 7.6));
    // service: 10, 20, 30, 40, 60, 120, 30000 ms (the H10 and H13 have none)
    let service = s.service.unwrap();
    assert_eq!(service.count, 7);
    assert!(close(service.mean, 30.28 / 7.0));
    assert_eq!(
        (
            service.p50,
            service.p90,
            service.p95,
            service.p99,
            service.max
        ),
        (0.04, 30.0, 30.0, 30.0, 30.0)
    );
    // connect: 0, 1 six times, 2 ms
    let connect = s.connect.unwrap();
    assert_eq!((connect.count, connect.p50, connect.max), (8, 0.001, 0.002));
    assert_eq!(
        counts(&s.status),
        [("200", 4), ("201", 1), ("404", 1), ("503", 3)]
    );
    assert_eq!(counts(&s.errors), [("H10", 1), ("H12", 1), ("H13", 1)]);
    assert_eq!(
        s.error_codes[1].description.as_deref(),
        Some("Request timeout")
    );
    assert_eq!(s.dynos, 2);
    let web1 = &s.per_dyno[0];
    assert_eq!((web1.dyno.as_str(), web1.requests), ("web.1", 4));
    assert!(close(web1.busy_seconds, 30.15));
    assert!(close(web1.in_service_mean.unwrap(), 30.15 / 7.6));
    assert_eq!(
        (s.per_dyno[1].dyno.as_str(), s.per_dyno[1].requests),
        ("web.2", 4)
    );
    assert!(close(s.per_dyno[1].busy_seconds, 0.13));
    let routes: Vec<(&str, u64)> = s
        .routes
        .iter()
        .map(|r| (r.route.as_str(), r.count))
        .collect();
    assert_eq!(
        routes,
        [
            ("GET /users/:id", 4),
            ("GET /", 1),
            ("GET /search/hello world", 1),
            ("GET /users/:id/posts", 1),
            ("POST /upload", 1),
            ("POST /users", 1),
        ]
    );
    // GET /users/:id: 20, 30, 40, 30000 ms
    let users = s.routes[0].service.as_ref().unwrap();
    assert_eq!(
        (users.p50, users.p90, users.max, s.routes[0].errors),
        (0.03, 30.0, 30.0, 1)
    );
    assert!(close(users.mean, 30.09 / 4.0));
    assert!(s.routes[1].service.is_none(), "the H10 has no service time");
    // Series: 1 s intervals from the H12's start (06:16:24) to the last line (06:16:57).
    assert_eq!(s.interval_seconds, 1.0);
    assert_eq!(s.series.len(), 34);
    assert_eq!(s.series[0].start, "2014-01-09T06:16:24.000000+00:00");
    assert_eq!(s.series.iter().map(|p| p.requests).sum::<u64>(), 9);
    let busy: f64 = s.series.iter().map(|p| p.in_service).sum();
    assert!(
        (busy - 30.28).abs() < 1e-6,
        "requests in service add up to the service time: {busy}"
    );
    assert!(
        close(s.series[1].in_service, 1.0),
        "only the H12 in service at 06:16:25"
    );
    let at_52 = s
        .series
        .iter()
        .find(|p| p.start == "2014-01-09T06:16:52.000000+00:00")
        .unwrap();
    assert_eq!(
        at_52.requests, 2,
        "the out-of-order line counts where it belongs"
    );
    assert_eq!(
        s.in_service_peak,
        Some(s.series.iter().map(|p| p.in_service).fold(0.0, f64::max))
    );
}

#[test]
fn gzip_reads_as_the_plain_file() {
    let plain = summary("heroku.log");
    let gz = summary("heroku.log.gz");
    assert_eq!(
        (gz.read.requests, gz.read.malformed, gz.read.duplicates),
        (
            plain.read.requests,
            plain.read.malformed,
            plain.read.duplicates
        )
    );
    assert_eq!(gz.service, plain.service);
    assert_eq!(gz.series, plain.series);
}

#[test]
fn truncated_gzip_is_an_error_naming_the_file_and_lines_read() {
    let err = summary_with(&["truncated.log.gz"], Options::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("truncated.log.gz: truncated gzip file"),
        "{text}"
    );
    match err {
        LogError::Read { lines, .. } => assert!(lines > 0 && lines < 260, "{lines}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn crlf_line_ends() {
    let s = summary("heroku-crlf.log");
    assert_eq!((s.read.requests, s.read.malformed), (4, 0));
    assert_eq!(s.service.unwrap().max, 0.12);
    assert_eq!(counts(&s.status), [("200", 3), ("201", 1)]);
}

#[test]
fn legacy_2012_lines() {
    let s = summary("heroku-2012-legacy.log");
    assert_eq!(
        (s.read.requests, s.read.malformed, s.read.duplicates),
        (5, 0, 0),
        "identical whole-second lines are two requests"
    );
    assert_eq!(counts(&s.errors), [("H11", 1), ("H12", 1)]);
    let routes: Vec<(&str, u64)> = s
        .routes
        .iter()
        .map(|r| (r.route.as_str(), r.count))
        .collect();
    assert_eq!(
        routes,
        [
            ("GET /posts/:id", 2),
            ("GET /", 1),
            ("GET /api/v1/dependencies", 1),
            ("GET /reports", 1)
        ]
    );
    assert_eq!(
        counts(&s.hosts),
        [("myapp.herokuapp.com", 4), ("bundler-api.herokuapp.com", 1)]
    );
    let service = s.service.unwrap();
    assert_eq!((service.count, service.p50, service.max), (4, 0.14, 30.0));
}

#[test]
fn drain_framing_2013() {
    let s = summary("heroku-2013-drain.log");
    assert_eq!(
        (s.read.requests, s.read.other_lines, s.read.malformed),
        (3, 1, 0)
    );
    assert_eq!(counts(&s.errors), [("H13", 1)]);
    assert_eq!(s.first.as_deref(), Some("2013-04-23T01:07:19.030189+00:00"));
}

#[test]
fn router2_and_2020_lines() {
    let s = summary("heroku-2025-router2.log");
    assert_eq!(
        (s.read.requests, s.read.other_lines, s.read.malformed),
        (7, 2, 0)
    );
    assert_eq!(s.service.as_ref().unwrap().max, 38.264);
    assert!(s
        .routes
        .iter()
        .any(|r| r.route == "GET /api/Schlachter 1951/books"));
    let s = summary("heroku-2020.log");
    assert_eq!((s.read.requests, s.read.other_lines, s.dynos), (3, 1, 1));
    assert_eq!(s.hosts.0.len(), 3);
}

#[test]
fn host_filter() {
    let options = Options {
        read: ReadOptions {
            host: Some("www.123-bibel.de".into()),
            ..ReadOptions::default()
        },
        ..Options::default()
    };
    let s = summary_with(&["heroku-2025-router2.log", "heroku-2020.log"], options).unwrap();
    assert_eq!((s.read.requests, s.read.other_hosts), (7, 3));
    let options = Options {
        read: ReadOptions {
            host: Some("nope.example.com".into()),
            ..ReadOptions::default()
        },
        ..Options::default()
    };
    let err = summary_with(&["heroku-2020.log"], options)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("--host nope.example.com: no request to that host; hosts in the log: "),
        "{err}"
    );
    assert!(err.contains("stark-earth-43785.herokuapp.com"), "{err}");
}

#[test]
fn haproxy_log() {
    let s = summary("haproxy.log");
    assert_eq!(
        (s.read.requests, s.read.other_lines, s.read.malformed),
        (11, 1, 0)
    );
    // service (Ta - Tq - Tw - Tc): 0, 0, 1, 1, 1, 1, 5, 5, 69 ms; none where Tc is -1
    let service = s.service.unwrap();
    assert_eq!(
        (service.count, service.p50, service.p90, service.max),
        (9, 0.001, 0.069, 0.069)
    );
    assert_eq!(
        counts(&s.status),
        [("200", 2), ("404", 6), ("501", 1), ("503", 2)]
    );
    assert_eq!(counts(&s.errors), [("SC", 1), ("sQ", 1)]);
    assert_eq!(s.dynos, 3);
    assert_eq!(counts(&s.formats), [("haproxy", 11)]);
}

#[test]
fn nginx_combined_with_timings() {
    let s = summary("nginx.log");
    assert_eq!(
        (s.read.requests, s.read.duplicates, s.read.malformed),
        (7, 0, 0),
        "identical whole-second lines are two requests"
    );
    assert_eq!(s.first.as_deref(), Some("2014-01-09T06:16:50.000000+00:00"));
    assert_eq!(s.last.as_deref(), Some("2014-01-09T06:16:55.000000+00:00"));
    // upstream times 0.020, 0.040, 0.120, 60.000; "-" and plain combined have none
    let service = s.service.unwrap();
    assert_eq!(
        (service.count, service.p50, service.p90, service.max),
        (4, 0.04, 60.0, 60.0)
    );
    assert!(close(service.mean, 60.18 / 4.0));
    assert_eq!(counts(&s.status), [("200", 5), ("201", 1), ("504", 1)]);
    assert_eq!(s.dynos, 0);
}

#[test]
fn nginx_with_a_users_log_format() {
    let format = std::fs::read_to_string(fixture("nginx-upstream.format")).unwrap();
    let options = Options {
        read: ReadOptions {
            format: FormatChoice::Only(dynosim_logs::Format::Nginx),
            log_format: Some(format),
            ..ReadOptions::default()
        },
        ..Options::default()
    };
    let s = summary_with(&["nginx-upstream.log"], options).unwrap();
    assert_eq!((s.read.requests, s.read.duplicates), (2, 1));
    // urt - uct of the upstream that answered: 0.020 - 0.002, 0.060 - 0.001
    let service = s.service.unwrap();
    assert_eq!((service.p50, service.max), (0.018, 0.059));
    assert_eq!(s.dynos, 1);
    assert_eq!(s.per_dyno[0].dyno, "10.1.0.5:8080");
    assert_eq!(counts(&s.hosts), [("api.example.com", 2)]);
    // without the format, the default layout refuses every line, saying why
    let err = summary_with(&["nginx-upstream.log"], Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("no request read: 3 of 3 lines malformed ("),
        "{err}"
    );
}

#[test]
fn several_formats_in_one_run() {
    let s = summary_with(
        &["heroku.log", "haproxy.log", "nginx.log"],
        Options::default(),
    )
    .unwrap();
    assert_eq!(s.read.requests, 9 + 11 + 7);
    assert_eq!(
        counts(&s.formats),
        [("heroku", 9), ("haproxy", 11), ("nginx", 7)]
    );
    assert_eq!(
        s.read.files.iter().map(|f| f.requests).collect::<Vec<_>>(),
        [9, 11, 7]
    );
}

#[test]
fn garbled_input_is_an_error_with_line_numbers() {
    let err = summary_with(&["garbled.log"], Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("no request read: 3 of 3 lines malformed ("),
        "{err}"
    );
    assert!(
        err.contains("garbled.log:1: not a Heroku router, HAProxy or nginx line"),
        "{err}"
    );
    assert!(err.contains("garbled.log:2:"), "{err}");
}

#[test]
fn unreadable_inputs_name_the_file() {
    let err = summary_with(&["no-such.log"], Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("no-such.log: cannot read: No such file or directory"),
        "{err}"
    );
    let err = summarise(&[fixture("")], Options::default(), &|| false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a folder"), "{err}");
}

#[test]
fn a_forced_format_counts_other_formats_malformed() {
    let options = Options {
        read: ReadOptions {
            format: FormatChoice::Only(dynosim_logs::Format::Heroku),
            ..ReadOptions::default()
        },
        ..Options::default()
    };
    let s = summary_with(&["heroku.log", "nginx.log"], options).unwrap();
    assert_eq!((s.read.requests, s.read.malformed), (9, 1 + 7));
    assert_eq!(s.read.malformed_lines.len(), 5, "the first five are kept");
    assert_eq!(s.read.malformed_lines[1].reason, "not a Heroku log line");
}

#[test]
fn top_routes_pool_the_rest() {
    let options = Options {
        top_routes: 2,
        ..Options::default()
    };
    let s = summary_with(&["heroku.log"], options).unwrap();
    let routes: Vec<(&str, u64)> = s
        .routes
        .iter()
        .map(|r| (r.route.as_str(), r.count))
        .collect();
    assert_eq!(
        routes,
        [("GET /users/:id", 4), ("GET /", 1), ("(other)", 4)]
    );
    // the pooled routes' services: 10, 60, 120 ms (the H13 has none)
    assert_eq!(s.routes[2].service.as_ref().unwrap().count, 3);
    assert_eq!(s.routes_distinct, 6);
}

#[test]
fn a_given_interval() {
    let options = Options {
        interval: Some(10.0),
        ..Options::default()
    };
    let s = summary_with(&["heroku.log"], options).unwrap();
    assert_eq!(s.interval_seconds, 10.0);
    let starts: Vec<&str> = s.series.iter().map(|p| p.start.as_str()).collect();
    assert_eq!(
        starts,
        [
            "2014-01-09T06:16:20.000000+00:00",
            "2014-01-09T06:16:30.000000+00:00",
            "2014-01-09T06:16:40.000000+00:00",
            "2014-01-09T06:16:50.000000+00:00"
        ]
    );
    assert_eq!(
        s.series.iter().map(|p| p.requests).collect::<Vec<_>>(),
        [0, 0, 0, 9]
    );
    assert!(close(s.series[3].rate_per_s, 0.9));
    // the H12 ran from 06:16:24 to 06:16:54: 6 s of the first interval
    assert!(close(s.series[0].in_service, 0.6));
    // a million intervals of 10 µs are 10 s, less than the log's 34 s
    let options = Options {
        interval: Some(1e-5),
        ..Options::default()
    };
    let err = summary_with(&["heroku.log"], options)
        .map(|s| s.read.requests)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("--interval: 0.00001 s is too fine for this log"),
        "{err}"
    );
}

#[test]
fn the_reader_hands_over_each_request_once_in_file_order() {
    // What fit and replay will build on: the same filtering as the summary, request by request.
    let mut reader = dynosim_logs::Reader::new(FormatChoice::Auto, None, None).unwrap();
    let mut seen: Vec<dynosim_logs::OwnedRequest> = Vec::new();
    reader
        .read_paths(
            &[fixture("heroku.log")],
            &|| false,
            &mut |r: &dynosim_logs::Request<'_>| {
                seen.push(r.to_owned());
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(
        (
            reader.lines(),
            reader.malformed(),
            reader.duplicates,
            reader.other_lines
        ),
        (13, 1, 1, 2)
    );
    let routes: Vec<&str> = seen.iter().map(|r| r.route.as_str()).collect();
    assert_eq!(
        routes,
        [
            "/users/:id",
            "/users/:id",
            "/users",
            "/users/:id/posts",
            "/users/:id",
            "/",
            "/upload",
            "/search/hello world",
            "/users/:id"
        ]
    );
    let h12 = &seen[4];
    assert_eq!(
        (h12.error.as_deref(), h12.service, h12.dyno.as_str()),
        (Some("H12"), Some(30.0), "web.1")
    );
    assert!(
        close(h12.time, 1_389_248_214.0),
        "06:16:54, the end of the request"
    );
    assert_eq!(seen[2].path, "/users", "the path as logged");
    assert_eq!(seen[1].path, "/users/7?tab=posts");
}

#[test]
fn summary_fit_and_trace_report_the_reading_alike_and_first() {
    // One "what was read" for the three commands: the same figures, as the first keys of each
    // one's JSON, in the same order.
    let paths = vec![fixture("heroku.log")];
    let summary = summarise(&paths, Options::default(), &|| false).unwrap();
    let fit =
        dynosim_logs::fit_data(&paths, dynosim_logs::FitOptions::default(), &|| false).unwrap();
    let mut out = Vec::new();
    let trace = dynosim_logs::build_trace(
        &paths,
        dynosim_logs::TraceOptions::default(),
        &mut out,
        &|| false,
    )
    .unwrap();
    assert_eq!(summary.read, fit.read);
    assert_eq!(summary.read, trace.read);
    assert_eq!(
        (
            summary.read.requests,
            summary.read.malformed,
            summary.read.duplicates
        ),
        (9, 1, 1)
    );
    // The top-level keys of a JSON object, in the order written.
    let first_keys = |text: String| -> Vec<String> {
        let (mut keys, mut depth, mut string, mut escaped) = (Vec::new(), 0, None, false);
        for (i, c) in text.char_indices() {
            match (string, c) {
                (Some(_), _) if escaped => escaped = false,
                (Some(_), '\\') => escaped = true,
                (Some(start), '"') => {
                    if depth == 1 && text[i + 1..].starts_with(':') {
                        keys.push(text[start..i].to_string());
                    }
                    string = None;
                }
                (Some(_), _) => {}
                (None, '"') => string = Some(i + 1),
                (None, '{' | '[') => depth += 1,
                (None, '}' | ']') => depth -= 1,
                (None, _) => {}
            }
        }
        keys.truncate(8);
        keys
    };
    let expected = [
        "files",
        "lines",
        "requests",
        "malformed",
        "malformed_lines",
        "duplicates",
        "other_lines",
        "other_hosts",
    ];
    for doc in [
        serde_json::to_string(&summary).unwrap(),
        serde_json::to_string(&fit).unwrap(),
        serde_json::to_string(&trace).unwrap(),
    ] {
        assert_eq!(first_keys(doc), expected);
    }
}
