//! The two STS calls the chain needs, as Query API POSTs: `AssumeRole` (signed with the base
//! credentials, for a profile's `role_arn`) and `AssumeRoleWithWebIdentity` (unsigned: the
//! web identity token is the proof, for IRSA). Both answer with temporary credentials.

use std::time::SystemTime;

use serde::Deserialize;

use crate::provider::aws::error::classify;
use crate::provider::aws::settings::AwsCredentials;
use crate::provider::aws::sign::sign_post;
use crate::provider::aws::xml;
use crate::provider::credentials::Expiring;
use crate::provider::secret::Secret;
use crate::provider::{ProviderError, ProviderResult};

pub const VERSION: &str = "2011-06-15";
const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// STS in one region: the regional endpoint, or an override (`AWS_ENDPOINT_URL_STS`,
/// `AWS_ENDPOINT_URL`) such as a moto server.
#[derive(Debug, Clone)]
pub struct Sts {
    pub endpoint: String,
    pub region: String,
}

#[derive(Debug, Deserialize)]
struct Response {
    #[serde(rename = "AssumeRoleResult", alias = "AssumeRoleWithWebIdentityResult")]
    result: ResultElement,
}

#[derive(Debug, Deserialize)]
struct ResultElement {
    #[serde(rename = "Credentials")]
    credentials: CredentialsElement,
}

#[derive(Debug, Deserialize)]
struct CredentialsElement {
    #[serde(rename = "AccessKeyId")]
    access_key_id: String,
    #[serde(rename = "SecretAccessKey")]
    secret_access_key: String,
    #[serde(rename = "SessionToken")]
    session_token: String,
    #[serde(rename = "Expiration")]
    expiration: String,
}

/// A function of its own because the serializer is not `Send` and must not live across an await.
fn form_body(action: &str, params: &[(&str, &str)]) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", action)
        .append_pair("Version", VERSION);
    for (k, v) in params {
        form.append_pair(k, v);
    }
    form.finish()
}

impl Sts {
    pub fn new(endpoint: Option<String>, region: &str) -> Self {
        Self {
            endpoint: endpoint.unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com/")),
            region: region.to_string(),
        }
    }

    pub async fn assume_role(
        &self,
        http: &reqwest::Client,
        base: &AwsCredentials,
        role_arn: &str,
        session_name: &str,
        external_id: Option<&str>,
    ) -> ProviderResult<Expiring<AwsCredentials>> {
        let mut params = vec![("RoleArn", role_arn), ("RoleSessionName", session_name)];
        if let Some(id) = external_id {
            params.push(("ExternalId", id));
        }
        self.call(http, "AssumeRole", &params, Some(base)).await
    }

    pub async fn assume_role_with_web_identity(
        &self,
        http: &reqwest::Client,
        token: &str,
        role_arn: &str,
        session_name: &str,
    ) -> ProviderResult<Expiring<AwsCredentials>> {
        let params = [
            ("RoleArn", role_arn),
            ("RoleSessionName", session_name),
            ("WebIdentityToken", token),
        ];
        self.call(http, "AssumeRoleWithWebIdentity", &params, None)
            .await
    }

    async fn call(
        &self,
        http: &reqwest::Client,
        action: &str,
        params: &[(&str, &str)],
        signer: Option<&AwsCredentials>,
    ) -> ProviderResult<Expiring<AwsCredentials>> {
        let url = url::Url::parse(&self.endpoint).map_err(|e| {
            ProviderError::InvalidRequest(format!(
                "the STS endpoint {:?} is not a URL: {e}",
                self.endpoint
            ))
        })?;
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => {
                return Err(ProviderError::InvalidRequest(format!(
                    "the STS endpoint {:?} names no host",
                    self.endpoint
                )));
            }
        };
        let body = form_body(action, params);
        let mut request = http
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(body.clone());
        if let Some(creds) = signer {
            let signed = sign_post(
                creds,
                &self.region,
                "sts",
                url.as_str(),
                &[("host", &host), ("content-type", CONTENT_TYPE)],
                body.as_bytes(),
                SystemTime::now(),
            )?;
            for (name, value) in signed {
                request = request.header(name, value);
            }
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        if !(200..300).contains(&status) {
            let e = classify(status, &text);
            return Err(match e {
                // STS refusing us is a credentials problem whatever code it used.
                ProviderError::InvalidRequest(m) | ProviderError::NotFound(m) => {
                    ProviderError::Unauthorized(format!("STS {action}: {m}"))
                }
                other => other,
            });
        }
        let parsed: Response = xml::parse(action, &text)?;
        let c = parsed.result.credentials;
        let expires_at_ms = xml::time_ms(&c.expiration).ok_or_else(|| {
            ProviderError::Other(format!(
                "STS {action}: unreadable Expiration {:?}",
                c.expiration
            ))
        })?;
        Ok(Expiring {
            value: AwsCredentials {
                access_key_id: c.access_key_id,
                secret_access_key: Secret::new(c.secret_access_key),
                session_token: Some(Secret::new(c.session_token)),
            },
            expires_at_ms: Some(expires_at_ms),
        })
    }
}
