//! The AWS adapter against moto, a local mock of EC2, Auto Scaling and IAM: a group with a
//! MixedInstancesPolicy is described, scaled, re-ordered, trimmed and emptied through the
//! adapter alone; instance types and spot prices are refreshed; and, on a private server with
//! authentication on, the signature is checked with a real and a wrong secret.

use std::collections::BTreeSet;
use std::time::Duration;

use trainscaler::core::catalog::Market;
use trainscaler::provider::aws::{AwsCredentials, AwsProvider, AwsSettings, Secret, Service};
use trainscaler::provider::retry::RetryPolicy;
use trainscaler::provider::{
    Capacity, CapacitySpec, Distribution, GroupRef, Provider, ProviderError, WorkerState,
};

use crate::moto;

const REGION: &str = "us-east-1";
const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];
/// An image moto knows in every region.
const IMAGE: &str = "ami-12c6146b";

pub(crate) fn provider(url: &str, key: &str, secret: &str) -> AwsProvider {
    let mut settings = AwsSettings::new(
        REGION,
        AwsCredentials {
            access_key_id: key.into(),
            secret_access_key: Secret::new(secret),
            session_token: None,
        },
    );
    settings.endpoint = Some(url.to_string());
    settings.retry = RetryPolicy {
        max_retries: 2,
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
    };
    AwsProvider::new(settings).expect("the AWS adapter builds")
}

fn group_ref(name: &str) -> GroupRef {
    GroupRef {
        pool: "train".into(),
        region: REGION.into(),
        group: name.into(),
        spot_group: None,
    }
}

pub(crate) fn distribution(base: u32, percent: u32, types: &[&str]) -> Distribution {
    Distribution {
        on_demand_base: base,
        on_demand_percentage_above_base: percent,
        instance_types: types.iter().map(|t| t.to_string()).collect(),
    }
}

fn spec(desired: u32, max: u32, distribution: Distribution) -> CapacitySpec {
    CapacitySpec {
        desired,
        min: 0,
        max,
        distribution,
        targets: vec![],
    }
}

/// A launch template and a group launching from it with a mixed-instances policy, made with
/// the adapter's own signed calls. The group starts empty.
pub(crate) async fn create_group(aws: &AwsProvider, name: &str, max: u32, d: &Distribution) {
    let first = d.instance_types.first().cloned().unwrap_or_default();
    let template = format!("{name}-lt");
    aws.call(
        Service::Ec2,
        "CreateLaunchTemplate",
        &[
            ("LaunchTemplateName", template.as_str()),
            ("LaunchTemplateData.ImageId", IMAGE),
            ("LaunchTemplateData.InstanceType", first.as_str()),
        ],
    )
    .await
    .expect("moto creates the launch template");

    let base = d.on_demand_base.to_string();
    let percent = d.on_demand_percentage_above_base.to_string();
    let max = max.to_string();
    let mut params: Vec<(String, String)> = [
        ("AutoScalingGroupName", name),
        ("MinSize", "0"),
        ("MaxSize", max.as_str()),
        ("DesiredCapacity", "0"),
        ("AvailabilityZones.member.1", ZONES[0]),
        ("AvailabilityZones.member.2", ZONES[1]),
        (
            "MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.LaunchTemplateName",
            template.as_str(),
        ),
        (
            "MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.Version",
            "$Latest",
        ),
        (
            "MixedInstancesPolicy.InstancesDistribution.OnDemandBaseCapacity",
            base.as_str(),
        ),
        (
            "MixedInstancesPolicy.InstancesDistribution.OnDemandPercentageAboveBaseCapacity",
            percent.as_str(),
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (i, t) in d.instance_types.iter().enumerate() {
        params.push((
            format!(
                "MixedInstancesPolicy.LaunchTemplate.Overrides.member.{}.InstanceType",
                i + 1
            ),
            t.clone(),
        ));
    }
    let params: Vec<(&str, &str)> = params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    aws.call(Service::AutoScaling, "CreateAutoScalingGroup", &params)
        .await
        .expect("moto creates the auto scaling group");
}

fn ids(c: &Capacity) -> Vec<String> {
    c.workers.iter().map(|w| w.id.clone()).collect()
}

const TYPES: [&str; 4] = ["g5.xlarge", "g4dn.xlarge", "g5.2xlarge", "g4dn.2xlarge"];

#[tokio::test]
async fn aws_describe_reads_a_new_groups_bounds_and_distribution_in_priority_order() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");
    let name = moto::unique("ts-describe");
    let d = distribution(1, 30, &TYPES);
    create_group(&aws, &name, 6, &d).await;

    let cap = aws.describe(&group_ref(&name)).await.expect("describe");
    assert_eq!((cap.desired, cap.min, cap.max), (0, 0, 6));
    assert_eq!(cap.distribution, Some(d));
    assert!(cap.workers.is_empty());
}

#[tokio::test]
async fn aws_set_capacity_launches_instances_and_an_identical_spec_sends_nothing() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");
    let name = moto::unique("ts-scale");
    let group = group_ref(&name);
    let d = distribution(0, 100, &TYPES);
    create_group(&aws, &name, 6, &d).await;

    let empty = aws.describe(&group).await.expect("describe");
    aws.set_capacity(&group, &empty, &spec(3, 6, d.clone()))
        .await
        .expect("scale to 3");
    let three = aws.describe(&group).await.expect("describe");
    assert_eq!(three.desired, 3);
    assert_eq!(three.workers.len(), 3, "{:?}", three.workers);
    for w in &three.workers {
        assert!(w.id.starts_with("i-"), "{w:?}");
        assert!(TYPES.contains(&w.instance_type.as_str()), "{w:?}");
        assert!(
            w.zone.as_deref().is_some_and(|z| ZONES.contains(&z)),
            "{w:?}"
        );
        assert!(
            matches!(w.state, WorkerState::Running | WorkerState::Pending),
            "{w:?}"
        );
        assert_eq!(
            w.market,
            Market::OnDemand,
            "moto launches on-demand only: {w:?}"
        );
        assert!(w.launched_at_ms.is_some_and(|t| t > 0), "{w:?}");
    }

    let before = aws.requests_sent();
    aws.set_capacity(&group, &three, &spec(3, 6, d.clone()))
        .await
        .expect("unchanged spec");
    assert_eq!(
        aws.requests_sent(),
        before,
        "an unchanged spec must send no request"
    );
    let again = aws.describe(&group).await.expect("describe");
    assert_eq!(again.desired, 3);
    assert_eq!(ids(&again), ids(&three));
}

#[tokio::test]
async fn aws_a_new_distribution_updates_the_group_and_reads_back() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");
    let name = moto::unique("ts-update");
    let group = group_ref(&name);
    create_group(&aws, &name, 6, &distribution(0, 100, &TYPES)).await;

    let current = aws.describe(&group).await.expect("describe");
    let reordered = distribution(1, 0, &["g4dn.2xlarge", "g5.2xlarge", "g5.xlarge"]);
    let mut wanted = spec(2, 8, reordered.clone());
    wanted.min = 1;
    let before = aws.requests_sent();
    aws.set_capacity(&group, &current, &wanted)
        .await
        .expect("update");
    assert_eq!(
        aws.requests_sent() - before,
        1,
        "one UpdateAutoScalingGroup, with the launch template remembered from describe"
    );
    let after = aws.describe(&group).await.expect("describe");
    assert_eq!((after.desired, after.min, after.max), (2, 1, 8));
    assert_eq!(after.distribution, Some(reordered));
    assert_eq!(after.workers.len(), 2);
}

#[tokio::test]
async fn aws_terminate_with_decrement_removes_exactly_that_instance_then_zero_empties_the_group() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");
    let name = moto::unique("ts-terminate");
    let group = group_ref(&name);
    let d = distribution(0, 100, &TYPES);
    create_group(&aws, &name, 6, &d).await;
    let empty = aws.describe(&group).await.expect("describe");
    aws.set_capacity(&group, &empty, &spec(3, 6, d.clone()))
        .await
        .expect("scale to 3");
    let three = aws.describe(&group).await.expect("describe");
    assert_eq!(three.workers.len(), 3);

    let chosen = three.workers[1].id.clone();
    aws.terminate(&group, std::slice::from_ref(&chosen), true)
        .await
        .expect("terminate");
    let two = aws.describe(&group).await.expect("describe");
    assert_eq!(two.desired, 2);
    let mut left = ids(&three);
    left.retain(|id| *id != chosen);
    assert_eq!(
        ids(&two).into_iter().collect::<BTreeSet<_>>(),
        left.into_iter().collect::<BTreeSet<_>>()
    );

    aws.set_capacity(&group, &two, &spec(0, 6, d))
        .await
        .expect("scale to 0");
    let none = aws.describe(&group).await.expect("describe");
    assert_eq!(none.desired, 0);
    assert!(none.workers.is_empty(), "{:?}", none.workers);
}

#[tokio::test]
async fn aws_refresh_reads_gpu_instance_types_and_spot_quotes() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");

    let all = aws.refresh(REGION, &[], 0).await.expect("refresh");
    assert!(all.types.len() > 10, "{} GPU types", all.types.len());
    let without: Vec<_> = all
        .types
        .iter()
        .filter(|t| t.gpu_count <= 0.0 || t.gpu_model.is_none())
        .collect();
    assert!(without.is_empty(), "GPU types without a GPU: {without:?}");
    assert!(!all.types.iter().any(|t| t.instance_type == "m5.large"));
    let g4dn = all
        .types
        .iter()
        .find(|t| t.instance_type == "g4dn.12xlarge")
        .expect("g4dn.12xlarge among the GPU types");
    assert_eq!(g4dn.gpu_model.as_deref(), Some("T4"));
    assert_eq!(g4dn.gpu_count, 4.0);
    assert_eq!(g4dn.gpu_memory_gib, 16.0);
    assert_eq!(g4dn.vcpus, 48.0);
    assert_eq!(g4dn.memory_gib, 192.0);
    let p4d = all
        .types
        .iter()
        .find(|t| t.instance_type == "p4d.24xlarge")
        .expect("p4d.24xlarge among the GPU types");
    assert_eq!(p4d.gpu_model.as_deref(), Some("A100"));
    assert_eq!(p4d.gpu_count, 8.0);
    assert!(p4d.rdma, "p4d has EFA");
    assert_eq!(p4d.local_nvme_gb, Some(8000.0));
    assert!(!all.prices.is_empty());

    let named = vec!["g4dn.12xlarge".to_string(), "p4d.24xlarge".to_string()];
    let some = aws.refresh(REGION, &named, 0).await.expect("refresh");
    let types: Vec<&str> = some
        .types
        .iter()
        .map(|t| t.instance_type.as_str())
        .collect();
    assert_eq!(types, ["g4dn.12xlarge", "p4d.24xlarge"]);
    assert!(!some.prices.is_empty());
    let mut seen = BTreeSet::new();
    for q in &some.prices {
        // moto's prices and times are placeholders: check the shape, not the values.
        assert!(named.contains(&q.instance_type), "{q:?}");
        assert_eq!(q.market, Market::Spot);
        assert!(
            q.zone.as_deref().is_some_and(|z| z.starts_with(REGION)),
            "{q:?}"
        );
        assert!(q.dollars_per_hour >= 0.0, "{q:?}");
        assert!(
            seen.insert((q.instance_type.clone(), q.zone.clone())),
            "one quote per type and zone: {q:?}"
        );
    }
}

#[tokio::test]
async fn aws_a_missing_group_is_not_found() {
    let moto = moto::shared();
    let aws = provider(&moto.url, "testing", "testing");
    let err = aws
        .describe(&group_ref(&moto::unique("ts-missing")))
        .await
        .expect_err("no such group");
    assert!(matches!(err, ProviderError::NotFound(_)), "{err:?}");
}

/// A signed IAM Query API call, for setting up users on moto (the adapter has no IAM client).
async fn iam(url: &str, action: &str, params: &[(&str, &str)]) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", action);
    form.append_pair("Version", "2010-05-08");
    for (k, v) in params {
        form.append_pair(k, v);
    }
    let body = form.finish();
    let endpoint = format!("{url}/");
    let host = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let content_type = "application/x-www-form-urlencoded; charset=utf-8";
    let creds = AwsCredentials {
        access_key_id: "AKIASETUPEXAMPLE0000".into(),
        secret_access_key: Secret::new("setup"),
        session_token: None,
    };
    let signed = trainscaler::provider::aws::sign::sign_post(
        &creds,
        REGION,
        "iam",
        &endpoint,
        &[("host", &host), ("content-type", content_type)],
        body.as_bytes(),
        std::time::SystemTime::now(),
    )
    .expect("signed");
    let mut request = reqwest::Client::new()
        .post(&endpoint)
        .header("content-type", content_type)
        .body(body);
    for (k, v) in signed {
        request = request.header(k, v);
    }
    let response = request.send().await.expect("moto answers IAM");
    let status = response.status();
    let text = response.text().await.expect("IAM body");
    assert!(status.is_success(), "IAM {action} failed: {status} {text}");
    text
}

fn element<'a>(xml: &'a str, name: &str) -> &'a str {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    xml.split_once(&open)
        .and_then(|(_, rest)| rest.split_once(&close))
        .map(|(value, _)| value)
        .unwrap_or_else(|| panic!("no <{name}> in {xml}"))
}

#[tokio::test]
async fn aws_with_authentication_on_the_real_key_is_accepted_and_a_wrong_secret_is_unauthorized() {
    // Its own server: switching authentication on would break every test sharing one.
    let moto = moto::private();
    let setup = provider(&moto.url, "testing", "testing");
    let name = moto::unique("ts-auth");
    create_group(&setup, &name, 2, &distribution(0, 100, &["g5.xlarge"])).await;

    iam(&moto.url, "CreateUser", &[("UserName", "trainscaler")]).await;
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["ec2:*","autoscaling:*"],"Resource":"*"}]}"#;
    let created = iam(
        &moto.url,
        "CreatePolicy",
        &[("PolicyName", "trainscaler"), ("PolicyDocument", policy)],
    )
    .await;
    let arn = element(&created, "Arn").to_string();
    iam(
        &moto.url,
        "AttachUserPolicy",
        &[("UserName", "trainscaler"), ("PolicyArn", &arn)],
    )
    .await;
    let key = iam(&moto.url, "CreateAccessKey", &[("UserName", "trainscaler")]).await;
    let key_id = element(&key, "AccessKeyId").to_string();
    let secret = element(&key, "SecretAccessKey").to_string();

    let reset = reqwest::Client::new()
        .post(format!("{}/moto-api/reset-auth", moto.url))
        .body("0")
        .send()
        .await
        .expect("moto answers reset-auth");
    assert!(
        reset.status().is_success(),
        "reset-auth: {}",
        reset.status()
    );

    let real = provider(&moto.url, &key_id, &secret);
    let cap = real
        .describe(&group_ref(&name))
        .await
        .expect("the IAM user's key is accepted");
    assert_eq!((cap.desired, cap.max), (0, 2));
    let refresh = real
        .refresh(REGION, &["g5.xlarge".to_string()], 0)
        .await
        .expect("EC2 accepts the IAM user's key too");
    assert_eq!(refresh.types.len(), 1);

    let wrong = provider(&moto.url, &key_id, "not-the-secret");
    let err = wrong
        .describe(&group_ref(&name))
        .await
        .expect_err("a wrong secret is refused");
    assert!(matches!(err, ProviderError::Unauthorized(_)), "{err:?}");
    let err = wrong
        .refresh(REGION, &["g5.xlarge".to_string()], 0)
        .await
        .expect_err("a wrong secret is refused by EC2 too");
    assert!(matches!(err, ProviderError::Unauthorized(_)), "{err:?}");
}
