//! What can go wrong when talking to a cloud, in the few kinds the reconciler treats
//! differently: throttling is retried, insufficient capacity moves to the next instance type,
//! everything else is recorded and tried again on the next pass.

use serde::Serialize;

pub type ProviderResult<T> = Result<T, ProviderError>;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("throttled: {0}")]
    Throttled(String),
    #[error("insufficient capacity{}{}: {message}",
        instance_type.as_ref().map(|t| format!(" for {t}")).unwrap_or_default(),
        zone.as_ref().map(|z| format!(" in {z}")).unwrap_or_default())]
    InsufficientCapacity {
        instance_type: Option<String>,
        zone: Option<String>,
        message: String,
    },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Other(String),
}

/// The kind of a [`ProviderError`], for metrics labels and event details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    Unauthorized,
    Throttled,
    InsufficientCapacity,
    InvalidRequest,
    Other,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Unauthorized => "unauthorized",
            Self::Throttled => "throttled",
            Self::InsufficientCapacity => "insufficient_capacity",
            Self::InvalidRequest => "invalid_request",
            Self::Other => "other",
        }
    }
}

impl ProviderError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound(_) => ErrorKind::NotFound,
            Self::Unauthorized(_) => ErrorKind::Unauthorized,
            Self::Throttled(_) => ErrorKind::Throttled,
            Self::InsufficientCapacity { .. } => ErrorKind::InsufficientCapacity,
            Self::InvalidRequest(_) => ErrorKind::InvalidRequest,
            Self::Other(_) => ErrorKind::Other,
        }
    }

    /// Whether the same call may succeed if made again shortly.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled(_))
    }
}

impl From<reqwest::Error> for ProviderError {
    fn from(e: reqwest::Error) -> Self {
        // The chain holds the useful part (connection refused, timed out).
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        Self::Other(msg)
    }
}
