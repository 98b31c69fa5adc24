//! Alibaba Cloud credentials without a stored key, against mocks of the documented wire
//! formats: RRSA (STS `AssumeRoleWithOIDC` with ACK's OIDC token file) and the ECS RAM role
//! (the metadata service in hardened mode). The STS token must then sign ECS and ESS calls:
//! the mock checks the `SecurityToken` parameter and recomputes the signature with the STS
//! AccessKeySecret.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use wiremock::matchers::{body_string_contains, header, header_exists, method, path, query_param};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use trainscaler::provider::alibaba::{
    AlibabaCredentialsProvider, AlibabaProvider, AlibabaSettings,
};
use trainscaler::provider::credentials::Clock;
use trainscaler::provider::{GroupRef, Provider, ProviderError};

use crate::alibaba_mock::{decoded_query, doc_signature, fixture};

/// 2030-01-01T00:00:00Z.
const EXPIRES_MS: i64 = 1_893_456_000_000;

fn clock(now: &Arc<AtomicI64>) -> Clock {
    let now = now.clone();
    Arc::new(move || now.load(Ordering::SeqCst))
}

fn settings(vars: &[(&str, &str)]) -> AlibabaSettings {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    AlibabaSettings::from_lookup(|n| vars.get(n).cloned()).expect("a source")
}

/// The `Credentials` object of STS and the metadata service, as documented.
fn sts_credentials(key: &str, token: &str, expiration: &str) -> serde_json::Value {
    serde_json::json!({
        "AccessKeyId": key,
        "AccessKeySecret": format!("secret-of-{key}"),
        "SecurityToken": token,
        "Expiration": expiration,
    })
}

/// A request signed with `key`'s STS secret that carries its security token.
struct SignedWithSts {
    key: &'static str,
    token: &'static str,
}

impl Match for SignedWithSts {
    fn matches(&self, request: &Request) -> bool {
        let Some(q) = decoded_query(request) else {
            return false;
        };
        q.get("AccessKeyId").map(String::as_str) == Some(self.key)
            && q.get("SecurityToken").map(String::as_str) == Some(self.token)
            && q.get("Signature") == Some(&doc_signature(&format!("secret-of-{}", self.key), &q))
    }
}

fn group() -> GroupRef {
    GroupRef {
        pool: "trainers".into(),
        region: "cn-shanghai".into(),
        group: "asg-credentials-test".into(),
        spot_group: None,
    }
}

/// Answers DescribeScalingGroups with no group (so `describe` ends with not found) only when
/// the request is signed with the STS credentials.
async fn ess_expecting(server: &MockServer, key: &'static str, token: &'static str, calls: u64) {
    Mock::given(method("GET"))
        .and(query_param("Action", "DescribeScalingGroups"))
        .and(SignedWithSts { key, token })
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(fixture("describe_scaling_groups_empty")),
        )
        .expect(calls)
        .mount(server)
        .await;
}

#[tokio::test]
async fn rrsa_exchanges_the_oidc_token_and_signs_calls_with_the_security_token() {
    let sts = MockServer::start().await;
    let api = MockServer::start().await;
    let dir = tempfile::tempdir().expect("temporary folder");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "oidc-token-from-ack\n").expect("token file");
    Mock::given(method("POST"))
        .and(path("/"))
        .and(query_param("Action", "AssumeRoleWithOIDC"))
        .and(query_param("Version", "2015-04-01"))
        .and(query_param("Format", "JSON"))
        .and(body_string_contains("OIDCToken=oidc-token-from-ack"))
        .and(body_string_contains("RoleArn=acs%3Aram%3A%3A1234%3Arole%2Ftrainscaler"))
        .and(body_string_contains(
            "OIDCProviderArn=acs%3Aram%3A%3A1234%3Aoidc-provider%2Fack-rrsa-c1",
        ))
        .and(body_string_contains("RoleSessionName=rrsa-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "RequestId": "3D57EAD2-8723-1F26-B69C-F8707D8B565D",
            "OIDCTokenInfo": {"Subject": "system:serviceaccount:trainscaler:trainscaler"},
            "AssumedRoleUser": {"Arn": "acs:ram::1234:role/trainscaler/rrsa-test", "AssumedRoleId": "3"},
            "Credentials": sts_credentials("STS.RRSA1", "rrsa-security-token", "2030-01-01T00:00:00Z"),
        })))
        .expect(1)
        .mount(&sts)
        .await;
    ess_expecting(&api, "STS.RRSA1", "rrsa-security-token", 2).await;
    let sts_uri = sts.uri();
    let api_uri = api.uri();
    let s = settings(&[
        ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1234:role/trainscaler"),
        (
            "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
            "acs:ram::1234:oidc-provider/ack-rrsa-c1",
        ),
        (
            "ALIBABA_CLOUD_OIDC_TOKEN_FILE",
            token_file.to_str().unwrap(),
        ),
        ("ALIBABA_CLOUD_ROLE_SESSION_NAME", "rrsa-test"),
        ("TRAINSCALER_ALIBABA_STS_ENDPOINT", &sts_uri),
        ("ALIBABA_CLOUD_ENDPOINT_URL", &api_uri),
    ]);
    let adapter = AlibabaProvider::new(s).expect("adapter");
    for _ in 0..2 {
        let e = adapter.describe(&group()).await.unwrap_err();
        assert!(matches!(e, ProviderError::NotFound(_)), "{e:?}");
    }
    let report = adapter.credentials().report();
    assert_eq!(report.source, "rrsa");
    assert_eq!(
        report.identity.as_deref(),
        Some("acs:ram::1234:role/trainscaler")
    );
    assert_eq!(report.expires_at.as_deref(), Some("2030-01-01T00:00:00Z"));
    assert_eq!(
        adapter.credentials().fetches(),
        1,
        "two calls, one exchange"
    );
}

#[tokio::test]
async fn sts_refusing_an_expired_oidc_token_is_an_authorization_error() {
    let sts = MockServer::start().await;
    let dir = tempfile::tempdir().expect("temporary folder");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "stale").expect("token file");
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
            "RequestId": "1", "HostId": "sts.aliyuncs.com",
            "Code": "AuthenticationFail.OIDCToken.Expired",
            "Message": "The OIDC token has expired.",
        })))
        .mount(&sts)
        .await;
    let sts_uri = sts.uri();
    let s = settings(&[
        ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1234:role/trainscaler"),
        (
            "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
            "acs:ram::1234:oidc-provider/ack-rrsa-c1",
        ),
        (
            "ALIBABA_CLOUD_OIDC_TOKEN_FILE",
            token_file.to_str().unwrap(),
        ),
        ("TRAINSCALER_ALIBABA_STS_ENDPOINT", &sts_uri),
    ]);
    let creds =
        AlibabaCredentialsProvider::new(&s, trainscaler::provider::credentials::system_clock())
            .expect("provider");
    let e = creds.credentials().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Unauthorized(m) if m.contains("AuthenticationFail.OIDCToken.Expired")),
        "{e:?}"
    );
}

async fn metadata(server: &MockServer, role: &str, key: &str, token: &str, expiration: &str) {
    Mock::given(method("PUT"))
        .and(path("/latest/api/token"))
        .and(header_exists("x-aliyun-ecs-metadata-token-ttl-seconds"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ecs-metadata-session"))
        .mount(server)
        .await;
    let mut answer = sts_credentials(key, token, expiration);
    answer["Code"] = "Success".into();
    answer["LastUpdated"] = "2029-12-31T18:00:00Z".into();
    Mock::given(method("GET"))
        .and(path(format!(
            "/latest/meta-data/ram/security-credentials/{role}"
        )))
        .and(header(
            "x-aliyun-ecs-metadata-token",
            "ecs-metadata-session",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(server)
        .await;
}

#[tokio::test]
async fn the_ecs_ram_role_comes_from_hardened_metadata_and_is_refreshed_before_expiry() {
    let server = MockServer::start().await;
    let api = MockServer::start().await;
    metadata(
        &server,
        "TrainscalerRole",
        "STS.ECS1",
        "ecs-token-1",
        "2030-01-01T00:00:00Z",
    )
    .await;
    ess_expecting(&api, "STS.ECS1", "ecs-token-1", 1).await;
    let uri = server.uri();
    let api_uri = api.uri();
    let s = settings(&[
        ("ALIBABA_CLOUD_ECS_METADATA", "TrainscalerRole"),
        ("TRAINSCALER_ALIBABA_METADATA_ENDPOINT", &uri),
        ("ALIBABA_CLOUD_ENDPOINT_URL", &api_uri),
    ]);
    let now = Arc::new(AtomicI64::new(EXPIRES_MS - 3_600_000));
    let creds = Arc::new(AlibabaCredentialsProvider::new(&s, clock(&now)).expect("provider"));
    let adapter = AlibabaProvider::with_credentials(s, creds.clone()).expect("adapter");
    let e = adapter.describe(&group()).await.unwrap_err();
    assert!(matches!(e, ProviderError::NotFound(_)), "{e:?}");

    now.store(EXPIRES_MS - 6 * 60_000, Ordering::SeqCst);
    assert_eq!(creds.credentials().await.unwrap().access_key_id, "STS.ECS1");
    assert_eq!(creds.fetches(), 1);

    server.reset().await;
    metadata(
        &server,
        "TrainscalerRole",
        "STS.ECS2",
        "ecs-token-2",
        "2030-01-01T06:00:00Z",
    )
    .await;
    now.store(EXPIRES_MS - 5 * 60_000, Ordering::SeqCst);
    let c = creds.credentials().await.unwrap();
    assert_eq!(c.access_key_id, "STS.ECS2");
    assert_eq!(
        c.security_token.as_ref().map(|t| t.expose()),
        Some("ecs-token-2")
    );
    assert_eq!(creds.report().source, "ecs_ram_role");
    assert_eq!(
        creds.report().expires_at.as_deref(),
        Some("2030-01-01T06:00:00Z")
    );
}
