//! Which provider adapter drives a pool: the static provider for `static` pools, the AWS,
//! Alibaba Cloud or GCP adapter for pools bound to a cloud group (when its credentials are
//! configured), none for cloud pools without a group (decided for, not actuated).

use std::sync::Arc;

use super::{ALIBABA, AWS, GCP, GroupRef, Provider, STATIC};
use crate::core::policy::Policy;

/// The adapters this process has, each wrapped in the metrics decorator.
#[derive(Debug, Clone)]
pub struct Providers {
    pub static_provider: Arc<dyn Provider>,
    pub aws: Option<Arc<dyn Provider>>,
    pub alibaba: Option<Arc<dyn Provider>>,
    pub gcp: Option<Arc<dyn Provider>>,
}

/// The adapter that drives a pool, and the pool's group.
pub type Binding = (Arc<dyn Provider>, GroupRef);

/// Why a bound pool cannot be driven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unbindable(pub String);

impl Providers {
    /// The configured adapter for a cloud's groups (`aws`, `alibaba`, `gcp`).
    pub fn cloud(&self, provider: &str) -> Option<Arc<dyn Provider>> {
        match provider {
            AWS => self.aws.clone(),
            ALIBABA => self.alibaba.clone(),
            GCP => self.gcp.clone(),
            _ => None,
        }
    }

    /// The adapter and group for `policy`; `Ok(None)` when the pool is not actuated.
    pub fn bind(&self, pool: &str, policy: &Policy) -> Result<Option<Binding>, Unbindable> {
        let group = |g: &str| GroupRef {
            pool: pool.to_string(),
            region: policy.region.clone(),
            group: g.to_string(),
            spot_group: None,
        };
        if policy.provider == STATIC {
            return Ok(Some((self.static_provider.clone(), group(""))));
        }
        let Some(name) = policy.group.as_deref() else {
            return Ok(None);
        };
        let (adapter, how) = match policy.provider.as_str() {
            AWS => (
                &self.aws,
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, web identity or \
                 container credentials, or allow the instance profile (AWS_EC2_METADATA_DISABLED)",
            ),
            ALIBABA => (
                &self.alibaba,
                "set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, RRSA's \
                 ALIBABA_CLOUD_ROLE_ARN, ALIBABA_CLOUD_OIDC_PROVIDER_ARN and \
                 ALIBABA_CLOUD_OIDC_TOKEN_FILE, or ALIBABA_CLOUD_ECS_METADATA (the ECS RAM role)",
            ),
            GCP => (
                &self.gcp,
                "set GOOGLE_APPLICATION_CREDENTIALS, or run where a metadata server answers",
            ),
            other => {
                return Err(Unbindable(format!(
                    "provider `{other}` has no adapter for cloud groups"
                )));
            }
        };
        match adapter {
            Some(a) => Ok(Some((
                a.clone(),
                GroupRef {
                    spot_group: policy.spot_group.clone(),
                    ..group(name)
                },
            ))),
            None => Err(Unbindable(format!(
                "pool is bound to {} group `{name}` but no {} credentials are configured: {how}",
                policy.provider, policy.provider
            ))),
        }
    }
}
