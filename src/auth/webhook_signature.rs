//! Signed webhooks: a sender that cannot hold an API key may instead sign each request with a
//! secret shared per source, in the scheme Stripe and Slack made familiar.
//!
//! The sender adds three headers:
//! - `X-Trainscaler-Source: <source>` names whose secret signed it;
//! - `X-Trainscaler-Timestamp: <unix seconds>` when it was signed;
//! - `X-Trainscaler-Signature: sha256=<hex>`, HMAC-SHA256 with the source's secret over
//!   `<timestamp>.<body>`.
//!
//! A request outside the replay window around the server's clock is refused, so a captured
//! request stops working after the window; inside it, a resent batch is a duplicate that
//! sample de-duplication and `Idempotency-Key` turn into a no-op.

use std::collections::HashMap;

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SOURCE_HEADER: &str = "x-trainscaler-source";
pub const TIMESTAMP_HEADER: &str = "x-trainscaler-timestamp";
pub const SIGNATURE_HEADER: &str = "x-trainscaler-signature";

/// The secrets per source and the replay window.
#[derive(Clone, Default)]
pub struct WebhookSecrets {
    secrets: HashMap<String, Vec<u8>>,
    pub window_secs: i64,
}

impl std::fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sources: Vec<&String> = self.secrets.keys().collect();
        sources.sort();
        f.debug_struct("WebhookSecrets")
            .field("sources", &sources)
            .field("window_secs", &self.window_secs)
            .finish()
    }
}

/// Why a signed request was refused; each names the header at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("names no source with a webhook secret")]
    UnknownSource,
    #[error("must be whole seconds since 1970-01-01T00:00:00Z")]
    BadTimestamp,
    #[error("is outside the replay window of {0} s around the server's clock")]
    Stale(i64),
    #[error("must be `sha256=` followed by 64 hex digits")]
    Malformed,
    #[error("does not match the body")]
    Mismatch,
}

impl SignatureError {
    /// The header a client should look at.
    pub fn header(&self) -> &'static str {
        match self {
            Self::UnknownSource => SOURCE_HEADER,
            Self::BadTimestamp | Self::Stale(_) => TIMESTAMP_HEADER,
            Self::Malformed | Self::Mismatch => SIGNATURE_HEADER,
        }
    }
}

impl WebhookSecrets {
    /// Reads `source=secret,source=secret` (the `TRAINSCALER_WEBHOOK_SECRETS` format).
    pub fn parse(spec: &str, window_secs: u64) -> Result<Self, String> {
        let mut secrets = HashMap::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (source, secret) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` must be source=secret"))?;
            let (source, secret) = (source.trim(), secret.trim());
            if source.is_empty() || !source.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!("source `{source}` must be visible ASCII"));
            }
            if secret.len() < 16 {
                return Err(format!(
                    "the secret of `{source}` must be at least 16 characters"
                ));
            }
            if secrets
                .insert(source.to_string(), secret.as_bytes().to_vec())
                .is_some()
            {
                return Err(format!("source `{source}` is given twice"));
            }
        }
        Ok(Self {
            secrets,
            window_secs: i64::try_from(window_secs).unwrap_or(i64::MAX),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Everything about a request that does not need its body: a known source, a timestamp
    /// inside the window, a well-formed signature. Checked before the body is read, so that an
    /// anonymous sender cannot make the server buffer a large body only to be refused.
    /// Returns the source's secret and the signature's bytes.
    pub fn check_headers(
        &self,
        source: &str,
        timestamp: &str,
        signature: &str,
        now_secs: i64,
    ) -> Result<(&[u8], Vec<u8>), SignatureError> {
        let secret = self
            .secrets
            .get(source)
            .ok_or(SignatureError::UnknownSource)?;
        let at: i64 = timestamp
            .parse()
            .map_err(|_| SignatureError::BadTimestamp)?;
        if now_secs.abs_diff(at) > self.window_secs.unsigned_abs() {
            return Err(SignatureError::Stale(self.window_secs));
        }
        let expected = signature
            .strip_prefix("sha256=")
            .filter(|h| h.len() == 64)
            .and_then(|h| hex::decode(h).ok())
            .ok_or(SignatureError::Malformed)?;
        Ok((secret, expected))
    }

    /// Checks one request; `now_secs` is the server's clock.
    pub fn verify(
        &self,
        source: &str,
        timestamp: &str,
        signature: &str,
        body: &[u8],
        now_secs: i64,
    ) -> Result<(), SignatureError> {
        let (secret, expected) = self.check_headers(source, timestamp, signature, now_secs)?;
        // verify_slice compares in constant time.
        mac(secret, timestamp, body)
            .verify_slice(&expected)
            .map_err(|_| SignatureError::Mismatch)
    }
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `X-Trainscaler-Signature` value a sender computes (for clients and tests).
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac(secret, timestamp, body).finalize().into_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef-shared";

    fn secrets() -> WebhookSecrets {
        WebhookSecrets::parse(&format!("eventbridge={SECRET}, dcgm = {SECRET}-2"), 300).unwrap()
    }

    #[test]
    fn a_known_answer_from_an_independent_hmac() {
        // printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac '0123456789abcdef-shared'
        assert_eq!(
            sign(SECRET.as_bytes(), "1700000000", br#"{"a":1}"#),
            "sha256=9b7c0d4aa87df20ba0b2a936c23a26f61dcd9c0ade8fa73f38e859166fd9fe8c"
        );
    }

    #[test]
    fn a_correct_signature_inside_the_window_passes() {
        let s = secrets();
        let body = br#"{"samples":[]}"#;
        let sig = sign(SECRET.as_bytes(), "1700000000", body);
        assert_eq!(
            s.verify("eventbridge", "1700000000", &sig, body, 1_700_000_299),
            Ok(())
        );
        assert_eq!(
            s.verify("eventbridge", "1700000000", &sig, body, 1_699_999_701),
            Ok(())
        );
    }

    #[test]
    fn every_way_to_get_it_wrong_is_refused_with_its_header() {
        let s = secrets();
        let body = br#"{"samples":[]}"#;
        let sig = sign(SECRET.as_bytes(), "1700000000", body);
        let now = 1_700_000_000;
        let cases = [
            (
                s.verify("nobody", "1700000000", &sig, body, now),
                SignatureError::UnknownSource,
            ),
            (
                s.verify("dcgm", "1700000000", &sig, body, now),
                SignatureError::Mismatch,
            ),
            (
                s.verify("eventbridge", "1700000000", &sig, b"{}", now),
                SignatureError::Mismatch,
            ),
            (
                s.verify("eventbridge", "1700000001", &sig, body, now),
                SignatureError::Mismatch,
            ),
            (
                s.verify("eventbridge", "soon", &sig, body, now),
                SignatureError::BadTimestamp,
            ),
            (
                s.verify("eventbridge", "1700000000", &sig, body, now + 301),
                SignatureError::Stale(300),
            ),
            (
                s.verify("eventbridge", "1700000000", &sig[7..], body, now),
                SignatureError::Malformed,
            ),
            (
                s.verify("eventbridge", "1700000000", "sha256=zz", body, now),
                SignatureError::Malformed,
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Err(want.clone()));
        }
        assert_eq!(SignatureError::Stale(1).header(), TIMESTAMP_HEADER);
    }

    #[test]
    fn the_secret_list_is_checked() {
        assert!(WebhookSecrets::parse("", 300).unwrap().is_empty());
        assert!(WebhookSecrets::parse("a", 300).is_err());
        assert!(WebhookSecrets::parse("a=short", 300).is_err());
        assert!(WebhookSecrets::parse("a=0123456789abcdef,a=0123456789abcdef", 300).is_err());
        let debug = format!("{:?}", secrets());
        assert!(!debug.contains(SECRET), "{debug}");
    }
}
