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

on_both_backends!(metrics_answer_in_the_format_the_scraper_asks_for);
