//! Measured benchmarks over HTTP: recording, summaries, their use in `/decide`, and plans.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem};
use crate::on_both_backends;

fn measurement(workload: &str, instance_type: &str, gpus: u32, nodes: u32, sps: f64) -> Value {
    json!({
        "workload": workload, "provider": "aws", "instance_type": instance_type,
        "gpus": gpus, "nodes": nodes, "steps": 1000, "samples_per_sec": sps,
        "measured_at": "2026-11-01T00:00:00Z"
    })
}

async fn record(app: &TestApp, body: &Value) -> reqwest::Response {
    app.post_json("/v1/benchmarks", body).await
}

async fn a_benchmark_overrides_the_datasheet(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let job = json!({"job": {"params_billion": 0.1, "workload": "resnet50", "total_samples": 3.6e9,
                             "flops_per_sample": 1.2e10, "spot_allowed": false}});
    let before: Value = app.post_json("/decide", &job).await.json().await.unwrap();
    assert_eq!(
        before["instance"]["candidates"][0]["throughput_source"],
        "datasheet"
    );
    // Far faster than any datasheet estimate for this job: it must win on cost.
    assert_eq!(
        record(&app, &measurement("resnet50", "g5.xlarge", 1, 1, 1e6))
            .await
            .status(),
        201
    );
    let after: Value = app.post_json("/decide", &job).await.json().await.unwrap();
    let best = &after["instance"]["candidates"][0];
    assert_eq!(best["instance_type"], "g5.xlarge");
    assert_eq!(best["throughput_source"], "benchmark");
    assert_eq!(best["throughput"], 1e6);
    // 3.6e9 samples at 1e6 samples/s = 1 hour, after AWS's default 4-minute start-up;
    // 64 minutes are whole seconds, billed as they are at g5.xlarge's price.
    let hours = 1.0 + 4.0 / 60.0;
    assert!(
        (best["est_hours"].as_f64().unwrap() - hours).abs() < 1e-9,
        "{best}"
    );
    assert_eq!(best["startup_min"], 4.0);
    let price = best["price_per_hour_total"].as_f64().unwrap();
    assert!((best["est_cost"].as_f64().unwrap() - hours * price).abs() < 1e-9);
    assert_eq!(best["scaling_efficiency"], 1.0);
    assert!(
        after["instance"]["catalog_version"].as_i64()
            > before["instance"]["catalog_version"].as_i64()
    );
}

async fn measured_scaling_replaces_the_fabric_default(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for (nodes, sps) in [(1, 1000.0), (2, 1900.0)] {
        assert_eq!(
            record(&app, &measurement("llama7b", "p4d.24xlarge", 8, nodes, sps))
                .await
                .status(),
            201
        );
    }
    let job = json!({"job": {"params_billion": 7, "sharding": "fsdp", "workload": "llama7b",
                             "total_samples": 1e8, "nodes": 4, "providers": ["aws"],
                             "gpus": ["A100"], "spot_allowed": false}});
    let body: Value = app.post_json("/decide", &job).await.json().await.unwrap();
    let best = &body["instance"]["candidates"][0];
    assert_eq!(
        (best["instance_type"].as_str(), best["nodes"].as_u64()),
        (Some("p4d.24xlarge"), Some(4))
    );
    // Measured: 1 -> 2 nodes went 1000 -> 1900, 0.95 per doubling; 4 nodes = 1900 × 2 × 0.95.
    assert!(
        (best["throughput"].as_f64().unwrap() - 3610.0).abs() < 1e-6,
        "{best}"
    );
}

async fn summaries_show_value_scaling_and_communication_bound_sizes(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for (nodes, sps) in [(1, 1000.0), (2, 1900.0), (4, 3000.0)] {
        record(&app, &measurement("bert", "p4d.24xlarge", 8, nodes, sps)).await;
    }
    let body = app.get_json("/v1/benchmarks?workload=BERT").await;
    let sizes = body["items"][0]["sizes"].as_array().unwrap();
    let efficiencies: Vec<f64> = sizes
        .iter()
        .map(|s| s["scaling_efficiency"].as_f64().unwrap())
        .collect();
    assert_eq!(efficiencies, vec![1.0, 0.95, 0.75]);
    let bound: Vec<bool> = sizes
        .iter()
        .map(|s| s["communication_bound"].as_bool().unwrap())
        .collect();
    assert_eq!(bound, vec![false, false, true]);
    // Per dollar at the cheapest on-demand price listed for p4d.24xlarge.
    let detail = app.get_json("/v1/offerings/aws/p4d.24xlarge").await;
    let cheapest = detail["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["on_demand_price"].as_f64())
        .fold(f64::MAX, f64::min);
    let per_dollar = sizes[1]["per_dollar_on_demand"].as_f64().unwrap();
    assert!((per_dollar - 1900.0 / (2.0 * cheapest)).abs() < 1e-9);
    let strict = app
        .get_json("/v1/benchmarks?workload=bert&communication_bound_below=0.96")
        .await;
    assert_eq!(strict["items"][0]["sizes"][1]["communication_bound"], true);
    // Step times with a fixed batch per GPU: 0.50 s, 0.52 s, 0.80 s -> 1.0, 0.96, 0.625.
    for (nodes, t) in [(1, 0.5), (2, 0.52), (4, 0.8)] {
        let mut m = measurement("vit", "p4d.24xlarge", 8, nodes, 1.0);
        m.as_object_mut().unwrap().remove("samples_per_sec");
        m["step_time_sec"] = json!(t);
        assert_eq!(record(&app, &m).await.status(), 201);
    }
    let steps = app.get_json("/v1/benchmarks?workload=vit").await;
    let sizes = steps["items"][0]["sizes"].as_array().unwrap();
    let eff: Vec<f64> = sizes
        .iter()
        .map(|s| s["scaling_efficiency"].as_f64().unwrap())
        .collect();
    assert!(
        (eff[0] - 1.0).abs() < 1e-12
            && (eff[1] - 0.5 / 0.52).abs() < 1e-12
            && (eff[2] - 0.625).abs() < 1e-12,
        "{eff:?}"
    );
    assert_eq!(sizes[0]["throughput_unit"], "steps_per_sec");
    assert_eq!(sizes[2]["communication_bound"], true);
}

async fn recording_is_idempotent_and_validated(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_problem(
        record(&app, &measurement("gpt", "g5.xlarge", 2, 1, 1.0)).await,
        422,
        "gpus",
    )
    .await;
    assert_problem(
        record(&app, &measurement("gpt", "g5.xlarge", 1, 5000, 1.0)).await,
        422,
        "nodes",
    )
    .await;
    let m = measurement("gpt", "g5.xlarge", 1, 1, 500.0);
    assert_eq!(record(&app, &m).await.status(), 201);
    let again = record(&app, &m).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap()["inserted"], false);
    assert_problem(
        record(&app, &measurement("gpt", "g5.xlarge", 1, 1, 600.0)).await,
        409,
        "measured_at",
    )
    .await;
    assert_problem(
        record(&app, &measurement("gpt", "g99.huge", 1, 1, 1.0)).await,
        422,
        "instance_type",
    )
    .await;
    let mut unknown = measurement("gpt", "g5.xlarge", 1, 1, 1.0);
    unknown["provider"] = json!("oraclecloud");
    assert_problem(record(&app, &unknown).await, 404, "provider").await;
    let mut neither = measurement("gpt", "g5.xlarge", 1, 1, 1.0);
    neither.as_object_mut().unwrap().remove("samples_per_sec");
    assert_problem(record(&app, &neither).await, 422, "samples_per_sec").await;
    assert_problem(
        record(&app, &measurement("gpt", "g5.xlarge", 1, 0, 1.0)).await,
        422,
        "nodes",
    )
    .await;
    assert_problem(app.get("/v1/benchmarks").await, 400, "query").await;
}

async fn a_plan_names_three_sizes_of_the_best_family(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let single = json!({"job": {"params_billion": 1, "tokens": 1e10, "providers": ["aws"], "gpus": ["A10G"],
                                "spot_allowed": false}, "steps": 500});
    let body: Value = app
        .post_json("/v1/benchmarks/plan", &single)
        .await
        .json()
        .await
        .unwrap();
    let plan = &body["plan"];
    assert_eq!(plan["gpu"], "A10G");
    assert_eq!(plan["steps"], 500);
    let runs = plan["runs"].as_array().unwrap();
    // g5 sells 1, 4 and 8 A10G GPUs per instance: three single-node sizes.
    let gpus: Vec<u64> = runs.iter().map(|r| r["gpus"].as_u64().unwrap()).collect();
    assert_eq!(gpus, vec![1, 4, 8]);
    assert!(runs.iter().all(|r| r["nodes"] == 1));

    let eight = json!({"job": {"params_billion": 7, "sharding": "fsdp", "tokens": 2e10, "gpus_per_node_min": 8,
                               "providers": ["aws"], "gpus": ["A100"], "spot_allowed": false}});
    let body: Value = app
        .post_json("/v1/benchmarks/plan", &eight)
        .await
        .json()
        .await
        .unwrap();
    let runs = body["plan"]["runs"].as_array().unwrap();
    let nodes: Vec<u64> = runs.iter().map(|r| r["nodes"].as_u64().unwrap()).collect();
    assert_eq!(nodes, vec![1, 2, 4]);
    assert!(runs.iter().all(|r| r["instance_type"] == "p4d.24xlarge"));
}

/// The three sizes of one GPU model on three instance types: one V100 on p3.2xlarge
/// at 400 samples/s, four on p3.8xlarge at 1400, eight on p3.16xlarge at 2600.
async fn record_p3_sizes(app: &TestApp, workload: &str) {
    for (instance_type, gpus, sps) in [
        ("p3.2xlarge", 1, 400.0),
        ("p3.8xlarge", 4, 1400.0),
        ("p3.16xlarge", 8, 2600.0),
    ] {
        assert_eq!(
            record(app, &measurement(workload, instance_type, gpus, 1, sps))
                .await
                .status(),
            201
        );
    }
}

fn efficiency_by_type(body: &Value) -> Vec<(String, f64, bool, String)> {
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = &t["sizes"][0];
            (
                t["instance_type"].as_str().unwrap().to_string(),
                s["scaling_efficiency"].as_f64().unwrap(),
                s["communication_bound"].as_bool().unwrap(),
                s["baseline"]["instance_type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn sizes_of_one_gpu_model_compare_across_instance_types(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    record_p3_sizes(&app, "resnet").await;
    // Per GPU 400, 350 and 325 samples/s against the smallest measured count's 400.
    let body = app
        .get_json("/v1/benchmarks?workload=resnet&communication_bound_below=0.85")
        .await;
    let base = "p3.2xlarge".to_string();
    assert_eq!(
        efficiency_by_type(&body),
        vec![
            ("p3.16xlarge".into(), 0.8125, true, base.clone()),
            ("p3.2xlarge".into(), 1.0, false, base.clone()),
            ("p3.8xlarge".into(), 0.875, false, base.clone()),
        ]
    );
    // Step times with a fixed batch per GPU: 0.5, 0.6 and 0.8 s -> 1, 0.8333 and 0.625.
    for (instance_type, gpus, t) in [
        ("p3.2xlarge", 1, 0.5),
        ("p3.8xlarge", 4, 0.6),
        ("p3.16xlarge", 8, 0.8),
    ] {
        let mut m = measurement("vit", instance_type, gpus, 1, 1.0);
        m.as_object_mut().unwrap().remove("samples_per_sec");
        m["step_time_sec"] = json!(t);
        assert_eq!(record(&app, &m).await.status(), 201);
    }
    let steps = efficiency_by_type(&app.get_json("/v1/benchmarks?workload=vit").await);
    assert_eq!((steps[0].1, steps[1].1), (0.625, 1.0));
    assert!((steps[2].1 - 0.5 / 0.6).abs() < 1e-12, "{steps:?}");

    // /decide reads the same comparison: measured sizes as measured, others from the
    // baseline's 400 per GPU × GPUs × the efficiency at that count.
    let job = json!({"job": {"params_billion": 0.025, "workload": "resnet", "total_samples": 1.4e7,
                             "gpus": ["V100"], "providers": ["aws", "gcp"],
                             "regions": ["us-east-1", "us-central1"], "spot_allowed": false,
                             "top_k": 100}});
    let body: Value = app.post_json("/decide", &job).await.json().await.unwrap();
    let candidates = body["instance"]["candidates"].as_array().unwrap();
    let throughput = |provider: &str, instance_type: &str| {
        candidates
            .iter()
            .find(|c| c["provider"] == provider && c["instance_type"] == instance_type)
            .unwrap_or_else(|| panic!("{instance_type}: {body:#}"))
            .clone()
    };
    let p3_8 = throughput("aws", "p3.8xlarge");
    assert_eq!(
        (&p3_8["throughput"], &p3_8["throughput_source"]),
        (&json!(1400.0), &json!("benchmark"))
    );
    assert_eq!(p3_8["scaling_efficiency"], 0.875);
    // 1.4e7 samples at 1400/s = 10,000 s, after AWS's 4-minute start-up.
    assert!((p3_8["est_hours"].as_f64().unwrap() - (1e4 / 3600.0 + 4.0 / 60.0)).abs() < 1e-9);
    // GCP sells two V100s on one N1 host, measured nowhere: halfway (in doublings) between
    // one GPU (1.0) and four (0.875), so 400 × 2 × sqrt(0.875).
    let two = throughput("gcp", "n1-highmem-16+V100x2");
    assert!(
        (two["throughput"].as_f64().unwrap() - 800.0 * 0.875f64.sqrt()).abs() < 1e-9,
        "{two:#}"
    );
    // Eight on GCP: the eight measured on p3.16xlarge, 0.8125.
    let eight = throughput("gcp", "n1-highmem-64+V100x8");
    assert!(
        (eight["throughput"].as_f64().unwrap() - 2600.0).abs() < 1e-9,
        "{eight:#}"
    );

    // The plan for this job measures the p3 sizes and shows what they measured, compared
    // the same way.
    let plan: Value = app
        .post_json(
            "/v1/benchmarks/plan",
            &json!({"job": {"params_billion": 0.025, "workload": "resnet", "total_samples": 1.4e7,
                            "providers": ["aws"], "gpus": ["V100"], "spot_allowed": false}}),
        )
        .await
        .json()
        .await
        .unwrap();
    let runs = plan["plan"]["runs"].as_array().unwrap();
    let measured: Vec<(String, f64)> = runs
        .iter()
        .map(|r| {
            (
                r["instance_type"].as_str().unwrap().to_string(),
                r["measured"]["scaling_efficiency"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        measured,
        vec![
            ("p3.2xlarge".into(), 1.0),
            ("p3.8xlarge".into(), 0.875),
            ("p3.16xlarge".into(), 0.8125),
        ],
        "{plan:#}"
    );
}

on_both_backends!(
    sizes_of_one_gpu_model_compare_across_instance_types,
    a_benchmark_overrides_the_datasheet,
    measured_scaling_replaces_the_fabric_default,
    summaries_show_value_scaling_and_communication_bound_sizes,
    recording_is_idempotent_and_validated,
    a_plan_names_three_sizes_of_the_best_family,
);
