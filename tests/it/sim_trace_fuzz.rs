//! The simulator's trace reader (CSV with a header, or JSON Lines) under arbitrary and
//! mutated files: a bad file is an error naming its lines, never a panic, and every event it
//! reads has finite, in-range figures (positive durations, prices of 0 or more, rates that are
//! finite and not negative, positive checkpoint intervals), in time order.

use proptest::prelude::*;
use trainscaler::core::sim::trace::TraceEvent;
use trainscaler::sim::files::read_trace;

use crate::mutation::{apply, edits, number_edits, replace_number};

/// The first rows of the seed scenario's trace (an interruption rate, then jobs).
fn csv_rows() -> String {
    include_str!("../../examples/seed-scenario/trace.csv")
        .lines()
        .take(10)
        .collect::<Vec<_>>()
        .join("\n")
}

const JSONL: &str = r#"{"at": "2026-11-01T00:00:00Z", "kind": "spot_price", "instance_type": "g4dn.12xlarge", "zone": "us-east-1a", "price": 1.25}
{"at": "2026-11-01T01:00:00Z", "kind": "job", "id": "j1", "gpus": 4, "duration_sec": 3600, "checkpoint_interval_sec": 600, "priority": 2}
{"at": "2026-11-01T02:00:00Z", "kind": "interruption", "instance_type": "g4dn.12xlarge", "count": 2}
{"at": "2026-11-01T03:00:00Z", "kind": "capacity_error", "instance_type": "g5.12xlarge", "market": "spot", "duration_sec": 900}
{"at": "2026-11-01T04:00:00Z", "kind": "interruption_rate", "rate_per_hour": 0.01, "seed": 3}
"#;

fn check_file(bytes: &[u8], jsonl: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir
        .path()
        .join(if jsonl { "trace.jsonl" } else { "trace.csv" });
    std::fs::write(&path, bytes).expect("write the trace");
    let Ok(trace) = read_trace(&path) else {
        return Ok(());
    };
    for e in trace.events() {
        match e {
            TraceEvent::Job(j) => {
                prop_assert!(j.duration_ms > 0, "{j:?}");
                prop_assert!(j.checkpoint_interval_ms.is_none_or(|c| c > 0), "{j:?}");
            }
            // A spot price of 0 is allowed (the trace format says "0 or more").
            TraceEvent::SpotPrice { price, .. } => {
                prop_assert!(price.is_finite() && *price >= 0.0, "{e:?}");
            }
            TraceEvent::InterruptionRate { rate_per_hour, .. } => {
                prop_assert!(rate_per_hour.is_finite() && *rate_per_hour >= 0.0, "{e:?}");
            }
            TraceEvent::CapacityError { duration_ms, .. } => {
                prop_assert!(*duration_ms > 0, "{e:?}");
            }
            TraceEvent::Interruption { .. } => {}
        }
    }
    // Sorted by time, as the replay expects.
    for pair in trace.events().windows(2) {
        prop_assert!(pair[0].at_ms() <= pair[1].at_ms());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300), jsonl in any::<bool>()) {
        check_file(&bytes, jsonl)?;
    }

    #[test]
    fn mutated_traces_never_panic(e in edits(5), jsonl in any::<bool>()) {
        let base = if jsonl { JSONL.to_string() } else { csv_rows() };
        check_file(&apply(base.as_bytes(), &e), jsonl)?;
    }
}

/// Every number of both fixtures swapped, one at a time, for each edge token: all of them.
#[test]
fn edge_numbers_are_rejected_or_in_range() {
    let mut failures = Vec::new();
    for (base, jsonl) in [(JSONL.to_string(), true), (csv_rows(), false)] {
        for (nth, token) in number_edits(&base) {
            if let Err(e) = check_file(replace_number(&base, nth, token).as_bytes(), jsonl) {
                failures.push(format!("jsonl={jsonl}: number {nth} as token {token}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_fixtures_read() {
    for (text, jsonl) in [(csv_rows(), false), (JSONL.to_string(), true)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(if jsonl { "t.jsonl" } else { "t.csv" });
        std::fs::write(&path, &text).unwrap();
        let trace = read_trace(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(trace.events().len() >= 5, "{text}");
    }
}
