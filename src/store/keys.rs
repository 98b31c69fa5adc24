//! What the store keeps for API keys, and the SQL both backends run for them. The secret part
//! of a key never reaches the store: only its hash.

use super::StoreResult;
use super::backend::{Backend, Tx, decode_error, fetch_all_as};
use super::stmt::Stmt;
use crate::auth::pools::PoolScope;
use crate::auth::scope::Scopes;

/// A key as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub scopes: Scopes,
    /// The pools the key reaches (every pool unless it was made with a list).
    pub pools: PoolScope,
    /// `sha256:<hex>` of the secret, or an Argon2id PHC string for a key made before digests
    /// and not used since (see `auth::token`).
    pub secret_hash: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// A row of `api_keys`; scopes and pools are stored as comma-separated names.
#[derive(Debug, sqlx::FromRow)]
struct KeyRecord {
    id: String,
    name: String,
    scopes: String,
    pools: String,
    secret_hash: String,
    created_at_ms: i64,
    revoked_at_ms: Option<i64>,
}

impl TryFrom<KeyRecord> for KeyRow {
    type Error = sqlx::Error;

    fn try_from(r: KeyRecord) -> Result<Self, Self::Error> {
        Ok(Self {
            id: r.id,
            name: r.name,
            scopes: Scopes::from_csv(&r.scopes).map_err(decode_error)?,
            pools: PoolScope::from_csv(&r.pools).map_err(decode_error)?,
            secret_hash: r.secret_hash,
            created_at_ms: r.created_at_ms,
            revoked_at_ms: r.revoked_at_ms,
        })
    }
}

async fn insert_key<B: Backend>(tx: &mut Tx<B>, key: &KeyRow) -> StoreResult<()> {
    let insert = Stmt::new(
        "INSERT INTO api_keys (id, name, scopes, pools, secret_hash, created_at_ms, revoked_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&key.id)
    .bind(&key.name)
    .bind(key.scopes.to_csv())
    .bind(key.pools.to_csv())
    .bind(&key.secret_hash)
    .bind(key.created_at_ms)
    .bind(key.revoked_at_ms);
    B::execute(tx, insert).await?;
    Ok(())
}

pub(super) async fn create_key<B: Backend>(db: &B, key: &KeyRow) -> StoreResult<()> {
    let mut tx = db.begin_write().await?;
    insert_key::<B>(&mut tx, key).await?;
    tx.commit().await?;
    Ok(())
}

/// Stores `key` only if no key was ever stored, and runs `hand_over` (which writes the token
/// where its owner finds it) before committing: if that fails, the key is not kept either.
/// Replicas starting together make exactly one.
pub(super) async fn create_first_key<B: Backend>(
    db: &B,
    key: &KeyRow,
    hand_over: impl FnOnce() -> std::io::Result<()>,
) -> StoreResult<bool> {
    let mut tx = db.begin_write().await?;
    B::lock_keys(&mut tx).await?;
    let any = Stmt::new("SELECT id FROM api_keys LIMIT 1");
    if B::fetch_optional::<(String,)>(&mut tx, any)
        .await?
        .is_some()
    {
        return Ok(false);
    }
    insert_key::<B>(&mut tx, key).await?;
    hand_over().map_err(sqlx::Error::Io)?;
    tx.commit().await?;
    Ok(true)
}

const KEY_COLUMNS: &str = "id, name, scopes, pools, secret_hash, created_at_ms, revoked_at_ms";

/// The key with this id, unless revoked.
pub(super) async fn active_key<B: Backend>(db: &B, id: &str) -> StoreResult<Option<KeyRow>> {
    let find = Stmt::new(format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1 AND revoked_at_ms IS NULL"
    ))
    .bind(id);
    let row: Option<KeyRecord> = B::fetch_optional(&mut *db.conn().await?, find).await?;
    Ok(row.map(KeyRow::try_from).transpose()?)
}

/// Replaces a key's stored secret `old` with `new` (a legacy Argon2 hash with its digest);
/// `false` when the row no longer holds `old` (another replica rewrote it first, or the key
/// was revoked), which leaves it as it is.
pub(super) async fn rehash_key<B: Backend>(
    db: &B,
    id: &str,
    old: &str,
    new: &str,
) -> StoreResult<bool> {
    let mut tx = db.begin_write().await?;
    let rewrite = Stmt::new(
        "UPDATE api_keys SET secret_hash = $3
         WHERE id = $1 AND secret_hash = $2 AND revoked_at_ms IS NULL",
    )
    .bind(id)
    .bind(old)
    .bind(new);
    let done = B::execute(&mut tx, rewrite).await?;
    tx.commit().await?;
    Ok(done == 1)
}

/// Every key, revoked ones included, oldest first.
pub(super) async fn keys<B: Backend>(db: &B) -> StoreResult<Vec<KeyRow>> {
    let all = Stmt::new(format!(
        "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at_ms, id"
    ));
    fetch_all_as::<B, KeyRecord, _>(&mut *db.conn().await?, all).await
}

/// Revokes a key; `false` when there is no such key or it was already revoked. Other
/// replicas hear of it at commit.
pub(super) async fn revoke_key<B: Backend>(db: &B, id: &str, now_ms: i64) -> StoreResult<bool> {
    let mut tx = db.pool().begin().await?;
    let revoke =
        Stmt::new("UPDATE api_keys SET revoked_at_ms = $2 WHERE id = $1 AND revoked_at_ms IS NULL")
            .bind(id)
            .bind(now_ms);
    let done = B::execute(&mut tx, revoke).await?;
    if done == 1 {
        B::announce_revocation(&mut tx, id).await?;
    }
    tx.commit().await?;
    Ok(done == 1)
}
