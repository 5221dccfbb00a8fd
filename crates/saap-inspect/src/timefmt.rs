//! Times in and out: RFC 3339 text for people and JSON, nanoseconds for comparisons. Parses the
//! forms `--since`/`--until` accept (RFC 3339, or nanoseconds since the epoch as SAAP's
//! `created_at` has them).
//!
//! Must not read the clock: callers that need "now" pass it in.

use crate::error::{Result, clip, invalid};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// RFC 3339 in UTC with microseconds, always the same width (tables line up).
const FIXED: &[time::format_description::BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// `ns` since the epoch as RFC 3339 UTC with microseconds (the epoch for out-of-range values).
pub fn format_ns(ns: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns))
        .ok()
        .map(format_time)
        .unwrap_or_else(|| "1970-01-01T00:00:00.000000Z".to_owned())
}

/// A client timestamp as RFC 3339 UTC with microseconds.
pub fn format_time(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(FIXED)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000000Z".to_owned())
}

/// Nanoseconds since the epoch of a client timestamp (saturating).
pub fn nanos_of(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos()).unwrap_or(if t.unix_timestamp() < 0 {
        i64::MIN
    } else {
        i64::MAX
    })
}

/// Parses `--since`/`--until`: RFC 3339 (`2026-01-01T10:00:00Z`) or an integer number of
/// nanoseconds since the epoch.
pub fn parse_time(text: &str) -> Result<i64> {
    let t = text.trim();
    if let Ok(ns) = t.parse::<i64>() {
        return Ok(ns);
    }
    OffsetDateTime::parse(t, &Rfc3339)
        .map(nanos_of)
        .map_err(|e| {
            invalid(format!(
                "`{}` is not a time ({e}); give RFC 3339 like 2026-01-01T10:00:00Z, or nanoseconds since the epoch",
                clip(t)
            ))
        })
}

/// A nanosecond count as a client timestamp.
pub fn datetime_of(ns: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_and_bad_ones_say_what_to_give() {
        let ns = parse_time("2026-01-01T10:00:00Z").unwrap();
        assert_eq!(format_ns(ns), "2026-01-01T10:00:00.000000Z");
        assert_eq!(parse_time("1767261600000000000").unwrap(), ns);
        let e = parse_time("yesterday").unwrap_err().to_string();
        assert!(e.contains("RFC 3339") && e.starts_with("SAAP-I008"), "{e}");
    }
}
