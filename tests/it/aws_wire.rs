//! The AWS adapter against wiremock answering exactly as AWS documents its Query APIs: the
//! signature and form parameters of each request, throttling retried with backoff, and an EC2
//! capacity error read into its typed form.

use std::time::Duration;

use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use trainscaler::core::catalog::Market;
use trainscaler::provider::aws::{AwsCredentials, AwsProvider, AwsSettings, Secret, Service};
use trainscaler::provider::retry::RetryPolicy;
use trainscaler::provider::{GroupRef, Provider, ProviderError, WorkerState};

const THROTTLING: &str = include_str!("../fixtures/aws/autoscaling_error_throttling.xml");
const GROUPS: &str = include_str!("../fixtures/aws/autoscaling_describe_auto_scaling_groups.xml");
const INSTANCES: &str = include_str!("../fixtures/aws/ec2_describe_instances.xml");
const TYPES: &str = include_str!("../fixtures/aws/ec2_describe_instance_types.xml");
const SPOT: &str = include_str!("../fixtures/aws/ec2_describe_spot_price_history.xml");
const GONE: &str = include_str!("../fixtures/aws/ec2_error_instance_not_found.xml");
const CAPACITY: &str = include_str!("../fixtures/aws/ec2_error_insufficient_capacity.xml");

const KEY: &str = "AKIDEXAMPLE";
const TOKEN: &str = "FQoGZXIvYXdzEXAMPLETOKEN";

fn settings(autoscaling: &MockServer, ec2: &MockServer, retries: usize) -> AwsSettings {
    let mut s = AwsSettings::new(
        "eu-west-1",
        AwsCredentials {
            access_key_id: KEY.into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: Some(Secret::new(TOKEN)),
        },
    );
    // Service-specific endpoints, as AWS_ENDPOINT_URL_AUTO_SCALING / _EC2 set them.
    s.autoscaling_endpoint = Some(autoscaling.uri());
    s.ec2_endpoint = Some(ec2.uri());
    s.retry = RetryPolicy {
        max_retries: retries,
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
    };
    s
}

fn group() -> GroupRef {
    GroupRef {
        pool: "train".into(),
        region: "eu-west-1".into(),
        group: "training-g5".into(),
        spot_group: None,
    }
}

fn xml(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_string(), "text/xml")
}

fn header<'a>(r: &'a Request, name: &str) -> &'a str {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header"))
}

fn form(r: &Request) -> Vec<(String, String)> {
    form_urlencoded::parse(&r.body).into_owned().collect()
}

fn assert_signed(r: &Request, service: &str) {
    let auth = header(r, "authorization");
    let date = header(r, "x-amz-date");
    assert_eq!(date.len(), 16, "x-amz-date is yyyymmddThhmmssZ: {date}");
    let prefix = format!(
        "AWS4-HMAC-SHA256 Credential={KEY}/{}/eu-west-1/{service}/aws4_request, SignedHeaders=",
        &date[..8]
    );
    assert!(auth.starts_with(&prefix), "{auth}");
    let signed = auth
        .split_once("SignedHeaders=")
        .and_then(|(_, rest)| rest.split_once(", Signature="))
        .expect("SignedHeaders and Signature");
    for h in ["content-type", "host", "x-amz-date", "x-amz-security-token"] {
        assert!(signed.0.split(';').any(|s| s == h), "{h} is signed: {auth}");
    }
    assert_eq!(signed.1.len(), 64, "hex SHA-256 signature: {auth}");
    assert_eq!(header(r, "x-amz-security-token"), TOKEN);
    assert_eq!(
        header(r, "content-type"),
        "application/x-www-form-urlencoded; charset=utf-8"
    );
}

#[tokio::test]
async fn aws_throttling_is_retried_with_backoff_and_every_attempt_is_signed_as_documented() {
    let autoscaling = MockServer::start().await;
    let ec2 = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/"))
        .and(body_string_contains("Action=DescribeAutoScalingGroups"))
        .respond_with(xml(400, THROTTLING))
        .up_to_n_times(2)
        .mount(&autoscaling)
        .await;
    Mock::given(method("POST"))
        .and(path("/"))
        .and(body_string_contains("Action=DescribeAutoScalingGroups"))
        .respond_with(xml(200, GROUPS))
        .mount(&autoscaling)
        .await;
    Mock::given(method("POST"))
        .and(path("/"))
        .and(body_string_contains("Action=DescribeInstances"))
        .respond_with(xml(200, INSTANCES))
        .mount(&ec2)
        .await;

    let aws = AwsProvider::new(settings(&autoscaling, &ec2, 4)).expect("adapter");
    let cap = aws
        .describe(&group())
        .await
        .expect("describe after two throttles");
    assert_eq!((cap.desired, cap.min, cap.max), (3, 0, 8));
    assert_eq!(cap.workers.len(), 3);
    assert_eq!(cap.workers[0].state, WorkerState::Running);

    let requests = autoscaling.received_requests().await.expect("recorded");
    assert_eq!(
        requests.len(),
        3,
        "two throttled attempts and one that passed"
    );
    for r in &requests {
        assert_signed(r, "autoscaling");
        assert_eq!(
            form(r),
            [
                (
                    "Action".to_string(),
                    "DescribeAutoScalingGroups".to_string()
                ),
                ("Version".into(), "2011-01-01".into()),
                (
                    "AutoScalingGroupNames.member.1".into(),
                    "training-g5".into()
                ),
            ]
        );
    }

    let ec2_requests = ec2.received_requests().await.expect("recorded");
    assert_eq!(
        ec2_requests.len(),
        1,
        "one DescribeInstances for all instances"
    );
    assert_signed(&ec2_requests[0], "ec2");
    assert_eq!(
        form(&ec2_requests[0]),
        [
            ("Action".to_string(), "DescribeInstances".to_string()),
            ("Version".into(), "2016-11-15".into()),
            ("InstanceId.1".into(), "i-0598c7d356eba48d7".into()),
            ("InstanceId.2".into(), "i-1234567890abcdef0".into()),
            ("InstanceId.3".into(), "i-0fedcba9876543210".into()),
        ]
    );
}

#[tokio::test]
async fn aws_throttling_that_never_ends_is_reported_as_throttled_when_retries_run_out() {
    let autoscaling = MockServer::start().await;
    let ec2 = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(xml(400, THROTTLING))
        .mount(&autoscaling)
        .await;

    let aws = AwsProvider::new(settings(&autoscaling, &ec2, 2)).expect("adapter");
    let err = aws.describe(&group()).await.expect_err("still throttled");
    assert!(
        matches!(err, ProviderError::Throttled(ref m) if m.contains("Rate exceeded")),
        "{err:?}"
    );
    let requests = autoscaling.received_requests().await.expect("recorded");
    assert_eq!(requests.len(), 3, "the first attempt and two retries");
}

#[tokio::test]
async fn aws_insufficient_instance_capacity_from_ec2_names_the_instance_type_and_zone() {
    let autoscaling = MockServer::start().await;
    let ec2 = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(xml(500, CAPACITY))
        .mount(&ec2)
        .await;

    let aws = AwsProvider::new(settings(&autoscaling, &ec2, 2)).expect("adapter");
    let err = aws
        .call(
            Service::Ec2,
            "RunInstances",
            &[
                ("ImageId", "ami-0abcdef1234567890"),
                ("InstanceType", "p4d.24xlarge"),
                ("MinCount", "1"),
                ("MaxCount", "1"),
            ],
        )
        .await
        .expect_err("no capacity");
    match err {
        ProviderError::InsufficientCapacity {
            instance_type,
            zone,
            ..
        } => {
            assert_eq!(instance_type.as_deref(), Some("p4d.24xlarge"));
            assert_eq!(zone.as_deref(), Some("us-east-1b"));
        }
        other => panic!("expected InsufficientCapacity, got {other:?}"),
    }
    assert_eq!(
        ec2.received_requests().await.expect("recorded").len(),
        1,
        "capacity errors are not retried"
    );
}

#[tokio::test]
async fn aws_an_instance_already_gone_from_ec2_does_not_fail_the_describe() {
    let autoscaling = MockServer::start().await;
    let ec2 = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(xml(200, GROUPS))
        .mount(&autoscaling)
        .await;
    // Naming an unknown instance fails the whole DescribeInstances; a filter does not.
    Mock::given(method("POST"))
        .and(body_string_contains("InstanceId.1="))
        .respond_with(xml(400, GONE))
        .mount(&ec2)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Filter.1.Name=instance-id"))
        .respond_with(xml(200, INSTANCES))
        .mount(&ec2)
        .await;

    let aws = AwsProvider::new(settings(&autoscaling, &ec2, 2)).expect("adapter");
    let cap = aws.describe(&group()).await.expect("describe");
    assert_eq!(cap.workers.len(), 3);
    assert_eq!(cap.workers[0].market, Market::Spot);
    assert_eq!(
        cap.workers[2].launched_at_ms, None,
        "an instance EC2 no longer knows has no launch time"
    );
    let requests = ec2.received_requests().await.expect("recorded");
    assert_eq!(requests.len(), 2);
    assert_eq!(
        form(&requests[1])[2..],
        [
            ("Filter.1.Name".to_string(), "instance-id".to_string()),
            ("Filter.1.Value.1".into(), "i-0598c7d356eba48d7".into()),
            ("Filter.1.Value.2".into(), "i-1234567890abcdef0".into()),
            ("Filter.1.Value.3".into(), "i-0fedcba9876543210".into()),
        ]
    );
}

#[tokio::test]
async fn aws_refresh_follows_next_tokens_through_every_page() {
    let autoscaling = MockServer::start().await;
    let ec2 = MockServer::start().await;
    let last_types_page = r#"<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>b1c2d3e4-example</requestId><instanceTypeSet/></DescribeInstanceTypesResponse>"#;
    let first_spot_page = r#"<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>c1d2e3f4-example</requestId>
    <spotPriceHistorySet>
        <item>
            <instanceType>g4dn.12xlarge</instanceType>
            <productDescription>Linux/UNIX</productDescription>
            <spotPrice>1.500000</spotPrice>
            <timestamp>2026-01-04T00:00:00.000Z</timestamp>
            <availabilityZone>us-east-1c</availabilityZone>
        </item>
    </spotPriceHistorySet>
    <nextToken>page2token</nextToken>
</DescribeSpotPriceHistoryResponse>"#;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeInstanceTypes"))
        .and(body_string_contains("NextToken=AAEAAbXgexample"))
        .respond_with(xml(200, last_types_page))
        .mount(&ec2)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeInstanceTypes"))
        .respond_with(xml(200, TYPES))
        .mount(&ec2)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeSpotPriceHistory"))
        .and(body_string_contains("NextToken=page2token"))
        .respond_with(xml(200, SPOT))
        .mount(&ec2)
        .await;
    Mock::given(method("POST"))
        .and(body_string_contains("Action=DescribeSpotPriceHistory"))
        .respond_with(xml(200, first_spot_page))
        .mount(&ec2)
        .await;

    let aws = AwsProvider::new(settings(&autoscaling, &ec2, 2)).expect("adapter");
    // 2026-01-01T00:00:00Z
    let refresh = aws
        .refresh("eu-west-1", &[], 1_767_225_600_000)
        .await
        .expect("refresh");
    let types: Vec<&str> = refresh
        .types
        .iter()
        .map(|t| t.instance_type.as_str())
        .collect();
    assert_eq!(
        types,
        ["g4dn.12xlarge", "g6f.large", "p4d.24xlarge"],
        "GPU types only"
    );
    let zones: Vec<(&str, Option<&str>)> = refresh
        .prices
        .iter()
        .map(|q| (q.instance_type.as_str(), q.zone.as_deref()))
        .collect();
    assert_eq!(
        zones,
        [
            ("g4dn.12xlarge", Some("us-east-1a")),
            ("g4dn.12xlarge", Some("us-east-1b")),
            ("g4dn.12xlarge", Some("us-east-1c")),
            ("p4d.24xlarge", Some("us-east-1a")),
        ],
        "quotes from both pages"
    );

    let requests = ec2.received_requests().await.expect("recorded");
    let forms: Vec<Vec<(String, String)>> = requests.iter().map(form).collect();
    assert_eq!(forms.len(), 4, "two pages of types, two of prices");
    assert_eq!(
        forms[0][2..],
        [("MaxResults".to_string(), "100".to_string())]
    );
    assert_eq!(
        forms[1][2..],
        [
            ("MaxResults".to_string(), "100".to_string()),
            ("NextToken".into(), "AAEAAbXgexample".into()),
        ]
    );
    let spot: Vec<(String, String)> = [
        ("Action", "DescribeSpotPriceHistory"),
        ("Version", "2016-11-15"),
        ("InstanceType.1", "g4dn.12xlarge"),
        ("InstanceType.2", "g6f.large"),
        ("InstanceType.3", "p4d.24xlarge"),
        ("ProductDescription.1", "Linux/UNIX"),
        ("StartTime", "2026-01-01T00:00:00Z"),
        ("MaxResults", "1000"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(forms[2], spot);
    let mut second = spot.clone();
    second.push(("NextToken".into(), "page2token".into()));
    assert_eq!(forms[3], second);
    for r in &requests {
        assert_signed(r, "ec2");
    }
}
