//! Every list endpoint answers `{"items": [...], "next": cursor|null}` and pages by cursor:
//! pools, workers, events, keys, benchmark summaries, GPUs and providers.

use serde_json::{Value, json};

use crate::auth::make_key;
use crate::common::{Backend, TestApp, assert_problem};
use crate::http_pools::{create_pool, put, rfc3339_ago, t4_policy};
use crate::on_both_backends;

/// Follows `next` from the first page of `path` (which has no query yet) with pages of
/// `limit`, and returns each page's values of `field`.
async fn walk(app: &TestApp, path: &str, limit: usize, field: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut url = format!("{path}?limit={limit}");
    loop {
        let page = app.get_json(&url).await;
        let keys: Vec<&str> = page
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            keys.contains(&"items") && keys.contains(&"next"),
            "{path}: {page}"
        );
        pages.push(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i[field].as_str().unwrap().to_string())
                .collect(),
        );
        match &page["next"] {
            Value::Null => return pages,
            Value::String(c) => url = format!("{path}?limit={limit}&cursor={c}"),
            other => panic!("{path}: next is {other}"),
        }
        assert!(pages.len() < 20, "{path}: endless pages");
    }
}

async fn pools_workers_and_keys_page_by_cursor(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for name in ["c-pool", "a-pool", "b-pool"] {
        create_pool(&app, name, &t4_policy()).await;
    }
    assert_eq!(
        walk(&app, "/v1/pools", 2, "name").await,
        vec![vec!["a-pool", "b-pool"], vec!["c-pool"]]
    );

    // Oldest first: w-late started after w-early although registered first.
    for (id, ago) in [("w-late", 60), ("w-early", 600), ("w-mid", 300)] {
        let r = put(
            &app,
            &format!("/v1/pools/a-pool/workers/{id}"),
            &json!({"instance_type": "g4dn.12xlarge", "market": "spot", "started_at": rfc3339_ago(ago)}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
    assert_eq!(
        walk(&app, "/v1/pools/a-pool/workers", 2, "id").await,
        vec![vec!["w-early", "w-mid"], vec!["w-late"]]
    );

    let (_, second) = make_key(&app, &["read"]).await;
    let (_, third) = make_key(&app, &["ingest"]).await;
    let pages = walk(&app, "/v1/keys", 1, "id").await;
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert_eq!(pages[1], vec![second]);
    assert_eq!(pages[2], vec![third]);

    // A page that holds everything says so with a null `next`.
    let all = app.get_json("/v1/pools").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    assert_eq!(all["next"], Value::Null);

    // Bad paging input is named.
    assert_problem(app.get("/v1/pools?cursor=nonsense").await, 400, "cursor").await;
    assert_problem(app.get("/v1/keys?limit=0").await, 422, "limit").await;
    let events = app.get_json("/v1/pools/a-pool/events").await;
    assert_eq!(events["next"], Value::Null);
    assert!(events["items"].is_array());
}

async fn catalog_lists_page_by_cursor(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let providers = walk(&app, "/v1/providers", 2, "name").await;
    let names: Vec<String> = providers.concat();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "by name, each once");
    assert!(names.contains(&"aws".to_string()), "{names:?}");
    assert!(providers.iter().all(|p| p.len() <= 2));

    let gpus = walk(&app, "/v1/gpus", 5, "name").await.concat();
    let whole = app.get_json("/v1/gpus?limit=500").await;
    assert_eq!(gpus.len(), whole["items"].as_array().unwrap().len());

    let summaries = app
        .get_json("/v1/benchmarks?workload=nothing-measured")
        .await;
    assert_eq!(
        summaries,
        json!({"workload": "nothing-measured", "items": [], "next": null})
    );
}

/// The edges schemathesis found where the spec and the handlers disagreed now agree: an empty
/// `limit=` is a 422 and an empty `cursor=` a 400 on every list (the spec: `minimum: 1`,
/// `minLength: 1`), `max_price=0` is a 422 (the spec: `exclusiveMinimum: 0`), and `steps`
/// above the spec's maximum is a 422 naming it.
async fn empty_limits_and_cursors_and_out_of_range_values_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for path in [
        "/v1/pools",
        "/v1/offerings?gpu=L4",
        "/v1/prices/history?provider=aws",
    ] {
        let sep = if path.contains('?') { '&' } else { '?' };
        let r = app.get(&format!("{path}{sep}limit=")).await;
        assert_problem(r, 422, "limit").await;
        let r = app.get(&format!("{path}{sep}cursor=")).await;
        assert_problem(r, 400, "cursor").await;
    }
    assert_problem(app.get("/v1/offerings?max_price=0").await, 422, "max_price").await;
    let r = app
        .post_json(
            "/v1/benchmarks/plan",
            &json!({"job": {"params_billion": 7.0, "tokens": 2e10}, "steps": 1_000_000_001u64}),
        )
        .await;
    assert_problem(r, 422, "steps").await;
    // The spec states the same bounds.
    let spec = app.get_json("/openapi.json").await;
    let offerings = &spec["paths"]["/v1/offerings"]["get"]["parameters"];
    let param = |name: &str| {
        offerings
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no parameter {name}"))
    };
    assert_eq!(
        param("max_price")["schema"]["exclusiveMinimum"],
        json!(0),
        "{offerings}"
    );
    assert_eq!(
        param("cursor")["schema"]["minLength"],
        json!(1),
        "{offerings}"
    );
    let plan = &spec["components"]["schemas"]["PlanRequest"]["properties"]["steps"];
    assert_eq!(plan["maximum"], json!(1_000_000_000), "{plan}");
}

on_both_backends!(
    empty_limits_and_cursors_and_out_of_range_values_are_refused,
    pools_workers_and_keys_page_by_cursor,
    catalog_lists_page_by_cursor
);
