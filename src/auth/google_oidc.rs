//! Pub/Sub push authentication as Google documents it for push endpoints: the subscription
//! sends `Authorization: Bearer <token>`, a Google-signed OIDC ID token (an RS256 JWT from
//! `accounts.google.com`) whose `aud` is the audience configured on the subscription and whose
//! `email` is the subscription's service account. Checked here: the RS256 signature against
//! Google's keys (a JWKS, fetched from a configurable URL and cached as its `Cache-Control`
//! says), the issuer, the audience, the expiry and issue times, and the service account with
//! `email_verified`. Anyone can get a Google ID token for any audience, so the service
//! account check is required, not optional.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
use serde::Deserialize;
use serde_json::Value;

/// Google's token-signing keys as a JWKS.
pub const DEFAULT_JWKS_URL: &str = "https://www.googleapis.com/oauth2/v3/certs";
const ISSUERS: [&str; 2] = ["accounts.google.com", "https://accounts.google.com"];
/// Clocks differ; a token a minute past its expiry (or early) is still taken.
const LEEWAY_SECS: i64 = 60;
/// Keys are kept at most this long when the answer says nothing about caching.
const DEFAULT_KEY_AGE_MS: i64 = 3_600_000;
/// An unknown `kid` fetches the keys again at most this often, so made-up kids cannot make
/// every request a fetch.
const REFETCH_AFTER_MS: i64 = 60_000;

/// What the verifier checks against.
#[derive(Debug, Clone)]
pub struct PushAuthSettings {
    pub audience: String,
    pub service_account: String,
    pub jwks_url: String,
}

/// Why a push token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushAuthError {
    #[error("is not a JWT")]
    Malformed,
    #[error("must be signed with RS256, not {0}")]
    Algorithm(String),
    #[error("is signed with a key Google does not list (kid {0})")]
    UnknownKey(String),
    #[error("has a signature that does not verify")]
    BadSignature,
    #[error("was issued by `{0}`, not accounts.google.com")]
    Issuer(String),
    #[error("is for another audience than this endpoint's")]
    Audience,
    #[error("has expired")]
    Expired,
    #[error("is not valid yet")]
    NotYetValid,
    #[error("is not for the push subscription's service account")]
    ServiceAccount,
    #[error("cannot be checked: Google's signing keys are unavailable ({0})")]
    Keys(String),
}

/// Who sent an accepted push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushIdentity {
    pub email: String,
}

#[derive(Debug, Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Claims {
    #[serde(default)]
    iss: String,
    #[serde(default)]
    aud: Option<Value>,
    #[serde(default)]
    exp: Option<i64>,
    #[serde(default)]
    iat: Option<i64>,
    #[serde(default)]
    nbf: Option<i64>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Jwks {
    #[serde(default)]
    keys: Vec<Jwk>,
}

#[derive(Debug, Deserialize)]
struct Jwk {
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    kty: String,
    #[serde(default)]
    n: String,
    #[serde(default)]
    e: String,
}

#[derive(Debug, Default)]
struct Keys {
    /// kid → (modulus, exponent), big-endian bytes.
    by_kid: HashMap<String, (Vec<u8>, Vec<u8>)>,
    fetched_at_ms: Option<i64>,
    max_age_ms: i64,
}

/// The verifier; one per server.
#[derive(Debug)]
pub struct PushAuth {
    settings: PushAuthSettings,
    http: reqwest::Client,
    keys: tokio::sync::Mutex<Keys>,
}

impl PushAuth {
    pub fn new(settings: PushAuthSettings) -> Result<Self, String> {
        if settings.audience.trim().is_empty() || settings.service_account.trim().is_empty() {
            return Err("a Pub/Sub push audience needs the push service account too".into());
        }
        let http = crate::provider::http::client(Default::default()).map_err(|e| e.to_string())?;
        Ok(Self {
            settings,
            http,
            keys: tokio::sync::Mutex::new(Keys::default()),
        })
    }

    /// Checks `token` at `now_ms`.
    pub async fn verify(&self, token: &str, now_ms: i64) -> Result<PushIdentity, PushAuthError> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(PushAuthError::Malformed);
        };
        let decode = |p: &str| {
            URL_SAFE_NO_PAD
                .decode(p)
                .map_err(|_| PushAuthError::Malformed)
        };
        let header: Header =
            serde_json::from_slice(&decode(h)?).map_err(|_| PushAuthError::Malformed)?;
        if header.alg != "RS256" {
            return Err(PushAuthError::Algorithm(header.alg));
        }
        let signature = decode(s)?;
        let signed = &token[..h.len() + 1 + c.len()];
        let kid = header.kid.unwrap_or_default();
        let (n, e) = self.key(&kid, now_ms).await?;
        RsaPublicKeyComponents { n: &n, e: &e }
            .verify(&RSA_PKCS1_2048_8192_SHA256, signed.as_bytes(), &signature)
            .map_err(|_| PushAuthError::BadSignature)?;
        // Only a signed token's claims are read.
        let claims: Claims =
            serde_json::from_slice(&decode(c)?).map_err(|_| PushAuthError::Malformed)?;
        self.check(&claims, now_ms.div_euclid(1000))
    }

    fn check(&self, claims: &Claims, now: i64) -> Result<PushIdentity, PushAuthError> {
        if !ISSUERS.contains(&claims.iss.as_str()) {
            return Err(PushAuthError::Issuer(claims.iss.clone()));
        }
        let audience = &self.settings.audience;
        let for_us = match &claims.aud {
            Some(Value::String(a)) => a == audience,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !for_us {
            return Err(PushAuthError::Audience);
        }
        match claims.exp {
            Some(exp) if now <= exp + LEEWAY_SECS => {}
            _ => return Err(PushAuthError::Expired),
        }
        if claims.iat.is_some_and(|t| t > now + LEEWAY_SECS)
            || claims.nbf.is_some_and(|t| t > now + LEEWAY_SECS)
        {
            return Err(PushAuthError::NotYetValid);
        }
        let verified = match &claims.email_verified {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s == "true",
            _ => false,
        };
        match &claims.email {
            Some(email)
                if verified && email.eq_ignore_ascii_case(&self.settings.service_account) =>
            {
                Ok(PushIdentity {
                    email: email.clone(),
                })
            }
            _ => Err(PushAuthError::ServiceAccount),
        }
    }

    /// The key named `kid`, fetching Google's keys when they are old or do not have it.
    async fn key(&self, kid: &str, now_ms: i64) -> Result<(Vec<u8>, Vec<u8>), PushAuthError> {
        let mut keys = self.keys.lock().await;
        let age = keys.fetched_at_ms.map(|t| now_ms - t);
        let stale = age.is_none_or(|a| a >= keys.max_age_ms);
        let missing = !keys.by_kid.contains_key(kid);
        if stale || (missing && age.is_none_or(|a| a >= REFETCH_AFTER_MS)) {
            match self.fetch(now_ms).await {
                Ok(fresh) => *keys = fresh,
                // Keys still in date keep working while the URL is down.
                Err(e) if stale => return Err(e),
                Err(e) => tracing::warn!(error = %e, "cannot refetch Google's signing keys"),
            }
        }
        keys.by_kid
            .get(kid)
            .cloned()
            .ok_or_else(|| PushAuthError::UnknownKey(kid.to_string()))
    }

    async fn fetch(&self, now_ms: i64) -> Result<Keys, PushAuthError> {
        let url = &self.settings.jwks_url;
        let fail = |e: String| PushAuthError::Keys(format!("{url}: {e}"));
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status())));
        }
        let max_age_ms = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(max_age_secs)
            .map_or(DEFAULT_KEY_AGE_MS, |s| s.saturating_mul(1000));
        let jwks: Jwks = response.json().await.map_err(|e| fail(e.to_string()))?;
        let mut by_kid = HashMap::new();
        for k in jwks.keys.into_iter().filter(|k| k.kty == "RSA") {
            let (Ok(n), Ok(e)) = (URL_SAFE_NO_PAD.decode(&k.n), URL_SAFE_NO_PAD.decode(&k.e))
            else {
                continue;
            };
            by_kid.insert(k.kid.unwrap_or_default(), (n, e));
        }
        Ok(Keys {
            by_kid,
            fetched_at_ms: Some(now_ms),
            max_age_ms,
        })
    }
}

/// `public, max-age=19204, must-revalidate, no-transform` → 19204.
fn max_age_secs(cache_control: &str) -> Option<i64> {
    cache_control
        .split(',')
        .filter_map(|d| d.trim().strip_prefix("max-age="))
        .find_map(|v| v.trim().parse().ok())
}

/// Whether a bearer credential is shaped like a JWT (three base64url parts) rather than an
/// API key.
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ")
        && token.split('.').count() == 3
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> PushAuth {
        PushAuth::new(PushAuthSettings {
            audience: "https://trainscaler.example.com/v1/webhooks/events".into(),
            service_account: "push@my-project.iam.gserviceaccount.com".into(),
            jwks_url: "http://127.0.0.1:9/certs".into(),
        })
        .unwrap()
    }

    fn claims(v: Value) -> Claims {
        serde_json::from_value(v).unwrap()
    }

    const NOW: i64 = 1_800_000_000;

    fn good() -> Value {
        serde_json::json!({
            "aud": "https://trainscaler.example.com/v1/webhooks/events",
            "azp": "113774264463038321964",
            "email": "push@my-project.iam.gserviceaccount.com",
            "email_verified": true,
            "exp": NOW + 3000,
            "iat": NOW - 600,
            "iss": "https://accounts.google.com",
            "sub": "113774264463038321964"
        })
    }

    #[test]
    fn claims_are_checked_one_by_one() {
        let a = auth();
        assert!(a.check(&claims(good()), NOW).is_ok());
        let with = |k: &str, v: Value| {
            let mut c = good();
            c[k] = v;
            a.check(&claims(c), NOW)
        };
        assert_eq!(
            with("iss", "https://evil.example".into()),
            Err(PushAuthError::Issuer("https://evil.example".into()))
        );
        assert_eq!(
            with("iss", "accounts.google.com".into()).map(|_| ()),
            Ok(())
        );
        assert_eq!(
            with("aud", "https://other".into()),
            Err(PushAuthError::Audience)
        );
        assert!(
            with(
                "aud",
                serde_json::json!(["x", "https://trainscaler.example.com/v1/webhooks/events"])
            )
            .is_ok()
        );
        assert_eq!(with("exp", (NOW - 61).into()), Err(PushAuthError::Expired));
        assert!(
            with("exp", (NOW - 59).into()).is_ok(),
            "a minute of clock skew"
        );
        assert_eq!(
            with("iat", (NOW + 600).into()),
            Err(PushAuthError::NotYetValid)
        );
        assert_eq!(
            with("email", "someone@gmail.com".into()),
            Err(PushAuthError::ServiceAccount)
        );
        assert_eq!(
            with("email_verified", false.into()),
            Err(PushAuthError::ServiceAccount)
        );
    }

    #[test]
    fn jwt_shapes_and_cache_control() {
        assert!(looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.eyJhIjoxfQ.c2ln"));
        assert!(!looks_like_jwt("tsk_0123456789ab_cdef"));
        assert!(!looks_like_jwt("eyJ.a"));
        assert_eq!(
            max_age_secs("public, max-age=19204, must-revalidate, no-transform"),
            Some(19204)
        );
        assert_eq!(max_age_secs("no-cache"), None);
    }

    #[tokio::test]
    async fn malformed_tokens_and_other_algorithms_are_refused_before_any_key_is_fetched() {
        let a = auth();
        assert_eq!(
            a.verify("a.b", NOW * 1000).await,
            Err(PushAuthError::Malformed)
        );
        let hs256 = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#),
            URL_SAFE_NO_PAD.encode(br#"{"iss":"accounts.google.com"}"#),
            URL_SAFE_NO_PAD.encode(b"sig")
        );
        assert_eq!(
            a.verify(&hs256, NOW * 1000).await,
            Err(PushAuthError::Algorithm("HS256".into()))
        );
        let none = hs256.replace(
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#),
            &URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        );
        assert_eq!(
            a.verify(&none, NOW * 1000).await,
            Err(PushAuthError::Algorithm("none".into()))
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]

        /// Arbitrary tokens are refused, never accepted and never a panic.
        #[test]
        fn arbitrary_tokens_are_refused(parts in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..5)) {
            let token = parts.iter().map(|p| URL_SAFE_NO_PAD.encode(p)).collect::<Vec<_>>().join(".");
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let out = rt.block_on(auth().verify(&token, NOW * 1000));
            proptest::prop_assert!(out.is_err());
        }
    }
}
