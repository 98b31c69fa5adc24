//! The HTTP surface around the handlers: OpenAPI, the API page, request ids, compression, CORS,
//! and problem documents for routing errors.

use std::io::Read;

use crate::common::{Backend, TestApp};
use crate::on_both_backends;

async fn the_served_spec_is_the_committed_spec(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let served = app.get_json("/openapi.json").await;
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../openapi/openapi.json")).unwrap();
    assert_eq!(served, committed);
    let docs = app.get("/docs").await;
    assert_eq!(docs.status(), 200);
    assert!(docs.text().await.unwrap().contains("openapi"));
}

async fn responses_carry_a_request_id_and_honour_gzip(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let response = app
        .client
        .get(app.url("/v1/offerings?gpu=T4&limit=200"))
        .header("accept-encoding", "gzip")
        .header("origin", "https://grafana.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(headers.get("x-request-id").is_some_and(|v| v.len() >= 32));
    assert_eq!(headers.get("content-encoding").unwrap(), "gzip");
    assert_eq!(headers.get("access-control-allow-origin").unwrap(), "*");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&response.bytes().await.unwrap()[..])
        .read_to_string(&mut text)
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["items"].as_array().unwrap().len(), 200);

    let given = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(given.headers().get("x-request-id").unwrap(), "trace-me-42");
}

async fn unknown_routes_and_methods_are_problems(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let missing = app.get("/v2/nothing").await;
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.headers().get("content-type").unwrap(),
        "application/problem+json"
    );
    let bad_path = app.get("/v1/offerings/aws/%FF%FE").await;
    assert_eq!(bad_path.status(), 400);
    let body: serde_json::Value = bad_path.json().await.unwrap();
    assert_eq!(body["errors"][0]["field"], "path");
    let wrong = app
        .client
        .delete(app.url("/v1/offerings"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 405);
    assert!(wrong.headers().get("allow").is_some());
    assert_eq!(
        wrong.headers().get("content-type").unwrap(),
        "application/problem+json"
    );
}

async fn cors_answers_browsers_and_every_answer_varies_by_origin(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let vary = |r: &reqwest::Response| {
        r.headers()
            .get_all("vary")
            .iter()
            .map(|v| v.to_str().unwrap().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(",")
    };
    // A scheduler or a probe: no CORS headers, but caches are told the answer depends on it.
    let plain = app.get("/v1/offerings?gpu=T4&limit=1").await;
    assert_eq!(plain.status(), 200);
    assert!(plain.headers().get("access-control-allow-origin").is_none());
    assert!(vary(&plain).contains("origin"), "{}", vary(&plain));
    // A dashboard in a browser.
    let browser = app
        .client
        .get(app.url("/v1/offerings?gpu=T4&limit=1"))
        .header("origin", "https://grafana.example")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), 200);
    assert_eq!(
        browser
            .headers()
            .get("access-control-allow-origin")
            .unwrap(),
        "*"
    );
    assert!(vary(&browser).contains("origin"), "{}", vary(&browser));
    // Its preflight, before a keyed POST.
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/decide"))
        .header("origin", "https://grafana.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let methods = preflight
        .headers()
        .get("access-control-allow-methods")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(methods.contains("POST"), "{methods}");
}

on_both_backends!(
    the_served_spec_is_the_committed_spec,
    responses_carry_a_request_id_and_honour_gzip,
    unknown_routes_and_methods_are_problems,
    cors_answers_browsers_and_every_answer_varies_by_origin,
);
