//! `GET /v1/providers/status` over HTTP on both stores: nothing configured, then an AWS
//! adapter on instance-profile credentials (IMDSv2 mock) whose call AWS refuses, and an
//! Alibaba adapter on an AccessKey pair that has made no call. No secret may appear.

use std::sync::Arc;

use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use trainscaler::app;
use trainscaler::provider::GroupRef;
use trainscaler::provider::alibaba::{AlibabaProvider, AlibabaSettings, Credentials, Secret};
use trainscaler::provider::aws::{AwsProvider, AwsSettings};

use crate::aws_credentials::imds;
use crate::common::{Backend, TestApp};
use crate::on_both_backends;

async fn status(app: &TestApp) -> serde_json::Value {
    app.get_json("/v1/providers/status").await
}

async fn providers_report_their_credentials_and_last_call_without_secrets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let anonymous = reqwest::Client::new()
        .get(app.url("/v1/providers/status"))
        .send()
        .await
        .expect("GET");
    assert_eq!(anonymous.status(), 401, "the read scope is needed");

    let body = status(&app).await;
    let names: Vec<&str> = body["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .map(|p| p["provider"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["aws", "alibaba", "gcp"]);
    for p in body["providers"].as_array().unwrap() {
        assert_eq!(p["configured"], false, "{body}");
        assert!(
            p["credentials"].is_null() && p["last_call"].is_null(),
            "{body}"
        );
    }

    let metadata = MockServer::start().await;
    imds(
        &metadata,
        "node-role",
        "ASIASTATUS",
        "status-session-token",
        "2030-01-01T00:00:00Z",
    )
    .await;
    let autoscaling = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(403).set_body_string(
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
             <Message>User is not authorized to perform: autoscaling:DescribeAutoScalingGroups</Message>\
             </Error><RequestId>r-1</RequestId></ErrorResponse>",
        ))
        .mount(&autoscaling)
        .await;
    let mut aws = AwsSettings::from_lookup(|n| {
        (n == "AWS_EC2_METADATA_SERVICE_ENDPOINT").then(|| metadata.uri())
    })
    .expect("chain")
    .expect("instance profile");
    aws.endpoint = Some(autoscaling.uri());
    let aws = app::metered(
        &app.state,
        Arc::new(AwsProvider::new(aws).expect("AWS adapter")),
    );
    app.state.provider_status.register(aws.clone());
    let alibaba = AlibabaSettings::new(Credentials {
        access_key_id: "LTAIstatusexample".into(),
        access_key_secret: Secret::new("alibaba-secret-value"),
    });
    let alibaba = app::metered(
        &app.state,
        Arc::new(AlibabaProvider::new(alibaba).expect("Alibaba adapter")),
    );
    app.state.provider_status.register(alibaba);

    let group = GroupRef {
        pool: "p".into(),
        region: "us-east-1".into(),
        group: "asg-status".into(),
        spot_group: None,
    };
    aws.describe(&group).await.expect_err("AccessDenied");

    let body = status(&app).await;
    let text = body.to_string();
    for secret in [
        "secret-of-ASIASTATUS",
        "status-session-token",
        "alibaba-secret-value",
    ] {
        assert!(!text.contains(secret), "a secret leaked: {text}");
    }
    let aws = &body["providers"][0];
    assert_eq!(aws["configured"], true);
    assert_eq!(aws["credentials"]["source"], "instance_profile");
    assert_eq!(aws["credentials"]["identity"], metadata.uri());
    assert_eq!(aws["credentials"]["expires_at"], "2030-01-01T00:00:00Z");
    assert_eq!(aws["last_call"]["method"], "describe");
    assert_eq!(aws["last_call"]["outcome"], "unauthorized");
    assert!(
        aws["last_call"]["at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{aws}"
    );
    let alibaba = &body["providers"][1];
    assert_eq!(alibaba["configured"], true);
    assert_eq!(alibaba["credentials"]["source"], "access_key");
    assert_eq!(alibaba["credentials"]["identity"], "LTAIstatusexample");
    assert!(alibaba["credentials"]["expires_at"].is_null(), "{alibaba}");
    assert!(alibaba["last_call"].is_null(), "{alibaba}");
    assert_eq!(body["providers"][2]["configured"], false);

    let ready = app.get("/readyz").await;
    assert_eq!(
        ready.status(),
        200,
        "readiness does not depend on providers"
    );
}

on_both_backends!(providers_report_their_credentials_and_last_call_without_secrets,);
