//! How the Alibaba Cloud adapter is configured: where credentials come from (an AccessKey
//! pair, RRSA or the ECS RAM role; see [`credentials`](super::credentials)), a default region,
//! endpoint overrides (mocks in tests), and the shared HTTP and retry limits.

use crate::provider::http::HttpSettings;
use crate::provider::retry::RetryPolicy;

/// Used when `ALIBABA_CLOUD_REGION_ID` is unset: the region the ECS documentation's examples use.
pub const DEFAULT_REGION: &str = "cn-hangzhou";

pub const ENV_ACCESS_KEY_ID: &str = "ALIBABA_CLOUD_ACCESS_KEY_ID";
pub const ENV_ACCESS_KEY_SECRET: &str = "ALIBABA_CLOUD_ACCESS_KEY_SECRET";
pub const ENV_REGION_ID: &str = "ALIBABA_CLOUD_REGION_ID";
pub const ENV_ENDPOINT_URL: &str = "ALIBABA_CLOUD_ENDPOINT_URL";
pub const ENV_SECURITY_TOKEN: &str = "ALIBABA_CLOUD_SECURITY_TOKEN";
pub const ENV_ROLE_ARN: &str = "ALIBABA_CLOUD_ROLE_ARN";
pub const ENV_OIDC_PROVIDER_ARN: &str = "ALIBABA_CLOUD_OIDC_PROVIDER_ARN";
pub const ENV_OIDC_TOKEN_FILE: &str = "ALIBABA_CLOUD_OIDC_TOKEN_FILE";
pub const ENV_ROLE_SESSION_NAME: &str = "ALIBABA_CLOUD_ROLE_SESSION_NAME";
/// The region of the STS endpoint (`sts.<region>.aliyuncs.com`), as Alibaba's SDKs read it.
pub const ENV_STS_REGION: &str = "ALIBABA_CLOUD_STS_REGION";
/// The RAM role name of the ECS instance, as Alibaba's SDKs read it.
pub const ENV_ECS_METADATA: &str = "ALIBABA_CLOUD_ECS_METADATA";
/// Our own overrides, for mocks in tests.
pub const ENV_STS_ENDPOINT: &str = "TRAINSCALER_ALIBABA_STS_ENDPOINT";
pub const ENV_METADATA_ENDPOINT: &str = "TRAINSCALER_ALIBABA_METADATA_ENDPOINT";

use super::credentials::{CredentialSource, DEFAULT_SESSION_NAME, METADATA_ENDPOINT, STS_ENDPOINT};

pub use crate::provider::secret::Secret;

/// An AccessKey pair of an Alibaba Cloud account or RAM user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub access_key_secret: Secret,
}

#[derive(Debug, Clone)]
pub struct AlibabaSettings {
    /// The region used where a call names none (pools name their own region).
    pub region: String,
    /// One base URL (scheme, host, optional port) for ECS and ESS alike, replacing the regional
    /// endpoints; `None` in production.
    pub endpoint: Option<String>,
    pub credentials: CredentialSource,
    pub http: HttpSettings,
    pub retry: RetryPolicy,
}

impl AlibabaSettings {
    pub fn new(credentials: impl Into<CredentialSource>) -> Self {
        Self {
            region: DEFAULT_REGION.to_string(),
            endpoint: None,
            credentials: credentials.into(),
            http: HttpSettings::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads the process environment; `None` when no credential source is configured.
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `lookup` (the environment in production, a map in tests). Empty
    /// values count as unset, because compose files and Helm charts often pass `NAME=`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mut settings = Self::new(source(&get)?);
        if let Some(region) = get(ENV_REGION_ID) {
            settings.region = region;
        }
        settings.endpoint = get(ENV_ENDPOINT_URL).map(|e| e.trim_end_matches('/').to_string());
        Some(settings)
    }
}

/// The first configured source: an AccessKey pair, then RRSA, then the ECS RAM role.
fn source(get: &dyn Fn(&str) -> Option<String>) -> Option<CredentialSource> {
    if let (Some(access_key_id), Some(secret)) =
        (get(ENV_ACCESS_KEY_ID), get(ENV_ACCESS_KEY_SECRET))
    {
        return Some(CredentialSource::AccessKey {
            credentials: Credentials {
                access_key_id,
                access_key_secret: Secret::new(secret),
            },
            security_token: get(ENV_SECURITY_TOKEN).map(Secret::new),
        });
    }
    if let (Some(role_arn), Some(oidc_provider_arn), Some(token_file)) = (
        get(ENV_ROLE_ARN),
        get(ENV_OIDC_PROVIDER_ARN),
        get(ENV_OIDC_TOKEN_FILE),
    ) {
        let sts_endpoint = get(ENV_STS_ENDPOINT)
            .map(|e| e.trim_end_matches('/').to_string())
            .or_else(|| get(ENV_STS_REGION).map(|r| format!("https://sts.{r}.aliyuncs.com")))
            .unwrap_or_else(|| STS_ENDPOINT.to_string());
        return Some(CredentialSource::Rrsa {
            role_arn,
            oidc_provider_arn,
            token_file: token_file.into(),
            session_name: get(ENV_ROLE_SESSION_NAME)
                .unwrap_or_else(|| DEFAULT_SESSION_NAME.to_string()),
            sts_endpoint,
        });
    }
    get(ENV_ECS_METADATA).map(|role| CredentialSource::EcsRamRole {
        role,
        endpoint: get(ENV_METADATA_ENDPOINT)
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| METADATA_ENDPOINT.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::test_env as lookup;

    #[test]
    fn an_access_key_pair_is_required() {
        assert!(AlibabaSettings::from_lookup(lookup(&[])).is_none());
        assert!(AlibabaSettings::from_lookup(lookup(&[(ENV_ACCESS_KEY_ID, "id")])).is_none());
        assert!(
            AlibabaSettings::from_lookup(lookup(&[
                (ENV_ACCESS_KEY_ID, ""),
                (ENV_ACCESS_KEY_SECRET, "s")
            ]))
            .is_none()
        );
    }

    #[test]
    fn region_defaults_and_the_endpoint_override_is_read() {
        let s = AlibabaSettings::from_lookup(lookup(&[
            (ENV_ACCESS_KEY_ID, "id"),
            (ENV_ACCESS_KEY_SECRET, "s"),
        ]))
        .expect("settings");
        assert_eq!(s.region, DEFAULT_REGION);
        assert_eq!(s.endpoint, None);

        let s = AlibabaSettings::from_lookup(lookup(&[
            (ENV_ACCESS_KEY_ID, "id"),
            (ENV_ACCESS_KEY_SECRET, "s"),
            (ENV_REGION_ID, "ap-southeast-1"),
            (ENV_ENDPOINT_URL, "http://127.0.0.1:9000/"),
        ]))
        .expect("settings");
        assert_eq!(s.region, "ap-southeast-1");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(
            s.credentials,
            CredentialSource::AccessKey {
                credentials: Credentials {
                    access_key_id: "id".into(),
                    access_key_secret: Secret::new("s"),
                },
                security_token: None,
            }
        );
    }

    const RRSA: [(&str, &str); 3] = [
        (ENV_ROLE_ARN, "acs:ram::1:role/trainscaler"),
        (
            ENV_OIDC_PROVIDER_ARN,
            "acs:ram::1:oidc-provider/ack-rrsa-c1",
        ),
        (
            ENV_OIDC_TOKEN_FILE,
            "/var/run/secrets/ack.alibabacloud.com/rrsa-tokens/token",
        ),
    ];

    #[test]
    fn an_access_key_beats_rrsa_which_beats_the_ecs_ram_role() {
        let kind = |vars: &[(&str, &str)]| {
            AlibabaSettings::from_lookup(lookup(vars)).map(|s| s.credentials.kind())
        };
        let mut all = vec![(ENV_ACCESS_KEY_ID, "id"), (ENV_ACCESS_KEY_SECRET, "s")];
        all.extend(RRSA);
        all.push((ENV_ECS_METADATA, "EcsRole"));
        assert_eq!(kind(&all), Some("access_key"));
        assert_eq!(kind(&all[2..]), Some("rrsa"));
        assert_eq!(kind(&all[5..]), Some("ecs_ram_role"));
        assert_eq!(kind(&all[3..5]), None, "RRSA needs all three variables");
    }

    #[test]
    fn rrsa_and_metadata_endpoints_follow_their_variables() {
        let s = AlibabaSettings::from_lookup(lookup(&RRSA)).expect("settings");
        let CredentialSource::Rrsa {
            sts_endpoint,
            session_name,
            ..
        } = &s.credentials
        else {
            panic!("{s:?}")
        };
        assert_eq!(sts_endpoint, "https://sts.aliyuncs.com");
        assert_eq!(session_name, "trainscaler");
        let mut vars = RRSA.to_vec();
        vars.push((ENV_STS_REGION, "cn-shanghai"));
        let s = AlibabaSettings::from_lookup(lookup(&vars)).expect("settings");
        let CredentialSource::Rrsa { sts_endpoint, .. } = &s.credentials else {
            panic!()
        };
        assert_eq!(sts_endpoint, "https://sts.cn-shanghai.aliyuncs.com");
        let s = AlibabaSettings::from_lookup(lookup(&[
            (ENV_ECS_METADATA, "EcsRole"),
            (ENV_METADATA_ENDPOINT, "http://127.0.0.1:7/"),
        ]))
        .expect("settings");
        assert_eq!(
            s.credentials,
            CredentialSource::EcsRamRole {
                role: "EcsRole".into(),
                endpoint: "http://127.0.0.1:7".into()
            }
        );
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let s = AlibabaSettings::new(Credentials {
            access_key_id: "LTAIexample".into(),
            access_key_secret: Secret::new("very-secret-value"),
        });
        let text = format!("{s:?}");
        assert!(!text.contains("very-secret-value"), "{text}");
        assert!(text.contains("LTAIexample"));
    }
}
