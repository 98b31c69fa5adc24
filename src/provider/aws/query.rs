//! The AWS Query API as EC2 and Auto Scaling speak it: a signed, form-encoded POST of
//! `Action=…&Version=…` and the call's parameters, answered with XML. Throttling answers are
//! retried with backoff by [`RetryPolicy::run`](crate::provider::retry::RetryPolicy::run);
//! every other error is returned typed at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use url::Url;

use super::credentials::AwsCredentialsProvider;
use super::error::classify;
use super::settings::AwsSettings;
use super::sign::sign_post;
use crate::provider::{ProviderError, ProviderResult};

const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// The AWS services the adapter calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ec2,
    AutoScaling,
}

impl Service {
    /// The name in the signature's credential scope.
    pub fn signing_name(self) -> &'static str {
        match self {
            Self::Ec2 => "ec2",
            Self::AutoScaling => "autoscaling",
        }
    }

    /// The API version every request names.
    pub fn version(self) -> &'static str {
        match self {
            Self::Ec2 => "2016-11-15",
            Self::AutoScaling => "2011-01-01",
        }
    }

    /// Where the service answers: its own endpoint setting, then the one for every service,
    /// then AWS's public regional endpoint.
    pub fn endpoint(self, settings: &AwsSettings, region: &str) -> String {
        let own = match self {
            Self::Ec2 => &settings.ec2_endpoint,
            Self::AutoScaling => &settings.autoscaling_endpoint,
        };
        own.as_ref()
            .or(settings.endpoint.as_ref())
            .cloned()
            .unwrap_or_else(|| format!("https://{}.{region}.amazonaws.com/", self.signing_name()))
    }
}

/// Sends Query API calls with one HTTP client and counts the requests it sends.
#[derive(Debug)]
pub struct QueryClient {
    settings: AwsSettings,
    credentials: Arc<AwsCredentialsProvider>,
    http: reqwest::Client,
    sent: AtomicU64,
}

impl QueryClient {
    pub fn new(
        settings: AwsSettings,
        credentials: Arc<AwsCredentialsProvider>,
    ) -> ProviderResult<Self> {
        let http = crate::provider::http::client(settings.http)?;
        Ok(Self {
            settings,
            credentials,
            http,
            sent: AtomicU64::new(0),
        })
    }

    pub fn credentials(&self) -> &Arc<AwsCredentialsProvider> {
        &self.credentials
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// HTTP requests sent so far, retries included.
    pub fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Calls `action` of `service` in `region` and returns the XML body of a successful answer.
    pub async fn call(
        &self,
        service: Service,
        region: &str,
        action: &str,
        params: &[(String, String)],
    ) -> ProviderResult<String> {
        let endpoint = service.endpoint(&self.settings, region);
        let url = Url::parse(&endpoint).map_err(|e| {
            ProviderError::InvalidRequest(format!(
                "the {} endpoint {endpoint:?} is not a URL: {e}",
                service.signing_name()
            ))
        })?;
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => {
                return Err(ProviderError::InvalidRequest(format!(
                    "the {} endpoint {endpoint:?} names no host",
                    service.signing_name()
                )));
            }
        };
        let body = form_body(service, action, params);
        self.settings
            .retry
            .run(|| self.send_once(service, region, action, &url, &host, &body))
            .await
    }

    async fn send_once(
        &self,
        service: Service,
        region: &str,
        action: &str,
        url: &Url,
        host: &str,
        body: &str,
    ) -> ProviderResult<String> {
        // Signed afresh on every attempt: the signature includes the time, and AWS refuses
        // signatures older than five minutes. The credentials come from the cache.
        let credentials = self.credentials.credentials().await?;
        let signed = sign_post(
            &credentials,
            region,
            service.signing_name(),
            url.as_str(),
            &[("host", host), ("content-type", CONTENT_TYPE)],
            body.as_bytes(),
            SystemTime::now(),
        )?;
        let mut request = self
            .http
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(body.to_string());
        for (name, value) in signed {
            request = request.header(name, value);
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        if status.is_success() {
            Ok(text)
        } else {
            let error = classify(status.as_u16(), &text);
            // The credentials themselves were refused (expired early or revoked), not the
            // action: the next attempt fetches new ones. A denied action keeps them.
            if matches!(&error, ProviderError::Unauthorized(m)
                if ["ExpiredToken", "InvalidClientTokenId", "AuthFailure"]
                    .iter()
                    .any(|code| m.starts_with(code)))
            {
                self.credentials.invalidate();
            }
            tracing::debug!(service = service.signing_name(), action, region, %status, error = %error, "AWS call failed");
            Err(error)
        }
    }
}

/// `Action=…&Version=…&…`, form-encoded. A function of its own because the serializer is
/// not `Send` and must not live across an await.
fn form_body(service: Service, action: &str, params: &[(String, String)]) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", action);
    form.append_pair("Version", service.version());
    for (k, v) in params {
        form.append_pair(k, v);
    }
    form.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_regional_unless_overridden_per_service_or_for_all() {
        let mut s = AwsSettings::for_tests();
        assert_eq!(
            Service::Ec2.endpoint(&s, "eu-west-1"),
            "https://ec2.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            Service::AutoScaling.endpoint(&s, "us-west-2"),
            "https://autoscaling.us-west-2.amazonaws.com/"
        );
        s.endpoint = Some("http://127.0.0.1:5000".into());
        assert_eq!(
            Service::Ec2.endpoint(&s, "eu-west-1"),
            "http://127.0.0.1:5000"
        );
        s.autoscaling_endpoint = Some("http://asg.local".into());
        assert_eq!(
            Service::AutoScaling.endpoint(&s, "eu-west-1"),
            "http://asg.local"
        );
        assert_eq!(
            Service::Ec2.endpoint(&s, "eu-west-1"),
            "http://127.0.0.1:5000"
        );
    }
}
