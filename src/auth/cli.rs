//! `trainscaler keys create|list|revoke`: key management from the command line, straight on the
//! database, for the first key of a cluster and for scripts.

use clap::Subcommand;

use super::issue::mint;
use super::pools::{POOL_NAME_RULE, PoolScope, is_pool_name};
use super::scope::{Scope, Scopes};
use crate::config::Config;
use crate::timefmt::{format_ms, now_ms};

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key and print its token (shown this once; only its hash is stored).
    Create {
        /// What the key may do: read, decide, ingest or admin (repeat the flag or separate with
        /// commas; admin implies the others).
        #[arg(long = "scope", required = true, value_delimiter = ',')]
        scopes: Vec<Scope>,
        /// A label for people: who or what uses the key.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Restrict the key to this pool (repeat for several); without it the key reaches
        /// every pool. The pools need not exist yet.
        #[arg(long = "pool", value_parser = pool_name)]
        pools: Vec<String>,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key by id (the 12 hex digits after `tsk_`); it stops working at once on this
    /// replica's database and within 10 s on running servers.
    Revoke { id: String },
}

pub async fn run(config: &Config, command: KeysCommand) -> anyhow::Result<()> {
    let store = crate::app::open_store(config).await?;
    match command {
        KeysCommand::Create {
            scopes,
            name,
            pools,
        } => {
            let issued = mint(&name, Scopes::new(scopes), PoolScope::only(pools), now_ms())?;
            store.create_key(&issued.row).await?;
            eprintln!(
                "created key {} ({}) with scopes {} for pools {}",
                issued.row.id,
                issued.row.name,
                issued.row.scopes.to_csv(),
                issued.row.pools
            );
            println!("{}", issued.token);
        }
        KeysCommand::List => {
            println!(
                "{:<14} {:<22} {:<24} {:<26} {:<26} name",
                "id", "scopes", "pools", "created", "revoked"
            );
            for k in store.keys().await? {
                println!(
                    "{:<14} {:<22} {:<24} {:<26} {:<26} {}",
                    k.id,
                    k.scopes.to_csv(),
                    k.pools.to_string(),
                    format_ms(k.created_at_ms),
                    k.revoked_at_ms.map(format_ms).unwrap_or_else(|| "-".into()),
                    k.name
                );
            }
        }
        KeysCommand::Revoke { id } => {
            if !store.revoke_key(&id, now_ms()).await? {
                anyhow::bail!("no live key with id `{id}`");
            }
            eprintln!("revoked key {id}");
        }
    }
    Ok(())
}

/// `--pool`: a pool name, or a message saying what one looks like.
fn pool_name(s: &str) -> Result<String, String> {
    if is_pool_name(s) {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` {POOL_NAME_RULE}"))
    }
}
