//! The real binary's log as a person reads it from a file: no ANSI colour codes when stderr
//! is not a terminal, and a warning that recurs every reconciler pass (a pool bound to AWS
//! with no credentials) written once, then counted.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::client_with_key;

/// The `failed` reconciles counted in a `/metrics` text.
fn failed_reconciles(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with("trainscaler_reconciles_total{outcome=\"failed\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_file_is_plain_text_and_a_recurring_warning_is_written_once() {
    let dir = tempfile::tempdir().expect("temporary folder");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainscaler"));
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") || k.starts_with("TRAINSCALER_") || k == "NO_COLOR" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .current_dir(dir.path())
        .env_remove("DATABASE_URL")
        .env("TRAINSCALER_BIND", "127.0.0.1:0")
        .env("TRAINSCALER_GRPC_BIND", "127.0.0.1:0")
        .env("TRAINSCALER_RECONCILE_INTERVAL_SEC", "1")
        // Without it the AWS chain falls back to the instance profile, and the pool is driven
        // (failing at IMDS) instead of refused for want of credentials.
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start trainscaler");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let (addr_tx, addr_rx) = std::sync::mpsc::channel::<String>();
    {
        let lines = Arc::clone(&lines);
        let stderr = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // Plain text: `... listening addr=127.0.0.1:PORT tls=false`.
                if line.contains(" listening ")
                    && let Some(addr) = line.split(" addr=").nth(1)
                {
                    let _ = addr_tx.send(addr.split(' ').next().unwrap_or("").to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
    }
    let text = || lines.lock().unwrap().join("\n");
    let addr = tokio::task::spawn_blocking(move || addr_rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    let Ok(addr) = addr else {
        let _ = child.kill();
        panic!("no plain `listening addr=` line:\n{}", text());
    };
    let token = std::fs::read_to_string(dir.path().join("data/admin.key"))
        .expect("admin key")
        .trim()
        .to_string();
    let client = client_with_key(&token);
    let url = |path: &str| format!("http://{addr}{path}");
    let r = client
        .put(url("/v1/pools/no-creds"))
        .json(&serde_json::json!({
            "provider": "aws", "group": "asg-x", "region": "us-east-1",
            "instance_types": ["g4dn.12xlarge"], "max_workers": 4
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);

    // Passes every second: wait until at least four failed on this pool.
    let start = Instant::now();
    loop {
        let metrics = client
            .get(url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if failed_reconciles(&metrics) >= 4 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "fewer than four failed passes in 60 s:\n{metrics}\n{}",
            text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = child.kill();
    let _ = child.wait();

    let log = text();
    assert!(!log.contains('\u{1b}'), "ANSI codes in a log file:\n{log}");
    let warnings = log
        .lines()
        .filter(|l| l.contains("pool cannot be driven"))
        .count();
    assert_eq!(warnings, 1, "one warning for four failed passes:\n{log}");
    assert!(
        log.contains("no aws credentials are configured"),
        "the warning says why:\n{log}"
    );
}
