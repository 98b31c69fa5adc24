//! The `trainscaler` command as an operator runs it.

use std::process::{Command, Output};

use crate::common::{Backend, ServerLog, TestDb, aws_fixture, trainscaler};
use crate::on_both_backends;

fn report(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON report on stdout")
}

async fn catalog_import_is_idempotent_and_names_bad_lines(backend: Backend) {
    let db = TestDb::new(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("vms.csv");
    std::fs::write(&good, aws_fixture("2.4655")).unwrap();
    let file = good.to_str().unwrap();
    let args = [
        "catalog",
        "import",
        "--format",
        "skypilot",
        "--provider",
        "aws",
        "--observed-at",
        "2026-11-01T00:00:00Z",
        file,
    ];
    let first = report(&trainscaler(&db, &args));
    assert_eq!(
        (
            first["offerings_added"].as_u64(),
            first["prices_appended"].as_u64()
        ),
        (Some(3), Some(5))
    );
    let second = report(&trainscaler(&db, &args));
    assert_eq!(
        (
            second["offerings_added"].as_u64(),
            second["prices_appended"].as_u64()
        ),
        (Some(0), Some(0))
    );

    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        aws_fixture("2.4655") + "g5.2xlarge,A10G,1,8,32,,abc,,us-east-1,,x86_64\n",
    )
    .unwrap();
    let failed = trainscaler(
        &db,
        &[
            "catalog",
            "import",
            "--provider",
            "aws",
            bad.to_str().unwrap(),
        ],
    );
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("line 5, column Price"), "{stderr}");

    let unknown = trainscaler(
        &db,
        &["catalog", "import", "--provider", "oraclecloud", file],
    );
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown provider `oraclecloud`"));
}

async fn migrate_applies_the_schema_and_can_run_again(backend: Backend) {
    let db = TestDb::new(backend).await;
    for _ in 0..2 {
        let out = trainscaler(&db, &["migrate"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

on_both_backends!(
    catalog_import_is_idempotent_and_names_bad_lines,
    migrate_applies_the_schema_and_can_run_again
);

#[test]
fn the_openapi_command_prints_the_committed_spec() {
    let out = Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .arg("openapi")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../openapi/openapi.json")).unwrap();
    assert_eq!(printed, committed);
}

#[test]
fn a_bad_database_url_is_refused_before_anything_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .args(["migrate"])
        .env("DATABASE_URL", "mysql://localhost/x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DATABASE_URL")
            || String::from_utf8_lossy(&out.stderr).contains("postgres://")
    );
}

/// The README's run command with no environment: an SQLite file appears under the working
/// directory, the bundled catalog is loaded, and real offerings are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_no_configuration_answers_from_the_bundled_catalog() {
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainscaler"))
        .current_dir(dir.path())
        .env_remove("DATABASE_URL")
        .env("TRAINSCALER_BIND", "127.0.0.1:0")
        .env("TRAINSCALER_GRPC_BIND", "127.0.0.1:0")
        .env("TRAINSCALER_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = ServerLog::follow(child.stderr.take().unwrap());
    let addr = log.listening_addr().await;
    let server_log = || log.text();
    let Some(addr) = addr else {
        let _ = child.kill();
        panic!("the server exited without listening:\n{}", server_log());
    };
    // Secure by default: the first start wrote an admin key for its owner only, said where,
    // and the API refuses requests without it.
    let key_file = dir.path().join("data/admin.key");
    let token = std::fs::read_to_string(&key_file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; the server said:\n{}",
            key_file.display(),
            server_log()
        )
    });
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    assert!(
        server_log().contains("data/admin.key"),
        "the log names the key file:\n{}",
        server_log()
    );
    let url = format!("http://{addr}/v1/offerings?gpu=A100&min_gpus=8&limit=1000");
    let refused = reqwest::get(&url).await.unwrap();
    assert_eq!(refused.status(), 401);
    let response = reqwest::Client::new()
        .get(&url)
        .bearer_auth(token.trim())
        .send()
        .await;
    let body: serde_json::Value = match response {
        Ok(r) => r.json().await.unwrap(),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{e}; the server said:\n{}", server_log());
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let providers: std::collections::BTreeSet<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["provider"].as_str())
        .collect();
    assert!(providers.len() >= 3, "{providers:?}");
    assert!(dir.path().join("data/trainscaler.db").exists());
}

/// `catalog refresh` asks the cloud (moto here) for a region's types and spot prices and
/// imports them; a second run adds no offering; without credentials it says which to set.
#[tokio::test]
async fn catalog_refresh_imports_a_region_from_the_cloud() {
    let moto = crate::moto::shared();
    let db = TestDb::new(Backend::Sqlite).await;
    let run = |with_credentials: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainscaler"));
        cmd.args([
            "catalog",
            "refresh",
            "--provider",
            "aws",
            "--region",
            "us-east-1",
            "--instance-type",
            "g4dn.12xlarge",
        ])
        .env("DATABASE_URL", &db.url)
        .env("TRAINSCALER_LOG", "warn")
        .env("AWS_ENDPOINT_URL", &moto.url)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY");
        if with_credentials {
            cmd.env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test");
        } else {
            // Otherwise the chain's last source, the instance profile, would be asked.
            cmd.env("AWS_EC2_METADATA_DISABLED", "true");
        }
        cmd.output().expect("run trainscaler")
    };
    let first = report(&run(true));
    // One region-wide offering plus one per zone moto quotes a spot price in.
    assert!(first["offerings_added"].as_u64().unwrap() >= 2, "{first}");
    assert!(first["prices_appended"].as_u64().unwrap() >= 1, "{first}");
    let again = report(&run(true));
    assert_eq!(again["offerings_added"], 0, "{again}");
    let out = run(false);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
}

/// `catalog refresh --provider gcp` gets a token from the metadata server, reads both pages of
/// the Billing catalog (wiremock answering the documented request with documented pages) and
/// prices the type for the region; a second run adds no offering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_refresh_prices_a_gcp_region_from_the_billing_catalog() {
    use std::sync::Arc;
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, ResponseTemplate};

    let g = crate::gcp_mock::Google::start().await;
    Mock::given(method("GET"))
        .and(path(
            "/computeMetadata/v1/instance/service-accounts/default/token",
        ))
        .and(header("Metadata-Flavor", "Google"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "access_token": crate::gcp_mock::TOKEN, "expires_in": 3599, "token_type": "Bearer"
        })))
        .expect(2)
        .mount(&g.server)
        .await;
    crate::gcp_mock::mount_skus_times(&g, 2).await;
    let db = Arc::new(TestDb::new(Backend::Sqlite).await);
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_trainscaler"))
            .args([
                "catalog",
                "refresh",
                "--provider",
                "gcp",
                "--region",
                "us-central1",
                "--instance-type",
                "n1-highmem-4+T4x1",
            ])
            .env("DATABASE_URL", &db.url)
            .env("TRAINSCALER_LOG", "warn")
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
            .env("GCE_METADATA_HOST", g.server.address().to_string())
            .env("TRAINSCALER_GCP_BILLING_ENDPOINT", g.server.uri())
            .env("TRAINSCALER_GCP_COMPUTE_ENDPOINT", g.server.uri())
            .output()
            .expect("run trainscaler")
    };
    let first = report(&run());
    assert_eq!(first["offerings_added"], 1, "{first}");
    // On-demand and spot.
    assert_eq!(first["prices_appended"], 2, "{first}");
    let again = report(&run());
    assert_eq!(again["offerings_added"], 0, "{again}");

    let app =
        crate::common::TestApp::spawn_with(db.clone(), crate::common::serve_config(false)).await;
    let o = app.get_json("/v1/offerings/gcp/n1-highmem-4+T4x1").await;
    let central: Vec<&serde_json::Value> = o["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["region"] == "us-central1")
        .collect();
    // No bundled catalog in this database: the region alone, at the Billing catalog's prices.
    assert_eq!(central.len(), 1, "{o:#}");
    for l in central {
        assert_eq!(l["on_demand_price"], serde_json::json!(0.586606), "{l}");
        assert_eq!(l["spot_price"], serde_json::json!(0.195902), "{l}");
    }
}

/// gRPC callers carry no API key: on an address other hosts can reach, the server refuses to
/// start without mutual TLS, unless told to serve anonymous callers, which it then says loudly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_off_the_loopback_needs_mutual_tls_or_an_explicit_opt_out() {
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let start = |insecure: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trainscaler"));
        command
            .current_dir(dir.path())
            .env_remove("DATABASE_URL")
            .env("TRAINSCALER_BIND", "127.0.0.1:0")
            .env("TRAINSCALER_GRPC_BIND", "0.0.0.0:0")
            .env("TRAINSCALER_LOG_FORMAT", "json")
            .stderr(Stdio::piped());
        if insecure {
            command.env("TRAINSCALER_GRPC_INSECURE", "true");
        }
        command.spawn().unwrap()
    };
    let mut refused = start(false);
    let log = ServerLog::follow(refused.stderr.take().unwrap());
    let status =
        crate::common::wait_exit(&mut refused, &log, std::time::Duration::from_secs(30)).await;
    let text = log.text();
    if status.is_none() {
        let _ = refused.kill();
    }
    assert!(
        status.is_some_and(|s| !s.success()),
        "served anonymous gRPC on 0.0.0.0:\n{text}"
    );
    assert!(text.contains("TRAINSCALER_GRPC_INSECURE"), "{text}");
    assert!(text.contains("TRAINSCALER_GRPC_CLIENT_CA"), "{text}");

    let mut child = start(true);
    let mut log = ServerLog::follow(child.stderr.take().unwrap());
    let addr = log.listening_addr().await;
    let _ = child.kill();
    let _ = child.wait();
    let text = log.text();
    assert!(addr.is_some(), "did not start with the opt-out:\n{text}");
    assert!(text.contains("gRPC IS UNAUTHENTICATED"), "{text}");
}
