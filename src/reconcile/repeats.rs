//! Warnings that would repeat every pass (a pool bound to a cloud with no credentials, a
//! region whose refresh keeps failing): logged the first time, then counted, with a reminder
//! carrying the count once an hour, and one line when the condition clears.
//!
//! Keyed by what the warning is about (a pool, a provider and region); a different message
//! for the same key is a new warning and is logged at once.

use std::collections::HashMap;
use std::sync::Mutex;

/// How long a repeating warning stays quiet before a reminder with its count.
pub const REMIND_AFTER_MS: i64 = 3_600_000;

/// What to do with one occurrence of a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occurrence {
    /// New (or changed): log it.
    First,
    /// Seen before and logged within the hour: count it, log nothing.
    Quiet,
    /// Seen `repeats` times since it was last logged, an hour or more ago: log a reminder.
    Remind { repeats: u64 },
}

#[derive(Debug)]
struct Entry {
    message: String,
    logged_at_ms: i64,
    /// Occurrences since it was last logged.
    unlogged: u64,
    /// Occurrences in all.
    total: u64,
}

/// The warnings currently repeating, by key.
#[derive(Debug, Default)]
pub struct Repeats {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Repeats {
    /// Notes one occurrence of `message` about `key` at `now_ms`.
    pub fn note(&self, key: &str, message: &str, now_ms: i64) -> Occurrence {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get_mut(key) {
            Some(e) if e.message == message => {
                e.total += 1;
                e.unlogged += 1;
                if now_ms - e.logged_at_ms >= REMIND_AFTER_MS {
                    let repeats = e.unlogged;
                    e.unlogged = 0;
                    e.logged_at_ms = now_ms;
                    Occurrence::Remind { repeats }
                } else {
                    Occurrence::Quiet
                }
            }
            _ => {
                entries.insert(
                    key.to_string(),
                    Entry {
                        message: message.to_string(),
                        logged_at_ms: now_ms,
                        unlogged: 0,
                        total: 1,
                    },
                );
                Occurrence::First
            }
        }
    }

    /// The condition about `key` is over: the number of times it occurred, if it was
    /// repeating.
    pub fn clear(&self, key: &str) -> Option<u64> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.remove(key).map(|e| e.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_logged_once_then_counted_and_reminded_hourly() {
        let r = Repeats::default();
        let msg = "no aws credentials";
        assert_eq!(r.note("pool a", msg, 0), Occurrence::First);
        // Every 15 s for just under an hour: quiet.
        for i in 1..240 {
            assert_eq!(r.note("pool a", msg, i * 15_000), Occurrence::Quiet, "{i}");
        }
        assert_eq!(
            r.note("pool a", msg, 240 * 15_000),
            Occurrence::Remind { repeats: 240 }
        );
        assert_eq!(r.note("pool a", msg, 241 * 15_000), Occurrence::Quiet);
        assert_eq!(r.clear("pool a"), Some(242));
        assert_eq!(r.clear("pool a"), None);
        assert_eq!(r.note("pool a", msg, 242 * 15_000), Occurrence::First);
    }

    #[test]
    fn another_message_or_key_is_a_new_warning() {
        let r = Repeats::default();
        assert_eq!(r.note("pool a", "no credentials", 0), Occurrence::First);
        assert_eq!(r.note("pool b", "no credentials", 1), Occurrence::First);
        assert_eq!(r.note("pool a", "throttled", 2), Occurrence::First);
        assert_eq!(r.note("pool a", "throttled", 3), Occurrence::Quiet);
    }
}
