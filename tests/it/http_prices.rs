//! Black-box tests of price ingestion and history over HTTP.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem, p4d_use1_az1_spot, post_declaring_length};
use crate::on_both_backends;

fn p4d_spot(price: Value, observed_at: &str) -> Value {
    json!({
        "provider": "aws", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "market": "spot",
        "price": price, "observed_at": observed_at
    })
}

async fn history_len(app: &TestApp) -> usize {
    app.get_json("/v1/prices/history?provider=aws&instance_type=p4d.24xlarge&limit=10000")
        .await["items"]
        .as_array()
        .unwrap()
        .len()
}

async fn a_new_observation_becomes_the_listed_price_and_resending_is_a_no_op(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_eq!(p4d_use1_az1_spot(&app).await, Some(2.4655));
    let batch = json!({"observations": [p4d_spot(json!(3.25), "2026-12-01T10:00:00Z")]});
    let first: Value = app
        .post_json("/v1/prices", &batch)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first, json!({"inserted": 1, "duplicates": 0}));
    assert_eq!(p4d_use1_az1_spot(&app).await, Some(3.25));
    let before = history_len(&app).await;
    let again: Value = app
        .post_json("/v1/prices", &batch)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again, json!({"inserted": 0, "duplicates": 1}));
    assert_eq!(history_len(&app).await, before);
    // An older observation is history, not the current price.
    let older = json!({"observations": [p4d_spot(json!(9.0), "2026-06-01T00:00:00Z")]});
    assert_eq!(app.post_json("/v1/prices", &older).await.status(), 200);
    assert_eq!(p4d_use1_az1_spot(&app).await, Some(3.25));
}

async fn negative_and_non_numeric_prices_are_422_naming_the_item(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let before = history_len(&app).await;
    let negative = json!({"observations": [
        p4d_spot(json!(2.0), "2026-12-01T10:00:00Z"),
        p4d_spot(json!(-1.5), "2026-12-01T11:00:00Z"),
    ]});
    assert_problem(
        app.post_json("/v1/prices", &negative).await,
        422,
        "observations[1].price",
    )
    .await;
    let text = json!({"observations": [p4d_spot(json!("cheap"), "2026-12-01T10:00:00Z")]});
    assert_problem(
        app.post_json("/v1/prices", &text).await,
        422,
        "observations[0].price",
    )
    .await;
    let bad_time = json!({"observations": [p4d_spot(json!(2.0), "yesterday")]});
    assert_problem(
        app.post_json("/v1/prices", &bad_time).await,
        422,
        "observations[0].observed_at",
    )
    .await;
    let future = json!({"observations": [p4d_spot(json!(0.01), "9999-12-31T23:59:59Z")]});
    assert_problem(
        app.post_json("/v1/prices", &future).await,
        422,
        "observations[0].observed_at",
    )
    .await;
    assert_eq!(p4d_use1_az1_spot(&app).await, Some(2.4655));
    let mut bad_market = p4d_spot(json!(2.0), "2026-12-01T10:00:00Z");
    bad_market["market"] = json!("reserved");
    assert_problem(
        app.post_json("/v1/prices", &json!({"observations": [bad_market]}))
            .await,
        422,
        "observations[0].market",
    )
    .await;
    // The valid first item of a rejected batch was not written.
    assert_eq!(history_len(&app).await, before);
}

async fn an_observation_for_an_unknown_offering_rejects_the_whole_batch(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let before = history_len(&app).await;
    let mut unknown = p4d_spot(json!(2.0), "2026-12-01T10:00:00Z");
    unknown["zone"] = json!("use1-az99");
    let batch = json!({"observations": [p4d_spot(json!(2.0), "2026-12-01T10:00:00Z"), unknown]});
    assert_problem(
        app.post_json("/v1/prices", &batch).await,
        422,
        "observations[1]",
    )
    .await;
    let mut provider = p4d_spot(json!(2.0), "2026-12-01T10:00:00Z");
    provider["provider"] = json!("oraclecloud");
    let batch = json!({"observations": [provider]});
    assert_problem(
        app.post_json("/v1/prices", &batch).await,
        404,
        "observations[0].provider",
    )
    .await;
    assert_eq!(history_len(&app).await, before);
}

async fn a_conflicting_resend_is_409(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let at = "2026-12-01T10:00:00Z";
    assert_eq!(
        app.post_json(
            "/v1/prices",
            &json!({"observations": [p4d_spot(json!(3.0), at)]})
        )
        .await
        .status(),
        200
    );
    let conflict = json!({"observations": [p4d_spot(json!(4.0), at)]});
    assert_problem(
        app.post_json("/v1/prices", &conflict).await,
        409,
        "observations[0]",
    )
    .await;
}

async fn malformed_bodies_are_problems(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let not_json = app
        .client
        .post(app.url("/v1/prices"))
        .header("content-type", "application/json")
        .body("{\"observations\": [")
        .send()
        .await
        .unwrap();
    // Syntax errors name where the JSON broke off.
    assert_problem(not_json, 400, "observations").await;
    let form = app
        .client
        .post(app.url("/v1/prices"))
        .body("a=b")
        .send()
        .await
        .unwrap();
    assert_problem(form, 415, "content-type").await;
    assert_problem(
        app.post_json("/v1/prices", &json!({"observations": []}))
            .await,
        422,
        "observations",
    )
    .await;
    let trailing = app
        .client
        .post(app.url("/v1/prices"))
        .header("content-type", "application/json")
        .body(format!(
            "{} trailing",
            json!({"observations": [p4d_spot(json!(2.0), "2026-12-01T10:00:00Z")]})
        ))
        .send()
        .await
        .unwrap();
    assert_problem(trailing, 400, "body").await;
    assert_problem(
        app.post_json("/v1/prices", &json!({"prices": []})).await,
        422,
        "prices",
    )
    .await;
}

async fn an_oversized_body_is_413(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (status, content_type, problem) =
        post_declaring_length(&app, "/v1/prices", "application/json", 1024 * 1024 + 1).await;
    assert_eq!(
        (status, content_type.as_str()),
        (413, "application/problem+json")
    );
    assert_eq!(problem["errors"][0]["field"], "body");
    // The limit is inclusive: a body of exactly 1 MiB is read (and then judged on content).
    let padded = format!("{{\"observations\": []{}}}", " ".repeat(1024 * 1024 - 20));
    assert_eq!(padded.len(), 1024 * 1024);
    let response = app
        .client
        .post(app.url("/v1/prices"))
        .header("content-type", "application/json")
        .body(padded)
        .send()
        .await
        .unwrap();
    assert_problem(response, 422, "observations").await;
}

async fn history_pages_through_a_time_range(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let observations: Vec<Value> = (10..16)
        .map(|h| {
            p4d_spot(
                json!(2.0 + h as f64 / 100.0),
                &format!("2026-12-01T{h}:00:00Z"),
            )
        })
        .collect();
    assert_eq!(
        app.post_json("/v1/prices", &json!({"observations": observations}))
            .await
            .status(),
        200
    );
    let base = "/v1/prices/history?provider=aws&instance_type=p4d.24xlarge&zone=use1-az1&market=spot\
                &from=2026-12-01T11:00:00Z&to=2026-12-01T15:00:00Z&limit=3";
    let first = app.get_json(base).await;
    let prices: Vec<f64> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["price"].as_f64().unwrap())
        .collect();
    assert_eq!(prices, vec![2.11, 2.12, 2.13]);
    let next = first["next"].as_str().expect("a second page");
    let second = app.get_json(&format!("{base}&cursor={next}")).await;
    let prices: Vec<f64> = second["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["price"].as_f64().unwrap())
        .collect();
    assert_eq!(prices, vec![2.14]);
    assert!(second["next"].is_null());
    assert_eq!(second["items"][0]["observed_at"], "2026-12-01T14:00:00Z");
    assert_eq!(second["items"][0]["source"], "api");
}

/// Scrapers re-send overlapping batches in any order, at the same time. Inserting the same
/// rows in opposite orders from two transactions is the classic deadlock.
async fn overlapping_batches_sent_at_once_all_land(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut inserted = 0;
    for round in 0..5 {
        let observations: Vec<Value> = (0..300)
            .map(|s| {
                let at = format!("2026-11-0{}T{:02}:{:02}:00Z", round + 1, s / 60, s % 60);
                p4d_spot(json!(2.0 + s as f64 / 1000.0), &at)
            })
            .collect();
        let mut reversed = observations.clone();
        reversed.reverse();
        let forward = json!({"observations": observations});
        let backward = json!({"observations": reversed});
        let (a, b) = tokio::join!(
            app.post_json("/v1/prices", &forward),
            app.post_json("/v1/prices", &backward)
        );
        for response in [a, b] {
            assert_eq!(response.status(), 200);
            let report: Value = response.json().await.unwrap();
            let (new, dup) = (
                report["inserted"].as_u64().unwrap(),
                report["duplicates"].as_u64().unwrap(),
            );
            assert_eq!(new + dup, 300);
            inserted += new;
        }
    }
    assert_eq!(inserted, 1500, "each observation is recorded exactly once");
    assert_eq!(p4d_use1_az1_spot(&app).await, Some(2.299));
}

on_both_backends!(
    a_new_observation_becomes_the_listed_price_and_resending_is_a_no_op,
    negative_and_non_numeric_prices_are_422_naming_the_item,
    an_observation_for_an_unknown_offering_rejects_the_whole_batch,
    a_conflicting_resend_is_409,
    malformed_bodies_are_problems,
    an_oversized_body_is_413,
    history_pages_through_a_time_range,
    overlapping_batches_sent_at_once_all_land,
);
