//! Prometheus remote-write 1.0 bodies, decoded and mapped onto trainscaler's samples.
//!
//! A Prometheus server or agent with a `remote_write` section pointing at us POSTs batches of
//! everything it scrapes: a snappy *block*-compressed (not framed) protobuf `WriteRequest`, sent
//! with the headers in [`CONTENT_ENCODING`], [`CONTENT_TYPE`] and [`VERSION_HEADER`]. [`decode`]
//! turns such a body into a [`WriteRequest`]; [`map_series`] keeps the few series we understand
//! and reduces them to one [`MappedSample`] per (pool, worker, name, timestamp). HTTP, header
//! checks and storing the samples belong to the caller.
//!
//! # Which series become which samples
//!
//! | source metric                     | sample                | value                 |
//! | --------------------------------- | --------------------- | --------------------- |
//! | `trainscaler_<name>`              | `<name>`              | as is                 |
//! | `DCGM_FI_DEV_GPU_UTIL`            | `gpu_utilization`     | percent ÷ 100         |
//! | `DCGM_FI_PROF_GR_ENGINE_ACTIVE`   | `gpu_utilization`     | ratio, as is          |
//! | `DCGM_FI_DEV_FB_USED`             | `gpu_memory_used_gib` | MiB ÷ 1024            |
//!
//! where `<name>` is one of [`SAMPLE_NAMES`]. Every other metric is counted in
//! [`Mapped::series_skipped_unknown_metric`]: Prometheus forwards all it has, so an unknown
//! metric is normal, not an error. A series without the pool label (or with it empty, which
//! Prometheus treats as absent) is counted in [`Mapped::series_skipped_no_pool`]. A series that
//! is both is counted once, as an unknown metric.
//!
//! The worker is the [`LabelMapping::worker_label`] (dcgm-exporter's `Hostname`); for GPU
//! samples the [`LabelMapping::worker_fallback_labels`] stand in when it is missing. Pool-level
//! samples (queue depth, pending and running jobs) do not consult the fallbacks: Prometheus
//! adds `instance` to every scraped series, so the fallbacks would turn a pool's queue depth
//! into the queue depth of whichever exporter happened to report it.
//!
//! # Several series, one sample
//!
//! dcgm-exporter reports one series per GPU, while a sample is keyed by (pool, worker, name,
//! timestamp). Values sharing a key are combined: the mean for `gpu_utilization` (how busy the
//! worker is), the maximum for `gpu_memory_used_gib` (the fullest GPU is the one about to run
//! out of memory), and the maximum for the job counts (the same count arriving twice, from a
//! pair of HA Prometheus servers or two scrape jobs, must not be added up; an exporter that
//! shards a queue should give each shard its own worker label).
//!
//! When different source metrics describe the same key, only the most trusted one is used,
//! never a blend of two different measures: a `trainscaler_*` gauge (someone exported it for
//! us on purpose) over `DCGM_FI_DEV_GPU_UTIL` over `DCGM_FI_PROF_GR_ENGINE_ACTIVE`. The
//! device-level utilisation wins over the profiling one although the latter is finer because
//! every GPU dcgm-exporter supports reports it by default, while profiling metrics exist only
//! on data-centre GPUs: preferring it keeps a mixed fleet on one measure. Hosts that report
//! only the profiling metric still get a utilisation from it.
//!
//! # Rejected samples
//!
//! Within a series we map, a non-finite value or a timestamp at or before the epoch fails the
//! whole request with [`RemoteWriteError::BadSample`]. Prometheus' staleness marker (a NaN with
//! a particular bit pattern, sent when a series disappears) is skipped silently. Series we do
//! not map are not inspected: summaries legitimately carry NaN quantiles, and rejecting them
//! would refuse every batch from an ordinary Prometheus.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use prost::Message;

/// `Content-Encoding` of a remote-write body.
pub const CONTENT_ENCODING: &str = "snappy";
/// `Content-Type` of a remote-write body.
pub const CONTENT_TYPE: &str = "application/x-protobuf";
/// Header in which senders state the protocol version.
pub const VERSION_HEADER: &str = "X-Prometheus-Remote-Write-Version";
/// The protocol version this module speaks.
pub const VERSION: &str = "0.1.0";

pub use crate::core::idle::names::{
    GPU_MEMORY_USED_GIB, GPU_UTILIZATION, PENDING_JOBS, QUEUE_DEPTH, RUNNING_JOBS,
};
/// Every sample name [`map_series`] produces.
pub const SAMPLE_NAMES: [&str; 5] = [
    QUEUE_DEPTH,
    PENDING_JOBS,
    RUNNING_JOBS,
    GPU_UTILIZATION,
    GPU_MEMORY_USED_GIB,
];

/// The label holding a series' metric name.
const METRIC_NAME_LABEL: &str = "__name__";

/// Prometheus' staleness marker: a NaN payload no arithmetic produces, so it cannot be
/// confused with a NaN an exporter computed.
const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// `prometheus.WriteRequest`. Field 3 (metadata) is left undeclared so prost skips it.
#[derive(Clone, PartialEq, Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`. Exemplars (3) and native histograms (4) are skipped: nothing we
/// map is a histogram, and undeclared fields cost no allocation.
#[derive(Clone, PartialEq, Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// Which labels name the pool and the worker of a series.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct LabelMapping {
    /// Label naming the pool; series without it are skipped.
    pub pool_label: String,
    /// Label naming the worker; `Hostname` is what dcgm-exporter sets.
    pub worker_label: String,
    /// Labels tried in order, first present wins, when a GPU series lacks `worker_label`.
    pub worker_fallback_labels: Vec<String>,
}

impl Default for LabelMapping {
    fn default() -> Self {
        Self {
            pool_label: "pool".to_owned(),
            worker_label: "Hostname".to_owned(),
            worker_fallback_labels: vec![
                "instance_id".to_owned(),
                "node".to_owned(),
                "instance".to_owned(),
            ],
        }
    }
}

/// One value of one of our metrics, in our units.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedSample {
    pub pool: String,
    /// `None` for pool-level values and for GPU series that carry no worker label at all.
    pub worker: Option<String>,
    /// One of [`SAMPLE_NAMES`].
    pub name: &'static str,
    pub value: f64,
    /// Milliseconds since the Unix epoch, as the sender stamped it.
    pub at_ms: i64,
}

/// What [`map_series`] made of a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapped {
    /// Unique by (pool, worker, name, at_ms) and sorted by it.
    pub samples: Vec<MappedSample>,
    /// Series in the request, mapped or not.
    pub series_total: usize,
    pub series_skipped_no_pool: usize,
    pub series_skipped_unknown_metric: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteWriteError {
    #[error("body is not snappy block-compressed: {0}")]
    Snappy(#[from] snap::Error),
    #[error("body decompresses to {decompressed} bytes, over the limit of {limit}")]
    TooLarge { decompressed: usize, limit: usize },
    #[error("body is not a remote-write WriteRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("series {series}: {problem}")]
    BadSample { series: usize, problem: String },
}

/// Decompresses and parses a remote-write body.
///
/// The size the body claims to decompress to is checked against `max_decompressed_bytes`
/// before anything is allocated, so a small body cannot make us reserve gigabytes. Parsed
/// messages take more memory than their encoding (an empty label is 2 bytes on the wire and
/// two `String`s in memory), so budget a few dozen times the limit for the result.
pub fn decode(
    body: &[u8],
    max_decompressed_bytes: usize,
) -> Result<WriteRequest, RemoteWriteError> {
    let claimed = snap::raw::decompress_len(body)?;
    if claimed > max_decompressed_bytes {
        return Err(RemoteWriteError::TooLarge {
            decompressed: claimed,
            limit: max_decompressed_bytes,
        });
    }
    let raw = snap::raw::Decoder::new().decompress_vec(body)?;
    Ok(WriteRequest::decode(raw.as_slice())?)
}

/// How a source metric becomes one of our samples.
#[derive(Debug, Clone, Copy)]
struct Rule {
    name: &'static str,
    /// The source value is divided by this to get our unit.
    divisor: f64,
    /// Lower is more trusted; see the module documentation.
    rank: u8,
    /// Whether the worker fallback labels apply (GPU samples) or not (pool-level samples).
    per_worker: bool,
}

fn rule_for(metric: &str) -> Option<Rule> {
    let rule = |name, divisor, rank, per_worker| Rule {
        name,
        divisor,
        rank,
        per_worker,
    };
    Some(match metric {
        "trainscaler_queue_depth" => rule(QUEUE_DEPTH, 1.0, 0, false),
        "trainscaler_pending_jobs" => rule(PENDING_JOBS, 1.0, 0, false),
        "trainscaler_running_jobs" => rule(RUNNING_JOBS, 1.0, 0, false),
        "trainscaler_gpu_utilization" => rule(GPU_UTILIZATION, 1.0, 0, true),
        "trainscaler_gpu_memory_used_gib" => rule(GPU_MEMORY_USED_GIB, 1.0, 0, true),
        "DCGM_FI_DEV_GPU_UTIL" => rule(GPU_UTILIZATION, 100.0, 1, true),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => rule(GPU_UTILIZATION, 1.0, 2, true),
        "DCGM_FI_DEV_FB_USED" => rule(GPU_MEMORY_USED_GIB, 1024.0, 1, true),
        _ => return None,
    })
}

/// Utilisation is averaged over a worker's GPUs; everything else takes the largest value.
fn is_averaged(name: &str) -> bool {
    name == GPU_UTILIZATION
}

/// A label's value; empty counts as absent, as it does in Prometheus.
fn label<'a>(series: &'a TimeSeries, name: &str) -> Option<&'a str> {
    series
        .labels
        .iter()
        .find(|l| l.name == name)
        .map(|l| l.value.as_str())
        .filter(|v| !v.is_empty())
}

fn worker_of<'a>(series: &'a TimeSeries, mapping: &LabelMapping, rule: Rule) -> Option<&'a str> {
    label(series, &mapping.worker_label).or_else(|| {
        if !rule.per_worker {
            return None;
        }
        mapping
            .worker_fallback_labels
            .iter()
            .find_map(|l| label(series, l))
    })
}

/// Values gathered for one key, from the most trusted source seen so far.
struct Combined {
    rank: u8,
    mean: f64,
    max: f64,
    count: usize,
}

impl Combined {
    fn new(rank: u8, value: f64) -> Self {
        Self {
            rank,
            mean: value,
            max: value,
            count: 1,
        }
    }

    fn add(&mut self, rank: u8, value: f64) {
        match rank.cmp(&self.rank) {
            Ordering::Less => *self = Self::new(rank, value),
            Ordering::Equal => {
                self.count += 1;
                // A running mean rather than a sum: two finite values near f64::MAX add up
                // to infinity, while this stays between the smallest and largest value seen.
                let n = self.count as f64;
                self.mean = self.mean - self.mean / n + value / n;
                self.max = self.max.max(value);
            }
            Ordering::Greater => {}
        }
    }
}

type Key = (String, Option<String>, &'static str, i64);

/// Keeps the series we understand and reduces them to unique samples; see the module
/// documentation for the rules.
pub fn map_series(req: &WriteRequest, mapping: &LabelMapping) -> Result<Mapped, RemoteWriteError> {
    let mut mapped = Mapped {
        series_total: req.timeseries.len(),
        ..Mapped::default()
    };
    // A BTreeMap both merges equal keys and yields them in the documented order.
    let mut combined: BTreeMap<Key, Combined> = BTreeMap::new();

    for (index, series) in req.timeseries.iter().enumerate() {
        let Some((metric, rule)) =
            label(series, METRIC_NAME_LABEL).and_then(|m| Some((m, rule_for(m)?)))
        else {
            mapped.series_skipped_unknown_metric += 1;
            continue;
        };
        let Some(pool) = label(series, &mapping.pool_label) else {
            mapped.series_skipped_no_pool += 1;
            continue;
        };
        let worker = worker_of(series, mapping, rule);

        for sample in &series.samples {
            if sample.value.to_bits() == STALE_NAN_BITS {
                continue;
            }
            if !sample.value.is_finite() {
                return Err(RemoteWriteError::BadSample {
                    series: index,
                    problem: format!(
                        "{metric} has the non-finite value {} at {}",
                        sample.value, sample.timestamp
                    ),
                });
            }
            if sample.timestamp <= 0 {
                return Err(RemoteWriteError::BadSample {
                    series: index,
                    problem: format!(
                        "{metric} has the timestamp {} (milliseconds since the epoch expected)",
                        sample.timestamp
                    ),
                });
            }
            let value = sample.value / rule.divisor;
            let key = (
                pool.to_owned(),
                worker.map(str::to_owned),
                rule.name,
                sample.timestamp,
            );
            combined
                .entry(key)
                .and_modify(|c| c.add(rule.rank, value))
                .or_insert_with(|| Combined::new(rule.rank, value));
        }
    }

    mapped.samples = combined
        .into_iter()
        .map(|((pool, worker, name, at_ms), c)| MappedSample {
            value: if is_averaged(name) { c.mean } else { c.max },
            pool,
            worker,
            name,
            at_ms,
        })
        .collect();
    Ok(mapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encoded by scripts/make_remote_write_fixture.py with Google's protobuf and cramjam's
    /// snappy, so our decoder is checked against encoders we did not write.
    const FIXTURE: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/remote_write/dcgm.snappy"
    ));
    const FIXTURE_EXPECTED: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/remote_write/dcgm.expected.json"
    ));

    #[derive(serde::Deserialize)]
    struct Expected {
        series_total: usize,
        series_skipped_no_pool: usize,
        series_skipped_unknown_metric: usize,
        samples: Vec<ExpectedSample>,
    }

    #[derive(serde::Deserialize)]
    struct ExpectedSample {
        pool: String,
        worker: Option<String>,
        name: String,
        at_ms: i64,
        value: f64,
    }

    fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
        TimeSeries {
            labels: labels
                .iter()
                .map(|(name, value)| Label {
                    name: (*name).to_owned(),
                    value: (*value).to_owned(),
                })
                .collect(),
            samples: samples
                .iter()
                .map(|&(value, timestamp)| Sample { value, timestamp })
                .collect(),
        }
    }

    fn request(timeseries: Vec<TimeSeries>) -> WriteRequest {
        WriteRequest { timeseries }
    }

    fn map(timeseries: Vec<TimeSeries>) -> Result<Mapped, RemoteWriteError> {
        map_series(&request(timeseries), &LabelMapping::default())
    }

    fn rows(mapped: &Mapped) -> Vec<(&str, Option<&str>, &str, i64, f64)> {
        mapped
            .samples
            .iter()
            .map(|s| {
                (
                    s.pool.as_str(),
                    s.worker.as_deref(),
                    s.name,
                    s.at_ms,
                    s.value,
                )
            })
            .collect()
    }

    const T: i64 = 1_767_225_600_000;

    #[test]
    fn fixture_from_independent_encoder_decodes_and_maps_as_expected() {
        let expected: Expected = serde_json::from_str(FIXTURE_EXPECTED).unwrap();
        let req = decode(FIXTURE, 1 << 20).unwrap();
        let mapped = map_series(&req, &LabelMapping::default()).unwrap();

        assert_eq!(mapped.series_total, expected.series_total);
        assert_eq!(
            mapped.series_skipped_no_pool,
            expected.series_skipped_no_pool
        );
        assert_eq!(
            mapped.series_skipped_unknown_metric,
            expected.series_skipped_unknown_metric
        );
        assert_eq!(mapped.samples.len(), expected.samples.len(), "{mapped:#?}");
        for (got, want) in mapped.samples.iter().zip(&expected.samples) {
            assert_eq!(
                (&got.pool, &got.worker, got.name, got.at_ms),
                (&want.pool, &want.worker, want.name.as_str(), want.at_ms)
            );
            assert!(
                (got.value - want.value).abs() <= 1e-12 * want.value.abs().max(1.0),
                "{got:?} != {}",
                want.value
            );
        }
    }

    #[test]
    fn corrupt_snappy_is_a_snappy_error() {
        // Claims 10 bytes, then a copy referring back before the start of the output.
        let body = [0x0a, 0x05, 0xff, 0xff];
        assert!(matches!(
            decode(&body, 1 << 20),
            Err(RemoteWriteError::Snappy(_))
        ));
        assert!(matches!(
            decode(&[], 1 << 20),
            Err(RemoteWriteError::Snappy(_))
        ));
    }

    #[test]
    fn valid_snappy_of_garbage_is_a_protobuf_error() {
        // Field 1, length-delimited, claiming 100 bytes of which 3 follow.
        let garbage = [0x0a, 0x64, 0x01, 0x02, 0x03];
        let body = snap::raw::Encoder::new().compress_vec(&garbage).unwrap();
        assert!(matches!(
            decode(&body, 1 << 20),
            Err(RemoteWriteError::Protobuf(_))
        ));
    }

    #[test]
    fn oversized_body_is_refused_before_decompressing() {
        // A bare header claiming 3 GiB: decompressing would fail on the missing data (or
        // allocate 3 GiB first), so TooLarge shows the claim was checked before either.
        let claimed: usize = 3 << 30;
        let mut header = Vec::new();
        let mut n = claimed;
        while n >= 0x80 {
            header.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        header.push(n as u8);
        match decode(&header, 1 << 20) {
            Err(RemoteWriteError::TooLarge {
                decompressed,
                limit,
            }) => assert_eq!((decompressed, limit), (claimed, 1 << 20)),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn limit_applies_to_the_decompressed_size() {
        let raw = request(vec![series(
            &[("__name__", "trainscaler_queue_depth"), ("pool", "p")],
            &[(1.0, T); 64],
        )])
        .encode_to_vec();
        let body = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        assert!(body.len() < raw.len());
        assert!(matches!(
            decode(&body, raw.len() - 1),
            Err(RemoteWriteError::TooLarge { .. })
        ));
        assert_eq!(decode(&body, raw.len()).unwrap().timeseries.len(), 1);
    }

    #[test]
    fn nan_is_rejected_naming_the_series() {
        let err = map(vec![
            series(
                &[("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("pool", "p")],
                &[(50.0, T)],
            ),
            series(
                &[("__name__", "DCGM_FI_DEV_FB_USED"), ("pool", "p")],
                &[(1024.0, T), (f64::NAN, T + 1)],
            ),
        ])
        .unwrap_err();
        match err {
            RemoteWriteError::BadSample { series, problem } => {
                assert_eq!(series, 1);
                assert!(problem.contains("DCGM_FI_DEV_FB_USED"), "{problem}");
            }
            other => panic!("expected BadSample, got {other:?}"),
        }
        assert!(matches!(
            map(vec![series(
                &[("__name__", "trainscaler_queue_depth"), ("pool", "p")],
                &[(f64::INFINITY, T)],
            )]),
            Err(RemoteWriteError::BadSample { series: 0, .. })
        ));
    }

    #[test]
    fn timestamps_at_or_before_the_epoch_are_rejected() {
        for at in [0, -1] {
            assert!(matches!(
                map(vec![series(
                    &[("__name__", "trainscaler_queue_depth"), ("pool", "p")],
                    &[(1.0, at)],
                )]),
                Err(RemoteWriteError::BadSample { series: 0, .. })
            ));
        }
    }

    #[test]
    fn staleness_markers_are_skipped_silently() {
        let stale = f64::from_bits(STALE_NAN_BITS);
        let mapped = map(vec![series(
            &[
                ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
                ("pool", "p"),
                ("Hostname", "w"),
            ],
            &[(40.0, T), (stale, T + 15_000)],
        )])
        .unwrap();
        assert_eq!(rows(&mapped), [("p", Some("w"), GPU_UTILIZATION, T, 0.4)]);
        assert_eq!(mapped.series_skipped_no_pool, 0);
        assert_eq!(mapped.series_skipped_unknown_metric, 0);
    }

    #[test]
    fn unknown_series_are_counted_not_inspected() {
        let mapped = map(vec![
            // Summaries without observations report NaN quantiles; that is not our problem.
            series(
                &[("__name__", "rpc_duration_seconds"), ("pool", "p")],
                &[(f64::NAN, T)],
            ),
            series(&[("pool", "p")], &[(1.0, T)]),
        ])
        .unwrap();
        assert_eq!(mapped.series_total, 2);
        assert_eq!(mapped.series_skipped_unknown_metric, 2);
        assert!(mapped.samples.is_empty());
    }

    #[test]
    fn series_without_pool_are_counted_and_skipped() {
        let mapped = map(vec![
            series(
                &[("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("Hostname", "w")],
                &[(f64::NAN, T)],
            ),
            series(
                &[("__name__", "trainscaler_queue_depth"), ("pool", "")],
                &[(3.0, T)],
            ),
            series(
                &[("__name__", "trainscaler_queue_depth"), ("pool", "p")],
                &[(3.0, T)],
            ),
        ])
        .unwrap();
        assert_eq!(mapped.series_total, 3);
        assert_eq!(mapped.series_skipped_no_pool, 2);
        assert_eq!(mapped.series_skipped_unknown_metric, 0);
        assert_eq!(rows(&mapped), [("p", None, QUEUE_DEPTH, T, 3.0)]);
    }

    #[test]
    fn gpus_of_a_worker_are_averaged_for_utilisation_and_maxed_for_memory() {
        let gpu = |name, n, value| {
            series(
                &[
                    ("__name__", name),
                    ("pool", "p"),
                    ("Hostname", "w"),
                    ("gpu", n),
                ],
                &[(value, T)],
            )
        };
        let mapped = map(vec![
            gpu("DCGM_FI_DEV_GPU_UTIL", "0", 20.0),
            gpu("DCGM_FI_DEV_GPU_UTIL", "1", 60.0),
            gpu("DCGM_FI_DEV_FB_USED", "0", 2048.0),
            gpu("DCGM_FI_DEV_FB_USED", "1", 40960.0),
        ])
        .unwrap();
        assert_eq!(
            rows(&mapped),
            [
                ("p", Some("w"), GPU_MEMORY_USED_GIB, T, 40.0),
                ("p", Some("w"), GPU_UTILIZATION, T, 0.4),
            ]
        );
    }

    #[test]
    fn device_utilisation_wins_over_profiling_and_profiling_fills_in() {
        let mapped = map(vec![
            series(
                &[
                    ("__name__", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                    ("pool", "p"),
                    ("Hostname", "a"),
                ],
                &[(0.9, T), (0.7, T + 1)],
            ),
            series(
                &[
                    ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
                    ("pool", "p"),
                    ("Hostname", "a"),
                ],
                &[(50.0, T)],
            ),
            series(
                &[
                    ("__name__", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                    ("pool", "p"),
                    ("Hostname", "b"),
                ],
                &[(0.25, T)],
            ),
        ])
        .unwrap();
        assert_eq!(
            rows(&mapped),
            [
                ("p", Some("a"), GPU_UTILIZATION, T, 0.5),
                ("p", Some("a"), GPU_UTILIZATION, T + 1, 0.7),
                ("p", Some("b"), GPU_UTILIZATION, T, 0.25),
            ]
        );
    }

    #[test]
    fn our_own_gauges_win_over_dcgm() {
        let mapped = map(vec![
            series(
                &[
                    ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
                    ("pool", "p"),
                    ("Hostname", "w"),
                ],
                &[(10.0, T)],
            ),
            series(
                &[
                    ("__name__", "trainscaler_gpu_utilization"),
                    ("pool", "p"),
                    ("Hostname", "w"),
                ],
                &[(0.8, T)],
            ),
        ])
        .unwrap();
        assert_eq!(rows(&mapped), [("p", Some("w"), GPU_UTILIZATION, T, 0.8)]);
    }

    #[test]
    fn worker_fallbacks_apply_to_gpu_series_only() {
        let mapped = map(vec![
            series(
                &[
                    ("__name__", "DCGM_FI_DEV_FB_USED"),
                    ("pool", "p"),
                    ("instance", "10.0.0.7:9400"),
                    ("node", "n1"),
                ],
                &[(1024.0, T)],
            ),
            series(
                &[
                    ("__name__", "DCGM_FI_DEV_FB_USED"),
                    ("pool", "p"),
                    ("Hostname", ""),
                    ("instance", "10.0.0.8:9400"),
                    ("instance_id", "i-0abc"),
                ],
                &[(1024.0, T)],
            ),
            // Prometheus labels everything with `instance`; the queue is still the pool's.
            series(
                &[
                    ("__name__", "trainscaler_queue_depth"),
                    ("pool", "p"),
                    ("instance", "scheduler:9100"),
                ],
                &[(4.0, T)],
            ),
            series(
                &[
                    ("__name__", "trainscaler_running_jobs"),
                    ("pool", "p"),
                    ("Hostname", "w"),
                ],
                &[(2.0, T)],
            ),
        ])
        .unwrap();
        assert_eq!(
            rows(&mapped),
            [
                ("p", None, QUEUE_DEPTH, T, 4.0),
                ("p", Some("i-0abc"), GPU_MEMORY_USED_GIB, T, 1.0),
                ("p", Some("n1"), GPU_MEMORY_USED_GIB, T, 1.0),
                ("p", Some("w"), RUNNING_JOBS, T, 2.0),
            ]
        );
    }

    #[test]
    fn repeated_counts_are_not_added_up() {
        let queue = |replica| {
            series(
                &[
                    ("__name__", "trainscaler_pending_jobs"),
                    ("pool", "p"),
                    ("prometheus_replica", replica),
                ],
                &[(7.0, T)],
            )
        };
        let mapped = map(vec![queue("a"), queue("b")]).unwrap();
        assert_eq!(rows(&mapped), [("p", None, PENDING_JOBS, T, 7.0)]);
    }

    #[test]
    fn label_mapping_is_configurable() {
        let mapping = LabelMapping {
            pool_label: "cluster".to_owned(),
            worker_label: "kubernetes_node".to_owned(),
            worker_fallback_labels: Vec::new(),
        };
        let req = request(vec![series(
            &[
                ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
                ("cluster", "c"),
                ("kubernetes_node", "k"),
                ("Hostname", "ignored"),
            ],
            &[(100.0, T)],
        )]);
        let mapped = map_series(&req, &mapping).unwrap();
        assert_eq!(rows(&mapped), [("c", Some("k"), GPU_UTILIZATION, T, 1.0)]);
    }
}
