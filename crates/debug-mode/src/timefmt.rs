//! Minimal UTC formatting of Unix epoch milliseconds (no time-zone database needed).

/// Days since 1970-01-01 for a Unix-ms timestamp.
pub fn day_number(ms: u64) -> u64 {
    ms / 86_400_000
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso8601(ms: u64) -> String {
    let days = day_number(ms);
    let rem = ms % 86_400_000;
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    let h = rem / 3_600_000;
    let min = (rem / 60_000) % 60;
    let s = (rem / 1000) % 60;
    let milli = rem % 1000;
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

/// Howard Hinnant's civil-from-days algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_784_313_728_231), "2026-07-17T18:42:08.231Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
