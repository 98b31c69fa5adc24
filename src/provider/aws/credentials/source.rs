//! The places AWS credentials can come from, as resolved once at start-up from the
//! environment and the shared files. Fetching them is [`super::AwsCredentialsProvider`]'s job.

use std::path::PathBuf;

use crate::provider::aws::settings::AwsCredentials;
use crate::provider::secret::Secret;

/// Where ECS and EKS Pod Identity serve container credentials when only a relative URI is set.
pub const CONTAINER_HOST: &str = "http://169.254.170.2";
/// The instance metadata service's link-local address.
pub const IMDS_ENDPOINT: &str = "http://169.254.169.254";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Long-lived keys (or a session token someone else refreshes). `origin` says where they
    /// were read: `environment`, `profile` or `static` (given in code).
    Static {
        credentials: AwsCredentials,
        origin: &'static str,
        profile: Option<String>,
    },
    /// STS AssumeRole with the credentials of `base` (a profile's `role_arn`).
    AssumeRole {
        role_arn: String,
        session_name: String,
        external_id: Option<String>,
        base: Box<Source>,
    },
    /// STS AssumeRoleWithWebIdentity with the token in `token_file` (IRSA), read afresh on
    /// every fetch because the kubelet rotates it.
    WebIdentity {
        role_arn: String,
        session_name: String,
        token_file: PathBuf,
    },
    /// The ECS or EKS Pod Identity container credentials endpoint.
    Container {
        uri: String,
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read on every fetch (it is rotated).
        token_file: Option<PathBuf>,
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
        token: Option<Secret>,
    },
    /// The instance profile's role through IMDSv2.
    InstanceProfile { endpoint: String },
}

impl Source {
    /// The name `GET /v1/providers/status` reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Static { origin, .. } => origin,
            Self::AssumeRole { .. } => "assume_role",
            Self::WebIdentity { .. } => "web_identity",
            Self::Container { .. } => "container",
            Self::InstanceProfile { .. } => "instance_profile",
        }
    }

    /// What the source names, never a secret: a profile, a role or an endpoint.
    pub fn identity(&self) -> Option<String> {
        match self {
            Self::Static { profile, .. } => profile.as_ref().map(|p| format!("profile {p}")),
            Self::AssumeRole { role_arn, .. } | Self::WebIdentity { role_arn, .. } => {
                Some(role_arn.clone())
            }
            Self::Container { uri, .. } => Some(uri.clone()),
            Self::InstanceProfile { endpoint } => Some(endpoint.clone()),
        }
    }
}

impl From<AwsCredentials> for Source {
    fn from(credentials: AwsCredentials) -> Self {
        Self::Static {
            credentials,
            origin: "static",
            profile: None,
        }
    }
}
