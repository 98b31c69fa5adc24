//! Checks presented bearer tokens against the stored keys.
//!
//! A refusal must cost next to nothing, whoever sends it: a token not shaped like ours is
//! refused without touching the database, and any other is one primary-key lookup and one
//! SHA-256 compared in constant time (see `auth::token` for why a fast digest is right for
//! random secrets). A key that verified is cached for [`CACHE_TTL`] by the digest of its
//! secret, so its next requests skip the database.
//!
//! When the database cannot be reached, a key whose cache entry expired but that verified
//! within the outage grace (`--auth-outage-grace-sec`) still works from memory, with the
//! scopes and pools it had then, so that routes served from memory keep answering; writes fail on their
//! own with 503. The first check once the database answers again reads the row, so a key
//! revoked during the outage stops working then.
//!
//! Keys stored before digests hold an Argon2 hash. Those alone still pay Argon2, only when the
//! id exists, on the blocking pool and at most [`MAX_CONCURRENT_HASHES`] at a time; the first
//! success rewrites the row with the digest, so each legacy key pays it about once.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use super::pools::PoolScope;
use super::scope::Scopes;
use super::token::{
    Stored, Token, digest, hash_secret, matches_argon2, matches_digest, stored_kind,
};
use crate::store::{Fault, Store, StoreError};

/// How long a verified key is trusted without looking at the database again: a key revoked on
/// another replica stops working there within this long (at once on the replica revoking it).
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Argon2 verifications in flight at once.
pub const MAX_CONCURRENT_HASHES: usize = 4;
/// Database lookups of keys not in memory in flight at once: a key is read once per
/// [`CACHE_TTL`], so legitimate callers need few, and a flood of made-up ids gets no more.
pub const MAX_CONCURRENT_LOOKUPS: usize = 4;
/// Entries kept before expired ones are swept.
const CACHE_SWEEP_AT: usize = 10_000;

/// Who a request comes from once its key checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `key:<id>`, `webhook:<source>`, or `anonymous` when authentication is off.
    pub name: String,
    pub scopes: Scopes,
    /// The pools it reaches: a key's list, every pool for the others.
    pub pools: PoolScope,
}

impl Principal {
    /// The principal of the stored API key `id`.
    pub fn key(id: &str, grant: Grant) -> Self {
        Self {
            name: format!("key:{id}"),
            scopes: grant.scopes,
            pools: grant.pools,
        }
    }

    /// A caller that reaches every pool: authentication off, a signed webhook, a Pub/Sub
    /// push subscription.
    pub fn everywhere(name: impl Into<String>, scopes: Scopes) -> Self {
        Self {
            name: name.into(),
            scopes,
            pools: PoolScope::every(),
        }
    }
}

/// What a verified key may do and where: what the cache keeps of its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub scopes: Scopes,
    pub pools: PoolScope,
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

/// What the cache knows of a presented token.
enum Verdict {
    Good(Grant),
    WrongSecret,
    Unknown,
}

#[derive(Debug, Clone)]
struct Cached {
    digest: [u8; 32],
    grant: Grant,
    /// When it was verified against the database.
    at: Instant,
}

/// The key checker every replica holds.
#[derive(Debug)]
pub struct KeyVerifier {
    store: Store,
    /// How long after its last database check a key works while the database is down.
    outage_grace: Duration,
    cache: Mutex<HashMap<String, Cached>>,
    hashes: Arc<Semaphore>,
    /// Argon2 verifications run (legacy rows only), for tests that refusals pay none.
    slow_checks: AtomicU64,
    /// Bounds the database lookups of keys not in memory (see [`MAX_CONCURRENT_LOOKUPS`]).
    lookups: Semaphore,
    db_lookups: AtomicU64,
    outage_hits: AtomicU64,
    /// Bumped by every revocation. A check that read its key's row before a revocation must
    /// not put the key back in the cache after `forget` took it out.
    revocations: AtomicU64,
}

impl KeyVerifier {
    pub fn new(store: Store, outage_grace: Duration) -> Result<Self, VerifyError> {
        Ok(Self {
            store,
            outage_grace,
            cache: Mutex::new(HashMap::new()),
            hashes: Arc::new(Semaphore::new(MAX_CONCURRENT_HASHES)),
            slow_checks: AtomicU64::new(0),
            lookups: Semaphore::new(MAX_CONCURRENT_LOOKUPS),
            db_lookups: AtomicU64::new(0),
            outage_hits: AtomicU64::new(0),
            revocations: AtomicU64::new(0),
        })
    }

    /// The principal `presented` (the bearer token) stands for.
    pub async fn verify(&self, presented: &str) -> Result<Principal, VerifyError> {
        // The token's shape is public, so refusing a malformed one at once tells nobody
        // anything they did not know.
        let t = Token::parse(presented).ok_or(VerifyError::Invalid)?;
        match self.cache_verdict(&t) {
            Verdict::Good(grant) => return Ok(Principal::key(&t.id, grant)),
            // A key's secret never changes (a new secret is a new key), so a verified key's
            // id with another secret is refused from memory: a flood of wrong secrets for a
            // real id costs no database round trip.
            Verdict::WrongSecret => return Err(VerifyError::Invalid),
            Verdict::Unknown => {}
        }
        let revocations = self.revocations.load(Ordering::SeqCst);
        // Lookups of keys not in memory share a few database connections: a flood of made-up
        // ids waits here instead of taking the pool that verified keys' requests use.
        let lookup = self
            .lookups
            .acquire()
            .await
            .map_err(|e| VerifyError::Internal(e.to_string()))?;
        self.db_lookups.fetch_add(1, Ordering::Relaxed);
        let found = self.store.active_key(&t.id).await;
        drop(lookup);
        let row = match found {
            Ok(row) => row.ok_or(VerifyError::Invalid)?,
            Err(e) if e.fault() == Fault::Unavailable => {
                return match self.recent(&t, self.outage_grace) {
                    Some(grant) => {
                        self.outage_hits.fetch_add(1, Ordering::Relaxed);
                        Ok(Principal::key(&t.id, grant))
                    }
                    None => Err(e.into()),
                };
            }
            Err(e) => return Err(e.into()),
        };
        let grant = Grant {
            scopes: row.scopes,
            pools: row.pools,
        };
        let matched = match stored_kind(&row.secret_hash) {
            Stored::Digest => matches_digest(&t.secret, &row.secret_hash),
            Stored::Argon2 => {
                self.verify_legacy(&t, &row.secret_hash, &grant, revocations)
                    .await?
            }
            Stored::Unknown => false,
        };
        if !matched {
            return Err(VerifyError::Invalid);
        }
        self.remember(&t, grant.clone(), revocations);
        Ok(Principal::key(&t.id, grant))
    }

    /// Checks `t` against a legacy Argon2 hash and, when it matches, rewrites the row with the
    /// digest so that the key never pays Argon2 again (on any replica).
    async fn verify_legacy(
        &self,
        t: &Token,
        stored: &str,
        grant: &Grant,
        revocations: u64,
    ) -> Result<bool, VerifyError> {
        let permit = self
            .hashes
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| VerifyError::Internal(e.to_string()))?;
        // A burst with one legacy key queues here: those behind the first find it verified.
        if self.cached(t).is_some() {
            return Ok(true);
        }
        self.slow_checks.fetch_add(1, Ordering::Relaxed);
        let (secret, phc) = (t.secret.clone(), stored.to_string());
        // The slot travels with the hash, so a cancelled request still holds it until Argon2
        // ends.
        let (matched, permit) =
            tokio::task::spawn_blocking(move || (matches_argon2(&secret, &phc), permit))
                .await
                .map_err(|e| VerifyError::Internal(e.to_string()))?;
        if matched {
            // Cached before the slot is freed, so the next in the queue finds it.
            self.remember(t, grant.clone(), revocations);
            let new = hash_secret(&t.secret);
            // The key is good either way; a failed rewrite only means Argon2 again next time.
            if let Err(e) = self.store.rehash_key(&t.id, stored, &new).await {
                tracing::warn!(key = %t.id, error = %e, "could not rewrite a legacy key hash");
            }
        }
        drop(permit);
        Ok(matched)
    }

    fn cached(&self, t: &Token) -> Option<Grant> {
        self.recent(t, CACHE_TTL)
    }

    /// What memory says of `t`: its key verified within [`CACHE_TTL`] with this secret, with
    /// another one, or nothing known.
    fn cache_verdict(&self, t: &Token) -> Verdict {
        let Ok(cache) = self.cache.lock() else {
            return Verdict::Unknown;
        };
        match cache.get(&t.id) {
            Some(hit) if hit.at.elapsed() < CACHE_TTL => {
                if bool::from(hit.digest.ct_eq(&digest(&t.secret))) {
                    Verdict::Good(hit.grant.clone())
                } else {
                    Verdict::WrongSecret
                }
            }
            _ => Verdict::Unknown,
        }
    }

    /// Key rows read from the database, for tests that refusals from memory read none.
    pub fn db_lookups(&self) -> u64 {
        self.db_lookups.load(Ordering::Relaxed)
    }

    /// The grant of `t` if it verified against the database less than `within` ago.
    fn recent(&self, t: &Token, within: Duration) -> Option<Grant> {
        let cache = self.cache.lock().ok()?;
        let hit = cache.get(&t.id)?;
        let same: bool = hit.digest.ct_eq(&digest(&t.secret)).into();
        (same && hit.at.elapsed() < within).then(|| hit.grant.clone())
    }

    /// Requests let through from memory while the database was unreachable.
    pub fn outage_hits(&self) -> u64 {
        self.outage_hits.load(Ordering::Relaxed)
    }

    /// Caches a verified key, unless a key was revoked since its row was read (`revocations`
    /// then): that row may be the revoked key's, and this request is the last it answers.
    fn remember(&self, t: &Token, grant: Grant, revocations: u64) {
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
            let keep = self.outage_grace.max(CACHE_TTL);
            cache.retain(|_, c| now.duration_since(c.at) < keep);
        }
        cache.insert(
            t.id.clone(),
            Cached {
                digest: digest(&t.secret),
                grant,
                at: now,
            },
        );
    }

    /// How many Argon2 verifications (of legacy rows) this verifier has run.
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
        let verifier =
            KeyVerifier::new(Store::connect(&url).await.unwrap(), Duration::ZERO).unwrap();
        let token = Token::generate().unwrap();
        let grant = Grant {
            scopes: Scopes::new([Scope::Read]),
            pools: PoolScope::every(),
        };

        let before = verifier.revocations.load(Ordering::SeqCst);
        verifier.forget(&token.id);
        verifier.remember(&token, grant.clone(), before);
        assert_eq!(verifier.cached(&token), None);

        let after = verifier.revocations.load(Ordering::SeqCst);
        verifier.remember(&token, grant.clone(), after);
        assert_eq!(verifier.cached(&token), Some(grant));
        verifier.forget(&token.id);
        assert_eq!(verifier.cached(&token), None);
    }

    /// A wrong secret for a key verified moments ago is refused from memory, however many
    /// times it is tried; only the first check of the key reads its row.
    #[tokio::test]
    async fn wrong_secrets_for_a_cached_key_read_no_row() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/keys.db", dir.path().display());
        let store = Store::connect(&url).await.unwrap();
        let issued =
            crate::auth::issue::mint("k", Scopes::new([Scope::Read]), PoolScope::every(), 0)
                .unwrap();
        store.migrate().await.unwrap();
        store.create_key(&issued.row).await.unwrap();
        let verifier = KeyVerifier::new(store, Duration::ZERO).unwrap();
        assert!(verifier.verify(&issued.token).await.is_ok());
        assert_eq!(verifier.db_lookups(), 1);
        let id = &issued.row.id;
        for _ in 0..50 {
            let wrong = Token::generate().unwrap();
            let forged = format!("tsk_{id}_{}", wrong.secret);
            assert!(matches!(
                verifier.verify(&forged).await,
                Err(VerifyError::Invalid)
            ));
        }
        assert_eq!(verifier.db_lookups(), 1, "refused from memory");
        assert!(verifier.verify(&issued.token).await.is_ok());
        // An id memory does not know still goes to the database, and is refused there.
        let unknown = Token::generate().unwrap();
        assert!(verifier.verify(&unknown.to_bearer()).await.is_err());
        assert_eq!(verifier.db_lookups(), 2);
    }

    /// What the cache (and so the outage grace) lets through keeps the key's pool list: a key
    /// restricted to one pool must not reach every pool because the database is down.
    #[tokio::test]
    async fn a_key_served_from_memory_keeps_its_pools() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/keys.db", dir.path().display());
        let verifier = KeyVerifier::new(
            Store::connect(&url).await.unwrap(),
            Duration::from_secs(600),
        )
        .unwrap();
        let token = Token::generate().unwrap();
        let grant = Grant {
            scopes: Scopes::new([Scope::Ingest]),
            pools: PoolScope::only(["gpu-t4".to_string()]),
        };
        let now = verifier.revocations.load(Ordering::SeqCst);
        verifier.remember(&token, grant, now);
        let kept = verifier.recent(&token, verifier.outage_grace).unwrap();
        assert!(kept.pools.allows("gpu-t4"));
        assert!(!kept.pools.allows("gpu-a100"));
        let principal = Principal::key(&token.id, kept);
        assert_eq!(principal.pools.names(), ["gpu-t4"]);
    }
}
