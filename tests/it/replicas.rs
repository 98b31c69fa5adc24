//! Catalog changes made elsewhere reach a running server's in-memory catalog: another replica
//! on PostgreSQL (LISTEN/NOTIFY), and another process on the SQLite file (version polling).
//! Concurrent pool decisions on two replicas are linearizable.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{
    Backend, TestApp, aws_fixture, p4d_use1_az1_spot, serve_config, trainscaler_ok,
};

/// Polls `app` until p4d's listed spot price is `expected`, within a generous bound.
async fn wait_for_spot(app: &TestApp, expected: f64, within: Duration) {
    let deadline = Instant::now() + within;
    while p4d_use1_az1_spot(app).await != Some(expected) {
        assert!(
            Instant::now() < deadline,
            "the server never listed spot price {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_posted_to_one_replica_reaches_the_other_by_notification() {
    let a = TestApp::spawn(Backend::Postgres).await;
    // Replica B polls only once an hour, so only a notification can tell it in time.
    let mut slow = serve_config(false);
    slow.catalog_poll_ms = 3_600_000;
    let b = TestApp::spawn_with(Arc::clone(&a.db), slow).await;
    assert_eq!(p4d_use1_az1_spot(&b).await, Some(2.4655));
    let batch = json!({"observations": [{
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot", "price": 4.5,
        "observed_at": "2026-12-01T10:00:00Z"
    }]});
    assert_eq!(a.post_json("/v1/prices", &batch).await.status(), 200);
    assert_eq!(
        p4d_use1_az1_spot(&a).await,
        Some(4.5),
        "the writing replica reads its own write"
    );
    wait_for_spot(&b, 4.5, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_import_into_the_sqlite_file_reaches_the_running_server() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vms.csv");
    std::fs::write(&file, aws_fixture("7.77")).unwrap();
    let args = [
        "catalog",
        "import",
        "--provider",
        "aws",
        file.to_str().unwrap(),
    ];
    trainscaler_ok(&app.db, &args);
    // The test server polls every 200 ms.
    wait_for_spot(&app, 7.77, Duration::from_secs(20)).await;
}

/// Twenty decisions on each of two replicas at once, round after round as the queue moves:
/// every round's answers are what one-after-another would give. The first decision under the
/// pool's row lock moves the target from the previous round's and logs it; every other one
/// sees that target and changes nothing. A lost update shows as a second change in a round,
/// or as a logged step whose `from` is not the previous `to`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_decisions_on_two_replicas_are_linearizable() {
    use crate::http_pools::{create_pool, put, rfc3339_ago, samples, t4_policy};

    let a = TestApp::spawn(Backend::Postgres).await;
    let b = TestApp::spawn_on(Arc::clone(&a.db), false).await;
    // A pool that may move every decision (no cooldowns, no stabilisation), and one whose
    // scale-up cooldown outlasts the test.
    let mut free = t4_policy();
    free["max_workers"] = json!(40);
    free["scale_up_cooldown_sec"] = json!(0);
    free["scale_down_cooldown_sec"] = json!(0);
    free["stabilization_window_sec"] = json!(0);
    let mut cooled = free.clone();
    cooled["scale_up_cooldown_sec"] = json!(3600);
    // Queue depth per round, and the target a sequential run reaches: four workers run four
    // one-worker jobs, so the need is 4 + the queue; a step adds at most 2 to the four live
    // workers; the running jobs are a floor. The cooled pool may step up only once.
    let queue = [2, 0, 1, 2, 1, 0, 2];
    let free_targets = [6, 4, 5, 6, 5, 4, 6];
    let cooled_targets = [6, 4, 4, 4, 4, 4, 4];
    for (pool, policy, targets) in [
        ("free", &free, free_targets),
        ("cooled", &cooled, cooled_targets),
    ] {
        create_pool(&a, pool, policy).await;
        for i in 0..4 {
            let r = put(
                &b,
                &format!("/v1/pools/{pool}/workers/od-{i}"),
                &json!({"instance_type": "g4dn.12xlarge", "market": "on_demand",
                        "started_at": rfc3339_ago(3600)}),
            )
            .await;
            assert_eq!(r.status(), 201);
        }
        samples(
            &a,
            json!([{"pool": pool, "name": "running_jobs", "value": 4, "at": rfc3339_ago(1)}]),
        )
        .await;

        let mut previous = 4;
        let mut chain = Vec::new();
        for (round, (&q, &target)) in queue.iter().zip(targets.iter()).enumerate() {
            let writer = if round % 2 == 0 { &a } else { &b };
            samples(
                writer,
                json!([{"pool": pool, "name": "queue_depth", "value": q, "at": rfc3339_ago(0)}]),
            )
            .await;
            let answers = forty_at_once(&a, &b, pool).await;
            let changed: Vec<&Value> = answers.iter().filter(|w| w["changed"] == true).collect();
            assert!(
                answers.iter().all(|w| w["desired"] == target),
                "{pool} round {round}: every answer is the sequential target {target}: {:?}",
                answers.iter().map(|w| &w["desired"]).collect::<Vec<_>>()
            );
            let expected_changes = usize::from(target != previous);
            assert_eq!(
                changed.len(),
                expected_changes,
                "{pool} round {round}: {changed:#?}"
            );
            for w in &changed {
                assert_eq!(w["previous_desired"], previous, "{pool} round {round}: {w}");
            }
            if target != previous {
                chain.push((previous, target));
            }
            previous = target;
        }

        // The log holds exactly the sequential run's steps, each from where the last one went.
        let events = a
            .get_json(&format!("/v1/pools/{pool}/events?limit=500"))
            .await;
        let mut logged: Vec<(u64, u64)> = events["items"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "scaled")
            .map(|e| {
                (
                    e["detail"]["from"].as_u64().expect("from"),
                    e["detail"]["to"].as_u64().expect("to"),
                )
            })
            .collect();
        logged.reverse(); // newest first on the wire
        assert_eq!(logged, chain, "{pool}: the logged steps");
        eprintln!("{pool}: {} decisions, steps {logged:?}", queue.len() * 40);
    }
}

/// Forty `POST /decide` for `pool`, twenty on each replica, released together.
async fn forty_at_once(a: &TestApp, b: &TestApp, pool: &str) -> Vec<Value> {
    let barrier = Arc::new(tokio::sync::Barrier::new(40));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let app = if i % 2 == 0 { a } else { b };
            let (client, url, barrier) = (app.client.clone(), app.url("/decide"), barrier.clone());
            let body = json!({"pool": pool});
            tokio::spawn(async move {
                barrier.wait().await;
                let r = client
                    .post(url)
                    .json(&body)
                    .send()
                    .await
                    .expect("POST /decide");
                assert_eq!(r.status(), 200);
                r.json::<Value>().await.expect("JSON")["workers"].clone()
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("decision task"));
    }
    answers
}
