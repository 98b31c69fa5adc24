//! Issuing keys: a new key's token and row, and the admin key a deployment gets on its first
//! start so that it is never open by default.

use std::io::Write;
use std::path::Path;

use super::pools::PoolScope;
use super::scope::Scopes;
use super::token::{Token, hash_secret};
use crate::store::{KeyRow, Store, StoreError};

/// A key just made: the token to hand to its user (shown once) and the row to store.
#[derive(Debug)]
pub struct IssuedKey {
    pub token: String,
    pub row: KeyRow,
}

/// Makes a key that reaches `pools`; nothing is stored yet. Cheap (a SHA-256), so it runs
/// inline.
pub fn mint(
    name: &str,
    scopes: Scopes,
    pools: PoolScope,
    now_ms: i64,
) -> Result<IssuedKey, getrandom::Error> {
    let token = Token::generate()?;
    let secret_hash = hash_secret(&token.secret);
    Ok(IssuedKey {
        token: token.to_bearer(),
        row: KeyRow {
            id: token.id,
            name: name.to_string(),
            scopes,
            pools,
            secret_hash,
            created_at_ms: now_ms,
            revoked_at_ms: None,
        },
    })
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("no random token: {0}")]
    Random(#[from] getrandom::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// On a database where no key was ever made, makes an admin key and writes its token to
/// `path`, readable by this user only. Returns whether it did. The token is written before
/// the key is committed, so a failed write leaves no key nobody can use.
pub async fn first_admin_key(
    store: &Store,
    path: &Path,
    now_ms: i64,
) -> Result<bool, BootstrapError> {
    let issued = mint(
        "first-start admin",
        Scopes::new([super::scope::Scope::Admin]),
        PoolScope::every(),
        now_ms,
    )?;
    let token = issued.token;
    Ok(store
        .create_first_key(&issued.row, || write_owner_only(path, &token))
        .await?)
}

/// Writes `token` and a newline to `path` with mode 0600, replacing what was there.
fn write_owner_only(path: &Path, token: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let mut file = options.open(path)?;
        // `mode` applies only when the file is created; an older file keeps its bits otherwise.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    }
    #[cfg(not(unix))]
    {
        let mut file = options.open(path)?;
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    }
}
