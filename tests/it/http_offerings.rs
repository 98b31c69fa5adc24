//! Black-box tests of the catalog reads over HTTP, against the bundled real catalog.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use crate::common::{Backend, TestApp, assert_problem};
use crate::on_both_backends;

fn price(item: &Value, field: &str) -> Option<f64> {
    item[field].as_f64()
}

async fn eight_a100s_come_from_at_least_three_providers_with_both_markets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = app
        .get_json("/v1/offerings?gpu=A100&min_gpus=8&limit=1000")
        .await;
    let items = body["items"].as_array().unwrap();
    assert!(body["next"].is_null());
    let providers: BTreeSet<&str> = items
        .iter()
        .map(|i| i["provider"].as_str().unwrap())
        .collect();
    assert!(providers.len() >= 3, "{providers:?}");
    for item in items {
        assert_eq!(item["gpu"], "A100");
        assert!(item["gpu_count"].as_f64().unwrap() >= 8.0);
        for field in [
            "provider",
            "region",
            "zone",
            "instance_type",
            "gpu_memory_gib",
            "vcpus",
            "memory_gib",
            "interconnect",
            "on_demand_price",
            "spot_price",
        ] {
            assert!(item.get(field).is_some(), "{field} missing in {item}");
        }
    }
    let with_both: BTreeSet<&str> = items
        .iter()
        .filter(|i| price(i, "on_demand_price").is_some() && price(i, "spot_price").is_some())
        .map(|i| i["provider"].as_str().unwrap())
        .collect();
    assert!(
        with_both.len() >= 3,
        "providers with on-demand and spot prices: {with_both:?}"
    );
    // Real reference point from the AWS catalog: p4d.24xlarge in use1-az1.
    let p4d = items
        .iter()
        .find(|i| i["instance_type"] == "p4d.24xlarge" && i["zone"] == "use1-az1")
        .expect("p4d.24xlarge in use1-az1");
    assert_eq!(price(p4d, "spot_price"), Some(2.4655));
    assert_eq!(p4d["interconnect"], "efa");
    // GCP's price is host VM plus GPUs: a2-highgpu-8g in europe-west4-a = 6.51251 + 12.90919.
    let gcp = items
        .iter()
        .find(|i| i["instance_type"] == "a2-highgpu-8g" && i["zone"] == "europe-west4-a")
        .expect("gcp a2-highgpu-8g");
    assert_eq!(price(gcp, "on_demand_price"), Some(19.4217));
}

async fn offerings_are_sorted_by_the_price_of_the_chosen_market(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let list = app.get_json("/v1/offerings?gpu=h100&limit=1000").await;
    let keys: Vec<f64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            price(i, "on_demand_price")
                .or(price(i, "spot_price"))
                .unwrap_or(f64::MAX)
        })
        .collect();
    assert!(keys.len() > 10);
    assert!(
        keys.windows(2).all(|w| w[0] <= w[1]),
        "not sorted by list price"
    );

    let spot = app
        .get_json("/v1/offerings?gpu=H100&market=spot&max_price=20&limit=1000")
        .await;
    let prices: Vec<f64> = spot["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| price(i, "spot_price").unwrap())
        .collect();
    assert!(!prices.is_empty());
    assert!(
        prices.windows(2).all(|w| w[0] <= w[1]),
        "not sorted by spot price"
    );
    assert!(prices.iter().all(|p| *p <= 20.0));
}

async fn filters_narrow_by_provider_region_and_gpu_memory(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = app
        .get_json("/v1/offerings?provider=azure&region=eastus&min_gpu_memory_gib=80&limit=1000")
        .await;
    let items = body["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for i in items {
        assert_eq!(
            (i["provider"].as_str(), i["region"].as_str()),
            (Some("azure"), Some("eastus"))
        );
        assert!(i["gpu_memory_gib"].as_f64().unwrap() >= 80.0, "{i}");
        assert!(i["zone"].is_null());
    }
    let nd = items
        .iter()
        .find(|i| i["instance_type"] == "Standard_ND96isr_H100_v5")
        .expect("ND H100 v5");
    assert_eq!(nd["interconnect"], "infiniband");
}

async fn cursor_pages_cover_every_offering_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let all = app.get_json("/v1/offerings?gpu=L4&limit=1000").await;
    let expected: Vec<i64> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect();
    assert!(expected.len() > 50);
    let mut seen = Vec::new();
    let mut path = "/v1/offerings?gpu=L4&limit=17".to_string();
    loop {
        let page = app.get_json(&path).await;
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 17);
        seen.extend(items.iter().map(|i| i["id"].as_i64().unwrap()));
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/offerings?gpu=L4&limit=17&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), seen.len());
}

async fn an_instance_type_shows_its_zones_and_price_history(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = app.get_json("/v1/offerings/aws/p5.48xlarge").await;
    assert_eq!(body["gpu"], "H100");
    assert_eq!(body["gpu_count"], 8.0);
    assert_eq!(body["interconnect"], "efa");
    let locations = body["locations"].as_array().unwrap();
    assert!(locations.len() > 5);
    assert!(locations.iter().all(|l| l["zone"].is_string()));
    let history = body["price_history"].as_array().unwrap();
    assert!(history.iter().any(|h| h["market"] == "spot"));
    assert!(
        history
            .iter()
            .all(|h| h["observed_at"] == "2026-01-21T00:00:00Z" && h["source"] == "bundled")
    );

    // SkyPilot's host for one T4: the cheapest N1 VM with 4 vCPUs and 16 GiB.
    let gcp = app.get_json("/v1/offerings/gcp/n1-highmem-4+T4x1").await;
    assert_eq!(
        (gcp["gpu"].as_str(), gcp["gpu_count"].as_f64()),
        (Some("T4"), Some(1.0))
    );
}

async fn unknown_providers_and_instance_types_are_404(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_problem(
        app.get("/v1/offerings?provider=oraclecloud").await,
        404,
        "provider",
    )
    .await;
    assert_problem(
        app.get("/v1/offerings/oraclecloud/x").await,
        404,
        "provider",
    )
    .await;
    assert_problem(
        app.get("/v1/offerings/aws/p9.huge").await,
        404,
        "instance_type",
    )
    .await;
    assert_problem(
        app.get("/v1/prices/history?provider=oraclecloud").await,
        404,
        "provider",
    )
    .await;
}

async fn bad_query_parameters_are_named(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_problem(
        app.get("/v1/offerings?min_gpus=eight").await,
        422,
        "min_gpus",
    )
    .await;
    assert_problem(app.get("/v1/offerings?min_gpus=-1").await, 422, "min_gpus").await;
    assert_problem(
        app.get("/v1/offerings?max_price=-3").await,
        422,
        "max_price",
    )
    .await;
    assert_problem(
        app.get("/v1/offerings?market=reserved").await,
        422,
        "market",
    )
    .await;
    assert_problem(app.get("/v1/offerings?limit=0").await, 422, "limit").await;
    assert_problem(app.get("/v1/offerings?cursor=bogus").await, 400, "cursor").await;
    assert_problem(app.get("/v1/offerings?gpus=A100").await, 400, "gpus").await;
    assert_problem(
        app.get("/v1/prices/history?from=yesterday").await,
        422,
        "from",
    )
    .await;
}

async fn gpu_facts_and_providers_are_listed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let gpus = app.get_json("/v1/gpus").await;
    let a100 = gpus["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "A100-80GB")
        .unwrap();
    assert_eq!(a100["memory_gib"], 80.0);
    assert_eq!(a100["memory_bandwidth_gbps"], 2039.0);
    assert_eq!(a100["fp16_bf16_dense_tflops"], 312.0);
    let providers = app.get_json("/v1/providers").await;
    assert!(
        providers["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "gcp")
    );
}

async fn probes_report_alive_and_ready(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    assert_eq!(app.get_json("/healthz").await["status"], "ok");
    let ready = app.get_json("/readyz").await;
    assert_eq!(ready["status"], "ready");
    assert!(ready["catalog_offerings"].as_u64().unwrap() > 3000);
    let expected = if backend == Backend::Postgres {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(ready["database"], expected);
}

on_both_backends!(
    eight_a100s_come_from_at_least_three_providers_with_both_markets,
    offerings_are_sorted_by_the_price_of_the_chosen_market,
    filters_narrow_by_provider_region_and_gpu_memory,
    cursor_pages_cover_every_offering_once,
    an_instance_type_shows_its_zones_and_price_history,
    unknown_providers_and_instance_types_are_404,
    bad_query_parameters_are_named,
    gpu_facts_and_providers_are_listed,
    probes_report_alive_and_ready,
);
