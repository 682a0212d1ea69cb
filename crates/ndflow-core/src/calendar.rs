//! Civil dates from day counts and back, for the places that print or read times without a
//! date library (Overlay's time stamps, attribute files' wallTime, the command-line clients,
//! a detector's RFC 3339 series date).

/// (year, month 1..=12, day 1..=31) of a day count from 1970-01-01, proleptic Gregorian
/// (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (year, month, day, hour, minute, second) in UTC of seconds since 1970-01-01T00:00:00Z.
pub fn utc_from_secs(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u32;
    (y, m, d, s / 3600, s / 60 % 60, s % 60)
}

/// The day count from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Nanoseconds since 1970-01-01T00:00:00Z of an RFC 3339 date-time
/// (`2023-02-10T13:42:01.123456+01:00`, `…Z`); `None` when it is not one.
pub fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ns: i64 = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = s.get(start..i.min(start + 9))?;
        if digits.is_empty() {
            return None;
        }
        frac_ns = digits.parse::<i64>().ok()? * 10i64.pow(9 - digits.len() as u32);
    }
    let offset_s = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let off = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if c == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(frac_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_784), (2026, 11, 27));
        for days in [-800_000, -1, 0, 11_016, 20_784, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_nanos("2026-11-27T01:00:00.5+01:00"),
            Some(20_784 * 86_400 * 1_000_000_000 + 500_000_000)
        );
        assert_eq!(
            parse_rfc3339_nanos("2023-02-10T13:42:01.123456789123Z").map(|n| n % 1_000_000_000),
            Some(123_456_789)
        );
        for bad in [
            "",
            "2023-02-10",
            "2023-13-10T00:00:00Z",
            "2023-02-10T00:00:00",
            "2023-02-10T00:00:00.Z",
            "2023-02-10T00:00:00+0100",
        ] {
            assert_eq!(parse_rfc3339_nanos(bad), None, "{bad}");
        }
    }
}
