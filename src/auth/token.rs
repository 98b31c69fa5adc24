//! API key tokens: how they look, how they are made, and how their secret is hashed.
//!
//! A token is `tsk_<id>_<secret>`: the id (12 hex digits) is public and finds the key's row;
//! the secret (64 hex digits, 256 random bits) is only ever stored as an Argon2id hash. The
//! prefix makes a leaked token easy to recognise in logs and by secret scanners.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

const PREFIX: &str = "tsk_";
const ID_BYTES: usize = 6;
const SECRET_BYTES: usize = 32;

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

/// Argon2id with OWASP's smallest recommended setting (19 MiB, 2 passes, 1 lane). The secret
/// is random, so this is defence in depth for a leaked table rather than the only barrier.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("no random salt: {0}")]
    Random(#[from] getrandom::Error),
    #[error("argon2: {0}")]
    Argon2(String),
}

/// The PHC string stored for `secret`.
pub fn hash_secret(secret: &str) -> Result<String, HashError> {
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| HashError::Argon2(e.to_string()))?;
    argon2()
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError::Argon2(e.to_string()))
}

/// Whether `secret` matches the stored hash. A malformed stored hash matches nothing.
pub fn verify_secret(secret: &str, stored: &str) -> bool {
    match PasswordHash::new(stored) {
        Ok(hash) => argon2().verify_password(secret.as_bytes(), &hash).is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_hash_verifies_its_secret_only() {
        let t = Token::generate().unwrap();
        let stored = hash_secret(&t.secret).unwrap();
        assert!(
            stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{stored}"
        );
        assert!(!stored.contains(&t.secret));
        assert!(verify_secret(&t.secret, &stored));
        let other = Token::generate().unwrap();
        assert!(!verify_secret(&other.secret, &stored));
        assert!(!verify_secret(&t.secret, "not a hash"));
        // Salted: the same secret hashes differently twice.
        assert_ne!(hash_secret(&t.secret).unwrap(), stored);
    }
}
