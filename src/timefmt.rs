//! Times at the edges: RFC 3339 text in the API and CLI, epoch milliseconds everywhere inside.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Parses an RFC 3339 timestamp (`2026-01-21T00:00:00Z`) into epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Result<i64, String> {
    let t = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| format!("must be an RFC 3339 timestamp such as 2026-01-21T00:00:00Z ({e})"))?;
    Ok((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Formats epoch milliseconds as RFC 3339 in UTC.
pub fn format_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// The wall clock, for the layers around the core.
pub fn now_ms() -> i64 {
    (OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_milliseconds() {
        let ms = parse_rfc3339_ms("2026-01-21T00:00:00Z").unwrap();
        assert_eq!(ms, 1_768_953_600_000);
        assert_eq!(format_ms(ms), "2026-01-21T00:00:00Z");
        assert_eq!(parse_rfc3339_ms("2026-01-21T01:00:00+01:00").unwrap(), ms);
    }

    #[test]
    fn rejects_dates_without_time_or_zone() {
        assert!(parse_rfc3339_ms("2026-01-21").is_err());
        assert!(parse_rfc3339_ms("2026-01-21T00:00:00").is_err());
    }
}
