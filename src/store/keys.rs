//! What the store keeps for API keys, and the SQL both backends run for them. The secret part
//! of a key never reaches the store: only its hash.

use crate::auth::scope::Scopes;

/// A key as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub scopes: Scopes,
    /// Argon2id PHC string.
    pub secret_hash: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

macro_rules! key_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let scopes: String = row.try_get("scopes")?;
        $crate::store::KeyRow {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            scopes: $crate::auth::scope::Scopes::from_csv(&scopes)
                .map_err(|e| sqlx::Error::Decode(e.into()))?,
            secret_hash: row.try_get("secret_hash")?,
            created_at_ms: row.try_get("created_at_ms")?,
            revoked_at_ms: row.try_get("revoked_at_ms")?,
        }
    }};
}

/// Implements the key methods for `$store` (which defines `begin_write` and `lock_keys`).
macro_rules! key_sql {
    ($store:ty, $db:ty) => {
        impl $store {
            async fn insert_key(
                tx: &mut sqlx::Transaction<'static, $db>,
                key: &$crate::store::KeyRow,
            ) -> $crate::store::StoreResult<()> {
                sqlx::query(
                    "INSERT INTO api_keys (id, name, scopes, secret_hash, created_at_ms, revoked_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&key.id)
                .bind(&key.name)
                .bind(key.scopes.to_csv())
                .bind(&key.secret_hash)
                .bind(key.created_at_ms)
                .bind(key.revoked_at_ms)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            pub async fn create_key(
                &self,
                key: &$crate::store::KeyRow,
            ) -> $crate::store::StoreResult<()> {
                let mut tx = self.begin_write().await?;
                Self::insert_key(&mut tx, key).await?;
                tx.commit().await?;
                Ok(())
            }

            /// Stores `key` only if no key was ever stored, and runs `hand_over` (which writes
            /// the token where its owner finds it) before committing: if that fails, the key
            /// is not kept either. Replicas starting together make exactly one.
            pub async fn create_first_key(
                &self,
                key: &$crate::store::KeyRow,
                hand_over: impl FnOnce() -> std::io::Result<()>,
            ) -> $crate::store::StoreResult<bool> {
                let mut tx = self.begin_write().await?;
                Self::lock_keys(&mut tx).await?;
                let any: Option<String> = sqlx::query_scalar("SELECT id FROM api_keys LIMIT 1")
                    .fetch_optional(&mut *tx)
                    .await?;
                if any.is_some() {
                    return Ok(false);
                }
                Self::insert_key(&mut tx, key).await?;
                hand_over().map_err(sqlx::Error::Io)?;
                tx.commit().await?;
                Ok(true)
            }

            /// The key with this id, unless revoked.
            pub async fn active_key(
                &self,
                id: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::KeyRow>> {
                let row = sqlx::query(
                    "SELECT id, name, scopes, secret_hash, created_at_ms, revoked_at_ms
                     FROM api_keys WHERE id = $1 AND revoked_at_ms IS NULL",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(match row {
                    Some(row) => Some(key_from_row!(row)),
                    None => None,
                })
            }

            /// Every key, revoked ones included, oldest first.
            pub async fn keys(&self) -> $crate::store::StoreResult<Vec<$crate::store::KeyRow>> {
                let rows = sqlx::query(
                    "SELECT id, name, scopes, secret_hash, created_at_ms, revoked_at_ms
                     FROM api_keys ORDER BY created_at_ms, id",
                )
                .fetch_all(&self.pool)
                .await?;
                let mut keys = Vec::with_capacity(rows.len());
                for row in rows {
                    keys.push(key_from_row!(row));
                }
                Ok(keys)
            }

            /// Revokes a key; `false` when there is no such key or it was already revoked.
            pub async fn revoke_key(
                &self,
                id: &str,
                now_ms: i64,
            ) -> $crate::store::StoreResult<bool> {
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(
                    "UPDATE api_keys SET revoked_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL",
                )
                .bind(id)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if done == 1 {
                    Self::announce_revocation(&mut tx, id).await?;
                }
                tx.commit().await?;
                Ok(done == 1)
            }
        }
    };
}
