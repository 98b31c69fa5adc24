//! Amazon SNS message signatures, as AWS documents them ("Verifying the signatures of Amazon
//! SNS messages"): the string to sign is `Name\nvalue\n` for a fixed list of the envelope's
//! fields in a fixed order (`Subject` only when present), signed with RSA PKCS#1 v1.5 over
//! SHA-1 (`SignatureVersion` 1) or SHA-256 (2) by the key of the X.509 certificate at
//! `SigningCertURL`. That URL must be HTTPS on an SNS host, `sns.<region>.amazonaws.com`
//! (or `.amazonaws.com.cn`), so only AWS's own certificates are ever trusted.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{
    AlgorithmIdentifier, CertificateDer, InvalidSignature, SignatureVerificationAlgorithm, alg_id,
};
use serde::Deserialize;

/// An SNS HTTP(S) delivery, as its JSON body carries it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Envelope {
    #[serde(rename = "Type")]
    pub kind: String,
    pub message_id: String,
    pub topic_arn: String,
    #[serde(default)]
    pub subject: Option<String>,
    pub message: String,
    pub timestamp: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(rename = "SubscribeURL", default)]
    pub subscribe_url: Option<String>,
    pub signature_version: String,
    pub signature: String,
    #[serde(rename = "SigningCertURL")]
    pub signing_cert_url: String,
}

pub const NOTIFICATION: &str = "Notification";
pub const SUBSCRIPTION_CONFIRMATION: &str = "SubscriptionConfirmation";
pub const UNSUBSCRIBE_CONFIRMATION: &str = "UnsubscribeConfirmation";

/// Why an envelope's signature is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("Type `{0}` is not one SNS sends")]
    UnknownType(String),
    #[error("{0} is required for this Type")]
    Missing(&'static str),
    #[error("SignatureVersion `{0}` is not 1 or 2")]
    UnknownVersion(String),
    #[error("`{0}` is not an SNS host URL (https://sns.REGION.amazonaws.com/...)")]
    UntrustedUrl(String),
    #[error("the signing certificate is not a PEM X.509 certificate: {0}")]
    BadCertificate(String),
    #[error("Signature is not base64")]
    NotBase64,
    #[error("the signature does not match the message")]
    Mismatch,
}

/// The string SNS signs for `e`.
pub fn string_to_sign(e: &Envelope) -> Result<String, SignatureError> {
    let mut fields: Vec<(&str, &str)> = vec![("Message", &e.message), ("MessageId", &e.message_id)];
    match e.kind.as_str() {
        NOTIFICATION => {
            if let Some(subject) = &e.subject {
                fields.push(("Subject", subject));
            }
            fields.push(("Timestamp", &e.timestamp));
            fields.push(("TopicArn", &e.topic_arn));
        }
        SUBSCRIPTION_CONFIRMATION | UNSUBSCRIBE_CONFIRMATION => {
            let url = e
                .subscribe_url
                .as_deref()
                .ok_or(SignatureError::Missing("SubscribeURL"))?;
            let token = e.token.as_deref().ok_or(SignatureError::Missing("Token"))?;
            fields.push(("SubscribeURL", url));
            fields.push(("Timestamp", &e.timestamp));
            fields.push(("Token", token));
            fields.push(("TopicArn", &e.topic_arn));
        }
        other => return Err(SignatureError::UnknownType(other.to_string())),
    }
    fields.push(("Type", &e.kind));
    Ok(fields
        .into_iter()
        .map(|(name, value)| format!("{name}\n{value}\n"))
        .collect())
}

/// Whether `url` may be fetched: HTTPS on an SNS host, or under `override_prefix` (a test's
/// mock, or a partition with other hosts) when one is configured.
pub fn trusted_url(url: &str, override_prefix: Option<&str>) -> Result<url::Url, SignatureError> {
    let untrusted = || SignatureError::UntrustedUrl(url.to_string());
    let parsed = url::Url::parse(url).map_err(|_| untrusted())?;
    if let Some(prefix) = override_prefix.filter(|p| !p.is_empty()) {
        return if url.starts_with(prefix) {
            Ok(parsed)
        } else {
            Err(untrusted())
        };
    }
    if parsed.scheme() != "https" || parsed.port().is_some() || !parsed.username().is_empty() {
        return Err(untrusted());
    }
    let host = parsed.host_str().unwrap_or_default();
    let labels: Vec<&str> = host.split('.').collect();
    let region_ok =
        |r: &str| r.len() >= 3 && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    match labels.as_slice() {
        ["sns", region, "amazonaws", "com"] | ["sns", region, "amazonaws", "com", "cn"]
            if region_ok(region) =>
        {
            Ok(parsed)
        }
        _ => Err(untrusted()),
    }
}

/// RSA PKCS#1 v1.5 with the digest SNS's signature version names, through `ring`.
#[derive(Debug)]
struct RsaPkcs1(&'static ring::signature::RsaParameters, AlgorithmIdentifier);

impl SignatureVerificationAlgorithm for RsaPkcs1 {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        ring::signature::UnparsedPublicKey::new(self.0, public_key)
            .verify(message, signature)
            .map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::RSA_ENCRYPTION
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.1
    }
}

/// sha1WithRSAEncryption (1.2.840.113549.1.1.5) with NULL parameters, DER without the outer
/// SEQUENCE as `alg_id` writes its constants. Only certificate chains compare it, which we
/// never build.
const RSA_PKCS1_SHA1: AlgorithmIdentifier = AlgorithmIdentifier::from_slice(&[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05, 0x05, 0x00,
]);

/// Checks `e`'s signature with the PEM certificate `cert_pem`.
pub fn verify(e: &Envelope, cert_pem: &[u8]) -> Result<(), SignatureError> {
    let algorithm = match e.signature_version.as_str() {
        "1" => RsaPkcs1(
            &ring::signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
            RSA_PKCS1_SHA1,
        ),
        "2" => RsaPkcs1(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            alg_id::RSA_PKCS1_SHA256,
        ),
        other => return Err(SignatureError::UnknownVersion(other.to_string())),
    };
    let signed = string_to_sign(e)?;
    let signature = STANDARD
        .decode(e.signature.trim())
        .map_err(|_| SignatureError::NotBase64)?;
    let der = CertificateDer::from_pem_slice(cert_pem)
        .map_err(|err| SignatureError::BadCertificate(err.to_string()))?;
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|err| SignatureError::BadCertificate(err.to_string()))?;
    cert.verify_signature(&algorithm, signed.as_bytes(), &signature)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification() -> Envelope {
        Envelope {
            kind: NOTIFICATION.into(),
            message_id: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324".into(),
            topic_arn: "arn:aws:sns:us-west-2:123456789012:MyTopic".into(),
            subject: Some("My First Message".into()),
            message: "Hello world!".into(),
            timestamp: "2012-05-02T00:54:06.655Z".into(),
            token: None,
            subscribe_url: None,
            signature_version: "1".into(),
            signature: String::new(),
            signing_cert_url: "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem".into(),
        }
    }

    #[test]
    fn the_string_to_sign_lists_the_documented_fields_in_order() {
        let mut e = notification();
        assert_eq!(
            string_to_sign(&e).unwrap(),
            "Message\nHello world!\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\nSubject\nMy First Message\nTimestamp\n2012-05-02T00:54:06.655Z\nTopicArn\narn:aws:sns:us-west-2:123456789012:MyTopic\nType\nNotification\n"
        );
        e.subject = None;
        assert!(!string_to_sign(&e).unwrap().contains("Subject"));
        e.kind = SUBSCRIPTION_CONFIRMATION.into();
        assert_eq!(
            string_to_sign(&e),
            Err(SignatureError::Missing("SubscribeURL"))
        );
        e.subscribe_url =
            Some("https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription".into());
        e.token = Some("tok".into());
        assert_eq!(
            string_to_sign(&e).unwrap(),
            "Message\nHello world!\nMessageId\n22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324\nSubscribeURL\nhttps://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription\nTimestamp\n2012-05-02T00:54:06.655Z\nToken\ntok\nTopicArn\narn:aws:sns:us-west-2:123456789012:MyTopic\nType\nSubscriptionConfirmation\n"
        );
    }

    #[test]
    fn only_https_sns_hosts_are_trusted_unless_a_prefix_is_configured() {
        for good in [
            "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem",
            "https://sns.cn-north-1.amazonaws.com.cn/x.pem",
        ] {
            assert!(trusted_url(good, None).is_ok(), "{good}");
        }
        for bad in [
            "http://sns.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com.evil.example/x.pem",
            "https://evil.example/sns.us-east-1.amazonaws.com/x.pem",
            "https://sqs.us-east-1.amazonaws.com/x.pem",
            "https://sns.us-east-1.amazonaws.com:8443/x.pem",
            "https://sns.a.amazonaws.com/x.pem",
            "not a url",
        ] {
            assert!(trusted_url(bad, None).is_err(), "{bad}");
        }
        assert!(trusted_url("http://127.0.0.1:9/cert.pem", Some("http://127.0.0.1:9/")).is_ok());
        assert!(trusted_url("http://127.0.0.2:9/cert.pem", Some("http://127.0.0.1:9/")).is_err());
    }

    /// A notification signed with SignatureVersion 1 (SHA1withRSA) by `openssl dgst -sha1
    /// -sign`, an implementation independent of ours.
    #[test]
    fn an_openssl_signed_v1_notification_verifies_and_a_changed_one_does_not() {
        let cert = include_bytes!("../../tests/fixtures/sns/signing-cert.pem");
        let text = include_str!("../../tests/fixtures/sns/notification-v1.json");
        let e: Envelope = serde_json::from_str(text).unwrap();
        assert_eq!(verify(&e, cert), Ok(()));
        let mut changed = e.clone();
        changed.message = changed.message.replace("i-0bbb", "i-0ccc");
        assert_eq!(verify(&changed, cert), Err(SignatureError::Mismatch));
        let mut other_version = e.clone();
        other_version.signature_version = "2".into();
        assert_eq!(verify(&other_version, cert), Err(SignatureError::Mismatch));
        let mut unknown = e.clone();
        unknown.signature_version = "3".into();
        assert!(matches!(
            verify(&unknown, cert),
            Err(SignatureError::UnknownVersion(_))
        ));
        assert!(matches!(
            verify(&e, b"not a pem"),
            Err(SignatureError::BadCertificate(_))
        ));
    }
}
