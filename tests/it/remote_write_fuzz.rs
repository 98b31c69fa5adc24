//! Prometheus remote-write decoding under arbitrary and mutated input: snappy and protobuf
//! errors are errors, never panics or huge allocations, and every mapped sample is finite with
//! a known name. Over HTTP, mutated bodies get a success or a 4xx problem, never a 5xx.

use proptest::prelude::*;
use prost::Message;
use trainscaler::ingest::remote_write::{
    self, Label, LabelMapping, SAMPLE_NAMES, Sample, TimeSeries, WriteRequest,
};

use crate::common::{Backend, TestApp};
use crate::http_pools::{create_pool, t4_policy};
use crate::mutation::{apply, edits, post_each, samples};

/// A real payload, encoded by Python's protobuf and cramjam (not by our code).
const PAYLOAD: &[u8] = include_bytes!("../fixtures/remote_write/dcgm.snappy");
const LIMIT: usize = 1 << 20;

fn check_mapped(req: &WriteRequest) -> Result<(), TestCaseError> {
    if let Ok(mapped) = remote_write::map_series(req, &LabelMapping::default()) {
        prop_assert_eq!(mapped.series_total, req.timeseries.len());
        prop_assert!(
            mapped.series_skipped_no_pool + mapped.series_skipped_unknown_metric
                <= mapped.series_total
        );
        for s in &mapped.samples {
            prop_assert!(s.value.is_finite(), "{s:?}");
            prop_assert!(s.at_ms > 0, "{s:?}");
            prop_assert!(SAMPLE_NAMES.contains(&s.name), "{s:?}");
            prop_assert!(!s.pool.is_empty(), "{s:?}");
        }
        // Unique and sorted by key, as documented.
        for pair in mapped.samples.windows(2) {
            let key = |s: &remote_write::MappedSample| {
                (s.pool.clone(), s.worker.clone(), s.name, s.at_ms)
            };
            prop_assert!(key(&pair[0]) < key(&pair[1]));
        }
    }
    Ok(())
}

fn decode_and_map(body: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(req) = remote_write::decode(body, LIMIT) {
        check_mapped(&req)?;
    }
    Ok(())
}

fn fixture_protobuf() -> Vec<u8> {
    snap::raw::Decoder::new()
        .decompress_vec(PAYLOAD)
        .expect("the fixture is snappy")
}

/// Values that are legal IEEE doubles but hard on arithmetic.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::MAX),
        Just(-f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(f64::from_bits(0x7ff0_0000_0000_0002)),
        -1e3..1e3f64,
    ]
}

fn series() -> impl Strategy<Value = TimeSeries> {
    let metric = prop::sample::select(vec![
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "trainscaler_queue_depth",
        "trainscaler_running_jobs",
        "trainscaler_bogus",
        "up",
    ]);
    let pool = prop::sample::select(vec!["", "p1", "p2"]);
    let worker = prop::option::of(prop::sample::select(vec!["w1", "w2"]));
    let sample = (
        value(),
        prop_oneof![Just(1_700_000_000_000i64), any::<i64>()],
    )
        .prop_map(|(value, timestamp)| Sample { value, timestamp });
    (metric, pool, worker, prop::collection::vec(sample, 0..4)).prop_map(
        |(metric, pool, worker, samples)| {
            let mut labels = vec![
                Label {
                    name: "__name__".into(),
                    value: metric.into(),
                },
                Label {
                    name: "pool".into(),
                    value: pool.into(),
                },
            ];
            if let Some(w) = worker {
                labels.push(Label {
                    name: "Hostname".into(),
                    value: w.into(),
                });
            }
            TimeSeries { labels, samples }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        decode_and_map(&bytes)?;
    }

    /// Arbitrary bytes compressed properly: past snappy, straight into the protobuf decoder.
    #[test]
    fn arbitrary_protobuf_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let body = snap::raw::Encoder::new().compress_vec(&bytes).expect("compress");
        decode_and_map(&body)?;
    }

    #[test]
    fn mutated_compressed_fixture_never_panics(e in edits(4)) {
        decode_and_map(&apply(PAYLOAD, &e))?;
    }

    /// The fixture's protobuf mutated, then compressed again, so the edits reach field tags,
    /// lengths and doubles rather than failing the snappy checks.
    #[test]
    fn mutated_protobuf_never_panics(e in edits(4)) {
        let raw = apply(&fixture_protobuf(), &e);
        let body = snap::raw::Encoder::new().compress_vec(&raw).expect("compress");
        decode_and_map(&body)?;
    }

    /// Well-formed requests with extreme values: means of huge values stay finite, and
    /// infinities and NaNs other than the staleness marker are refused.
    #[test]
    fn extreme_values_map_to_finite_samples(ts in prop::collection::vec(series(), 0..6)) {
        let req = WriteRequest { timeseries: ts };
        let body = snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).expect("compress");
        decode_and_map(&body)?;
    }
}

#[test]
fn the_mean_of_two_huge_utilizations_is_finite() {
    let gpu = |gpu: &str, value: f64| TimeSeries {
        labels: vec![
            Label {
                name: "__name__".into(),
                value: "DCGM_FI_DEV_GPU_UTIL".into(),
            },
            Label {
                name: "pool".into(),
                value: "p".into(),
            },
            Label {
                name: "Hostname".into(),
                value: "w".into(),
            },
            Label {
                name: "gpu".into(),
                value: gpu.into(),
            },
        ],
        samples: vec![Sample {
            value,
            timestamp: 1_700_000_000_000,
        }],
    };
    let req = WriteRequest {
        timeseries: vec![gpu("0", f64::MAX), gpu("1", f64::MAX), gpu("2", 0.0)],
    };
    let mapped = remote_write::map_series(&req, &LabelMapping::default()).expect("finite input");
    let value = mapped.samples[0].value;
    // (2 × MAX + 0) / 3 / 100, computed without passing through 2 × MAX.
    let expected = f64::MAX / 3.0 * 2.0 / 100.0;
    assert!(value.is_finite(), "{value}");
    assert!(
        (value - expected).abs() <= expected * 1e-12,
        "{value} vs {expected}"
    );
}

/// Mutated bodies over HTTP, for a pool that exists: a success or a 4xx problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_bodies_get_a_4xx_problem_never_a_5xx() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    create_pool(&app, "a100-train", &t4_policy()).await;
    let raw = fixture_protobuf();
    let bodies = samples((edits(3), any::<bool>()), 40)
        .into_iter()
        .map(|(e, recompress)| {
            if recompress {
                snap::raw::Encoder::new()
                    .compress_vec(&apply(&raw, &e))
                    .expect("compress")
            } else {
                apply(PAYLOAD, &e)
            }
        });
    let protobuf = [
        ("content-type", "application/x-protobuf"),
        ("content-encoding", "snappy"),
    ];
    let rejected = post_each(&app, "/v1/webhooks/prometheus", &protobuf, bodies).await;
    assert!(rejected > 0, "no mutated body was rejected");
}
