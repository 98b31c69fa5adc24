//! The two ways to get Alibaba Cloud STS credentials without a stored key:
//!
//! - RRSA: STS `AssumeRoleWithOIDC` (RPC style, version 2015-04-01), which needs no
//!   signature: the OIDC token is the proof. The answer's `Credentials` carry `AccessKeyId`,
//!   `AccessKeySecret`, `SecurityToken` and `Expiration`.
//! - The ECS RAM role: the metadata service in hardened mode (a token from
//!   `PUT /latest/api/token`, sent as `X-aliyun-ecs-metadata-token`), then
//!   `GET /latest/meta-data/ram/security-credentials/<role>`, answering the same four fields
//!   and `Code: Success`.

use std::path::Path;

use serde::Deserialize;
use time::OffsetDateTime;

use super::SessionCredentials;
use crate::provider::alibaba::rpc::format_timestamp;
use crate::provider::credentials::Expiring;
use crate::provider::secret::Secret;
use crate::provider::{ProviderError, ProviderResult};

pub const STS_VERSION: &str = "2015-04-01";
pub const METADATA_TOKEN_PATH: &str = "/latest/api/token";
pub const METADATA_CREDENTIALS_PATH: &str = "/latest/meta-data/ram/security-credentials/";
pub const METADATA_TOKEN_HEADER: &str = "x-aliyun-ecs-metadata-token";
pub const METADATA_TOKEN_TTL_HEADER: &str = "x-aliyun-ecs-metadata-token-ttl-seconds";
const METADATA_TOKEN_TTL_SECONDS: &str = "21600";
/// How long assumed-role credentials last: an hour, the default of the role's maximum.
const DURATION_SECONDS: &str = "3600";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsCredentials {
    access_key_id: String,
    access_key_secret: String,
    security_token: String,
    expiration: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct OidcAnswer {
    credentials: StsCredentials,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct MetadataAnswer {
    #[serde(default)]
    code: Option<String>,
    #[serde(flatten)]
    credentials: StsCredentials,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct ErrorAnswer {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

fn expiring(what: &str, c: StsCredentials) -> ProviderResult<Expiring<SessionCredentials>> {
    let expires_at_ms = crate::timefmt::parse_rfc3339_ms(&c.expiration).map_err(|e| {
        ProviderError::Unauthorized(format!("{what}: Expiration {:?} {e}", c.expiration))
    })?;
    Ok(Expiring {
        value: SessionCredentials {
            access_key_id: c.access_key_id,
            access_key_secret: Secret::new(c.access_key_secret),
            security_token: Some(Secret::new(c.security_token)),
        },
        expires_at_ms: Some(expires_at_ms),
    })
}

/// A successful answer's body, or an error naming who answered what.
async fn text(what: &str, request: reqwest::RequestBuilder) -> ProviderResult<String> {
    let response = request.send().await.map_err(|e| {
        ProviderError::Unauthorized(format!(
            "{what} did not answer ({})",
            ProviderError::from(e)
        ))
    })?;
    let status = response.status().as_u16();
    let body = response.text().await?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let e: ErrorAnswer = serde_json::from_str(&body).unwrap_or_default();
    let detail = match (e.code, e.message) {
        (Some(code), Some(m)) => format!("{code}: {m}"),
        (Some(code), None) => code,
        _ => body.chars().take(200).collect(),
    };
    let text = format!("{what} answered HTTP {status}: {detail}");
    Err(match status {
        429 | 500..=599 => ProviderError::Throttled(text),
        _ => ProviderError::Unauthorized(text),
    })
}

pub async fn assume_role_with_oidc(
    http: &reqwest::Client,
    endpoint: &str,
    role_arn: &str,
    oidc_provider_arn: &str,
    token_file: &Path,
    session_name: &str,
) -> ProviderResult<Expiring<SessionCredentials>> {
    let token = std::fs::read_to_string(token_file).map_err(|e| {
        ProviderError::Unauthorized(format!(
            "ALIBABA_CLOUD_OIDC_TOKEN_FILE {}: {e}",
            token_file.display()
        ))
    })?;
    let what = format!("STS AssumeRoleWithOIDC at {endpoint}");
    let timestamp = format_timestamp(OffsetDateTime::now_utc());
    let nonce = uuid::Uuid::new_v4().to_string();
    let query = [
        ("Action", "AssumeRoleWithOIDC"),
        ("Format", "JSON"),
        ("Version", STS_VERSION),
        ("Timestamp", timestamp.as_str()),
        ("SignatureNonce", nonce.as_str()),
    ];
    let form = [
        ("RoleArn", role_arn),
        ("OIDCProviderArn", oidc_provider_arn),
        ("OIDCToken", token.trim()),
        ("RoleSessionName", session_name),
        ("DurationSeconds", DURATION_SECONDS),
    ];
    let body =
        serde_urlencoded::to_string(form).map_err(|e| ProviderError::Other(e.to_string()))?;
    let request = http
        .post(format!("{}/", endpoint.trim_end_matches('/')))
        .query(&query)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body);
    let body = text(&what, request).await?;
    let answer: OidcAnswer = serde_json::from_str(&body).map_err(|e| {
        ProviderError::Unauthorized(format!("{what} answered without credentials: {e}"))
    })?;
    expiring(&what, answer.credentials)
}

pub async fn ecs_ram_role(
    http: &reqwest::Client,
    endpoint: &str,
    role: &str,
) -> ProviderResult<Expiring<SessionCredentials>> {
    let what = format!("the ECS metadata service at {endpoint}");
    let token = text(
        &what,
        http.put(format!("{endpoint}{METADATA_TOKEN_PATH}"))
            .header(METADATA_TOKEN_TTL_HEADER, METADATA_TOKEN_TTL_SECONDS),
    )
    .await?;
    let body = text(
        &what,
        http.get(format!("{endpoint}{METADATA_CREDENTIALS_PATH}{role}"))
            .header(METADATA_TOKEN_HEADER, token.trim()),
    )
    .await?;
    let answer: MetadataAnswer = serde_json::from_str(&body).map_err(|e| {
        ProviderError::Unauthorized(format!("{what} answered without credentials: {e}"))
    })?;
    if let Some(code) = answer.code.as_deref().filter(|c| *c != "Success") {
        return Err(ProviderError::Unauthorized(format!(
            "{what} answered Code {code} for RAM role {role}"
        )));
    }
    expiring(&what, answer.credentials)
}
