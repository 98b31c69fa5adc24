//! The reconciler end to end with the static provider: a pool's workers follow its decisions
//! through the running service, capacity errors move to the next type, `observe` changes
//! nothing, and of two replicas on one PostgreSQL only the lease holder acts, the other
//! taking over when it dies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::http_pools::{create_pool, rfc3339_ago, samples};
use crate::on_both_backends;

/// No `provider`: the static provider is the default binding.
fn static_policy() -> Value {
    json!({
        "region": "us-east-1",
        "instance_types": ["g4dn.12xlarge", "g5.12xlarge"],
        "max_workers": 4,
        "scale_down_cooldown_sec": 1,
        "stabilization_window_sec": 0,
        "idle_to_zero_after_sec": 2
    })
}

async fn reconciling_app(db: Arc<TestDb>, capacity: &str, lease_sec: u64) -> TestApp {
    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    serve.leader_lease_sec = lease_sec;
    serve.static_capacity = capacity.to_string();
    TestApp::spawn_with(db, serve).await
}

async fn current(app: &TestApp, pool: &str) -> u64 {
    app.get_json(&format!("/v1/pools/{pool}")).await["current"]
        .as_u64()
        .unwrap()
}

/// Waits (up to `within`) until the pool has `n` live workers.
async fn wait_for_workers(app: &TestApp, pool: &str, n: u64, within: Duration) {
    let start = Instant::now();
    loop {
        let now = current(app, pool).await;
        if now == n {
            return;
        }
        if start.elapsed() > within {
            let events = events(app, pool).await;
            panic!("pool {pool} has {now} workers, not {n}, after {within:?}; events: {events:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pool reconciliations `app`'s reconciler has finished, whatever their outcome.
fn reconciles(app: &TestApp) -> u64 {
    ["unchanged", "changed", "observed", "failed"]
        .into_iter()
        .map(|outcome| {
            app.state
                .metrics
                .reconciles
                .get_or_create(&trainscaler::metrics::ReconcileLabels { outcome })
                .get()
        })
        .sum()
}

/// Waits until the reconcilers of `apps` have together finished `n` more pool
/// reconciliations than when called: a test that asserts nothing happened waits for passes
/// that could have done it, not for a guess at how long they take.
async fn wait_for_reconciles(apps: &[&TestApp], n: u64) {
    let count = || apps.iter().map(|a| reconciles(a)).sum::<u64>();
    let from = count();
    let start = Instant::now();
    while count() < from + n {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{n} reconciliations did not happen within 15 s ({} since)",
            count() - from
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Live workers of one type and market in a `/fleet/{pool}` answer.
fn live_count(fleet: &Value, instance_type: &str, market: &str) -> u64 {
    fleet["workers"]
        .as_array()
        .expect("workers in /fleet/{pool}")
        .iter()
        .filter(|g| g["instance_type"] == instance_type && g["market"] == market)
        .map(|g| g["count"].as_u64().unwrap_or(0))
        .sum()
}

async fn events(app: &TestApp, pool: &str) -> Value {
    app.get_json(&format!("/v1/pools/{pool}/events?limit=500"))
        .await["items"]
        .clone()
}

async fn events_of(app: &TestApp, pool: &str, kind: &str) -> Vec<Value> {
    events(app, pool)
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// Posts the pool's waiting and running job counts as of now.
pub(crate) async fn queue(app: &TestApp, pool: &str, waiting: u32, running: u32) {
    samples(
        app,
        json!([{"pool": pool, "name": "queue_depth", "value": waiting, "at": rfc3339_ago(0)},
               {"pool": pool, "name": "running_jobs", "value": running, "at": rfc3339_ago(0)}]),
    )
    .await;
}

async fn static_pool_follows_the_queue_up_and_back_to_zero(backend: Backend) {
    let app = reconciling_app(Arc::new(TestDb::new(backend).await), "", 15).await;
    let reconciler = app.start_reconciler("r1");
    create_pool(&app, "follow", &static_policy()).await;
    let pool = app.get_json("/v1/pools/follow").await;
    assert_eq!(pool["policy"]["provider"], "static", "{pool:#}");
    assert_eq!(pool["policy"]["actuation"], "act", "{pool:#}");
    queue(&app, "follow", 3, 0).await;
    wait_for_workers(&app, "follow", 3, Duration::from_secs(15)).await;

    // The 80/20 default mix, on-demand rounded up: one on-demand, two spot, first type.
    let fleet = app.get_json("/fleet/follow").await;
    assert_eq!(
        live_count(&fleet, "g4dn.12xlarge", "on_demand"),
        1,
        "{fleet:#}"
    );
    assert_eq!(live_count(&fleet, "g4dn.12xlarge", "spot"), 2, "{fleet:#}");
    let steps = events_of(&app, "follow", "reconcile_step").await;
    assert!(
        steps
            .iter()
            .any(|e| e["detail"]["step"]["step"] == "set_capacity"
                && e["detail"]["outcome"] == "ok"
                && e["detail"]["step"]["spec"]["desired"] == 3),
        "{steps:#?}"
    );

    // Nothing new: passes keep running and make no call.
    let before = steps.len();
    wait_for_reconciles(&[&app], 2).await;
    assert_eq!(current(&app, "follow").await, 3);
    assert_eq!(
        events_of(&app, "follow", "reconcile_step").await.len(),
        before,
        "an unchanged pool must not be changed again"
    );

    // Work done: idle for idle_to_zero_after_sec, then every worker goes.
    queue(&app, "follow", 0, 0).await;
    wait_for_workers(&app, "follow", 0, Duration::from_secs(15)).await;
    let steps = events_of(&app, "follow", "reconcile_step").await;
    assert!(
        steps
            .iter()
            .any(|e| e["detail"]["step"]["step"] == "terminate"
                && e["detail"]["step"]["why"] == "scale_down"
                && e["detail"]["outcome"] == "ok"),
        "{steps:#?}"
    );
    assert!(steps.iter().all(|e| e["detail"]["replica"] == "r1"));
    reconciler.stop().await;
}

async fn insufficient_capacity_moves_to_the_next_type(backend: Backend) {
    let app = reconciling_app(Arc::new(TestDb::new(backend).await), "g4dn.12xlarge=1", 15).await;
    let reconciler = app.start_reconciler("r1");
    let mut policy = static_policy();
    policy["spot_percentage"] = json!(0);
    create_pool(&app, "ice", &policy).await;
    queue(&app, "ice", 3, 0).await;
    wait_for_workers(&app, "ice", 3, Duration::from_secs(15)).await;

    let fleet = app.get_json("/fleet/ice").await;
    assert_eq!(
        live_count(&fleet, "g5.12xlarge", "on_demand"),
        3,
        "the next type in priority order: {fleet:#}"
    );
    let steps = events_of(&app, "ice", "reconcile_step").await;
    assert!(
        steps
            .iter()
            .any(|e| e["detail"]["outcome"] == "insufficient_capacity"
                && e["instance_type"] == "g4dn.12xlarge"),
        "{steps:#?}"
    );
    let errors = events_of(&app, "ice", "capacity_error").await;
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["instance_type"], "g4dn.12xlarge");
    // The decision now leaves the type out for the backoff.
    let d = crate::http_pools::decide(&app, "ice").await;
    assert_eq!(d["usable_types"], json!(["g5.12xlarge"]), "{d:#}");
    reconciler.stop().await;
}

async fn observe_mode_records_the_plan_and_changes_nothing(backend: Backend) {
    let app = reconciling_app(Arc::new(TestDb::new(backend).await), "", 15).await;
    let reconciler = app.start_reconciler("r1");
    let mut policy = static_policy();
    policy["actuation"] = json!("observe");
    create_pool(&app, "dry", &policy).await;
    queue(&app, "dry", 2, 0).await;
    let start = Instant::now();
    while events_of(&app, "dry", "reconcile_planned").await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no plan recorded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for_reconciles(&[&app], 2).await;
    let planned = events_of(&app, "dry", "reconcile_planned").await;
    assert_eq!(
        planned.len(),
        1,
        "the same plan is logged once: {planned:#?}"
    );
    assert_eq!(planned[0]["detail"]["decided_desired"], 2);
    assert_eq!(planned[0]["detail"]["steps"][0]["step"], "set_capacity");
    assert_eq!(current(&app, "dry").await, 0, "observe changes nothing");
    assert!(events_of(&app, "dry", "reconcile_step").await.is_empty());
    reconciler.stop().await;
}

async fn live_workers(app: &TestApp, pool: &str) -> Vec<Value> {
    app.get_json(&format!("/v1/pools/{pool}/workers")).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn in_secs(secs: i64) -> String {
    let t = time::OffsetDateTime::now_utc() + time::Duration::seconds(secs);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

async fn interruption_launches_the_replacement_first_and_terminates_after_the_checkpoint(
    backend: Backend,
) {
    let app = reconciling_app(Arc::new(TestDb::new(backend).await), "", 15).await;
    let reconciler = app.start_reconciler("r1");
    let mut policy = static_policy();
    policy["max_interruption_rate"] = json!(10.0);
    create_pool(&app, "irq", &policy).await;
    queue(&app, "irq", 0, 2).await;
    wait_for_workers(&app, "irq", 2, Duration::from_secs(15)).await;
    let spot = live_workers(&app, "irq")
        .await
        .into_iter()
        .find(|w| w["market"] == "spot")
        .expect("a spot worker");
    let doomed = spot["id"].as_str().unwrap().to_string();

    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "interruption_warning", "pool": "irq", "worker": doomed,
                                "at": rfc3339_ago(0), "action_at": in_secs(120)}]}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    // The replacement starts while the interrupted worker saves its state.
    wait_for_workers(&app, "irq", 3, Duration::from_secs(10)).await;
    let workers = live_workers(&app, "irq").await;
    let warned = workers.iter().find(|w| w["id"] == doomed.as_str()).unwrap();
    assert_eq!(warned["warning"], "interruption_warning", "{workers:#?}");
    wait_for_reconciles(&[&app], 2).await;
    assert_eq!(
        live_workers(&app, "irq").await.len(),
        3,
        "kept until its checkpoint (the deadline is two minutes away)"
    );

    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "checkpoint_saved", "pool": "irq", "worker": doomed,
                                "at": rfc3339_ago(0)}]}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    wait_for_workers(&app, "irq", 2, Duration::from_secs(10)).await;
    let workers = live_workers(&app, "irq").await;
    assert!(
        workers.iter().all(|w| w["id"] != doomed.as_str()),
        "{workers:#?}"
    );
    let steps = events_of(&app, "irq", "reconcile_step").await;
    assert!(
        steps
            .iter()
            .any(|e| e["detail"]["step"]["why"] == "interrupted"
                && e["detail"]["step"]["workers"] == json!([doomed])),
        "{steps:#?}"
    );
    reconciler.stop().await;
}

on_both_backends!(
    interruption_launches_the_replacement_first_and_terminates_after_the_checkpoint,
    static_pool_follows_the_queue_up_and_back_to_zero,
    insufficient_capacity_moves_to_the_next_type,
    observe_mode_records_the_plan_and_changes_nothing,
);

/// Of two replicas on one PostgreSQL, only one leads and acts; when it dies (its process
/// and its database session gone), the other takes over within the lease.
#[tokio::test]
async fn two_replicas_one_acts_and_the_other_takes_over() {
    const LEASE_SEC: u64 = 3;
    let db = Arc::new(TestDb::new(Backend::Postgres).await);
    let a = reconciling_app(db.clone(), "", LEASE_SEC).await;
    let b = reconciling_app(db.clone(), "", LEASE_SEC).await;
    let ra = a.start_reconciler("replica-a");
    let rb = b.start_reconciler("replica-b");

    // Exactly one leads, and keeps leading, never both.
    let start = Instant::now();
    while !(*ra.leader.borrow() || *rb.leader.borrow()) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nobody took the lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..50 {
        let (la, lb) = (*ra.leader.borrow(), *rb.leader.borrow());
        assert!(la ^ lb, "exactly one leader, got a={la} b={lb}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a_leads = *ra.leader.borrow();
    let (leader, follower, leader_name, follower_name) = if a_leads {
        (ra, rb, "replica-a", "replica-b")
    } else {
        (rb, ra, "replica-b", "replica-a")
    };

    create_pool(&a, "ha", &static_policy()).await;
    queue(&b, "ha", 2, 0).await;
    wait_for_workers(&a, "ha", 2, Duration::from_secs(15)).await;
    // Both replicas heard of the pool (NOTIFY and their own ticks); only one changed it.
    wait_for_reconciles(&[&a, &b], 2).await;
    assert_eq!(
        current(&b, "ha").await,
        2,
        "one replica acting launches 2, two would launch 4"
    );
    let steps = events_of(&a, "ha", "reconcile_step").await;
    assert!(!steps.is_empty());
    assert!(
        steps.iter().all(|e| e["detail"]["replica"] == leader_name),
        "{steps:#?}"
    );

    // The leader dies without releasing anything.
    leader.abort();
    let died = Instant::now();
    while !*follower.leader.borrow() {
        assert!(
            died.elapsed() < Duration::from_secs(LEASE_SEC),
            "{follower_name} did not take over within the {LEASE_SEC} s lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("takeover after {:?}", died.elapsed());
    queue(&a, "ha", 3, 0).await;
    wait_for_workers(&a, "ha", 3, Duration::from_secs(15)).await;
    // The static provider writes its workers before the step's event commits, so the event
    // may follow the workers by a moment.
    let acted = Instant::now();
    loop {
        let steps = events_of(&a, "ha", "reconcile_step").await;
        if steps
            .iter()
            .any(|e| e["detail"]["replica"] == follower_name)
        {
            break;
        }
        assert!(
            acted.elapsed() < Duration::from_secs(10),
            "the new leader acts: {steps:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    follower.stop().await;
}

/// A leader whose database session is cut (the server ends it, as `idle_session_timeout`
/// would for a silent leader) stops leading at its next renewal, and the other replica takes
/// the lease: never two leaders at once.
#[tokio::test]
async fn a_leader_that_loses_its_session_steps_down_and_the_other_leads() {
    use trainscaler::reconcile::leader::hold_lease;
    use trainscaler::store::{LEADER_LOCK_KEY, Store};
    const LEASE: Duration = Duration::from_millis(1500);
    let db = TestDb::new(Backend::Postgres).await;
    let store = Store::connect(&db.url).await.expect("connect");
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let (a_tx, a) = tokio::sync::watch::channel(false);
    let (b_tx, b) = tokio::sync::watch::channel(false);
    tokio::spawn(hold_lease(store.clone(), LEASE, a_tx, stop.clone()));
    let start = Instant::now();
    while !*a.borrow() {
        assert!(start.elapsed() < Duration::from_secs(5), "a never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::spawn(hold_lease(store.clone(), LEASE, b_tx, stop.clone()));
    tokio::time::sleep(LEASE).await;
    assert!(*a.borrow() && !*b.borrow(), "b waits while a renews");

    // The server ends a's session: the lock goes with it.
    let Store::Postgres(pg) = &store else {
        unreachable!()
    };
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND ((l.classid::bigint << 32) | l.objid::bigint) = $1",
    )
    .bind(LEADER_LOCK_KEY)
    .fetch_all(pg.pool())
    .await
    .expect("end the leader's session");
    assert_eq!(ended, vec![true], "exactly one session held the lease");
    let cut = Instant::now();
    loop {
        let (la, lb) = (*a.borrow(), *b.borrow());
        assert!(!(la && lb), "two leaders at once");
        if !la && lb {
            break;
        }
        assert!(
            cut.elapsed() < LEASE * 2,
            "no hand-over within two leases: a={la} b={lb}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("hand-over after the session was cut: {:?}", cut.elapsed());
    let _ = stop_tx.send(true);
}
