//! Realistic time and cost over HTTP, on both stores, against the bundled catalog: the
//! calibrated utilisation, start-up and billing, the job's overrides, multi-node for speed,
//! GPUs without facts, GPU names people type, and words instead of Rust names.

use serde_json::{Value, json};

use crate::common::{Backend, TestApp, assert_problem};
use crate::on_both_backends;

async fn decide(app: &TestApp, job: Value) -> Value {
    let response = app.post_json("/decide", &json!({ "job": job })).await;
    assert_eq!(response.status(), 200);
    response.json::<Value>().await.unwrap()["instance"].clone()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64()
        .is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

/// A 25M-parameter ResNet-style job: 1.2e8 samples of 1.2e10 FLOPs, on AWS in us-east-1.
fn resnet(extra: Value) -> Value {
    let mut job = json!({"params_billion": 0.025, "total_samples": 1.2e8, "flops_per_sample": 1.2e10,
                         "spot_allowed": false, "providers": ["aws"], "regions": ["us-east-1"],
                         "top_k": 50});
    for (k, v) in extra.as_object().unwrap() {
        job[k] = v.clone();
    }
    job
}

async fn a_25m_parameter_job_runs_on_one_small_gpu_with_start_up_and_billing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let d = decide(&app, resnet(json!({"gpus": ["L4", "B200"]}))).await;
    let candidates = d["candidates"].as_array().unwrap();
    let best = &candidates[0];
    assert_eq!(best["instance_type"], "g6.xlarge", "{best:#}");
    // One L4 (121 TFLOPS, 300 GB/s): ceiling 0.55 × (153 / 403.3)^0.4 = 0.37323, fill
    // 1 + 0.3 × log10(25e6 / (3e9 × sqrt(121 / 312))) = 0.43795, utilisation 0.16346:
    // 19.778 TFLOPS, so 1.44e18 FLOPs take 20.2244 h; AWS's 4-minute start-up makes
    // 20.291059 h, billed to the second (20.291111 h) at $0.8048/h = $16.330286.
    assert!(close(&best["utilisation"], 0.163_455), "{best:#}");
    assert!(close(&best["est_hours"], 20.291_059), "{best:#}");
    assert!(close(&best["billed_hours"], 20.291_111), "{best:#}");
    assert!(close(&best["est_cost"], 16.330_286), "{best:#}");
    assert_eq!(best["startup_min"], 4.0);
    // Eight B200s finish in 18.35 minutes but cost $34.88: 0.306111 h × $113.9328.
    let b200 = candidates
        .iter()
        .find(|c| c["instance_type"] == "p6-b200.48xlarge")
        .unwrap_or_else(|| panic!("{d:#}"));
    assert!(close(&b200["utilisation"], 0.106_721), "{b200:#}");
    assert!(close(&b200["scaling_efficiency"], 0.870_580), "{b200:#}");
    assert!(close(&b200["est_hours"], 0.305_849), "{b200:#}");
    assert!(
        close(&b200["est_cost"], 0.306_111_11 * 113.9328),
        "{b200:#}"
    );
    // The assumptions say which utilisation, from where, and what start-up and billing.
    let a = &d["assumptions"];
    assert_eq!(a["utilisation"]["model_params"], 25e6);
    assert!(
        a["utilisation"]["source"]
            .as_str()
            .unwrap()
            .contains("calibration.csv")
    );
    assert_eq!(
        a["providers"],
        json!([{"provider": "aws", "startup_min": 4.0, "startup_from": "provider_default",
                "billing_increment_sec": 1.0, "billing_minimum_sec": 60.0}])
    );
    assert_eq!(
        a["memory_reserve"],
        json!({"cuda_context_gib": 1.0, "allocator_overhead": 0.05})
    );

    // Over the whole catalog it lands on one or two small GPUs for a few dollars, not on
    // eight B200s.
    let all = decide(
        &app,
        json!({"params_billion": 0.025, "total_samples": 1.2e8, "flops_per_sample": 1.2e10}),
    )
    .await;
    let best = &all["candidates"][0];
    assert!(best["gpus_per_node"].as_f64().unwrap() <= 2.0, "{best:#}");
    assert!(best["est_cost"].as_f64().unwrap() < 10.0, "{best:#}");
}

async fn a_job_may_state_its_utilisation_and_start_up(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let d = decide(
        &app,
        resnet(json!({"gpus": ["L4"], "utilisation": 0.5, "startup_min": 0, "top_k": 1})),
    )
    .await;
    let best = &d["candidates"][0];
    // 60.5 TFLOPS: 23,801.65 s, billed as 23,802 s at $0.8048/h.
    assert_eq!(best["utilisation"], 0.5);
    assert!(
        close(&best["est_hours"], 1.44e18 / 60.5e12 / 3600.0),
        "{best:#}"
    );
    assert!(
        close(&best["est_cost"], 23_802.0 / 3600.0 * 0.8048),
        "{best:#}"
    );
    assert_eq!(d["assumptions"]["utilisation"]["job_override"], 0.5);
    assert_eq!(d["assumptions"]["providers"][0]["startup_from"], "job");
    assert_problem(
        app.post_json(
            "/decide",
            &json!({"job": resnet(json!({"startup_min": 5000}))}),
        )
        .await,
        422,
        "job.startup_min",
    )
    .await;
}

async fn fastest_with_a_node_range_spreads_when_it_is_faster(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let job = json!({"params_billion": 7, "sharding": "fsdp", "tokens": 1e10, "nodes": {"min": 1, "max": 2},
                     "providers": ["aws"], "gpus": ["A100"], "gpus_per_node_min": 8, "top_k": 3});
    let mut fastest = job.clone();
    fastest["objective"] = json!("fastest");
    let d = decide(&app, fastest).await;
    assert_eq!(d["candidates"][0]["nodes"], 2, "{d:#}");
    let d = decide(&app, job).await;
    assert!(
        d["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["nodes"] == 1)
    );
    assert!(
        d["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reason"] == "single_node_suffices")
    );
}

async fn unknown_gpu_names_are_422_with_the_closest_known(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = assert_problem(
        app.post_json(
            "/decide",
            &json!({"job": {"params_billion": 1, "gpus": ["A100-80G"]}}),
        )
        .await,
        422,
        "job.gpus[0]",
    )
    .await;
    let problem = body["errors"][0]["problem"].as_str().unwrap();
    assert!(
        problem.contains("`A100-80G`")
            && problem.contains("the closest known are `A100-80GB`, `A100`"),
        "{problem}"
    );
    assert_problem(
        app.post_json(
            "/decide",
            &json!({"job": {"params_billion": 1, "exclude_gpus": ["H100", "H1O0"]}}),
        )
        .await,
        422,
        "job.exclude_gpus[1]",
    )
    .await;
    assert_problem(
        app.post_json(
            "/v1/benchmarks/plan",
            &json!({"job": {"params_billion": 1, "tokens": 1e9, "gpus": ["a10-g"]}}),
        )
        .await,
        422,
        "job.gpus[0]",
    )
    .await;
    let body = assert_problem(app.get("/v1/offerings?gpu=A100-80G").await, 422, "gpu").await;
    assert!(body.to_string().contains("`A100-80GB`"), "{body}");
    // Case and known names still pass.
    let ok = app.get_json("/v1/offerings?gpu=a100-80gb&limit=1").await;
    assert_eq!(ok["items"][0]["gpu"], "A100-80GB");
}

async fn gpus_without_facts_rank_by_price_and_say_what_is_missing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // No work: ranked by price, throughput unknown.
    let d = decide(
        &app,
        json!({"gpu_memory_gib_min": 8, "gpus": ["RTX3060"], "top_k": 3}),
    )
    .await;
    let c = d["candidates"].as_array().unwrap();
    assert!(!c.is_empty(), "{d:#}");
    for w in c.windows(2) {
        assert!(w[0]["price_per_hour_total"].as_f64() <= w[1]["price_per_hour_total"].as_f64());
    }
    assert_eq!(
        (
            &c[0]["throughput"],
            &c[0]["value"],
            &c[0]["throughput_source"]
        ),
        (&Value::Null, &Value::Null, &json!("unknown"))
    );
    // Work to estimate: the suggestion names the missing fact.
    let d = decide(
        &app,
        json!({"gpu_memory_gib_min": 8, "gpus": ["RTX3060"], "total_samples": 1e6, "flops_per_sample": 1e9}),
    )
    .await;
    assert!(d["candidates"].as_array().unwrap().is_empty());
    let s = d["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["change"] == "gpus")
        .unwrap_or_else(|| panic!("{d:#}"));
    assert!(
        s["detail"]
            .as_str()
            .unwrap()
            .contains("RTX3060: there are no datasheet TFLOPS"),
        "{s}"
    );
}

async fn bf16_where_there_is_none_suggests_fp16_and_memory_names_allowed_gpus(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let d = decide(&app, json!({"params_billion": 1, "gpus": ["T4", "V100"]})).await;
    assert!(d["candidates"].as_array().unwrap().is_empty());
    let s = d["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["change"] == "precision")
        .unwrap_or_else(|| panic!("{d:#}"));
    assert!(
        s["detail"]
            .as_str()
            .unwrap()
            .starts_with("T4, V100 have no bf16 tensor cores: use precision fp16")
            || s["detail"]
                .as_str()
                .unwrap()
                .starts_with("V100, T4 have no bf16 tensor cores: use precision fp16"),
        "{s}"
    );
    // 70B unsharded on T4s: 1043.1 GiB of states; the largest GPU this job may use is a
    // T4 (16 GiB, 14.2 usable), which cannot even hold the 26.1 GiB of activations.
    let d = decide(
        &app,
        json!({"params_billion": 70, "precision": "fp16", "gpus": ["T4"]}),
    )
    .await;
    let s = &d["suggestions"][0];
    assert_eq!(s["change"], "gpu_memory", "{d:#}");
    assert!(
        s["detail"]
            .as_str()
            .unwrap()
            .ends_with("the largest GPU this job may use is T4 (16 GiB, 14.2 usable)"),
        "{s}"
    );
}

async fn reasons_and_numbers_read_as_words(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let d = decide(
        &app,
        json!({"params_billion": 1, "tokens": 1e10, "objective": "best_value", "top_k": 3}),
    )
    .await;
    let text = d.to_string();
    for bad in [
        "None sharding",
        "BestValue",
        "by Cheapest",
        "share the model states",
        "-0.0",
    ] {
        assert!(!text.contains(bad), "{bad} in {text}");
    }
    let first = d["candidates"][0]["reasons"][0].as_str().unwrap();
    assert!(first.starts_with("rank 1 of "), "{first}");
    assert!(
        first.contains(" by most throughput per hourly dollar: "),
        "{first}"
    );
    assert!(
        d["profile"]["memory_formula"]
            .as_str()
            .unwrap()
            .contains("not sharded")
    );
    // An empty fleet costs 0.0 an hour, not -0.0 (Rust sums no floats to -0.0).
    let fleet = app.get("/fleet").await.text().await.unwrap();
    assert!(!fleet.contains("-0.0"), "{fleet}");
    let fleet: Value = serde_json::from_str(&fleet).unwrap();
    assert_eq!(fleet["totals"]["cost_per_hour"], 0.0, "{fleet:#}");
}

async fn gcp_b200_is_priced_as_skypilot_prices_it(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = app
        .get_json("/v1/offerings?provider=gcp&gpu=B200&limit=100")
        .await;
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 11, "one a4-highgpu-8g per zone: {body:#}");
    // asia-northeast1-b: host 0.0 + accelerators 64.44; spot 0.0 + 41.0848.
    let tokyo = items
        .iter()
        .find(|o| o["zone"] == "asia-northeast1-b")
        .unwrap_or_else(|| panic!("{body:#}"));
    assert_eq!(tokyo["instance_type"], "a4-highgpu-8g");
    assert_eq!(tokyo["on_demand_price"], 64.44);
    assert_eq!(tokyo["spot_price"], 41.0848);
    assert_eq!(items[0]["on_demand_price"], 64.44, "cheapest first");
}

/// Issue 16's spot rule over HTTP: the work an interruption loses is capped by the run's own
/// length. Eight B200s run the ResNet job in about 18 minutes; a checkpoint every hour or
/// every 100 hours is never reached, so both lose half the run per interruption and get the
/// same spot estimate. A 5-minute interval is reached and loses less.
async fn spot_loss_per_interruption_is_capped_by_the_run(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let spot = |checkpoint_min: f64| {
        resnet(
            json!({"gpus": ["B200"], "providers": ["aws"], "spot_allowed": true,
                      "checkpoint_interval_min": checkpoint_min}),
        )
    };
    let pick = |d: &Value| -> Value {
        d["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["instance_type"] == "p6-b200.48xlarge" && c["market"] == "spot")
            .unwrap_or_else(|| panic!("no spot B200 candidate: {d:#}"))
            .clone()
    };
    let hourly = pick(&decide(&app, spot(60.0)).await);
    let rarely = pick(&decide(&app, spot(6000.0)).await);
    let often = pick(&decide(&app, spot(5.0)).await);
    let hours = |c: &Value| c["est_hours"].as_f64().unwrap();
    assert!(hours(&hourly) < 1.0, "a short run: {hourly:#}");
    assert_eq!(hours(&hourly), hours(&rarely), "{hourly:#}\n{rarely:#}");
    assert_eq!(hourly["est_cost"], rarely["est_cost"]);
    assert!(hours(&often) < hours(&hourly), "{often:#}\n{hourly:#}");
}

on_both_backends!(
    a_25m_parameter_job_runs_on_one_small_gpu_with_start_up_and_billing,
    a_job_may_state_its_utilisation_and_start_up,
    fastest_with_a_node_range_spreads_when_it_is_faster,
    unknown_gpu_names_are_422_with_the_closest_known,
    gpus_without_facts_rank_by_price_and_say_what_is_missing,
    bf16_where_there_is_none_suggests_fp16_and_memory_names_allowed_gpus,
    reasons_and_numbers_read_as_words,
    gcp_b200_is_priced_as_skypilot_prices_it,
    spot_loss_per_interruption_is_capped_by_the_run,
);
