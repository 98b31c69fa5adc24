//! The AWS Query API XML readers (DescribeInstanceTypes, DescribeSpotPriceHistory,
//! DescribeInstances, DescribeAutoScalingGroups) under arbitrary and mutated responses: a
//! body that does not match is an error, never a panic, and what is read is in range (sizes
//! and prices finite and non-negative, percentages at most 100). The refresh that turns it
//! into catalog offerings keeps those figures finite as well.

use proptest::prelude::*;
use trainscaler::core::catalog::CatalogSnapshot;
use trainscaler::provider::aws::autoscaling::DescribeAutoScalingGroupsResponse;
use trainscaler::provider::aws::ec2::{
    self, DescribeInstanceTypesResponse, DescribeInstancesResponse,
    DescribeSpotPriceHistoryResponse,
};
use trainscaler::provider::aws::xml;
use trainscaler::provider::refresh::to_import;
use trainscaler::provider::{InstanceTypeInfo, Refresh};

use crate::mutation::{apply_text, edits, number_edits, replace_number};

const TYPES: &str = include_str!("../fixtures/aws/ec2_describe_instance_types.xml");
const SPOT: &str = include_str!("../fixtures/aws/ec2_describe_spot_price_history.xml");
const INSTANCES: &str = include_str!("../fixtures/aws/ec2_describe_instances.xml");
const GROUPS: &str = include_str!("../fixtures/aws/autoscaling_describe_auto_scaling_groups.xml");

fn in_range(name: &str, v: f64) -> Result<(), TestCaseError> {
    prop_assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
    Ok(())
}

fn check_types(body: &str) -> Result<Vec<InstanceTypeInfo>, TestCaseError> {
    let Ok(r) = xml::parse::<DescribeInstanceTypesResponse>("DescribeInstanceTypes", body) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for t in r.instance_types.item {
        let info = t.into_info();
        in_range("vcpus", info.vcpus)?;
        in_range("memory_gib", info.memory_gib)?;
        in_range("gpu_count", info.gpu_count)?;
        in_range("gpu_memory_gib", info.gpu_memory_gib)?;
        if let Some(nvme) = info.local_nvme_gb {
            in_range("local_nvme_gb", nvme)?;
        }
        out.push(info);
    }
    Ok(out)
}

fn check_spot(body: &str) -> Result<Vec<trainscaler::provider::PriceQuote>, TestCaseError> {
    let Ok(r) = xml::parse::<DescribeSpotPriceHistoryResponse>("DescribeSpotPriceHistory", body)
    else {
        return Ok(Vec::new());
    };
    let quotes = ec2::newest_spot_quotes(r.history.item);
    for q in &quotes {
        in_range("spot price", q.dollars_per_hour)?;
    }
    Ok(quotes)
}

/// The refresh's import of what was read: every spec figure finite and non-negative, every
/// price positive.
fn check_import(
    types: Vec<InstanceTypeInfo>,
    prices: Vec<trainscaler::provider::PriceQuote>,
) -> Result<(), TestCaseError> {
    let refresh = Refresh { types, prices };
    for o in to_import(&CatalogSnapshot::default(), "aws", "us-east-1", &refresh) {
        let s = &o.spec;
        for v in [s.gpu_count, s.gpu_memory_gib, s.vcpus, s.memory_gib] {
            in_range("spec", v)?;
        }
        for v in [s.network_gbps, s.local_nvme_gb].into_iter().flatten() {
            in_range("spec", v)?;
        }
        for p in [o.on_demand, o.spot].into_iter().flatten() {
            prop_assert!(p.0 > 0);
        }
    }
    Ok(())
}

fn check_instances(body: &str) {
    if let Ok(r) = xml::parse::<DescribeInstancesResponse>("DescribeInstances", body) {
        for reservation in r.reservations.item {
            for i in reservation.instances.item {
                let _ = i.facts();
            }
        }
    }
}

fn check_groups(body: &str) -> Result<(), TestCaseError> {
    if let Ok(r) =
        xml::parse::<DescribeAutoScalingGroupsResponse>("DescribeAutoScalingGroups", body)
    {
        for g in r.result.groups.member {
            let _ = g.launch_template();
            let _ = g.instance_ids();
            let capacity = g.into_capacity(|_| None);
            if let Some(d) = &capacity.distribution {
                prop_assert!(d.on_demand_percentage_above_base <= 100, "{d:?}");
            }
        }
    }
    Ok(())
}

fn any_response(body: &str) -> Result<(), TestCaseError> {
    let types = check_types(body)?;
    let quotes = check_spot(body)?;
    check_import(types, quotes)?;
    check_instances(body);
    check_groups(body)
}

fn fixture() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![TYPES, SPOT, INSTANCES, GROUPS])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        any_response(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn mutated_responses_never_panic(body in fixture(), e in edits(5)) {
        any_response(&apply_text(body, &e))?;
    }

}

/// Every number of every fixture swapped, one at a time, for each of `inf`, `NaN`, `1e999`,
/// negatives and runs too long for any integer: few enough cases (a few thousand) to try them
/// all rather than sample them, so a bad figure cannot slip past one run and fail the next.
#[test]
fn edge_numbers_are_rejected_or_in_range() {
    let mut failures = Vec::new();
    for (name, body) in [
        ("types", TYPES),
        ("spot", SPOT),
        ("instances", INSTANCES),
        ("groups", GROUPS),
    ] {
        for (nth, token) in number_edits(body) {
            if let Err(e) = any_response(&replace_number(body, nth, token)) {
                failures.push(format!("{name}: number {nth} as token {token}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The one instance type of a DescribeInstanceTypes answer, as the catalog would take it.
fn only_info(body: &str) -> trainscaler::provider::InstanceTypeInfo {
    let r: DescribeInstanceTypesResponse =
        xml::parse("DescribeInstanceTypes", body).expect("parses");
    r.instance_types
        .item
        .into_iter()
        .next()
        .expect("one instance type")
        .into_info()
}

fn one_type(memory: &str, gpu_memory: &str, count: &str, network: &str) -> String {
    format!(
        r#"<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <instanceTypeSet><item>
    <instanceType>g9.huge</instanceType>
    <vCpuInfo><defaultVCpus>8</defaultVCpus></vCpuInfo>
    <memoryInfo><sizeInMiB>{memory}</sizeInMiB></memoryInfo>
    <gpuInfo><gpus><item><name>T4</name><count>{count}</count>
      <memoryInfo><sizeInMiB>{gpu_memory}</sizeInMiB></memoryInfo></item></gpus></gpuInfo>
    <networkInfo><networkPerformance>{network}</networkPerformance></networkInfo>
  </item></instanceTypeSet>
</DescribeInstanceTypesResponse>"#
    )
}

#[test]
fn infinite_or_negative_sizes_count_as_not_stated() {
    for bad in ["inf", "Infinity", "NaN", "-16384", "1e999"] {
        let info = only_info(&one_type(bad, bad, "1", "25 Gigabit"));
        assert_eq!((info.memory_gib, info.gpu_memory_gib), (0.0, 0.0), "{bad}");
    }
    let info = only_info(&one_type("16384", "16384", "-inf", "inf Gigabit"));
    assert_eq!(info.gpu_count, 0.0);
    assert_eq!(info.gpu_memory_gib, 16.0);
    let refresh = Refresh {
        types: vec![info],
        prices: Vec::new(),
    };
    let offerings = to_import(&CatalogSnapshot::default(), "aws", "us-east-1", &refresh);
    assert_eq!(
        offerings[0].spec.network_gbps, None,
        "`inf Gigabit` is no bandwidth"
    );
}

#[test]
fn an_on_demand_percentage_over_100_is_read_as_100() {
    let body = GROUPS.replace(
        "<OnDemandPercentageAboveBaseCapacity>",
        "<OnDemandPercentageAboveBaseCapacity>4000",
    );
    assert_ne!(body, GROUPS, "the fixture has a distribution");
    let r: DescribeAutoScalingGroupsResponse =
        xml::parse("DescribeAutoScalingGroups", &body).expect("still valid XML");
    let capacity = r
        .result
        .groups
        .member
        .into_iter()
        .next()
        .unwrap()
        .into_capacity(|_| None);
    assert_eq!(
        capacity
            .distribution
            .unwrap()
            .on_demand_percentage_above_base,
        100
    );
}
