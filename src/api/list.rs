//! Pages of small lists that are read whole from the store (pools, workers, keys, benchmark
//! summaries, GPUs, providers), cut by a keyset cursor so they answer like the lists the
//! database pages itself: `{"items": [...], "next": cursor|null}`.
//!
//! The cursor holds the sort key of the page's last item, not a position, so an item added
//! or removed between two requests neither repeats nor skips another.

use serde::Deserialize;
use utoipa::IntoParams;

use super::cursor;
use super::error::ApiError;
use super::extract::parse_limit;

/// The query of a list with no filters: a page size and the previous page's `next`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size, 1 to 500 (default 100); not empty.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// The `next` value of the previous page.
    pub cursor: Option<String>,
}

/// Default page size of these lists.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest page size of these lists.
pub const MAX_LIMIT: usize = 500;

/// One page of `items`: sorted by `key` (unique per item), those after the `cursor`, at most
/// `limit` of them (`limit` and `cursor` are the raw query values), and the cursor of the
/// next page when more follow.
pub fn page<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> String,
    limit: Option<&str>,
    after: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ApiError> {
    let limit = parse_limit(limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = after.map(cursor::decode_key).transpose()?;
    items.sort_by_cached_key(|item| key(item));
    let mut rest: Vec<T> = match &after {
        Some(a) => items.into_iter().filter(|i| key(i) > *a).collect(),
        None => items,
    };
    let more = rest.len() > limit;
    rest.truncate(limit);
    let next = if more {
        rest.last().map(|i| cursor::encode_key(&key(i)))
    } else {
        None
    };
    Ok((rest, next))
}

/// A sort key for items ordered by a time and then a name: zero-padded so that text order is
/// time order.
pub fn time_then(ms: i64, name: &str) -> String {
    format!("{:020}\u{1}{name}", ms.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(page: &[&str]) -> Vec<String> {
        page.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pages_follow_each_other_without_repeats_or_gaps() {
        let all = vec!["d", "b", "a", "c", "e"];
        let key = |s: &&str| s.to_string();
        let (first, next) = page(all.clone(), key, Some("2"), None).unwrap();
        assert_eq!(first, vec!["a", "b"]);
        let (second, next) = page(all.clone(), key, Some("2"), next.as_deref()).unwrap();
        assert_eq!(second, vec!["c", "d"]);
        let (third, next) = page(all, key, Some("2"), next.as_deref()).unwrap();
        assert_eq!(third, vec!["e"]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_full_last_page_has_no_next() {
        let (items, next) = page(vec!["a", "b"], |s| s.to_string(), Some("2"), None).unwrap();
        assert_eq!(items, vec!["a", "b"]);
        assert_eq!(next, None);
    }

    #[test]
    fn an_item_removed_between_pages_moves_nothing_else() {
        let key = |s: &&str| s.to_string();
        let (_, next) = page(vec!["a", "b", "c", "d"], key, Some("2"), None).unwrap();
        // "b", the last item of the first page, is deleted before the second request.
        let (second, _) = page(vec!["a", "c", "d"], key, Some("2"), next.as_deref()).unwrap();
        assert_eq!(names(&second), names(&["c", "d"]));
    }

    #[test]
    fn time_keys_sort_by_time_before_name() {
        assert!(time_then(9, "z") < time_then(10, "a"));
        assert!(time_then(10, "a") < time_then(10, "b"));
    }

    #[test]
    fn bad_limits_and_forged_cursors_are_refused() {
        let key = |s: &&str| s.to_string();
        assert!(page(vec!["a"], key, Some("0"), None).is_err());
        assert!(page(vec!["a"], key, Some("501"), None).is_err());
        assert!(page(vec!["a"], key, None, Some("not base64!")).is_err());
    }
}
