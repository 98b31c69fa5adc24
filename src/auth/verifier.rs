//! Checks presented bearer tokens against the stored keys.
//!
//! Argon2 is slow on purpose (tens of milliseconds), far too slow to pay on every request. A
//! key that verified once is cached for [`CACHE_TTL`] as the SHA-256 of its secret, so the
//! next requests cost one hash and a constant-time comparison. Everything that fails the
//! cache -- an unknown id, a wrong secret for a known id, a malformed token -- pays one Argon2
//! verification (against a dummy hash when there is no row), so how long a refusal takes does
//! not tell an unknown key from a wrong secret. Argon2 runs on the blocking pool, at most
//! [`MAX_CONCURRENT_HASHES`] at a time, which bounds what a flood of bad keys can cost in CPU
//! and memory (19 MiB each).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use super::scope::Scopes;
use super::token::{Token, hash_secret, verify_secret};
use crate::store::{Store, StoreError};

/// How long a verified key is trusted without looking at the database again: a key revoked on
/// another replica stops working there within this long (at once on the replica revoking it).
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Argon2 verifications in flight at once.
pub const MAX_CONCURRENT_HASHES: usize = 4;
/// Entries kept before expired ones are swept.
const CACHE_SWEEP_AT: usize = 10_000;

/// Who a request comes from once its key checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `key:<id>`, `webhook:<source>`, or `anonymous` when authentication is off.
    pub name: String,
    pub scopes: Scopes,
}

impl Principal {
    /// The principal of the stored API key `id`.
    pub fn key(id: &str, scopes: Scopes) -> Self {
        Self {
            name: format!("key:{id}"),
            scopes,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The token is not one of our live keys. Deliberately carries no reason.
    #[error("invalid API key")]
    Invalid,
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("key verification failed: {0}")]
    Internal(String),
}

#[derive(Debug, Clone)]
struct Cached {
    digest: [u8; 32],
    scopes: Scopes,
    until: Instant,
}

/// The key checker every replica holds.
#[derive(Debug)]
pub struct KeyVerifier {
    store: Store,
    cache: Mutex<HashMap<String, Cached>>,
    /// A hash of a secret nobody knows, verified against when no row matches.
    dummy_hash: String,
    hashes: Arc<Semaphore>,
    /// Argon2 verifications run, for tests that every refusal pays the same.
    slow_checks: AtomicU64,
    /// Bumped by every revocation. A check that read its key's row before a revocation must
    /// not put the key back in the cache after `forget` took it out.
    revocations: AtomicU64,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

impl KeyVerifier {
    pub fn new(store: Store) -> Result<Self, VerifyError> {
        let unknown = Token::generate().map_err(|e| VerifyError::Internal(e.to_string()))?;
        let dummy_hash =
            hash_secret(&unknown.secret).map_err(|e| VerifyError::Internal(e.to_string()))?;
        Ok(Self {
            store,
            cache: Mutex::new(HashMap::new()),
            dummy_hash,
            hashes: Arc::new(Semaphore::new(MAX_CONCURRENT_HASHES)),
            slow_checks: AtomicU64::new(0),
            revocations: AtomicU64::new(0),
        })
    }

    /// The principal `presented` (the bearer token) stands for.
    pub async fn verify(&self, presented: &str) -> Result<Principal, VerifyError> {
        let token = Token::parse(presented);
        if let Some(t) = &token
            && let Some(scopes) = self.cached(t)
        {
            return Ok(Principal::key(&t.id, scopes));
        }
        let revocations = self.revocations.load(Ordering::SeqCst);
        let row = match &token {
            Some(t) => self.store.active_key(&t.id).await?,
            None => None,
        };
        let (secret, stored) = match (&token, &row) {
            (Some(t), Some(r)) => (t.secret.clone(), r.secret_hash.clone()),
            // Same work as a real check, with an answer of no.
            _ => (presented.to_string(), self.dummy_hash.clone()),
        };
        let permit = self
            .hashes
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| VerifyError::Internal(e.to_string()))?;
        // When a cached key expires under load, every request in flight with it misses at
        // once. Those that queued for a slot find it verified again by the first ones: without
        // this they would all pay Argon2 (seconds of queueing, 19 MiB each). Only the same
        // token with the same secret can hit, so refusals still pay one verification each.
        if let Some(t) = &token
            && let Some(scopes) = self.cached(t)
        {
            return Ok(Principal::key(&t.id, scopes));
        }
        self.slow_checks.fetch_add(1, Ordering::Relaxed);
        // The slot travels with the hash, so a cancelled request still holds it until Argon2
        // ends, and comes back to be freed only after a verified key is remembered: a request
        // that takes the slot next then finds it in the cache.
        let (matched, permit) = tokio::task::spawn_blocking(move || {
            let matched = verify_secret(&secret, &stored);
            (matched, permit)
        })
        .await
        .map_err(|e| VerifyError::Internal(e.to_string()))?;
        match (token, row) {
            (Some(t), Some(r)) if matched => {
                self.remember(&t, r.scopes, revocations);
                drop(permit);
                Ok(Principal::key(&t.id, r.scopes))
            }
            _ => Err(VerifyError::Invalid),
        }
    }

    fn cached(&self, t: &Token) -> Option<Scopes> {
        let cache = self.cache.lock().ok()?;
        let hit = cache.get(&t.id)?;
        let same: bool = hit.digest.ct_eq(&digest(&t.secret)).into();
        (same && hit.until > Instant::now()).then_some(hit.scopes)
    }

    /// Caches a verified key, unless a key was revoked since its row was read (`revocations`
    /// then): that row may be the revoked key's, and this request is the last it answers.
    fn remember(&self, t: &Token, scopes: Scopes, revocations: u64) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        // Checked under the lock `forget` takes, so a revocation is either seen here or
        // removes this entry after it is written.
        if self.revocations.load(Ordering::SeqCst) != revocations {
            return;
        }
        let now = Instant::now();
        if cache.len() >= CACHE_SWEEP_AT {
            cache.retain(|_, c| c.until > now);
        }
        cache.insert(
            t.id.clone(),
            Cached {
                digest: digest(&t.secret),
                scopes,
                until: now + CACHE_TTL,
            },
        );
    }

    /// How many Argon2 verifications this verifier has run.
    pub fn slow_checks(&self) -> u64 {
        self.slow_checks.load(Ordering::Relaxed)
    }

    /// Forgets a key at once (this replica revoked it).
    pub fn forget(&self, id: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            self.revocations.fetch_add(1, Ordering::SeqCst);
            cache.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::scope::Scope;

    /// A check that read its row before a revocation (and so saw the old counter) must not
    /// cache the key afterwards; one that started after it may.
    #[tokio::test]
    async fn a_check_begun_before_a_revocation_does_not_cache_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/keys.db", dir.path().display());
        let verifier = KeyVerifier::new(Store::connect(&url).await.unwrap()).unwrap();
        let token = Token::generate().unwrap();
        let scopes = Scopes::new([Scope::Read]);

        let before = verifier.revocations.load(Ordering::SeqCst);
        verifier.forget(&token.id);
        verifier.remember(&token, scopes, before);
        assert_eq!(verifier.cached(&token), None);

        let after = verifier.revocations.load(Ordering::SeqCst);
        verifier.remember(&token, scopes, after);
        assert_eq!(verifier.cached(&token), Some(scopes));
        verifier.forget(&token.id);
        assert_eq!(verifier.cached(&token), None);
    }
}
