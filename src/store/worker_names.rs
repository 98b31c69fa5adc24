//! The names a pool's workers go by: their ids and their aliases (a host name, a private DNS
//! name or IP, as metrics exporters and clouds call them). [`WorkerNames::match_worker`] is
//! the one place a name in a sample is matched to a worker; the SQL that keeps aliases is
//! here too, written once for both backends.

use std::collections::{BTreeMap, BTreeSet};

use super::StoreResult;
use super::backend::{Backend, Conn};
use super::stmt::Stmt;

/// Every name of a pool's workers (live or stopped), read once per pool and batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct WorkerNames {
    ids: BTreeSet<String>,
    /// Alias -> worker id.
    aliases: BTreeMap<String, String>,
}

impl WorkerNames {
    #[cfg(test)]
    pub fn new(
        ids: impl IntoIterator<Item = String>,
        aliases: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        Self {
            ids: ids.into_iter().collect(),
            aliases: aliases.into_iter().collect(),
        }
    }

    /// Reads the names of the workers of each of `pools` (distinct, at least one), in two
    /// statements however many pools a batch names.
    pub async fn load_many<B: Backend>(
        conn: &mut Conn<B>,
        pools: &[&str],
    ) -> StoreResult<BTreeMap<String, Self>> {
        let mut ids = Stmt::new("SELECT pool, id FROM workers WHERE pool IN ");
        ids.push_list(pools.iter().copied());
        let ids: Vec<(String, String)> = B::fetch_all(conn, ids).await?;
        let mut aliases =
            Stmt::new("SELECT pool, alias, worker FROM worker_aliases WHERE pool IN ");
        aliases.push_list(pools.iter().copied());
        let aliases: Vec<(String, String, String)> = B::fetch_all(conn, aliases).await?;
        let mut by_pool: BTreeMap<String, Self> = BTreeMap::new();
        for (pool, id) in ids {
            by_pool.entry(pool).or_default().ids.insert(id);
        }
        for (pool, alias, worker) in aliases {
            by_pool
                .entry(pool)
                .or_default()
                .aliases
                .insert(alias, worker);
        }
        Ok(by_pool)
    }

    /// The id of the worker `name` names: a worker id as it is, else the worker with that
    /// alias; `None` when no worker of the pool goes by `name`. An id wins over an alias, so
    /// an alias can never take a worker's series away from it.
    pub fn match_worker<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        if self.ids.contains(name) {
            return Some(name);
        }
        self.aliases.get(name).map(String::as_str)
    }
}

/// Makes `aliases` the aliases of worker `id` of `pool`. An alias another worker of the pool
/// had moves to this one: clouds reuse private IPs and the names derived from them, and the
/// worker registered (or seen) last is the one using it now.
pub(super) async fn replace_aliases<B: Backend>(
    conn: &mut Conn<B>,
    pool: &str,
    id: &str,
    aliases: &[String],
) -> StoreResult<()> {
    let clear = Stmt::new("DELETE FROM worker_aliases WHERE pool = $1 AND worker = $2")
        .bind(pool)
        .bind(id);
    B::execute(conn, clear).await?;
    for alias in aliases {
        let insert = Stmt::new(
            "INSERT INTO worker_aliases (pool, worker, alias) VALUES ($1, $2, $3)
             ON CONFLICT (pool, alias) DO UPDATE SET worker = excluded.worker",
        )
        .bind(pool)
        .bind(id)
        .bind(alias);
        B::execute(conn, insert).await?;
    }
    Ok(())
}

/// The aliases of `pool`'s workers, as (worker id, alias), sorted by both.
pub(super) async fn aliases<B: Backend>(
    conn: &mut Conn<B>,
    pool: &str,
) -> StoreResult<Vec<(String, String)>> {
    let stmt = Stmt::new(
        "SELECT worker, alias FROM worker_aliases WHERE pool = $1 ORDER BY worker, alias",
    )
    .bind(pool);
    B::fetch_all(conn, stmt).await
}

/// Every pool's live workers and their aliases, as (pool, id or alias), in one statement: what
/// ingestion checks a batch's worker names against.
pub(super) async fn live_worker_names<B: Backend>(db: &B) -> StoreResult<Vec<(String, String)>> {
    let stmt = Stmt::new(
        "SELECT pool, id FROM workers WHERE stopped_at_ms IS NULL
         UNION ALL
         SELECT a.pool, a.alias FROM worker_aliases a
           JOIN workers w ON w.pool = a.pool AND w.id = a.worker
          WHERE w.stopped_at_ms IS NULL",
    );
    B::fetch_all(&mut *db.conn().await?, stmt).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_themselves_aliases_their_worker_and_ids_win() {
        let names = WorkerNames::new(
            ["i-1".to_string(), "i-2".to_string()],
            [
                ("ip-10-0-0-1.ec2.internal".to_string(), "i-1".to_string()),
                // An alias spelled like another worker's id does not take its series.
                ("i-2".to_string(), "i-1".to_string()),
            ],
        );
        assert_eq!(names.match_worker("i-1"), Some("i-1"));
        assert_eq!(names.match_worker("i-2"), Some("i-2"));
        assert_eq!(names.match_worker("ip-10-0-0-1.ec2.internal"), Some("i-1"));
        assert_eq!(names.match_worker("ip-10-0-0-9.ec2.internal"), None);
    }
}
