//! Catalog uploads over HTTP: idempotent imports and malformed files named by line.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem, aws_fixture, post_declaring_length};
use crate::on_both_backends;

async fn upload(app: &TestApp, query: &str, csv: String) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/v1/catalog/import?{query}")))
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap()
}

async fn importing_a_file_twice_changes_nothing_the_second_time(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    assert_eq!(app.get_json("/readyz").await["catalog_offerings"], 0);
    let q = "provider=aws&format=skypilot&observed_at=2026-11-01T00:00:00Z";
    let first: Value = upload(&app, q, aws_fixture("2.4655"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        first,
        json!({"offerings_added": 3, "offerings_updated": 0, "offerings_unchanged": 0, "prices_appended": 5})
    );
    let second: Value = upload(&app, q, aws_fixture("2.4655"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        second,
        json!({"offerings_added": 0, "offerings_updated": 0, "offerings_unchanged": 3, "prices_appended": 0})
    );
    // The snapshot was reloaded: the new offerings are listed at once.
    let listed = app.get_json("/v1/offerings?provider=aws&limit=10").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 3);
    assert_eq!(listed["items"][0]["instance_type"], "g5.xlarge");
    assert_eq!(
        listed["items"][0]["price_observed_at"],
        "2026-11-01T00:00:00Z"
    );
}

async fn a_malformed_file_is_422_naming_its_line_and_writes_nothing(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    let bad =
        aws_fixture("2.4655") + "g5.2xlarge,A10G,1.0,8.0,32.0,,not-a-price,,us-east-1,,x86_64\n";
    let problem = assert_problem(upload(&app, "provider=aws", bad).await, 422, "body").await;
    assert_eq!(problem["errors"][0]["line"], 5);
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("line 5, column Price"),
        "{problem}"
    );
    let ragged = aws_fixture("2.4655") + "g5.2xlarge,A10G\n";
    let problem = assert_problem(upload(&app, "provider=aws", ragged).await, 422, "body").await;
    assert_eq!(problem["errors"][0]["line"], 5);
    assert_eq!(app.get_json("/readyz").await["catalog_offerings"], 0);
}

async fn uploads_for_unknown_providers_or_of_the_wrong_type_are_refused(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    assert_problem(
        upload(&app, "provider=oraclecloud", aws_fixture("1")).await,
        404,
        "provider",
    )
    .await;
    assert_problem(
        upload(&app, "provider=aws&format=excel", aws_fixture("1")).await,
        400,
        "format",
    )
    .await;
    let json_body = app
        .client
        .post(app.url("/v1/catalog/import?provider=aws"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_problem(json_body, 415, "content-type").await;
}

async fn a_catalog_over_the_upload_limit_is_413(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    // The test server allows 8 MiB catalogs (the default is 64 MiB).
    let (status, content_type, problem) = post_declaring_length(
        &app,
        "/v1/catalog/import?provider=aws",
        "text/csv",
        8 * 1024 * 1024 + 1,
    )
    .await;
    assert_eq!(
        (status, content_type.as_str()),
        (413, "application/problem+json")
    );
    assert_eq!(problem["errors"][0]["field"], "body");
    // JSON routes keep their 1 MiB limit; the catalog limit applies to uploads only.
    let (status, _, _) =
        post_declaring_length(&app, "/v1/prices", "application/json", 2 * 1024 * 1024).await;
    assert_eq!(status, 413);
}

async fn a_different_price_at_the_same_observation_time_is_a_conflict(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    let q = "provider=aws&observed_at=2026-11-01T00:00:00Z";
    assert_eq!(upload(&app, q, aws_fixture("5.00")).await.status(), 200);
    // A corrected file must say when it was observed; the same time with another price is 409,
    // and the whole import is rolled back, including its new offering.
    let corrected =
        aws_fixture("6.00") + "g5.2xlarge,A10G,1.0,8.0,32.0,,1.212,,us-east-1,,x86_64\n";
    let problem = assert_problem(upload(&app, q, corrected.clone()).await, 409, "body").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("p4d.24xlarge"),
        "{problem}"
    );
    assert_eq!(app.get_json("/readyz").await["catalog_offerings"], 3);
    let later = "provider=aws&observed_at=2026-11-02T00:00:00Z";
    let report: Value = upload(&app, later, corrected).await.json().await.unwrap();
    assert_eq!(
        (
            report["offerings_added"].as_u64(),
            report["prices_appended"].as_u64()
        ),
        (Some(1), Some(2))
    );
}

async fn a_future_observation_time_is_refused(backend: Backend) {
    let app = TestApp::spawn_empty(backend).await;
    let response = upload(
        &app,
        "provider=aws&observed_at=2999-01-01T00:00:00Z",
        aws_fixture("1"),
    )
    .await;
    assert_problem(response, 422, "observed_at").await;
}

on_both_backends!(
    a_different_price_at_the_same_observation_time_is_a_conflict,
    a_future_observation_time_is_refused,
    importing_a_file_twice_changes_nothing_the_second_time,
    a_malformed_file_is_422_naming_its_line_and_writes_nothing,
    uploads_for_unknown_providers_or_of_the_wrong_type_are_refused,
    a_catalog_over_the_upload_limit_is_413,
);
