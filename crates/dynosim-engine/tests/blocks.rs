//! A run split into blocks of replications (issue #28: a Dask task per block) and assembled
//! gives the report `run` gives, to the last bit: the summary, every replication's figures,
//! the per-dyno utilisation, the engine's name. (That the blocks' numbers travel exactly,
//! through Python's JSON reader, is tests/test_distributed.py's.)

mod common;

use common::{build, run_ok, scenario_json};
use dynosim_engine::report::{assemble, run_block, Gathered};
use serde_json::{json, Value};

fn never() -> bool {
    false
}

/// The report of `scenario_json` assembled from blocks of the given sizes, as JSON values
/// (`wall_seconds` zeroed), beside `run`'s.
fn split_and_whole(json: &str, sizes: &[u64]) -> (Value, Value) {
    let scenario = build(json);
    let mut whole = serde_json::to_value(run_ok(&scenario)).unwrap();
    whole["wall_seconds"] = json!(0.0);
    let (mut trees, mut per_dyno, mut engines) = (Vec::new(), Vec::new(), Vec::new());
    let mut first = 0;
    for &size in sizes {
        let block = run_block(&scenario, first, size, &never).unwrap();
        assert_eq!(block.first, first);
        // As values: how the numbers travel exactly (Python's json) is the Python side's.
        trees.extend(
            block
                .results
                .iter()
                .map(|r| serde_json::to_value(r).unwrap()),
        );
        per_dyno.extend(block.per_dyno.iter().cloned());
        engines.extend(block.engines.iter().map(|e| e.to_string()));
        first += size;
    }
    let gathered = Gathered {
        trees: &trees,
        per_dyno: &per_dyno,
        engines: &engines,
    };
    let mut split = serde_json::to_value(assemble(&scenario, gathered).unwrap()).unwrap();
    split["wall_seconds"] = json!(0.0);
    (split, whole)
}

fn exponential(mean: f64) -> Value {
    json!({"distribution": "exponential", "mean": mean})
}

#[test]
fn blocks_of_a_direct_run_assemble_into_the_run() {
    let json = scenario_json(
        80.0,
        exponential(0.1),
        10,
        1,
        json!({"policy": "random"}),
        (60.0, 5.0, 5, 42),
    );
    let (split, whole) = split_and_whole(&json, &[2, 1, 2]);
    assert_eq!(whole["engine"], "direct");
    assert!(
        whole["summary"]["utilisation"]["per_dyno"]
            .as_array()
            .unwrap()
            .len()
            == 10
    );
    assert_eq!(split, whole);
}

#[test]
fn blocks_of_an_event_run_assemble_into_the_run() {
    let mut doc: Value = serde_json::from_str(&scenario_json(
        60.0,
        exponential(0.1),
        8,
        1,
        json!({"policy": "intelligent"}),
        (60.0, 5.0, 4, 7),
    ))
    .unwrap();
    doc["run"]["engine"] = json!("events");
    let json = doc.to_string();
    let (split, whole) = split_and_whole(&json, &[1, 3]);
    assert_eq!(whole["engine"], "events");
    assert_eq!(split, whole);
    let (split, whole) = split_and_whole(&json, &[4]);
    assert_eq!(split, whole);
}

#[test]
fn blocks_that_miss_replications_are_refused() {
    let scenario = build(&scenario_json(
        60.0,
        exponential(0.1),
        8,
        1,
        json!({"policy": "random"}),
        (10.0, 1.0, 3, 7),
    ));
    let block = run_block(&scenario, 0, 2, &never).unwrap();
    let trees: Vec<Value> = block
        .results
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let engines: Vec<String> = block.engines.iter().map(|e| e.to_string()).collect();
    let gathered = Gathered {
        trees: &trees,
        per_dyno: &block.per_dyno,
        engines: &engines,
    };
    let error = assemble(&scenario, gathered).unwrap_err().to_string();
    assert!(
        error.contains("2 replications") && error.contains("3"),
        "{error}"
    );
}
