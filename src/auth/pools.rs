//! Which pools an API key reaches: every pool (the default, and what keys made before pool
//! restrictions keep), or only those named when it was made. The scope says what a key may do;
//! this says to which pools.

use std::fmt;

/// Pool names are path segments, metric labels and Kubernetes-style names: lowercase letters,
/// digits, `-`, `_` and `.`, starting with a letter or digit, at most 63 characters. Being
/// free of commas is what lets a key's pools be stored as one comma-separated column.
pub fn is_pool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// What [`is_pool_name`] asks for, in words for a problem document.
pub const POOL_NAME_RULE: &str =
    "must be 1 to 63 lowercase letters, digits, `-`, `_` or `.`, starting with a letter or digit";

/// The pools one key reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolScope {
    /// `None`: every pool. `Some`: these, sorted and without repeats, never empty (an empty
    /// list would be a key that reaches nothing, which nobody asks for on purpose).
    only: Option<Vec<String>>,
}

impl PoolScope {
    /// Every pool, present and future.
    pub fn every() -> Self {
        Self { only: None }
    }

    /// Only `names`; no names means every pool (the API's "absent or empty"). Names are not
    /// checked here: see [`is_pool_name`].
    pub fn only(names: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort();
        names.dedup();
        Self {
            only: (!names.is_empty()).then_some(names),
        }
    }

    /// Whether the key reaches `pool`.
    pub fn allows(&self, pool: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == pool))
    }

    /// Whether the key reaches every pool.
    pub fn is_every(&self) -> bool {
        self.only.is_none()
    }

    /// The pools named, empty for every pool (as the API shows it).
    pub fn names(&self) -> &[String] {
        self.only.as_deref().unwrap_or_default()
    }

    /// The stored form: `gpu-a100,gpu-t4`, or empty for every pool.
    pub fn to_csv(&self) -> String {
        self.names().join(",")
    }

    /// Reads the stored form. A name that is not a pool name is an error, so that a
    /// hand-edited row cannot turn into a key that reaches every pool or none.
    pub fn from_csv(s: &str) -> Result<Self, String> {
        let names: Vec<String> = s
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = names.iter().find(|n| !is_pool_name(n)) {
            return Err(format!("`{bad}` is not a pool name"));
        }
        Ok(Self::only(names))
    }
}

impl fmt::Display for PoolScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_every() {
            f.write_str("*")
        } else {
            f.write_str(&self.to_csv())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restricted_scope_allows_its_pools_only_and_an_empty_list_means_every_pool() {
        let some = PoolScope::only(["gpu-t4".to_string(), "gpu-a100".to_string()]);
        assert!(some.allows("gpu-t4") && some.allows("gpu-a100"));
        assert!(!some.allows("gpu-h100") && !some.allows(""));
        assert!(!some.is_every());
        assert_eq!(some.names(), ["gpu-a100", "gpu-t4"]);
        let every = PoolScope::only(Vec::new());
        assert!(every.is_every() && every.allows("anything"));
        assert_eq!(every, PoolScope::every());
        assert!(every.names().is_empty());
    }

    #[test]
    fn the_stored_form_round_trips_and_refuses_what_is_not_a_pool_name() {
        let s = PoolScope::only(["b".to_string(), "a".to_string(), "b".to_string()]);
        assert_eq!(s.to_csv(), "a,b");
        assert_eq!(PoolScope::from_csv("a,b"), Ok(s));
        assert_eq!(PoolScope::from_csv(""), Ok(PoolScope::every()));
        assert!(PoolScope::from_csv("a,B").is_err());
        assert!(PoolScope::from_csv("a, b").is_err());
    }

    #[test]
    fn pool_names_follow_the_documented_rule() {
        assert!(is_pool_name("gpu-t4") && is_pool_name("0.a_b"));
        assert!(!is_pool_name("") && !is_pool_name("-a") && !is_pool_name("A"));
        assert!(!is_pool_name("a,b") && !is_pool_name(&"a".repeat(64)));
    }
}
