//! Go's time texts as region labels carry them: a `time.ParseDuration` duration (`"24h"`,
//! `"1h30m"`, `"1.5s"`) and a `time.UnixDate` instant (`"Mon Jan  2 15:04:05 UTC 2006"`), in
//! UTC, which is how PD writes `start_at` on a server in UTC; another zone is refused.

/// Why a time text was refused: Go's own words (`time.ParseDuration`'s and `time.Parse`'s),
/// which PD passes on in its refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeTextError {
    #[error("time: invalid duration {0:?}")]
    InvalidDuration(String),
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("time: unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit { unit: String, text: String },
    #[error("parsing time {0:?} as \"Mon Jan _2 15:04:05 MST 2006\": cannot parse")]
    Date(String),
    /// The clock is outside what a date can be written as.
    #[error("time out of range")]
    OutOfRange,
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Go's `time.ParseDuration`, in whole milliseconds (negative durations are refused: a label
/// cannot expire before it starts).
pub fn parse_go_duration(text: &str) -> Result<i64, TimeTextError> {
    let invalid = || TimeTextError::InvalidDuration(text.to_string());
    if text == "0" {
        return Ok(0);
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() || rest.starts_with('-') {
        return Err(invalid());
    }
    let mut total_ns: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| TimeTextError::MissingUnit(text.to_string()))?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(TimeTextError::UnknownUnit {
                    unit: unit.to_string(),
                    text: text.to_string(),
                })
            }
        };
        total_ns += value * scale;
        rest = tail;
    }
    if total_ns > i64::MAX as f64 {
        return Err(invalid());
    }
    Ok((total_ns / 1e6) as i64)
}

/// `secs` as Go's `time.UnixDate` in UTC.
pub fn format_unix_date(secs: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(secs).ok()?;
    let day = DAYS[t.weekday().number_days_from_monday() as usize];
    let month = MONTHS[u8::from(t.month()) as usize - 1];
    Some(format!(
        "{day} {month} {:>2} {:02}:{:02}:{:02} UTC {}",
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.year()
    ))
}

/// Go's `time.Parse(time.UnixDate, text)` for a time in UTC, as Unix seconds.
pub fn parse_unix_date(text: &str) -> Result<i64, TimeTextError> {
    let refused = || TimeTextError::Date(text.to_string());
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [weekday, month, day, clock, zone, year] = fields.as_slice() else {
        return Err(refused());
    };
    if !DAYS.contains(weekday) || *zone != "UTC" {
        return Err(refused());
    }
    let month = MONTHS
        .iter()
        .position(|m| m == month)
        .and_then(|i| time::Month::try_from(i as u8 + 1).ok())
        .ok_or_else(refused)?;
    let day: u8 = day.parse().map_err(|_| refused())?;
    let year: i32 = year.parse().map_err(|_| refused())?;
    let hms: Vec<u8> = clock
        .split(':')
        .map(|p| p.parse::<u8>())
        .collect::<Result<_, _>>()
        .map_err(|_| refused())?;
    let [h, m, s] = hms.as_slice() else {
        return Err(refused());
    };
    let date = time::Date::from_calendar_date(year, month, day).map_err(|_| refused())?;
    let clock = time::Time::from_hms(*h, *m, *s).map_err(|_| refused())?;
    Ok(time::PrimitiveDateTime::new(date, clock)
        .assume_utc()
        .unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("24h"), Ok(86_400_000));
        assert_eq!(parse_go_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_go_duration("1.5s"), Ok(1500));
        assert_eq!(parse_go_duration("300ms"), Ok(300));
        for bad in ["", "h", "10", "1x", "-1s", "1..5s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_are_in_gos_words() {
        let words = |r: Result<i64, TimeTextError>| r.unwrap_err().to_string();
        assert_eq!(
            words(parse_go_duration("1x")),
            r#"time: unknown unit "x" in duration "1x""#
        );
        assert_eq!(
            words(parse_go_duration("10")),
            r#"time: missing unit in duration "10""#
        );
        assert_eq!(
            words(parse_go_duration("1..5s")),
            r#"time: invalid duration "1..5s""#
        );
        assert_eq!(
            words(parse_unix_date("yesterday")),
            r#"parsing time "yesterday" as "Mon Jan _2 15:04:05 MST 2006": cannot parse"#
        );
    }

    #[test]
    fn unix_dates_read_and_write_as_go_does() {
        assert_eq!(
            format_unix_date(1_136_214_245).as_deref(),
            Some("Mon Jan  2 15:04:05 UTC 2006")
        );
        assert_eq!(
            parse_unix_date("Mon Jan  2 15:04:05 UTC 2006"),
            Ok(1_136_214_245)
        );
        assert!(parse_unix_date("Mon Jan  2 15:04:05 CST 2006").is_err());
        assert!(parse_unix_date("yesterday").is_err());
    }

    proptest! {
        #[test]
        fn unix_dates_round_trip(secs in 0i64..4_000_000_000) {
            let text = format_unix_date(secs).unwrap();
            prop_assert_eq!(parse_unix_date(&text), Ok(secs));
        }
    }
}
