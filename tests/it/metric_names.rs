//! Every metric that the Grafana dashboard (`deploy/grafana/trainscaler.json`) and the Helm
//! chart's alerts (`deploy/helm/trainscaler/templates/prometheusrule.yaml`) name is one that
//! `/metrics` exports, and every label they select or group by is one that metric carries.
//! The names come from scraping a running server whose reconciler has just driven a pool and
//! which has recorded samples and a cloud event, so that the families have series with their
//! labels (a labelled family with no series does not appear in `/metrics` at all).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::http_pools::{create_pool, decide, rfc3339_ago, samples};

/// Labels Prometheus adds from the scrape target, not the service.
const TARGET_LABELS: &[&str] = &[
    "job",
    "instance",
    "namespace",
    "pod",
    "service",
    "endpoint",
    "container",
];

/// What `/metrics` exports: sample names, and the labels seen on each.
#[derive(Debug, Default)]
struct Exported {
    names: BTreeSet<String>,
    labels: BTreeMap<String, BTreeSet<String>>,
}

fn exported(text: &str) -> Exported {
    let mut e = Exported::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            e.names
                .extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..end];
            let labels = e.labels.entry(name.to_string()).or_default();
            if line[end..].starts_with('{') {
                labels.extend(label_names(&line[end + 1..]));
            }
        }
    }
    e
}

/// Label names of `a="x",b="y\"z"}...`, up to the closing brace.
fn label_names(s: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.trim().is_empty() {
            return names;
        }
        names.push(name.trim_start_matches(',').trim().to_string());
        // The quoted value, with backslash escapes.
        chars.next();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                _ => {}
            }
        }
        if chars.peek() == Some(&'}') {
            return names;
        }
    }
}

/// One PromQL expression's references: metric names with the labels their selector names,
/// the labels it groups or matches by, and the labels `label_replace` makes.
#[derive(Debug, Default)]
struct Refs {
    metrics: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
    made: Vec<String>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn refs(expr: &str) -> Refs {
    let mut r = Refs::default();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < expr.len() {
        let rest = &expr[i..];
        let boundary = i == 0 || !is_ident(b[i - 1] as char);
        if boundary && rest.starts_with("trainscaler_") {
            let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            let name = rest[..len].to_string();
            let mut matchers = Vec::new();
            if rest[len..].starts_with('{') {
                let close = rest[len..].find('}').expect("a closed selector") + len;
                for m in rest[len + 1..close].split(',') {
                    let label: String = m.trim().chars().take_while(|c| is_ident(*c)).collect();
                    if !label.is_empty() {
                        matchers.push(label);
                    }
                }
            }
            r.metrics.push((name, matchers));
            i += len;
            continue;
        }
        for keyword in [
            "by",
            "on",
            "without",
            "ignoring",
            "group_left",
            "group_right",
        ] {
            let after = rest.strip_prefix(keyword).map(str::trim_start);
            if boundary
                && let Some(after) = after.filter(|a| a.starts_with('('))
                && !rest[keyword.len()..].starts_with(is_ident)
            {
                let close = after.find(')').expect("a closed label list");
                r.grouping.extend(
                    after[1..close]
                        .split(',')
                        .map(|l| l.trim().to_string())
                        .filter(|l| !l.is_empty()),
                );
            }
        }
        if boundary && let Some(args) = rest.strip_prefix("label_replace(") {
            // label_replace(v, "dst", "replacement", "src", "regex"): the first quoted string.
            if let Some(start) = args.find('"') {
                let len = args[start + 1..].find('"').expect("a closed string");
                r.made.push(args[start + 1..start + 1 + len].to_string());
            }
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    r
}

/// Every PromQL expression of the dashboard: panel targets and variable queries.
fn dashboard_exprs() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/trainscaler.json"
    );
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(t["expr"].as_str().expect("a target's expr").to_string());
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str().or(v["query"].as_str()) {
            out.push(q.to_string());
        }
    }
    out
}

/// Every `expr:` of the chart's PrometheusRule template, with Helm's actions (`{{ ... }}`:
/// the release's job and namespace selector, thresholds from values) removed. Names and
/// labels of the service's metrics are literal in the template.
fn rule_exprs() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/helm/trainscaler/templates/prometheusrule.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let expr = if value.trim() == "|-" {
            lines[i + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent)
                .copied()
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            value.to_string()
        };
        out.push(without_actions(&expr));
    }
    out
}

fn without_actions(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed action") + start + 2;
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The problems of `expr` against what the service exports.
fn problems(expr: &str, e: &Exported) -> Vec<String> {
    let r = refs(expr);
    let mut found = Vec::new();
    let mut carried: BTreeSet<String> = TARGET_LABELS.iter().map(|l| l.to_string()).collect();
    carried.extend(r.made.iter().cloned());
    for (name, matchers) in &r.metrics {
        if !e.names.contains(name) {
            found.push(format!("`{name}` is not exported"));
            continue;
        }
        if let Some(labels) = e.labels.get(name) {
            carried.extend(labels.iter().cloned());
            for m in matchers {
                if !labels.contains(m) && !TARGET_LABELS.contains(&m.as_str()) {
                    found.push(format!("`{name}` has no label `{m}` (it has {labels:?})"));
                }
            }
        } else {
            // No series in the scrape: trust the labels it is selected by for grouping.
            carried.extend(matchers.iter().cloned());
        }
    }
    for g in &r.grouping {
        if !carried.contains(g) {
            found.push(format!("grouping by `{g}`, which no metric here carries"));
        }
    }
    found
}

/// A server whose reconciler has driven a static pool up, with GPU signals for a worker and a
/// cloud event, so that decision, reconciler, provider, leader, per-worker and event series
/// exist.
async fn busy_server() -> (TestApp, trainscaler::app::ReconcilerHandle) {
    let mut serve = serve_config(false);
    serve.reconcile_interval_sec = 1;
    serve.leader_lease_sec = 2;
    let app = TestApp::spawn_with(
        std::sync::Arc::new(TestDb::new(Backend::Sqlite).await),
        serve,
    )
    .await;
    let reconciler = app.start_reconciler("r1");
    create_pool(
        &app,
        "metrics",
        &json!({"region": "us-east-1", "instance_types": ["g4dn.12xlarge"], "max_workers": 2,
                "daily_budget": 1000}),
    )
    .await;
    samples(
        &app,
        json!([{"pool": "metrics", "name": "queue_depth", "value": 2, "at": rfc3339_ago(0)}]),
    )
    .await;
    decide(&app, "metrics").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let worker = loop {
        let fleet = app.get_json("/fleet/metrics").await;
        if let Some(id) = fleet["worker_signals"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "the reconciler never started a worker: {fleet:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    samples(
        &app,
        json!([
            {"pool": "metrics", "worker": worker, "name": "gpu_utilization", "value": 0.8, "at": rfc3339_ago(0)},
            {"pool": "metrics", "worker": worker, "name": "gpu_memory_used_gib", "value": 11.5, "at": rfc3339_ago(0)}
        ]),
    )
    .await;
    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "capacity_error", "pool": "metrics",
                                "instance_type": "g4dn.12xlarge", "zone": "us-east-1a",
                                "message": "InsufficientInstanceCapacity"}]}),
        )
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    (app, reconciler)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_alerts_name_only_exported_metrics_and_labels() {
    let (app, _reconciler) = busy_server().await;
    let text = app.get("/metrics").await.text().await.unwrap();
    let e = exported(&text);
    // The series this scrape must carry, or the label checks below would be hollow.
    for family in [
        "trainscaler_decisions_total",
        "trainscaler_samples_ingested_total",
        "trainscaler_cloud_events_total",
        "trainscaler_reconciles_total",
        "trainscaler_provider_calls_total",
        "trainscaler_provider_call_duration_seconds_bucket",
        "trainscaler_reconcile_leader",
        "trainscaler_pool_workers_current",
        "trainscaler_pool_daily_budget_dollars",
        "trainscaler_worker_gpu_memory_used_gib",
        "trainscaler_http_request_duration_seconds_bucket",
    ] {
        assert!(
            e.labels.contains_key(family),
            "{family} has no series in the scrape:\n{text}"
        );
    }

    let dashboard = dashboard_exprs();
    let rules = rule_exprs();
    assert!(
        dashboard.len() >= 25,
        "{} dashboard expressions",
        dashboard.len()
    );
    assert_eq!(rules.len(), 5, "{rules:#?}");
    let mut all = Vec::new();
    for (source, exprs) in [("dashboard", &dashboard), ("alert", &rules)] {
        for expr in exprs {
            for p in problems(expr, &e) {
                all.push(format!("{source} `{expr}`: {p}"));
            }
        }
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The checker itself finds what it must: a wrong name, a label the metric lacks, and a
/// grouping label nothing carries.
#[test]
fn the_checker_catches_wrong_names_and_labels() {
    let text = "# TYPE trainscaler_reconciles counter\n\
                trainscaler_reconciles_total{outcome=\"failed\"} 1\n\
                # TYPE trainscaler_keda_streams gauge\n\
                trainscaler_keda_streams 0\n";
    let e = exported(text);
    assert!(
        problems(
            "sum by (outcome) (rate(trainscaler_reconciles_total[5m]))",
            &e
        )
        .is_empty()
    );
    assert!(problems("max by (instance) (trainscaler_keda_streams)", &e).is_empty());
    assert_eq!(problems("rate(trainscaler_reconciles[5m])", &e).len(), 1);
    assert_eq!(
        problems("trainscaler_reconciles_total{pool=\"a\"}", &e).len(),
        1
    );
    assert_eq!(
        problems("sum by (pool) (trainscaler_reconciles_total)", &e).len(),
        1
    );
    assert!(
        problems(
            "sum by (status_class) (label_replace(trainscaler_keda_streams, \"status_class\", \"x\", \"\", \"\"))",
            &e
        )
        .is_empty()
    );
    assert_eq!(
        without_actions("x{ {{- $sel -}} ,outcome=\"failed\"} > {{ .Values.t }}"),
        "x{  ,outcome=\"failed\"} > "
    );
}
