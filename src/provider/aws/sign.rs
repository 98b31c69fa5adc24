//! SigV4 signing of Query API requests with `aws-sigv4`. Every request is signed, even against
//! a local endpoint: AWS needs it, and moto tells EC2 from Auto Scaling on one port by the
//! service named in the signature's credential scope.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

use super::settings::AwsCredentials;
use crate::provider::{ProviderError, ProviderResult};

/// The headers to add to a request: `Authorization`, `X-Amz-Date` and, with a session token,
/// `X-Amz-Security-Token`.
pub type SignedHeaders = Vec<(&'static str, String)>;

/// Signs a POST of `body` to `url` with the given (unsigned) headers, which must include
/// `host` and `content-type` so both are covered by the signature.
pub fn sign_post(
    credentials: &AwsCredentials,
    region: &str,
    service: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    time: SystemTime,
) -> ProviderResult<SignedHeaders> {
    let identity = Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.expose().to_string(),
        credentials
            .session_token
            .as_ref()
            .map(|t| t.expose().to_string()),
        None,
        "trainscaler",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| ProviderError::Other(format!("cannot sign the {service} request: {e}")))?
        .into();
    let request = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| ProviderError::Other(format!("cannot sign the {service} request: {e}")))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| ProviderError::Other(format!("cannot sign the {service} request: {e}")))?
        .into_parts();
    let (signed, _query) = instructions.into_parts();
    Ok(signed
        .into_iter()
        .map(|h| (h.name(), h.value().to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::settings::Secret;
    use std::time::{Duration, UNIX_EPOCH};

    fn creds(token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: token.map(Secret::new),
        }
    }

    fn header<'a>(h: &'a SignedHeaders, name: &str) -> Option<&'a str> {
        h.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_signature_names_key_date_region_and_service_and_covers_host_and_content_type() {
        // 2015-08-30T12:36:00Z, the date of AWS's own SigV4 examples.
        let time = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let h = sign_post(
            &creds(None),
            "us-east-1",
            "autoscaling",
            "https://autoscaling.us-east-1.amazonaws.com/",
            &[
                ("host", "autoscaling.us-east-1.amazonaws.com"),
                (
                    "content-type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                ),
            ],
            b"Action=DescribeAutoScalingGroups&Version=2011-01-01",
            time,
        )
        .expect("signed");
        let auth = header(&h, "authorization").expect("authorization header");
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/autoscaling/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature="
            ),
            "{auth}"
        );
        assert_eq!(header(&h, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header(&h, "x-amz-security-token"), None);
    }

    #[test]
    fn a_session_token_is_sent_and_signed() {
        let h = sign_post(
            &creds(Some("FQoGZXIvYXdzEXAMPLE")),
            "eu-west-1",
            "ec2",
            "https://ec2.eu-west-1.amazonaws.com/",
            &[("host", "ec2.eu-west-1.amazonaws.com")],
            b"Action=DescribeInstances&Version=2016-11-15",
            SystemTime::now(),
        )
        .expect("signed");
        assert_eq!(
            header(&h, "x-amz-security-token"),
            Some("FQoGZXIvYXdzEXAMPLE")
        );
        let auth = header(&h, "authorization").expect("authorization header");
        assert!(auth.contains("/eu-west-1/ec2/aws4_request"), "{auth}");
        assert!(auth.contains("x-amz-security-token"), "{auth}");
    }
}
