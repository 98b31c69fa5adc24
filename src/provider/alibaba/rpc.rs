//! One signed RPC-style GET to ECS or Auto Scaling (ESS): common parameters, signature, the
//! regional endpoint (or the override), error mapping, and retries of throttled calls.

use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use time::macros::format_description;

use std::sync::Arc;

use super::credentials::AlibabaCredentialsProvider;
use super::errors::{self, RequestContext};
use super::settings::AlibabaSettings;
use super::signer;
use crate::provider::{ProviderError, ProviderResult};

/// The two products the adapter calls, each with its documented API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ecs,
    Ess,
}

impl Service {
    pub fn version(self) -> &'static str {
        match self {
            Self::Ecs => "2014-05-26",
            Self::Ess => "2014-08-28",
        }
    }

    /// The public endpoint of the product in `region`, per each product's "Endpoints" topic.
    pub fn endpoint(self, region: &str) -> String {
        match self {
            Self::Ecs => format!("https://ecs.{region}.aliyuncs.com"),
            // Auto Scaling lists the shared `ess.aliyuncs.com` for its oldest mainland regions
            // and a regional host everywhere else.
            Self::Ess => {
                const SHARED: &[&str] = &[
                    "cn-qingdao",
                    "cn-beijing",
                    "cn-hangzhou",
                    "cn-shanghai",
                    "cn-nanjing",
                    "cn-shenzhen",
                ];
                if SHARED.contains(&region) {
                    "https://ess.aliyuncs.com".to_string()
                } else {
                    format!("https://ess.{region}.aliyuncs.com")
                }
            }
        }
    }
}

/// The signing HTTP client of one adapter.
#[derive(Debug)]
pub struct RpcClient {
    http: reqwest::Client,
    settings: AlibabaSettings,
    credentials: Arc<AlibabaCredentialsProvider>,
}

/// `YYYY-MM-DDThh:mm:ssZ`, the only form the Timestamp parameter accepts.
pub fn format_timestamp(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    t.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
    ))
    .unwrap_or_default()
}

impl RpcClient {
    pub fn new(
        http: reqwest::Client,
        settings: AlibabaSettings,
        credentials: Arc<AlibabaCredentialsProvider>,
    ) -> Self {
        Self {
            http,
            settings,
            credentials,
        }
    }

    pub fn credentials(&self) -> &Arc<AlibabaCredentialsProvider> {
        &self.credentials
    }

    pub fn settings(&self) -> &AlibabaSettings {
        &self.settings
    }

    /// Calls `action` with `params` (RegionId included by the caller's `region`), retrying
    /// throttled attempts, and decodes the JSON answer. Each attempt is signed afresh: a retried
    /// request must not reuse its SignatureNonce, which the server rejects as a replay.
    pub async fn call<T: DeserializeOwned>(
        &self,
        service: Service,
        action: &str,
        region: &str,
        params: &[(String, String)],
    ) -> ProviderResult<T> {
        let ctx = RequestContext {
            action: action.to_string(),
            instance_type: param(params, "InstanceType"),
            zone: param(params, "ZoneId"),
        };
        self.settings
            .retry
            .run(|| self.attempt(service, action, region, params, &ctx))
            .await
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        service: Service,
        action: &str,
        region: &str,
        params: &[(String, String)],
        ctx: &RequestContext,
    ) -> ProviderResult<T> {
        let creds = self.credentials.credentials().await?;
        let mut all: Vec<(String, String)> = vec![
            ("Format".into(), "JSON".into()),
            ("Version".into(), service.version().into()),
            ("AccessKeyId".into(), creds.access_key_id.clone()),
            ("SignatureMethod".into(), "HMAC-SHA1".into()),
            (
                "Timestamp".into(),
                format_timestamp(OffsetDateTime::now_utc()),
            ),
            ("SignatureVersion".into(), "1.0".into()),
            ("SignatureNonce".into(), uuid::Uuid::new_v4().to_string()),
            ("Action".into(), action.into()),
            ("RegionId".into(), region.into()),
        ];
        if let Some(token) = &creds.security_token {
            // STS credentials are only accepted with their token, covered by the signature.
            all.push(("SecurityToken".into(), token.expose().to_string()));
        }
        all.extend(params.iter().cloned());
        let query = signer::signed_query(creds.access_key_secret.expose(), &all);
        let base = match &self.settings.endpoint {
            Some(base) => base.clone(),
            None => service.endpoint(region),
        };
        let url = format!("{base}/?{query}");

        let response = self.http.get(&url).send().await?;
        let status = response.status();
        let body = response.text().await?;
        if !status.is_success() {
            let err = errors::from_response(status.as_u16(), &body, ctx);
            // The credentials themselves were refused (an STS token expired early, a key
            // revoked), not the action: the next attempt fetches new ones.
            if matches!(&err, ProviderError::Unauthorized(m)
                if m.contains("InvalidSecurityToken") || m.contains("InvalidAccessKeyId"))
            {
                self.credentials.invalidate();
            }
            tracing::debug!(action, status = status.as_u16(), error = %err, "alibaba call failed");
            return Err(err);
        }
        serde_json::from_str(&body).map_err(|e| {
            ProviderError::Other(format!(
                "{action}: cannot read the answer ({e}): {}",
                body.chars().take(200).collect::<String>()
            ))
        })
    }
}

fn param(params: &[(String, String)], name: &str) -> Option<String> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// Builds a parameter list from `(&str, impl ToString)` pairs.
pub fn params<const N: usize>(list: [(&str, String); N]) -> Vec<(String, String)> {
    list.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_follow_each_products_documented_form() {
        assert_eq!(
            Service::Ecs.endpoint("cn-hangzhou"),
            "https://ecs.cn-hangzhou.aliyuncs.com"
        );
        assert_eq!(
            Service::Ess.endpoint("cn-hangzhou"),
            "https://ess.aliyuncs.com"
        );
        assert_eq!(
            Service::Ess.endpoint("ap-southeast-5"),
            "https://ess.ap-southeast-5.aliyuncs.com"
        );
    }

    #[test]
    fn the_timestamp_has_seconds_and_a_z() {
        let t = OffsetDateTime::from_unix_timestamp(1_456_231_584).expect("time");
        assert_eq!(format_timestamp(t), "2016-02-23T12:46:24Z");
    }
}

/// Epoch milliseconds of an Alibaba time: `2017-12-10T04:04Z` (ECS creation times stop at the
/// minute) or `2017-09-12T02:00:00Z`.
pub fn parse_time_ms(text: &str) -> Option<i64> {
    use time::PrimitiveDateTime;
    let with_seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    let minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]Z");
    let t = PrimitiveDateTime::parse(text, with_seconds)
        .or_else(|_| PrimitiveDateTime::parse(text, minutes))
        .ok()?
        .assume_utc();
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod time_tests {
    use super::parse_time_ms;

    #[test]
    fn both_documented_time_forms_parse() {
        assert_eq!(parse_time_ms("1970-01-01T00:01Z"), Some(60_000));
        assert_eq!(parse_time_ms("1970-01-01T00:01:02Z"), Some(62_000));
        assert_eq!(parse_time_ms("yesterday"), None);
    }
}
