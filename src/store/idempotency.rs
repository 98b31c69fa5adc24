//! Idempotency keys of ingestion batches, and the SQL both backends run for them.
//!
//! A key is claimed inside the batch's own transaction, before the batch writes anything, and
//! the answer the batch got is stored in that transaction too: a committed batch always has
//! its key and answer, a rolled-back one has neither, so a failed request leaves the key free
//! for a corrected retry. Two requests claiming one key at once queue on the key's primary
//! key (PostgreSQL makes the second insert wait for the first transaction; SQLite's
//! `BEGIN IMMEDIATE` serialises writers anyway), so the second finds the key taken and the
//! batch is written once.

use super::backend::{Backend, Tx};
use super::stmt::Stmt;
use super::{StoreError, StoreResult};

/// The key a request claims: who, on which route, with which request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    /// The API key id, `webhook:<source>` for signed webhooks, or `""` without authentication.
    pub caller: String,
    /// The matched route template.
    pub route: String,
    pub key: String,
    /// SHA-256 (hex) of method, route and body.
    pub request_hash: String,
    pub now_ms: i64,
    pub expires_at_ms: i64,
}

/// An answer as it was sent, to send again on a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// A key as stored and not yet expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    pub request_hash: String,
    /// `None` only while the claiming transaction is open (never visible from outside it).
    pub response: Option<StoredResponse>,
}

/// A key to claim in a write's transaction, and how to render the answer that write's outcome
/// gets, so the answer is stored in the same transaction.
#[derive(Clone, Copy)]
pub struct Once<'a, R> {
    pub claim: &'a IdempotencyClaim,
    pub respond: &'a (dyn Fn(&R) -> StoredResponse + Send + Sync),
}

impl<R> std::fmt::Debug for Once<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Once").field("claim", self.claim).finish()
    }
}

/// A row of `idempotency_keys`; the answer columns are NULL until the claiming transaction
/// stores them.
#[derive(Debug, sqlx::FromRow)]
struct KeyRecord {
    request_hash: String,
    status: Option<i32>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

impl TryFrom<KeyRecord> for StoredKey {
    type Error = sqlx::Error;

    fn try_from(r: KeyRecord) -> Result<Self, Self::Error> {
        let response = match (r.status, r.content_type, r.body) {
            (Some(status), Some(content_type), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).map_err(super::backend::decode_error)?,
                content_type,
                body,
            }),
            _ => None,
        };
        Ok(Self {
            request_hash: r.request_hash,
            response,
        })
    }
}

/// Claims `claim`'s key in `tx`, replacing an expired row. Fails with
/// [`StoreError::IdempotencyKeyTaken`] when a live row holds it (committed by a request that
/// got here first).
async fn claim_key<B: Backend>(tx: &mut Tx<B>, claim: &IdempotencyClaim) -> StoreResult<()> {
    let insert = Stmt::new(
        "INSERT INTO idempotency_keys
             (caller, route, key, request_hash, created_at_ms, expires_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (caller, route, key) DO UPDATE SET
             request_hash = excluded.request_hash, status = NULL,
             content_type = NULL, body = NULL,
             created_at_ms = excluded.created_at_ms,
             expires_at_ms = excluded.expires_at_ms
         WHERE idempotency_keys.expires_at_ms <= $5",
    )
    .bind(&claim.caller)
    .bind(&claim.route)
    .bind(&claim.key)
    .bind(&claim.request_hash)
    .bind(claim.now_ms)
    .bind(claim.expires_at_ms);
    if B::execute(tx, insert).await? == 0 {
        return Err(StoreError::IdempotencyKeyTaken);
    }
    Ok(())
}

/// Stores the answer for a key claimed earlier in `tx`.
async fn store_response<B: Backend>(
    tx: &mut Tx<B>,
    claim: &IdempotencyClaim,
    response: &StoredResponse,
) -> StoreResult<()> {
    let update = Stmt::new(
        "UPDATE idempotency_keys SET status = $4, content_type = $5, body = $6
         WHERE caller = $1 AND route = $2 AND key = $3",
    )
    .bind(&claim.caller)
    .bind(&claim.route)
    .bind(&claim.key)
    .bind(i32::from(response.status))
    .bind(&response.content_type)
    .bind(&response.body);
    B::execute(tx, update).await?;
    Ok(())
}

/// Claims the key (if any) at the start of a write.
pub(super) async fn begin_once<B: Backend, R>(
    tx: &mut Tx<B>,
    once: &Option<Once<'_, R>>,
) -> StoreResult<()> {
    match once {
        Some(o) => claim_key::<B>(tx, o.claim).await,
        None => Ok(()),
    }
}

/// Stores the answer `outcome` gets (if a key was claimed) just before the commit.
pub(super) async fn finish_once<B: Backend, R>(
    tx: &mut Tx<B>,
    once: &Option<Once<'_, R>>,
    outcome: &R,
) -> StoreResult<()> {
    match once {
        Some(o) => store_response::<B>(tx, o.claim, &(o.respond)(outcome)).await,
        None => Ok(()),
    }
}

/// The live (unexpired) row for a key, if any.
pub(super) async fn idempotency_key<B: Backend>(
    db: &B,
    caller: &str,
    route: &str,
    key: &str,
    now_ms: i64,
) -> StoreResult<Option<StoredKey>> {
    let find = Stmt::new(
        "SELECT request_hash, status, content_type, body FROM idempotency_keys
         WHERE caller = $1 AND route = $2 AND key = $3 AND expires_at_ms > $4",
    )
    .bind(caller)
    .bind(route)
    .bind(key)
    .bind(now_ms);
    let row: Option<KeyRecord> = B::fetch_optional(&mut *db.conn().await?, find).await?;
    Ok(row.map(StoredKey::try_from).transpose()?)
}

/// Deletes keys that expired at or before `now_ms`; returns how many.
pub(super) async fn prune_idempotency_keys<B: Backend>(db: &B, now_ms: i64) -> StoreResult<u64> {
    let prune = Stmt::new("DELETE FROM idempotency_keys WHERE expires_at_ms <= $1").bind(now_ms);
    B::execute(&mut *db.conn().await?, prune).await
}
