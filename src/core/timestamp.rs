//! RFC 3339 text for epoch milliseconds, so decisions can carry readable times without the
//! core reading a clock.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Formats epoch milliseconds as RFC 3339 in UTC (`2026-12-02T10:00:00Z`).
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}
