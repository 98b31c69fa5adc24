//! `/metrics` in both text formats: OpenMetrics by default, the classic Prometheus format when
//! the scraper asks for `text/plain;version=0.0.4`; HELP on every family in both, and
//! `promtool check metrics` (Debian's `prometheus` package) accepts the classic one.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{Backend, TestApp, header_text};
use crate::http_pools::{create_pool, samples, t4_policy};
use crate::on_both_backends;

/// Every `# TYPE` family has a `# HELP` line of the same name.
fn families_without_help(text: &str) -> Vec<String> {
    let helped: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .filter(|name| !helped.contains(name))
        .map(str::to_string)
        .collect()
}

fn promtool_check(text: &str) -> (bool, String) {
    let promtool = std::env::var_os("PROMTOOL").unwrap_or_else(|| "promtool".into());
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e}. Install Debian's `prometheus` package (`apt-get install \
                 prometheus`; .ci/run does) or set PROMTOOL to a promtool binary",
                promtool.to_string_lossy()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && said.trim().is_empty(), said)
}

async fn metrics_answer_in_the_format_the_scraper_asks_for(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut policy = t4_policy();
    policy["daily_budget"] = json!(100);
    create_pool(&app, "gpu-t4", &policy).await;
    samples(
        &app,
        json!([{"pool": "gpu-t4", "name": "queue_depth", "value": 3}]),
    )
    .await;
    let r = app.post_json("/decide", &json!({"pool": "gpu-t4"})).await;
    assert_eq!(r.status(), 200);

    let r = app.get("/metrics").await;
    assert_eq!(r.status(), 200);
    assert!(header_text(&r, "content-type").starts_with("application/openmetrics-text"));
    let openmetrics = r.text().await.unwrap();
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert!(openmetrics.contains("# TYPE trainscaler_decisions counter"));
    assert_eq!(families_without_help(&openmetrics), Vec::<String>::new());

    let r = app
        .client
        .get(app.url("/metrics"))
        .header("accept", "text/plain;version=0.0.4")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header_text(&r, "content-type").starts_with("text/plain; version=0.0.4"));
    let classic = r.text().await.unwrap();
    assert!(!classic.contains("# EOF"), "{classic}");
    assert!(classic.contains("# TYPE trainscaler_decisions_total counter"));
    assert!(classic.contains("trainscaler_pool_daily_budget_dollars{pool=\"gpu-t4\"} 100"));
    assert!(!classic.contains("-0.0"), "{classic}");
    assert_eq!(families_without_help(&classic), Vec::<String>::new());
    let (ok, said) = promtool_check(&classic);
    assert!(ok, "promtool check metrics: {said}\n{classic}");

    // Prometheus' own default header prefers OpenMetrics.
    let r = app
        .client
        .get(app.url("/metrics"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
        )
        .send()
        .await
        .unwrap();
    assert!(header_text(&r, "content-type").starts_with("application/openmetrics-text"));
}

/// The label sets of the HTTP latency histogram and the decision counter in `text`.
fn series(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| {
            l.starts_with("trainscaler_http_request_duration_seconds_count{")
                || l.starts_with("trainscaler_decisions_total{")
        })
        .filter_map(|l| l.split_once(' ').map(|(s, _)| s.to_string()))
        .collect();
    out.sort();
    out
}

/// Sends `n` requests with made-up methods and paths, without a key and with the admin key.
async fn flood(app: &TestApp, tag: &str, n: usize) {
    let anonymous = reqwest::Client::new();
    for i in 0..n {
        let method = reqwest::Method::from_bytes(format!("M{tag}X{i}").as_bytes()).unwrap();
        let path = format!("/v1/{tag}/{i}");
        for client in [&anonymous, &app.client] {
            let r = client
                .request(method.clone(), app.url(&path))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_client_error(), "{}", r.status());
            let r = client.get(app.url(&path)).send().await.unwrap();
            assert!(r.status().is_client_error(), "{}", r.status());
            let r = client
                .request(method.clone(), app.url("/v1/pools"))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_client_error(), "{}", r.status());
        }
    }
}

/// Made-up methods end up as `other` and made-up paths add nothing: a second flood with new ones
/// adds no series, and no label carries what a client sent. A deleted pool's decision series
/// go at the next scrape.
async fn random_methods_and_paths_do_not_grow_metrics(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    create_pool(&app, "gpu-t4", &t4_policy()).await;
    let r = app.post_json("/decide", &json!({"pool": "gpu-t4"})).await;
    assert_eq!(r.status(), 200);
    // A first scrape, so that the scrape's own series is there before either flood.
    assert_eq!(app.get("/metrics").await.status(), 200);
    flood(&app, "a", 20).await;
    let first = series(&app.get("/metrics").await.text().await.unwrap());
    flood(&app, "b", 20).await;
    let text = app.get("/metrics").await.text().await.unwrap();
    let second = series(&text);
    assert_eq!(first, second, "a second flood added series");
    assert!(!text.contains("MaX") && !text.contains("MbX"), "{text}");
    assert!(
        !text.contains("/v1/a/") && !text.contains("/v1/b/"),
        "{text}"
    );
    assert!(text.contains("method=\"other\""), "{text}");
    assert!(text.contains("pool=\"gpu-t4\""), "{text}");

    let r = app.delete("/v1/pools/gpu-t4").await;
    assert!(r.status().is_success(), "{}", r.status());
    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(!text.contains("pool=\"gpu-t4\""), "{text}");
}

on_both_backends!(
    metrics_answer_in_the_format_the_scraper_asks_for,
    random_methods_and_paths_do_not_grow_metrics,
);
