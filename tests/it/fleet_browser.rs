//! The fleet page in a real browser: headless Chromium (Debian's `chromium`) loads `/` with
//! the key as the Basic password, as a person's browser sends it after the prompt, and the
//! DOM it built holds the pool's figures: the summary, cost, GPU memory, the warned worker
//! and its replacement, and events in words.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Backend, TestApp};
use crate::http_pools::{create_pool, put, rfc3339_ago, samples};
use crate::on_both_backends;

/// The browser: `CHROMIUM` names it, else `chromium` (Debian) or `chromium-browser` on PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    for name in ["chromium", "chromium-browser"] {
        let found = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        });
        if let Some(p) = found {
            return p;
        }
    }
    panic!(
        "the fleet page test needs a headless browser and found none: install Debian's \
         `chromium` (`apt-get install chromium`; .ci/run does) or set CHROMIUM to one"
    );
}

/// The DOM Chromium built from `url`, serialised after the page loaded.
async fn dump_dom(url: &str) -> String {
    dump_dom_with(url, &[]).await
}

/// [`dump_dom`] with more command-line switches.
pub async fn dump_dom_with(url: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().expect("a fresh profile folder");
    let child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg("--dump-dom")
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .expect("chromium answers within 60 s")
    .unwrap()
    .expect("chromium output");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn the_fleet_page_shows_the_pool_in_a_browser(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let policy = json!({
        "provider": "aws", "region": "us-east-1",
        "instance_types": ["g4dn.12xlarge"], "max_workers": 4, "daily_budget": 250
    });
    create_pool(&app, "browser-pool", &policy).await;
    for (id, market) in [("i-0ondemand", "on_demand"), ("i-0spot", "spot")] {
        let r = put(
            &app,
            &format!("/v1/pools/browser-pool/workers/{id}"),
            &json!({"instance_type": "g4dn.12xlarge", "market": market, "started_at": rfc3339_ago(600)}),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
    samples(
        &app,
        json!([
            {"pool": "browser-pool", "name": "queue_depth", "value": 2},
            {"pool": "browser-pool", "worker": "i-0ondemand", "name": "gpu_memory_used_gib", "value": 12.5},
            {"pool": "browser-pool", "worker": "i-0ondemand", "name": "gpu_utilization", "value": 0.9},
        ]),
    )
    .await;
    let r = app
        .post_json(
            "/v1/webhooks/events",
            &json!({"events": [{"kind": "interruption_warning", "worker": "i-0spot", "pool": "browser-pool"}]}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let r = app
        .post_json("/decide", &json!({"pool": "browser-pool"}))
        .await;
    assert_eq!(r.status(), 200);
    // The figures the page must show, as the JSON view has them.
    let view: Value = app.get_json("/fleet/browser-pool").await;
    let cost = format!("${:.2}", view["cost_per_hour"].as_f64().unwrap());
    assert_ne!(cost, "$0.00", "{view}");

    let token = app.db.admin_token.get().cloned().expect("an admin key");
    let url = app
        .url("/")
        .replacen("http://", &format!("http://trainscaler:{token}@"), 1);
    let dom = dump_dom(&url).await;

    assert!(
        dom.contains("<h2 id=\"pool-0-h\">browser-pool</h2>"),
        "{dom}"
    );
    // The summary on top.
    assert!(dom.contains("1 on-demand · 1 spot"), "{dom}");
    assert!(
        dom.contains(&format!("<dt>Cost per hour</dt><dd>{cost}</dd>")),
        "{dom}"
    );
    assert!(dom.contains("of $250.00"), "{dom}");
    // Each worker: GPU memory, the warning and the replacement the decision launched.
    assert!(dom.contains("12.5 GiB"), "{dom}");
    assert!(dom.contains("90%"), "{dom}");
    assert!(dom.contains("⚠ interruption warning"), "{dom}");
    assert!(dom.contains("replacement under way"), "{dom}");
    // The history starts with the pool, ten minutes ago, not six hours back.
    assert!(dom.contains("since the pool was created at"), "{dom}");
    // Events in words, not JSON.
    assert!(
        dom.contains("<td>instance_type: g4dn.12xlarge, market: on_demand, worker: i-0spot</td>"),
        "{dom}"
    );
    assert!(!dom.contains("{\""), "{dom}");
}

on_both_backends!(the_fleet_page_shows_the_pool_in_a_browser);
