//! The SkyPilot catalog CSV importer under arbitrary and mutated input: it never panics, and
//! every offering it returns has finite, non-negative sizes and positive, finite prices. Over
//! HTTP, mutated uploads get a success or a 4xx problem naming a field, never a 5xx.

use proptest::prelude::*;
use trainscaler::catalog::ImportedOffering;
use trainscaler::catalog::skypilot;

use crate::common::{Backend, TestApp};
use crate::mutation::{apply_text, edits, number_edits, post_each, replace_number, samples};

/// The first rows of the real bundled AWS catalog (GpuInfo literals, zones, empty spot
/// prices).
fn aws_rows() -> String {
    include_str!("../../catalog/aws/vms.csv")
        .lines()
        .take(12)
        .collect::<Vec<_>>()
        .join("\n")
}

/// GCP's layout, where a GPU offering joins a host VM row and an accelerator row.
const GCP: &str = "\
InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
n1-highmem-8,8.0,52.0,,,,us-central1,us-central1-a,0.47321,0.17276
a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.73948,0.36975
,,,T4,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]},us-central1,us-central1-a,0.35,0.1513
,,,A100,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]},us-central1,us-central1-a,2.93,0.88
";

fn check(offerings: &[ImportedOffering]) -> Result<(), TestCaseError> {
    for o in offerings {
        let s = &o.spec;
        for (name, v) in [
            ("gpu_count", s.gpu_count),
            ("gpu_memory_gib", s.gpu_memory_gib),
            ("vcpus", s.vcpus),
            ("memory_gib", s.memory_gib),
        ] {
            prop_assert!(v.is_finite() && v >= 0.0, "{name} = {v} in {o:?}");
        }
        for v in [s.network_gbps, s.local_nvme_gb].into_iter().flatten() {
            prop_assert!(v.is_finite() && v >= 0.0, "{o:?}");
        }
        prop_assert!(
            s.gpu_count > 0.0,
            "only accelerator offerings are kept: {o:?}"
        );
        for price in [o.on_demand, o.spot].into_iter().flatten() {
            prop_assert!(price.0 > 0, "{o:?}");
        }
        prop_assert!(!o.key.instance_type.is_empty() && !o.key.region.is_empty());
    }
    Ok(())
}

fn provider() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["aws", "gcp", "azure", "vast", "lambda"])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400), provider in provider()) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(offerings) = skypilot::parse(provider, &text) {
            check(&offerings)?;
        }
    }

    #[test]
    fn arbitrary_rows_under_a_valid_header_never_panic(
        rows in prop::collection::vec("[-0-9a-zA-Z.,\"' {}:\\[\\]]{0,80}", 0..6),
        provider in provider(),
    ) {
        let header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch";
        let text = format!("{header}\n{}", rows.join("\n"));
        if let Ok(offerings) = skypilot::parse(provider, &text) {
            check(&offerings)?;
        }
    }

    #[test]
    fn mutated_aws_rows_never_panic(e in edits(6)) {
        if let Ok(offerings) = skypilot::parse("aws", &apply_text(&aws_rows(), &e)) {
            check(&offerings)?;
        }
    }

    #[test]
    fn mutated_gcp_rows_never_panic(e in edits(6)) {
        if let Ok(offerings) = skypilot::parse("gcp", &apply_text(GCP, &e)) {
            check(&offerings)?;
        }
    }
}

/// Every number swapped, one at a time, for each of `inf`, `NaN`, `1e999`, negatives and
/// 45-digit runs: inside the GpuInfo literal too, where an infinite `SizeInMiB` once became
/// infinite GPU memory. All of them, not a sample, so a bad figure cannot pass one run.
#[test]
fn edge_numbers_are_rejected_or_in_range() {
    let mut failures = Vec::new();
    for (provider, text) in [("gcp", GCP.to_string()), ("aws", aws_rows())] {
        for (nth, token) in number_edits(&text) {
            let parsed = skypilot::parse(provider, &replace_number(&text, nth, token));
            if let Err(e) = parsed.map_or(Ok(()), |offerings| check(&offerings)) {
                failures.push(format!("{provider}: number {nth} as token {token}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_infinite_gpu_memory_size_is_not_taken() {
    let row = format!(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n\
         p9.huge,ZZ9,1,8,64,\"{{'Gpus': [{{'MemoryInfo': {{'SizeInMiB': {}}}}}]}}\",1.0,,us-east-1\n",
        "9".repeat(400)
    );
    let offerings = skypilot::parse("aws", &row).expect("the row is otherwise valid");
    // An unknown GPU with no usable stated size has no known memory (0), not infinity.
    assert_eq!(offerings[0].spec.gpu_memory_gib, 0.0);
}

/// Mutated uploads over HTTP: a success or a 4xx problem, never a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_uploads_get_a_4xx_problem_never_a_5xx() {
    let app = TestApp::spawn_empty(Backend::Sqlite).await;
    let base = aws_rows();
    let bodies = samples(edits(4), 40)
        .into_iter()
        .map(|e| crate::mutation::apply(base.as_bytes(), &e));
    let csv = [("content-type", "text/csv")];
    let path = "/v1/catalog/import?provider=aws&format=skypilot";
    let rejected = post_each(&app, path, &csv, bodies).await;
    // Some mutations must have broken the file, or the check above proved nothing.
    assert!(rejected > 0, "no mutated upload was rejected");
}
