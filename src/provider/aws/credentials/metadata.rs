//! The two HTTP credential endpoints of AWS compute: the instance metadata service (IMDSv2:
//! a session token from `PUT /latest/api/token`, then the role name and its credentials under
//! `/latest/meta-data/iam/security-credentials/`) and the container credentials endpoint of
//! ECS and EKS Pod Identity (a GET, with an `Authorization` token when one is configured).
//! Both answer with the same JSON: `AccessKeyId`, `SecretAccessKey`, `Token`, `Expiration`.

use std::path::Path;

use serde::Deserialize;

use crate::provider::aws::settings::AwsCredentials;
use crate::provider::credentials::Expiring;
use crate::provider::secret::Secret;
use crate::provider::{ProviderError, ProviderResult};

pub const TOKEN_PATH: &str = "/latest/api/token";
pub const CREDENTIALS_PATH: &str = "/latest/meta-data/iam/security-credentials/";
pub const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
pub const TOKEN_TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";
/// Six hours, the longest session IMDS grants; we ask for one per fetch anyway.
const TOKEN_TTL_SECONDS: &str = "21600";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CredentialsJson {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    access_key_id: String,
    secret_access_key: String,
    token: String,
    expiration: String,
}

fn decode(what: &str, body: &str) -> ProviderResult<Expiring<AwsCredentials>> {
    let c: CredentialsJson = serde_json::from_str(body).map_err(|e| {
        ProviderError::Unauthorized(format!("{what} answered without credentials: {e}"))
    })?;
    if let Some(code) = c.code.as_deref().filter(|c| *c != "Success") {
        return Err(ProviderError::Unauthorized(format!(
            "{what} answered Code {code}: {}",
            c.message.unwrap_or_default()
        )));
    }
    let expires_at_ms = crate::timefmt::parse_rfc3339_ms(&c.expiration).map_err(|e| {
        ProviderError::Unauthorized(format!("{what}: Expiration {:?} {e}", c.expiration))
    })?;
    Ok(Expiring {
        value: AwsCredentials {
            access_key_id: c.access_key_id,
            secret_access_key: Secret::new(c.secret_access_key),
            session_token: Some(Secret::new(c.token)),
        },
        expires_at_ms: Some(expires_at_ms),
    })
}

/// The body of a successful answer; anything else is an error saying who answered what.
async fn text(what: &str, request: reqwest::RequestBuilder) -> ProviderResult<String> {
    let response = request.send().await.map_err(|e| {
        ProviderError::Unauthorized(format!(
            "no AWS credentials: {what} did not answer ({}); outside AWS set \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or another source of the chain",
            ProviderError::from(e)
        ))
    })?;
    let status = response.status().as_u16();
    let body = response.text().await?;
    match status {
        200..=299 => Ok(body),
        429 | 500..=599 => Err(ProviderError::Throttled(format!(
            "{what} answered HTTP {status}"
        ))),
        _ => Err(ProviderError::Unauthorized(format!(
            "{what} answered HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        ))),
    }
}

/// The instance profile's credentials through IMDSv2 at `endpoint`.
pub async fn instance_profile(
    http: &reqwest::Client,
    endpoint: &str,
) -> ProviderResult<Expiring<AwsCredentials>> {
    let what = format!("the instance metadata service at {endpoint}");
    let token = text(
        &what,
        http.put(format!("{endpoint}{TOKEN_PATH}"))
            .header(TOKEN_TTL_HEADER, TOKEN_TTL_SECONDS),
    )
    .await?;
    let listing = text(
        &what,
        http.get(format!("{endpoint}{CREDENTIALS_PATH}"))
            .header(TOKEN_HEADER, &token),
    )
    .await?;
    let role = listing
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| {
            ProviderError::Unauthorized(format!(
                "{what}: this instance has no instance profile role"
            ))
        })?;
    let body = text(
        &what,
        http.get(format!("{endpoint}{CREDENTIALS_PATH}{role}"))
            .header(TOKEN_HEADER, &token),
    )
    .await?;
    decode(&what, &body)
}

/// Credentials from the container endpoint `uri`, authorised by the token file's current
/// content (it is rotated) or by the fixed token.
pub async fn container(
    http: &reqwest::Client,
    uri: &str,
    token_file: Option<&Path>,
    token: Option<&Secret>,
) -> ProviderResult<Expiring<AwsCredentials>> {
    let what = format!("the container credentials endpoint {uri}");
    let mut request = http.get(uri);
    let authorization = match token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| {
                    ProviderError::Unauthorized(format!(
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {}: {e}",
                        path.display()
                    ))
                })?
                .trim()
                .to_string(),
        ),
        None => token.map(|t| t.expose().to_string()),
    };
    if let Some(a) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, a);
    }
    let body = text(&what, request).await?;
    decode(&what, &body)
}
