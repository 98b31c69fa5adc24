//! Times at the edges: RFC 3339 text in the API and CLI, epoch milliseconds everywhere inside.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Parses an RFC 3339 timestamp (`2026-01-21T00:00:00Z`) into epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Result<i64, String> {
    let t = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| format!("must be an RFC 3339 timestamp such as 2026-01-21T00:00:00Z ({e})"))?;
    Ok((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Formats epoch milliseconds as RFC 3339 in UTC: the core's formatter, so decisions and the
/// API spell times alike.
pub use crate::core::timestamp::rfc3339 as format_ms;

/// How far ahead of this server's clock an observation time may be (other clocks drift).
pub const MAX_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// Refuses a time in the future: the newest observation is the current price, and history is
/// append-only, so one far-future observation would pin a price for good.
pub fn check_not_future(ms: i64, now_ms: i64) -> Result<i64, String> {
    if ms > now_ms + MAX_CLOCK_SKEW_MS {
        Err(format!(
            "must not be in the future (it is {}, this server's clock says {})",
            format_ms(ms),
            format_ms(now_ms)
        ))
    } else {
        Ok(ms)
    }
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
    fn future_times_beyond_the_skew_are_refused() {
        let now = 1_767_225_600_000;
        assert_eq!(
            check_not_future(now + MAX_CLOCK_SKEW_MS, now),
            Ok(now + MAX_CLOCK_SKEW_MS)
        );
        assert!(check_not_future(now + MAX_CLOCK_SKEW_MS + 1, now).is_err());
        assert_eq!(check_not_future(0, now), Ok(0));
    }

    #[test]
    fn rejects_dates_without_time_or_zone() {
        assert!(parse_rfc3339_ms("2026-01-21").is_err());
        assert!(parse_rfc3339_ms("2026-01-21T00:00:00").is_err());
    }
}
