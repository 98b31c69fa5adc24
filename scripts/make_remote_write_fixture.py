#!/usr/bin/env python3
"""Writes the remote-write fixture that src/ingest/remote_write.rs is tested against.

The point of the fixture is independence: the body is encoded by Google's protobuf package
(from a .proto written out below from the remote-write 1.0 spec, compiled with the protoc
bundled in grpcio-tools) and compressed by cramjam's Snappy *raw block* compressor, and the
expected samples are computed here in Python from the documented mapping rules, not by the Rust
code under test.

It imitates what a Prometheus server forwards after scraping dcgm-exporter: two workers with
two GPUs each (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED), one of which also reports the
profiling metric that must lose to the device one; a third worker that reports only the
profiling metric; a pool-level queue depth; unrelated series (`up`, a summary with a NaN
quantile, a native histogram); a GPU series without a pool label; a staleness marker; a zero
value (absent on the wire in proto3); exemplars and metric metadata, which must be skipped.

Run (versions this was made with: protobuf 7.36.2, grpcio-tools 1.85.1, cramjam 2.14.0):

    python3 -m venv /tmp/rwvenv
    /tmp/rwvenv/bin/pip install protobuf grpcio-tools cramjam
    /tmp/rwvenv/bin/python scripts/make_remote_write_fixture.py
"""

import importlib
import importlib.resources
import json
import math
import pathlib
import struct
import sys
import tempfile

import cramjam
from grpc_tools import protoc

OUT_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "remote_write"

# Written from prompb/remote.proto and prompb/types.proto (remote-write 1.0), without the gogo
# options. Everything the Rust side does not declare is here too, so skipping it is tested.
PROTO = """
syntax = "proto3";
package prometheus;

message WriteRequest {
  repeated TimeSeries timeseries = 1;
  reserved 2;
  repeated MetricMetadata metadata = 3;
}

message MetricMetadata {
  enum MetricType {
    UNKNOWN = 0; COUNTER = 1; GAUGE = 2; HISTOGRAM = 3;
    GAUGEHISTOGRAM = 4; SUMMARY = 5; INFO = 6; STATESET = 7;
  }
  MetricType type = 1;
  string metric_family_name = 2;
  string help = 4;
  string unit = 5;
}

message Sample {
  double value = 1;
  int64 timestamp = 2;
}

message Exemplar {
  repeated Label labels = 1;
  double value = 2;
  int64 timestamp = 3;
}

message BucketSpan {
  sint32 offset = 1;
  uint32 length = 2;
}

message Histogram {
  enum ResetHint { UNKNOWN = 0; YES = 1; NO = 2; GAUGE = 3; }
  oneof count { uint64 count_int = 1; double count_float = 2; }
  double sum = 3;
  sint32 schema = 4;
  double zero_threshold = 5;
  oneof zero_count { uint64 zero_count_int = 6; double zero_count_float = 7; }
  repeated BucketSpan negative_spans = 8;
  repeated sint64 negative_deltas = 9;
  repeated double negative_counts = 10;
  repeated BucketSpan positive_spans = 11;
  repeated sint64 positive_deltas = 12;
  repeated double positive_counts = 13;
  ResetHint reset_hint = 14;
  int64 timestamp = 15;
}

message TimeSeries {
  repeated Label labels = 1;
  repeated Sample samples = 2;
  repeated Exemplar exemplars = 3;
  repeated Histogram histograms = 4;
}

message Label {
  string name = 1;
  string value = 2;
}
"""

STALE_NAN_BITS = 0x7FF0000000000002
STALE_NAN = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, in ms
T1 = T0 + 15_000  # the next scrape


def compile_proto():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="rwproto"))
    (tmp / "remote_write.proto").write_text(PROTO)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    rc = protoc.main(
        ["protoc", f"-I{tmp}", f"-I{include}", f"--python_out={tmp}", str(tmp / "remote_write.proto")]
    )
    if rc != 0:
        sys.exit(f"protoc failed with {rc}")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("remote_write_pb2")


def build_series():
    """The series as (labels, [(value, timestamp)]) pairs; labels sorted by name, as Prometheus
    sends them."""
    series = []

    def dcgm(metric, host, gpu, uuid, model, pool, values, extra=()):
        labels = {
            "__name__": metric,
            "DCGM_FI_DRIVER_VERSION": "570.124.06",
            "Hostname": host,
            "UUID": uuid,
            "container": "trainer",
            "device": f"nvidia{gpu}",
            "gpu": str(gpu),
            "instance": f"{host}:9400",
            "job": "dcgm-exporter",
            "modelName": model,
            "namespace": "training",
            "pod": f"trainer-{host}",
        }
        if pool is not None:
            labels["pool"] = pool
        labels.update(extra)
        series.append((labels, values))

    a100 = "NVIDIA A100-SXM4-80GB"
    h100 = "NVIDIA H100 80GB HBM3"
    gpus = [
        ("gpu-node-1", 0, "GPU-3f1c2a9e-0d4b-4c7e-9a51-2b6f8e0c1d11", [87.0, 91.0], [61234.0, 61400.0]),
        # A GPU that went idle: 0.0 is the proto3 default and is not on the wire at all.
        ("gpu-node-1", 1, "GPU-8a7b6c5d-4e3f-4a1b-8c9d-0e1f2a3b4c22", [93.0, 0.0], [80100.0, 80200.0]),
        ("gpu-node-2", 0, "GPU-1b2c3d4e-5f60-4718-89ab-cdef01234533", [12.0, 15.0], [1024.0, 1100.0]),
        # The second scrape lost this GPU's utilisation: Prometheus sends a staleness marker.
        ("gpu-node-2", 1, "GPU-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b44", [64.0, STALE_NAN], [40960.0, 41000.0]),
    ]
    for host, gpu, uuid, util, fb in gpus:
        dcgm("DCGM_FI_DEV_GPU_UTIL", host, gpu, uuid, a100, "a100-train", list(zip(util, (T0, T1))))
        dcgm("DCGM_FI_DEV_FB_USED", host, gpu, uuid, a100, "a100-train", list(zip(fb, (T0, T1))))
    # Also reported for one GPU of gpu-node-1; must lose to DCGM_FI_DEV_GPU_UTIL.
    dcgm(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpu-node-1", 0, gpus[0][2], a100, "a100-train",
        [(0.8512, T0), (0.8833, T1)],
    )
    # A host whose exporter was configured with profiling metrics only.
    h100_uuid = "GPU-0a1b2c3d-4e5f-4607-8899-aabbccddee55"
    dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gpu-node-3", 0, h100_uuid, h100, "h100-ft", [(0.4217, T0)])
    dcgm("DCGM_FI_DEV_FB_USED", "gpu-node-3", 0, h100_uuid, h100, "h100-ft", [(30721.0, T0)])
    # A login node's GPU nobody put in a pool.
    dcgm(
        "DCGM_FI_DEV_GPU_UTIL", "login-node", 0, "GPU-77777777-7777-4777-8777-777777777766",
        "NVIDIA L4", None, [(3.0, T0), (4.0, T1)],
    )
    series.append(({"__name__": "trainscaler_queue_depth", "pool": "a100-train"}, [(5.0, T0), (7.0, T1)]))
    series.append((
        {"__name__": "up", "instance": "gpu-node-1:9400", "job": "dcgm-exporter", "pool": "a100-train"},
        [(1.0, T0), (1.0, T1)],
    ))
    # A summary without observations has NaN quantiles; not ours, so it must not be rejected.
    series.append((
        {"__name__": "go_gc_duration_seconds", "instance": "scheduler:9100", "job": "trainscaler",
         "pool": "a100-train", "quantile": "0.5"},
        [(math.nan, T0)],
    ))
    return series


def build_request(pb, series):
    req = pb.WriteRequest()
    for labels, samples in series:
        ts = req.timeseries.add()
        for name in sorted(labels):
            ts.labels.add(name=name, value=labels[name])
        for value, at in samples:
            ts.samples.add(value=value, timestamp=at)
    # Exemplar on the queue depth series, as a trace-instrumented exporter would attach.
    queue = next(ts for ts in req.timeseries if ts.labels[0].value == "trainscaler_queue_depth")
    ex = queue.exemplars.add(value=7.0, timestamp=T1)
    ex.labels.add(name="trace_id", value="4bf92f3577b34da6a3ce929d0e0e4736")
    # A native histogram series: a name with our prefix that is not one of our metrics.
    hist_series = req.timeseries.add()
    hist_series.labels.add(name="__name__", value="trainscaler_job_wait_seconds")
    hist_series.labels.add(name="pool", value="a100-train")
    h = hist_series.histograms.add(count_int=12, sum=340.5, schema=3, zero_threshold=1e-128,
                                   zero_count_int=0, timestamp=T1)
    h.positive_spans.add(offset=40, length=3)
    h.positive_deltas.extend([4, 2, -3])
    req.metadata.add(type=pb.MetricMetadata.GAUGE, metric_family_name="DCGM_FI_DEV_GPU_UTIL",
                     help="GPU utilization (in %).", unit="")
    req.metadata.add(type=pb.MetricMetadata.GAUGE, metric_family_name="DCGM_FI_DEV_FB_USED",
                     help="Framebuffer memory used (in MiB).", unit="")
    return req


# The mapping rules, as documented in src/ingest/remote_write.rs, implemented again here.
# metric -> (sample name, divisor, rank: lower is preferred, worker fallbacks apply)
RULES = {
    "trainscaler_queue_depth": ("queue_depth", 1.0, 0, False),
    "trainscaler_pending_jobs": ("pending_jobs", 1.0, 0, False),
    "trainscaler_running_jobs": ("running_jobs", 1.0, 0, False),
    "trainscaler_gpu_utilization": ("gpu_utilization", 1.0, 0, True),
    "trainscaler_gpu_memory_used_gib": ("gpu_memory_used_gib", 1.0, 0, True),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_utilization", 100.0, 1, True),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gpu_utilization", 1.0, 2, True),
    "DCGM_FI_DEV_FB_USED": ("gpu_memory_used_gib", 1024.0, 1, True),
}
POOL_LABEL = "pool"
WORKER_LABEL = "Hostname"
WORKER_FALLBACKS = ["instance_id", "node", "instance"]


def expected(series_with_histogram):
    skipped_no_pool = 0
    skipped_unknown = 0
    groups = {}  # key -> {rank: [values]}
    for labels, samples in series_with_histogram:
        labels = {k: v for k, v in labels.items() if v != ""}
        rule = RULES.get(labels.get("__name__"))
        if rule is None:
            skipped_unknown += 1
            continue
        if POOL_LABEL not in labels:
            skipped_no_pool += 1
            continue
        name, divisor, rank, fallbacks = rule
        worker = labels.get(WORKER_LABEL)
        if worker is None and fallbacks:
            worker = next((labels[f] for f in WORKER_FALLBACKS if f in labels), None)
        for value, at in samples:
            if struct.unpack("<Q", struct.pack("<d", value))[0] == STALE_NAN_BITS:
                continue
            assert math.isfinite(value) and at > 0, "the fixture holds no rejected samples"
            groups.setdefault((labels[POOL_LABEL], worker, name, at), {}).setdefault(rank, []).append(
                value / divisor
            )
    rows = []
    for (pool, worker, name, at), by_rank in groups.items():
        values = by_rank[min(by_rank)]
        if name == "gpu_utilization":
            total = 0.0
            for v in values:
                total += v
            value = total / len(values)
        else:
            value = max(values)
        rows.append({"pool": pool, "worker": worker, "name": name, "at_ms": at, "value": value})
    rows.sort(key=lambda r: (r["pool"], r["worker"] is not None, r["worker"] or "", r["name"], r["at_ms"]))
    return {
        "series_total": len(series_with_histogram),
        "series_skipped_no_pool": skipped_no_pool,
        "series_skipped_unknown_metric": skipped_unknown,
        "samples": rows,
    }


def main():
    pb = compile_proto()
    series = build_series()
    req = build_request(pb, series)
    raw = req.SerializeToString()

    # The marker must reach the wire bit for bit (it is a signalling NaN; arithmetic on the way
    # would have quietened it).
    assert struct.pack("<Q", STALE_NAN_BITS) in raw, "staleness marker lost its bit pattern"
    body = bytes(cramjam.snappy.compress_raw(raw))
    assert not body.startswith(b"\xff\x06\x00\x00sNaPpY"), "framed, not block, snappy"
    assert bytes(cramjam.snappy.decompress_raw(body)) == raw
    assert pb.WriteRequest.FromString(raw) == req

    all_series = series + [({"__name__": "trainscaler_job_wait_seconds", "pool": "a100-train"}, [])]
    exp = expected(all_series)

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "dcgm.snappy").write_bytes(body)
    (OUT_DIR / "dcgm.expected.json").write_text(json.dumps(exp, indent=1) + "\n")
    print(f"{len(raw)} bytes of protobuf, {len(body)} compressed, {len(exp['samples'])} expected samples")


if __name__ == "__main__":
    main()
