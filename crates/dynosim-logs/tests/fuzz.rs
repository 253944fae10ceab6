//! Nothing a log holds makes the reader panic: random bytes, real lines cut anywhere, lines
//! with bytes flipped, in any order, through the parser and the whole summary.

use dynosim_logs::summary::{Options, Summariser};
use dynosim_logs::ReadOptions;
use dynosim_logs::{FormatChoice, Line, LogError, Parser};
use proptest::prelude::*;

fn fixture_lines() -> Vec<Vec<u8>> {
    let dir = format!("{}/../../tests/fixtures/logs", env!("CARGO_MANIFEST_DIR"));
    let mut lines = Vec::new();
    for name in [
        "heroku.log",
        "heroku-2012-legacy.log",
        "heroku-2013-drain.log",
        "heroku-2025-router2.log",
        "haproxy.log",
        "nginx.log",
        "nginx-upstream.log",
    ] {
        let text = std::fs::read(format!("{dir}/{name}")).unwrap();
        lines.extend(
            text.split(|c| *c == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    lines
}

/// A line to feed: a real one cut, with bytes changed, or random bytes.
fn mangled_line() -> impl Strategy<Value = Vec<u8>> {
    let lines = fixture_lines();
    let n = lines.len();
    prop_oneof![
        (0..n, any::<prop::sample::Index>()).prop_map({
            let lines = lines.clone();
            move |(i, cut)| {
                let l = &lines[i];
                l[..cut.index(l.len() + 1)].to_vec()
            }
        }),
        (
            0..n,
            prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)
        )
            .prop_map({
                let lines = lines.clone();
                move |(i, edits)| {
                    let mut l = lines[i].clone();
                    for (at, byte) in edits {
                        let k = at.index(l.len());
                        l[k] = byte;
                    }
                    l
                }
            }),
        prop::collection::vec(any::<u8>(), 0..300),
        // a real line with a field repeated or a value emptied
        (
            0..n,
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>()
        )
            .prop_map(move |(i, a, b)| {
                let l = &lines[i];
                let (x, y) = (a.index(l.len()), b.index(l.len()));
                let (x, y) = (x.min(y), x.max(y));
                [&l[..y], &l[x..]].concat()
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_never_panics(line in mangled_line(), format in 0..4usize) {
        let choice = ["auto", "heroku", "haproxy", "nginx"][format].parse::<FormatChoice>().unwrap();
        let mut parser = Parser::new(choice, None).unwrap();
        if let Ok(Line::Request(r, _)) = parser.parse(&line) {
            prop_assert!(r.time.is_finite());
            prop_assert!(r.service.map_or(true, |s| s.is_finite() && s >= 0.0));
            prop_assert!(r.connect.map_or(true, |s| s.is_finite() && s >= 0.0));
        }
    }

}

proptest! {
    // Fewer cases: each reads a little log whole; given intervals are long, as one short
    // enough for a million of them between two fixtures years apart costs seconds in debug.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_summary_never_panics(lines in prop::collection::vec(mangled_line(), 0..40), interval in prop::option::of(600.0f64..86_400.0)) {
        let mut text = Vec::new();
        for l in &lines {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        let mut s = Summariser::new(&Options { interval, ..Options::default() }).unwrap();
        let mut reader = ReadOptions::default().reader().unwrap();
        match reader.read("fuzz", &text[..], false, &|| false, &mut s) {
            Ok(()) => {}
            // garbled times far apart, for a given interval
            Err(LogError::Option { option, .. }) if option == "--interval" && interval.is_some() => return Ok(()),
            Err(e) => panic!("{e}"),
        }
        if let Ok(read) = reader.finish() {
            let summary = s.finish(read);
            // every line is exactly one of these
            prop_assert_eq!(
                summary.read.requests + summary.read.malformed + summary.read.duplicates + summary.read.other_lines + summary.read.other_hosts,
                summary.read.lines
            );
            prop_assert!(summary.read.lines >= lines.len() as u64);
            prop_assert_eq!(summary.series.iter().map(|p| p.requests).sum::<u64>(), summary.read.requests);
            prop_assert!(serde_json::to_string(&summary).is_ok());
        }
    }
}

#[test]
fn the_summary_does_not_depend_on_line_order() {
    let lines = fixture_lines();
    let read = |lines: &[Vec<u8>]| {
        let text: Vec<u8> = lines
            .iter()
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        let mut s = Summariser::new(&Options::default()).unwrap();
        let mut reader = ReadOptions::default().reader().unwrap();
        reader
            .read("x", &text[..], false, &|| false, &mut s)
            .unwrap();
        s.finish(reader.finish().unwrap())
    };
    let forward = read(&lines);
    let mut reversed = lines.clone();
    reversed.reverse();
    let backward = read(&reversed);
    assert_eq!(forward.read.requests, backward.read.requests);
    assert_eq!(forward.service, backward.service);
    assert_eq!(forward.status, backward.status);
    assert_eq!(forward.routes, backward.routes);
    assert_eq!(forward.first, backward.first);
    assert_eq!(forward.series.len(), backward.series.len());
    for (a, b) in forward.series.iter().zip(&backward.series) {
        assert_eq!((&a.start, a.requests), (&b.start, b.requests));
        assert!((a.in_service - b.in_service).abs() < 1e-6);
    }
}
