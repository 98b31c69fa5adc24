//! Idempotency keys of ingestion batches, and the SQL both backends run for them.
//!
//! A key is claimed inside the batch's own transaction, before the batch writes anything, and
//! the answer the batch got is stored in that transaction too: a committed batch always has
//! its key and answer, a rolled-back one has neither, so a failed request leaves the key free
//! for a corrected retry. Two requests claiming one key at once queue on the key's primary
//! key (PostgreSQL makes the second insert wait for the first transaction; SQLite's
//! `BEGIN IMMEDIATE` serialises writers anyway), so the second finds the key taken and the
//! batch is written once.

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

/// Implements the idempotency key methods for `$store`.
macro_rules! idempotency_sql {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Claims `claim`'s key in `tx`, replacing an expired row. Fails with
            /// [`StoreError::IdempotencyKeyTaken`](crate::store::StoreError) when a live row
            /// holds it (committed by a request that got here first).
            async fn claim_idempotency_key(
                tx: &mut sqlx::Transaction<'static, $db>,
                claim: &$crate::store::IdempotencyClaim,
            ) -> $crate::store::StoreResult<()> {
                let claimed = sqlx::query(
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
                .bind(claim.expires_at_ms)
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if claimed == 0 {
                    return Err($crate::store::StoreError::IdempotencyKeyTaken);
                }
                Ok(())
            }

            /// Stores the answer for a key claimed earlier in `tx`.
            async fn store_idempotent_response(
                tx: &mut sqlx::Transaction<'static, $db>,
                claim: &$crate::store::IdempotencyClaim,
                response: &$crate::store::StoredResponse,
            ) -> $crate::store::StoreResult<()> {
                sqlx::query(
                    "UPDATE idempotency_keys SET status = $4, content_type = $5, body = $6
                     WHERE caller = $1 AND route = $2 AND key = $3",
                )
                .bind(&claim.caller)
                .bind(&claim.route)
                .bind(&claim.key)
                .bind(i32::from(response.status))
                .bind(&response.content_type)
                .bind(&response.body)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            /// Claims the key (if any) at the start of a write.
            async fn begin_once<R>(
                tx: &mut sqlx::Transaction<'static, $db>,
                once: &Option<$crate::store::Once<'_, R>>,
            ) -> $crate::store::StoreResult<()> {
                match once {
                    Some(o) => Self::claim_idempotency_key(tx, o.claim).await,
                    None => Ok(()),
                }
            }

            /// Stores the answer `outcome` gets (if a key was claimed) just before the commit.
            async fn finish_once<R>(
                tx: &mut sqlx::Transaction<'static, $db>,
                once: &Option<$crate::store::Once<'_, R>>,
                outcome: &R,
            ) -> $crate::store::StoreResult<()> {
                match once {
                    Some(o) => {
                        Self::store_idempotent_response(tx, o.claim, &(o.respond)(outcome)).await
                    }
                    None => Ok(()),
                }
            }

            /// The live (unexpired) row for a key, if any.
            pub async fn idempotency_key(
                &self,
                caller: &str,
                route: &str,
                key: &str,
                now_ms: i64,
            ) -> $crate::store::StoreResult<Option<$crate::store::StoredKey>> {
                use sqlx::Row as _;
                let row = sqlx::query(
                    "SELECT request_hash, status, content_type, body FROM idempotency_keys
                     WHERE caller = $1 AND route = $2 AND key = $3 AND expires_at_ms > $4",
                )
                .bind(caller)
                .bind(route)
                .bind(key)
                .bind(now_ms)
                .fetch_optional(&self.pool)
                .await?;
                let Some(row) = row else { return Ok(None) };
                let status: Option<i32> = row.try_get("status")?;
                let content_type: Option<String> = row.try_get("content_type")?;
                let body: Option<Vec<u8>> = row.try_get("body")?;
                let response = match (status, content_type, body) {
                    (Some(status), Some(content_type), Some(body)) => {
                        Some($crate::store::StoredResponse {
                            status: u16::try_from(status)
                                .map_err(|e| sqlx::Error::Decode(e.into()))?,
                            content_type,
                            body,
                        })
                    }
                    _ => None,
                };
                Ok(Some($crate::store::StoredKey {
                    request_hash: row.try_get("request_hash")?,
                    response,
                }))
            }

            /// Deletes keys that expired at or before `now_ms`; returns how many.
            pub async fn prune_idempotency_keys(
                &self,
                now_ms: i64,
            ) -> $crate::store::StoreResult<u64> {
                Ok(
                    sqlx::query("DELETE FROM idempotency_keys WHERE expires_at_ms <= $1")
                        .bind(now_ms)
                        .execute(&self.pool)
                        .await?
                        .rows_affected(),
                )
            }
        }
    };
}
