//! `epicsTimeToStrftime` for a frame's EPICS time stamp: the strftime conversions a time
//! stamp needs, plus EPICS' fractional seconds `%0<n>f` (n = 1..9 digits, truncated) and
//! `%f` (6 digits). Deviation: the time is UTC (ADCore formats local time).

use ndflow_core::EpicsTimeStamp;

/// Seconds from 1970-01-01 to the EPICS epoch, 1990-01-01 (UTC).
const EPICS_EPOCH_UNIX: i64 = 631_152_000;
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

fn day_of_year(y: i64, m: i64, d: i64) -> i64 {
    const BEFORE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    BEFORE[(m - 1) as usize] + d + i64::from(leap && m > 2)
}

/// Formats `ts` with `fmt`; unknown conversions are copied as written.
pub fn format(fmt: &str, ts: EpicsTimeStamp) -> String {
    let secs = EPICS_EPOCH_UNIX + i64::from(ts.sec);
    let (days, tod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = ndflow_core::calendar::civil_from_days(days);
    let (m, d) = (i64::from(m), i64::from(d));
    let (hh, mm, ss) = (tod / 3600, tod / 60 % 60, tod % 60);
    let wday = (days + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let month = MONTHS[(m - 1) as usize];
    let frac = |n: usize| {
        let s = format!("{:09}", ts.nsec.min(999_999_999));
        s[..n].to_string()
    };
    let mut out = String::new();
    let mut it = fmt.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(k) = it.next() else {
            out.push('%');
            break;
        };
        let piece = match k {
            'Y' => format!("{y}"),
            'y' => format!("{:02}", y.rem_euclid(100)),
            'm' => format!("{m:02}"),
            'd' => format!("{d:02}"),
            'e' => format!("{d:2}"),
            'H' => format!("{hh:02}"),
            'I' => format!("{:02}", (hh + 11) % 12 + 1),
            'p' => (if hh < 12 { "AM" } else { "PM" }).to_string(),
            'M' => format!("{mm:02}"),
            'S' => format!("{ss:02}"),
            'j' => format!("{:03}", day_of_year(y, m, d)),
            'b' | 'h' => month[..3].to_string(),
            'B' => month.to_string(),
            'a' => DAYS[wday][..3].to_string(),
            'A' => DAYS[wday].to_string(),
            'F' => format!("{y}-{m:02}-{d:02}"),
            'T' => format!("{hh:02}:{mm:02}:{ss:02}"),
            's' => format!("{secs}"),
            'f' => frac(6),
            '%' => "%".to_string(),
            '0' => match it.peek().and_then(|c| c.to_digit(10)) {
                Some(n @ 1..=9) => {
                    it.next();
                    if it.peek() == Some(&'f') {
                        it.next();
                        frac(n as usize)
                    } else {
                        format!("%0{n}")
                    }
                }
                _ => "%0".to_string(),
            },
            other => format!("%{other}"),
        };
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // 2024-02-29 13:45:07.123456789 UTC.
        let unix = 1_709_214_307i64;
        let ts = EpicsTimeStamp {
            sec: (unix - EPICS_EPOCH_UNIX) as u32,
            nsec: 123_456_789,
        };
        assert_eq!(
            format("%Y-%m-%d %H:%M:%S.%03f", ts),
            "2024-02-29 13:45:07.123"
        );
        assert_eq!(format("%j %a %b %f %%", ts), "060 Thu Feb 123456 %");
        let epoch = EpicsTimeStamp { sec: 0, nsec: 0 };
        assert_eq!(format("%F %T %A", epoch), "1990-01-01 00:00:00 Monday");
    }
}
