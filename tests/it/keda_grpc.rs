//! KEDA's external scaler over gRPC: every RPC through a client generated from our proto, the
//! wire format checked with hand-written protobuf bytes (so a wrong field number cannot pass),
//! the push stream, errors, and the metrics-api twin over HTTP.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut};
use serde_json::{Value, json};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use trainscaler::keda::externalscaler::external_scaler_client::ExternalScalerClient;
use trainscaler::keda::externalscaler::{GetMetricsRequest, IsActiveResponse, ScaledObjectRef};

use crate::common::{Backend, TestApp, assert_problem};
use crate::http_pools::{create_pool, decide, rfc3339_ago, samples, t4_policy};
use crate::on_both_backends;

async fn channel(app: &TestApp) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{}", app.grpc_addr))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect")
}

fn object(pool: Option<&str>) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "trainer".into(),
        namespace: "ml".into(),
        scaler_metadata: pool
            .map(|p| HashMap::from([("pool".to_string(), p.to_string())]))
            .unwrap_or_default(),
    }
}

async fn every_rpc_answers_from_the_pool_decision(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "gpu-t4", &t4_policy()).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);

    let spec = keda
        .get_metric_spec(object(Some("gpu-t4")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(spec.metric_specs.len(), 1);
    let m = &spec.metric_specs[0];
    assert_eq!(m.metric_name, "trainscaler-gpu-t4");
    assert_eq!((m.target_size, m.target_size_float), (1, 1.0));

    let ask = |name: &str| GetMetricsRequest {
        scaled_object_ref: Some(object(Some("gpu-t4"))),
        metric_name: name.into(),
    };
    let value = keda
        .get_metrics(ask("trainscaler-gpu-t4"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(value.metric_values[0].metric_value, 0);
    assert!(
        !keda
            .is_active(object(Some("gpu-t4")))
            .await
            .unwrap()
            .into_inner()
            .result
    );

    // Work arrives by webhook: the next poll follows the same decision /decide makes.
    samples(
        &app,
        json!([{"pool": "gpu-t4", "name": "queue_depth", "value": 8, "at": rfc3339_ago(1)}]),
    )
    .await;
    // Names arrive with KEDA's prefix stripped, in whatever case.
    let value = keda
        .get_metrics(ask("TrainScaler-GPU-T4"))
        .await
        .unwrap()
        .into_inner();
    let v = &value.metric_values[0];
    assert_eq!((v.metric_value, v.metric_value_float), (4, 4.0));
    assert_eq!(v.metric_name, "TrainScaler-GPU-T4");
    assert!(
        keda.is_active(object(Some("gpu-t4")))
            .await
            .unwrap()
            .into_inner()
            .result
    );
    // Recorded the same way: the fleet view and /decide agree, and the step was logged once.
    assert_eq!(app.get_json("/fleet/gpu-t4").await["desired"], 4);
    let events = app.get_json("/v1/pools/gpu-t4/events").await;
    assert_eq!(events["items"].as_array().unwrap().len(), 1, "{events}");
    let http: Value = app.get_json("/v1/keda/pools/gpu-t4").await;
    assert_eq!(http["desired_workers"], 4);
    assert_eq!(http["queue_depth"], 8.0);
    assert_eq!(http["active"], true);

    let status = keda
        .stream_metric_spec(object(Some("gpu-t4")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
}

async fn unknown_pools_and_missing_metadata_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let missing = keda.is_active(object(None)).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument);
    assert!(missing.message().contains("pool"), "{}", missing.message());
    let unknown = keda
        .get_metric_spec(object(Some("ghost")))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(unknown.message().contains("ghost"), "{}", unknown.message());
    let unknown = keda
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(object(Some("ghost"))),
            metric_name: "trainscaler-ghost".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let unknown = keda
        .stream_is_active(object(Some("ghost")))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    create_pool(&app, "real", &t4_policy()).await;
    let wrong_metric = keda
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(object(Some("real"))),
            metric_name: "queue-length".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(wrong_metric.code(), Code::InvalidArgument);
    assert_problem(app.get("/v1/keda/pools/ghost").await, 404, "pool").await;
}

/// An `external-push` subscriber hears `true` as soon as an idle pool gets work, without a poll.
async fn stream_pushes_true_when_an_idle_pool_gets_work(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "push", &t4_policy()).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let mut stream = keda
        .stream_is_active(object(Some("push")))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().expect("the current state");
    assert!(!first.result);
    samples(
        &app,
        json!([{"pool": "push", "name": "queue_depth", "value": 2, "at": rfc3339_ago(0)}]),
    )
    .await;
    let pushed = tokio::time::timeout(Duration::from_secs(1), stream.message())
        .await
        .expect("pushed within a second")
        .unwrap()
        .expect("a message");
    assert!(pushed.result);
    assert!(open_streams(&app).await == 1);
    // The subscriber goes; the server ends its task for it.
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while open_streams(&app).await != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream was never cleaned up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        keda.is_active(object(Some("push")))
            .await
            .unwrap()
            .into_inner()
            .result
    );
}

/// A policy for pool `name` that lets it go to zero `idle_sec` after its queue empties, with no
/// cooldown or stabilisation window in the way.
async fn idling_pool(app: &TestApp, name: &str, idle_sec: u64, min_workers: u32) {
    let mut policy = t4_policy();
    policy["idle_to_zero_after_sec"] = json!(idle_sec);
    policy["scale_down_cooldown_sec"] = json!(0);
    policy["stabilization_window_sec"] = json!(0);
    policy["min_workers"] = json!(min_workers);
    let r = crate::http_pools::put(app, &format!("/v1/pools/{name}"), &policy).await;
    assert!(
        r.status().is_success(),
        "{}",
        r.text().await.unwrap_or_default()
    );
}

/// The next message on an open stream, waited for a bounded time.
async fn pushed(stream: &mut tonic::Streaming<IsActiveResponse>, within: Duration) -> bool {
    tokio::time::timeout(within, stream.message())
        .await
        .expect("a push within the bound")
        .expect("the stream is healthy")
        .expect("a message, not the end of the stream")
        .result
}

/// `false` follows `true` as soon as the queue empties when the policy waits no idle time: the
/// queue's zero wakes the stream, which decides again.
async fn stream_pushes_false_when_the_queue_empties(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    idling_pool(&app, "drain", 0, 0).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let mut stream = keda
        .stream_is_active(object(Some("drain")))
        .await
        .unwrap()
        .into_inner();
    assert!(!pushed(&mut stream, Duration::from_secs(5)).await);

    let queue = |n: u32| json!([{"pool": "drain", "name": "queue_depth", "value": n, "at": rfc3339_ago(0)}]);
    samples(&app, queue(2)).await;
    assert!(
        pushed(&mut stream, Duration::from_secs(5)).await,
        "work arrived"
    );
    samples(&app, queue(0)).await;
    assert!(
        !pushed(&mut stream, Duration::from_secs(5)).await,
        "the queue emptied"
    );
    // The stream's own decision was recorded: the pool's target is zero again.
    assert_eq!(app.get_json("/fleet/drain").await["desired"], 0);
}

/// A pool on its idle timer is pushed `false` when the timer runs out, though nobody asks and
/// no signal arrives then: the stream decides again at the decision's next evaluation.
async fn stream_pushes_false_when_the_idle_time_runs_out(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    idling_pool(&app, "resting", 1, 0).await;
    let queue = |n: u32| json!([{"pool": "resting", "name": "queue_depth", "value": n, "at": rfc3339_ago(0)}]);
    samples(&app, queue(3)).await;
    assert!(decide(&app, "resting").await["desired"].as_u64().unwrap() > 0);
    samples(&app, queue(0)).await;

    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let mut stream = keda
        .stream_is_active(object(Some("resting")))
        .await
        .unwrap()
        .into_inner();
    assert!(
        pushed(&mut stream, Duration::from_secs(5)).await,
        "still inside idle_to_zero_after_sec"
    );
    assert!(
        !pushed(&mut stream, Duration::from_secs(10)).await,
        "idle for a second"
    );
    assert_eq!(app.get_json("/fleet/resting").await["desired"], 0);
}

/// A policy change wakes the stream both ways: raising `min_workers` makes the pool active,
/// lowering it again (with no idle time to wait) makes it inactive.
async fn stream_follows_policy_changes_both_ways(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    idling_pool(&app, "floor", 0, 0).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let mut stream = keda
        .stream_is_active(object(Some("floor")))
        .await
        .unwrap()
        .into_inner();
    assert!(!pushed(&mut stream, Duration::from_secs(5)).await);
    idling_pool(&app, "floor", 0, 1).await;
    assert!(
        pushed(&mut stream, Duration::from_secs(5)).await,
        "min_workers 1"
    );
    idling_pool(&app, "floor", 0, 0).await;
    assert!(
        !pushed(&mut stream, Duration::from_secs(5)).await,
        "min_workers 0 again"
    );
}

/// `trainscaler_keda_streams` from `/metrics`.
async fn open_streams(app: &TestApp) -> i64 {
    let text = app.get("/metrics").await.text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("trainscaler_keda_streams "))
        .and_then(|v| v.trim().parse().ok())
        .expect("trainscaler_keda_streams in /metrics")
}

/// Open `StreamIsActive` streams are bounded: past `TRAINSCALER_GRPC_MAX_STREAMS` a new one is
/// refused with RESOURCE_EXHAUSTED (polling still works), and a closed stream frees its place.
async fn open_streams_are_bounded(backend: Backend) {
    let db = Arc::new(crate::common::TestDb::new(backend).await);
    let mut serve = crate::common::serve_config(false);
    serve.grpc_max_streams = 2;
    let app = TestApp::spawn_with(db, serve).await;
    idling_pool(&app, "bounded", 0, 0).await;
    let mut keda = ExternalScalerClient::new(channel(&app).await);
    let mut first = keda
        .stream_is_active(object(Some("bounded")))
        .await
        .unwrap()
        .into_inner();
    let mut second = keda
        .stream_is_active(object(Some("bounded")))
        .await
        .unwrap()
        .into_inner();
    assert!(!pushed(&mut first, Duration::from_secs(5)).await);
    assert!(!pushed(&mut second, Duration::from_secs(5)).await);
    let refused = keda
        .stream_is_active(object(Some("bounded")))
        .await
        .expect_err("a third stream past the limit of 2");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("TRAINSCALER_GRPC_MAX_STREAMS"),
        "{refused:?}"
    );
    assert!(keda.is_active(object(Some("bounded"))).await.is_ok());
    drop(first);
    // The server notices the closed stream when its task next looks: poll, do not sleep.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let third = loop {
        match keda.stream_is_active(object(Some("bounded"))).await {
            Ok(s) => break s.into_inner(),
            Err(e) if e.code() == Code::ResourceExhausted => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "a closed stream's place was not freed"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    drop((second, third));
}

on_both_backends!(
    open_streams_are_bounded,
    every_rpc_answers_from_the_pool_decision,
    unknown_pools_and_missing_metadata_are_refused,
    stream_pushes_true_when_an_idle_pool_gets_work,
    stream_pushes_false_when_the_queue_empties,
    stream_pushes_false_when_the_idle_time_runs_out,
    stream_follows_policy_changes_both_ways,
);

/// On PostgreSQL the push crosses replicas: work posted to one replica wakes a subscriber of
/// another (LISTEN/NOTIFY on `trainscaler_activity`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_crosses_replicas_on_postgres() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = TestApp::spawn_on(Arc::clone(&a.db), false).await;
    create_pool(&a, "shared", &t4_policy()).await;
    let mut keda = ExternalScalerClient::new(channel(&b).await);
    let mut stream = keda
        .stream_is_active(object(Some("shared")))
        .await
        .unwrap()
        .into_inner();
    assert!(!stream.message().await.unwrap().unwrap().result);
    samples(
        &a,
        json!([{"pool": "shared", "name": "queue_depth", "value": 3, "at": rfc3339_ago(0)}]),
    )
    .await;
    let pushed = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("pushed across replicas")
        .unwrap()
        .unwrap();
    assert!(pushed.result);
}

// ---- The wire, without our generated code --------------------------------------------------

/// Passes bytes through untouched, so requests are exactly the bytes written below.
#[derive(Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// A length-delimited field (wire type 2).
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

/// `ScaledObjectRef { name = 1; namespace = 2; map scalerMetadata = 3 }`, a map entry being
/// `{ key = 1; value = 2 }`.
fn scaled_object_ref(pool: &str) -> Vec<u8> {
    let entry = [field(1, b"pool"), field(2, pool.as_bytes())].concat();
    [field(1, b"trainer"), field(2, b"ml"), field(3, &entry)].concat()
}

#[derive(Debug, PartialEq)]
enum Wire {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(Vec<u8>),
}

/// Reads every (field number, value) of one message.
fn fields(mut b: &[u8]) -> Vec<(u64, Wire)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let tag = varint(&mut b);
        let value = match tag & 7 {
            0 => Wire::Varint(varint(&mut b)),
            1 => {
                let (x, rest) = b.split_at(8);
                b = rest;
                Wire::Fixed64(x.try_into().unwrap())
            }
            2 => {
                let n = usize::try_from(varint(&mut b)).unwrap();
                let (x, rest) = b.split_at(n);
                b = rest;
                Wire::Bytes(x.to_vec())
            }
            other => panic!("unexpected wire type {other}"),
        };
        out.push((tag >> 3, value));
    }
    out
}

async fn raw_call(app: &TestApp, method: &'static str, body: Vec<u8>) -> Vec<u8> {
    let mut grpc = tonic::client::Grpc::new(channel(app).await);
    grpc.ready().await.unwrap();
    grpc.unary(Request::new(body), PathAndQuery::from_static(method), Raw)
        .await
        .unwrap()
        .into_inner()
}

async fn the_wire_format_matches_kedas_field_numbers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "wire", &t4_policy()).await;
    samples(
        &app,
        json!([{"pool": "wire", "name": "queue_depth", "value": 3, "at": rfc3339_ago(1)}]),
    )
    .await;

    // GetMetricSpecResponse { repeated MetricSpec metricSpecs = 1 }, MetricSpec { metricName = 1;
    // int64 targetSize = 2; double targetSizeFloat = 3 }.
    let out = raw_call(
        &app,
        "/externalscaler.ExternalScaler/GetMetricSpec",
        scaled_object_ref("wire"),
    )
    .await;
    let top = fields(&out);
    assert_eq!(top.len(), 1);
    let Wire::Bytes(spec) = &top[0].1 else {
        panic!("{top:?}")
    };
    assert_eq!(top[0].0, 1);
    let spec = fields(spec);
    assert!(
        spec.contains(&(1, Wire::Bytes(b"trainscaler-wire".to_vec()))),
        "{spec:?}"
    );
    assert!(spec.contains(&(2, Wire::Varint(1))), "{spec:?}");
    assert!(
        spec.contains(&(3, Wire::Fixed64(1.0f64.to_le_bytes()))),
        "{spec:?}"
    );

    // GetMetricsRequest { ScaledObjectRef scaledObjectRef = 1; string metricName = 2 } ->
    // GetMetricsResponse { repeated MetricValue metricValues = 1 }, MetricValue { metricName = 1;
    // int64 metricValue = 2; double metricValueFloat = 3 }.
    let request = [
        field(1, &scaled_object_ref("wire")),
        field(2, b"trainscaler-wire"),
    ]
    .concat();
    let out = raw_call(&app, "/externalscaler.ExternalScaler/GetMetrics", request).await;
    let top = fields(&out);
    let Wire::Bytes(value) = &top[0].1 else {
        panic!("{top:?}")
    };
    assert_eq!(top[0].0, 1);
    let value = fields(value);
    assert!(
        value.contains(&(1, Wire::Bytes(b"trainscaler-wire".to_vec()))),
        "{value:?}"
    );
    assert!(
        value.contains(&(2, Wire::Varint(3))),
        "3 waiting 4-GPU jobs: {value:?}"
    );
    assert!(
        value.contains(&(3, Wire::Fixed64(3.0f64.to_le_bytes()))),
        "{value:?}"
    );

    // IsActiveResponse { bool result = 1 }.
    let out = raw_call(
        &app,
        "/externalscaler.ExternalScaler/IsActive",
        scaled_object_ref("wire"),
    )
    .await;
    assert_eq!(fields(&out), vec![(1, Wire::Varint(1))]);
}

mod wire {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres() {
        the_wire_format_matches_kedas_field_numbers(Backend::Postgres).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        the_wire_format_matches_kedas_field_numbers(Backend::Sqlite).await
    }
}

/// A server with the pool `secure` and, beside it, the gRPC port with `tls` on its own
/// listener; returns the server (kept alive by the caller) and the gRPC address.
async fn serve_grpc_with(
    tls: tonic::transport::ServerTlsConfig,
) -> (TestApp, std::net::SocketAddr) {
    let db = Arc::new(crate::common::TestDb::new(Backend::Sqlite).await);
    let app = TestApp::spawn_on(Arc::clone(&db), false).await;
    create_pool(&app, "secure", &t4_policy()).await;
    let state = trainscaler::app::prepare(&db.config(), &crate::common::serve_config(true))
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(trainscaler::keda::server::serve_grpc(
        listener,
        state,
        Some(tls),
        std::future::pending(),
    ));
    (app, addr)
}

/// With a certificate and key configured, the gRPC port speaks TLS: a client that trusts the
/// certificate gets answers, a plaintext client does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_with_configured_certificate() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let tls = trainscaler::keda::server::tls_config(Some(&cert_path), Some(&key_path), None)
        .unwrap()
        .expect("TLS configured");
    assert!(trainscaler::keda::server::tls_config(Some(&cert_path), None, None).is_err());

    let (_app, addr) = serve_grpc_with(tls).await;

    let ca = tonic::transport::Certificate::from_pem(cert.cert.pem());
    let secure =
        tonic::transport::Endpoint::from_shared(format!("https://localhost:{}", addr.port()))
            .unwrap()
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(ca)
                    .domain_name("localhost"),
            )
            .unwrap()
            .connect()
            .await
            .expect("TLS connect");
    let mut keda = ExternalScalerClient::new(secure);
    assert!(
        !keda
            .is_active(object(Some("secure")))
            .await
            .unwrap()
            .into_inner()
            .result
    );

    let plain = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await;
    if let Ok(plain) = plain {
        let refused = ExternalScalerClient::new(plain)
            .is_active(object(Some("secure")))
            .await;
        assert!(refused.is_err(), "plaintext must not be answered over TLS");
    }
}

/// Asks `is_active` for the pool `secure` over TLS trusting `ca`, presenting `identity` (a PEM
/// certificate and key) if given; any transport or handshake failure is an `Err`.
async fn is_active_over_tls(
    addr: std::net::SocketAddr,
    ca: &str,
    identity: Option<(&str, &str)>,
) -> Result<bool, String> {
    let mut tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(tonic::transport::Identity::from_pem(cert, key));
    }
    let channel =
        tonic::transport::Endpoint::from_shared(format!("https://localhost:{}", addr.port()))
            .unwrap()
            .tls_config(tls)
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| format!("connect: {e:?}"))?;
    ExternalScalerClient::new(channel)
        .is_active(object(Some("secure")))
        .await
        .map(|r| r.into_inner().result)
        .map_err(|e| format!("call: {e:?}"))
}

/// With a client CA configured (mutual TLS, what KEDA's `tlsClientCert` is for), the gRPC port
/// answers only clients whose certificate that CA signed: none, or one from another CA, is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_with_a_client_ca_answers_only_certificates_it_signed() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let make_ca = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    };
    let ours = make_ca("trainscaler test CA");
    let theirs = make_ca("someone else's CA");
    let leaf = |name: &str, issuer: &CertifiedIssuer<'_, KeyPair>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("localhost", &ours);
    let (keda_cert, keda_key) = leaf("keda", &ours);
    let (stranger_cert, stranger_key) = leaf("keda", &theirs);

    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str, pem: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let (cert_path, key_path, ca_path) = (
        path("tls.crt", &server_cert),
        path("tls.key", &server_key),
        path("client-ca.crt", &ours.pem()),
    );
    // A client CA without TLS on the port would protect nothing: refused at start-up.
    assert!(trainscaler::keda::server::tls_config(None, None, Some(&ca_path)).is_err());
    let tls =
        trainscaler::keda::server::tls_config(Some(&cert_path), Some(&key_path), Some(&ca_path))
            .unwrap()
            .expect("TLS configured");
    let (_app, addr) = serve_grpc_with(tls).await;

    let ca = ours.pem();
    assert_eq!(
        is_active_over_tls(addr, &ca, Some((&keda_cert, &keda_key))).await,
        Ok(false)
    );
    let anonymous = is_active_over_tls(addr, &ca, None).await;
    assert!(
        anonymous.is_err(),
        "answered without a client certificate: {anonymous:?}"
    );
    let stranger = is_active_over_tls(addr, &ca, Some((&stranger_cert, &stranger_key))).await;
    assert!(
        stranger.is_err(),
        "answered a certificate from another CA: {stranger:?}"
    );
}
