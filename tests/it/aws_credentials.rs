//! The AWS credential chain's sources against their counterparts: STS (AssumeRole for a
//! profile's role, AssumeRoleWithWebIdentity for IRSA) on moto, the instance metadata service
//! (IMDSv2) and the container credentials endpoint (ECS, EKS Pod Identity) on mocks of their
//! documented wire format. Time is injected: credentials are reused until five minutes before
//! they expire and fetched again from then on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use wiremock::matchers::{header, header_exists, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use trainscaler::provider::ProviderError;
use trainscaler::provider::aws::{AwsCredentialsProvider, AwsProvider, AwsSettings, Service};
use trainscaler::provider::credentials::Clock;

use crate::moto;

const HOUR_MS: i64 = 3_600_000;
/// 2030-01-01T00:00:00Z, the expiry the mocks hand out first.
const EXPIRES_MS: i64 = 1_893_456_000_000;

fn clock(now: &Arc<AtomicI64>) -> Clock {
    let now = now.clone();
    Arc::new(move || now.load(Ordering::SeqCst))
}

fn settings(vars: &[(&str, &str)]) -> AwsSettings {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    AwsSettings::from_lookup(|n| vars.get(n).cloned())
        .expect("a valid chain")
        .expect("a source")
}

/// The JSON both IMDS and the container endpoint answer with.
fn credentials_json(key: &str, token: &str, expiration: &str) -> serde_json::Value {
    serde_json::json!({
        "Code": "Success",
        "LastUpdated": "2029-12-31T23:00:00Z",
        "Type": "AWS-HMAC",
        "AccessKeyId": key,
        "SecretAccessKey": "secret-of-".to_string() + key,
        "Token": token,
        "Expiration": expiration,
    })
}

pub(crate) async fn imds(
    server: &MockServer,
    role: &str,
    key: &str,
    token: &str,
    expiration: &str,
) {
    Mock::given(method("PUT"))
        .and(path("/latest/api/token"))
        .and(header_exists("x-aws-ec2-metadata-token-ttl-seconds"))
        .respond_with(ResponseTemplate::new(200).set_body_string("imds-session"))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path("/latest/meta-data/iam/security-credentials/"))
        .and(header("x-aws-ec2-metadata-token", "imds-session"))
        .respond_with(ResponseTemplate::new(200).set_body_string(role))
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!(
            "/latest/meta-data/iam/security-credentials/{role}"
        )))
        .and(header("x-aws-ec2-metadata-token", "imds-session"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(credentials_json(key, token, expiration)),
        )
        .mount(server)
        .await;
}

#[tokio::test]
async fn the_instance_profile_comes_from_imdsv2_and_is_refreshed_five_minutes_before_expiry() {
    let server = MockServer::start().await;
    imds(
        &server,
        "node-role",
        "ASIAFIRST",
        "token-1",
        "2030-01-01T00:00:00Z",
    )
    .await;
    let s = settings(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &server.uri())]);
    assert_eq!(s.credentials.kind(), "instance_profile");
    let now = Arc::new(AtomicI64::new(EXPIRES_MS - HOUR_MS));
    let creds = AwsCredentialsProvider::new(&s, clock(&now)).expect("provider");

    let c = creds.credentials().await.expect("credentials");
    assert_eq!(c.access_key_id, "ASIAFIRST");
    assert_eq!(c.secret_access_key.expose(), "secret-of-ASIAFIRST");
    assert_eq!(
        c.session_token.as_ref().map(|t| t.expose()),
        Some("token-1")
    );
    assert_eq!(
        creds.report().expires_at.as_deref(),
        Some("2030-01-01T00:00:00Z")
    );

    // Six minutes before expiry: still the cached ones, no request.
    now.store(EXPIRES_MS - 6 * 60_000, Ordering::SeqCst);
    creds.credentials().await.expect("cached");
    assert_eq!(creds.fetches(), 1);
    let asked = server.received_requests().await.expect("recorded").len();
    assert_eq!(asked, 3, "token, role name, credentials");

    // Five minutes before: fetched again, with a new session token.
    server.reset().await;
    imds(
        &server,
        "node-role",
        "ASIASECOND",
        "token-2",
        "2030-01-01T06:00:00Z",
    )
    .await;
    now.store(EXPIRES_MS - 5 * 60_000, Ordering::SeqCst);
    let c = creds.credentials().await.expect("refreshed");
    assert_eq!(c.access_key_id, "ASIASECOND");
    assert_eq!(creds.fetches(), 2);
    assert_eq!(creds.report().source, "instance_profile");
    assert_eq!(
        creds.report().expires_at.as_deref(),
        Some("2030-01-01T06:00:00Z")
    );
}

#[tokio::test]
async fn calls_are_signed_with_the_fetched_key_and_session_token() {
    let metadata = MockServer::start().await;
    imds(
        &metadata,
        "node-role",
        "ASIASIGNER",
        "session-token-9",
        "2099-01-01T00:00:00Z",
    )
    .await;
    let ec2 = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("x-amz-security-token", "session-token-9"))
        .respond_with(
            ResponseTemplate::new(200).set_body_string(
                "<DescribeRegionsResponse><regionInfo/></DescribeRegionsResponse>",
            ),
        )
        .expect(2)
        .mount(&ec2)
        .await;
    let mut s = settings(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &metadata.uri())]);
    s.endpoint = Some(ec2.uri());
    let provider = AwsProvider::new(s).expect("adapter");
    for _ in 0..2 {
        provider
            .call(Service::Ec2, "DescribeRegions", &[])
            .await
            .expect("EC2 answers");
    }
    let requests = ec2.received_requests().await.expect("recorded");
    let auth = requests[0]
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(auth.contains("Credential=ASIASIGNER/"), "{auth}");
    assert_eq!(provider.credentials().fetches(), 1, "two calls, one fetch");
}

#[tokio::test]
async fn imds_refusing_the_token_is_an_authorization_error_naming_the_service() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/latest/api/token"))
        .respond_with(ResponseTemplate::new(403))
        .mount(&server)
        .await;
    let s = settings(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &server.uri())]);
    let creds = AwsCredentialsProvider::new(&s, trainscaler::provider::credentials::system_clock())
        .expect("provider");
    let e = creds.credentials().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Unauthorized(m) if m.contains("instance metadata")),
        "{e:?}"
    );
}

#[tokio::test]
async fn container_credentials_send_the_token_files_current_content() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().expect("temporary folder");
    let token_file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token_file, "pod-token-1\n").expect("token file");
    for (token, key) in [("pod-token-1", "ASIAPOD1"), ("pod-token-2", "ASIAPOD2")] {
        Mock::given(method("GET"))
            .and(path("/v1/credentials"))
            .and(header("authorization", token))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "AccessKeyId": key,
                "SecretAccessKey": "s",
                "Token": "session-".to_string() + key,
                "AccountId": "123456789012",
                "Expiration": "2030-01-01T00:00:00Z",
            })))
            .mount(&server)
            .await;
    }
    let uri = format!("{}/v1/credentials", server.uri());
    let s = settings(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.to_str().unwrap(),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            "ignored-when-the-file-is-set",
        ),
    ]);
    assert_eq!(s.credentials.kind(), "container");
    let now = Arc::new(AtomicI64::new(EXPIRES_MS - HOUR_MS));
    let creds = AwsCredentialsProvider::new(&s, clock(&now)).expect("provider");
    assert_eq!(creds.credentials().await.unwrap().access_key_id, "ASIAPOD1");
    // The agent rotates the token; the next fetch reads the file again.
    std::fs::write(&token_file, "pod-token-2").expect("rotated");
    now.store(EXPIRES_MS - 60_000, Ordering::SeqCst);
    assert_eq!(creds.credentials().await.unwrap().access_key_id, "ASIAPOD2");
    assert_eq!(creds.report().identity.as_deref(), Some(uri.as_str()));
}

#[tokio::test]
async fn environment_keys_win_over_every_other_source_and_are_never_fetched() {
    let s = settings(&[
        ("AWS_ACCESS_KEY_ID", "AKIAENV"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent"),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa"),
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://127.0.0.1:9/creds",
        ),
    ]);
    let creds = AwsCredentialsProvider::new(&s, trainscaler::provider::credentials::system_clock())
        .expect("provider");
    assert_eq!(creds.credentials().await.unwrap().access_key_id, "AKIAENV");
    let r = creds.report();
    assert_eq!((r.source.as_str(), r.expires_at), ("environment", None));
}

#[tokio::test]
async fn irsa_exchanges_the_web_identity_token_at_sts_and_the_credentials_work_on_ec2() {
    let moto = moto::shared();
    let dir = tempfile::tempdir().expect("temporary folder");
    let token_file = dir.path().join("token");
    std::fs::write(
        &token_file,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dHJhaW5zY2FsZXIifQ.c2ln\n",
    )
    .expect("token file");
    let s = settings(&[
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/trainscaler-irsa",
        ),
        ("AWS_ROLE_SESSION_NAME", "irsa-test"),
        ("AWS_ENDPOINT_URL", &moto.url),
        ("AWS_REGION", "us-east-1"),
    ]);
    assert_eq!(s.credentials.kind(), "web_identity");
    let provider = AwsProvider::new(s).expect("adapter");
    let c = provider
        .credentials()
        .credentials()
        .await
        .expect("STS answers");
    assert!(c.access_key_id.starts_with("ASIA"), "{}", c.access_key_id);
    assert!(c.session_token.is_some());
    let r = provider.credentials().report();
    assert_eq!(
        r.identity.as_deref(),
        Some("arn:aws:iam::123456789012:role/trainscaler-irsa")
    );
    assert!(r.expires_at.is_some(), "{r:?}");
    provider
        .call(Service::Ec2, "DescribeRegions", &[])
        .await
        .expect("EC2 accepts the assumed role's credentials");
    assert_eq!(provider.credentials().fetches(), 1);
}

#[tokio::test]
async fn a_profiles_role_arn_is_assumed_with_its_source_profiles_keys() {
    let moto = moto::shared();
    let dir = tempfile::tempdir().expect("temporary folder");
    let config = dir.path().join("config");
    let credentials = dir.path().join("credentials");
    std::fs::write(
        &config,
        "[profile train]\nrole_arn = arn:aws:iam::123456789012:role/trainer\nsource_profile = base\nrole_session_name = from-profile\nregion = eu-west-1\n",
    )
    .expect("config");
    std::fs::write(
        &credentials,
        "[base]\naws_access_key_id = AKIDBASEEXAMPLE\naws_secret_access_key = base-secret\n",
    )
    .expect("credentials");
    let s = settings(&[
        ("AWS_PROFILE", "train"),
        ("AWS_CONFIG_FILE", config.to_str().unwrap()),
        ("AWS_SHARED_CREDENTIALS_FILE", credentials.to_str().unwrap()),
        ("AWS_ENDPOINT_URL_STS", &moto.url),
        // IRSA is configured too, but the profile comes first.
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent"),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa"),
    ]);
    assert_eq!(s.region, "eu-west-1", "the profile's region");
    assert_eq!(s.credentials.kind(), "assume_role");
    let creds = AwsCredentialsProvider::new(&s, trainscaler::provider::credentials::system_clock())
        .expect("provider");
    let c = creds.credentials().await.expect("STS AssumeRole answers");
    assert!(c.access_key_id.starts_with("ASIA"), "{}", c.access_key_id);
    assert_ne!(c.access_key_id, "AKIDBASEEXAMPLE");
    assert_eq!(
        creds.report().identity.as_deref(),
        Some("arn:aws:iam::123456789012:role/trainer")
    );
}
