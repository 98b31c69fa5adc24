//! API key tokens: how they look, how they are made, and how their secret is stored.
//!
//! A token is `tsk_<id>_<secret>`: the id (12 hex digits) is public and finds the key's row;
//! the secret (64 hex digits, 256 random bits) is only ever stored as a digest. The prefix
//! makes a leaked token easy to recognise in logs and by secret scanners.
//!
//! The digest is a plain SHA-256 of the secret (`sha256:<hex>`). A slow password hash
//! (Argon2, which keys were stored with until now) protects guessable secrets; these are 256
//! random bits, which nobody can search through however fast the hash, so slowness buys
//! nothing and costs every refusal 19 MiB and tens of milliseconds. A server-side pepper
//! (HMAC) would not add strength either and would be one more secret to deploy and rotate.
//! Keys stored with Argon2 still verify (see [`Stored::Argon2`]) and are rewritten with the
//! digest on their next success.

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const PREFIX: &str = "tsk_";
const ID_BYTES: usize = 6;
const SECRET_BYTES: usize = 32;
/// Marks a stored digest; Argon2 PHC strings start with `$argon2`.
const DIGEST_PREFIX: &str = "sha256:";

/// A token split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub secret: String,
}

impl Token {
    /// A new token from the operating system's random source.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut id = [0u8; ID_BYTES];
        let mut secret = [0u8; SECRET_BYTES];
        getrandom::getrandom(&mut id)?;
        getrandom::getrandom(&mut secret)?;
        Ok(Self {
            id: hex::encode(id),
            secret: hex::encode(secret),
        })
    }

    /// Reads a presented token; `None` for anything not shaped like one of ours.
    pub fn parse(s: &str) -> Option<Self> {
        let rest = s.strip_prefix(PREFIX)?;
        let (id, secret) = rest.split_once('_')?;
        let is_hex = |p: &str, len: usize| {
            p.len() == len
                && p.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        (is_hex(id, ID_BYTES * 2) && is_hex(secret, SECRET_BYTES * 2)).then(|| Self {
            id: id.to_string(),
            secret: secret.to_string(),
        })
    }

    /// The form clients send.
    pub fn to_bearer(&self) -> String {
        format!("{PREFIX}{}_{}", self.id, self.secret)
    }
}

/// The form of a stored secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// `sha256:<hex>`: checked in microseconds.
    Digest,
    /// An Argon2id PHC string from before digests; rewritten on its next success.
    Argon2,
    /// Neither: matches nothing.
    Unknown,
}

/// What kind of stored secret `stored` is.
pub fn stored_kind(stored: &str) -> Stored {
    if stored.starts_with(DIGEST_PREFIX) {
        Stored::Digest
    } else if stored.starts_with("$argon2") {
        Stored::Argon2
    } else {
        Stored::Unknown
    }
}

/// The SHA-256 of `secret`.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The string stored for `secret`: `sha256:` and 64 hex digits.
pub fn hash_secret(secret: &str) -> String {
    format!("{DIGEST_PREFIX}{}", hex::encode(digest(secret)))
}

/// Whether `secret` matches a stored digest, compared in constant time. Fast: no Argon2 here.
pub fn matches_digest(secret: &str, stored: &str) -> bool {
    let Some(hex_digest) = stored.strip_prefix(DIGEST_PREFIX) else {
        return false;
    };
    let Ok(expected) = hex::decode(hex_digest) else {
        return false;
    };
    expected.ct_eq(&digest(secret)).into()
}

/// Argon2id with the setting keys were hashed with before digests (19 MiB, 2 passes, 1 lane);
/// the PHC string carries its own parameters, these only fill in what it does not say.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Whether `secret` matches a legacy Argon2 PHC string. Slow (tens of milliseconds, 19 MiB):
/// callers run it on the blocking pool, a few at a time, and only for rows that exist.
pub fn matches_argon2(secret: &str, stored: &str) -> bool {
    match PasswordHash::new(stored) {
        Ok(hash) => argon2().verify_password(secret.as_bytes(), &hash).is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::{PasswordHasher, SaltString};

    #[test]
    fn a_generated_token_parses_back_and_others_do_not() {
        let t = Token::generate().unwrap();
        let bearer = t.to_bearer();
        assert!(bearer.starts_with("tsk_"));
        assert_eq!(Token::parse(&bearer), Some(t.clone()));
        assert_ne!(Token::generate().unwrap(), t);
        for bad in [
            "",
            "tsk_",
            "tsk_abc_def",
            &bearer[1..],
            &format!("{bearer}0"),
            &bearer.to_uppercase(),
            &bearer.replacen('_', "-", 2),
        ] {
            assert_eq!(Token::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_digest_matches_its_secret_only() {
        let t = Token::generate().unwrap();
        let stored = hash_secret(&t.secret);
        assert!(
            stored.starts_with("sha256:") && stored.len() == 7 + 64,
            "{stored}"
        );
        assert_eq!(stored_kind(&stored), Stored::Digest);
        assert!(!stored.contains(&t.secret));
        assert!(matches_digest(&t.secret, &stored));
        let other = Token::generate().unwrap();
        assert!(!matches_digest(&other.secret, &stored));
        assert!(!matches_digest(&t.secret, "sha256:zz"));
        assert!(!matches_digest(&t.secret, "not a hash"));
        assert_eq!(stored_kind("not a hash"), Stored::Unknown);
    }

    /// A key stored by the old code (Argon2id PHC string) still verifies.
    #[test]
    fn a_legacy_argon2_hash_still_verifies_its_secret_only() {
        let t = Token::generate().unwrap();
        let salt = SaltString::encode_b64(&[7u8; 16]).unwrap();
        let stored = argon2()
            .hash_password(t.secret.as_bytes(), &salt)
            .unwrap()
            .to_string();
        assert_eq!(stored_kind(&stored), Stored::Argon2);
        assert!(matches_argon2(&t.secret, &stored));
        assert!(!matches_argon2(&Token::generate().unwrap().secret, &stored));
        assert!(!matches_digest(&t.secret, &stored));
    }
}
