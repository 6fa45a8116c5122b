//! Parses `10s`, `500ms`, `2m`, `1h` (and a bare number of seconds) for `--duration`.

use std::time::Duration;

/// Why a duration was refused; each names the text it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("'{0}' is not a duration like 10s or 500ms")]
    NotANumber(String),
    #[error("unknown unit '{unit}' in '{text}' (use ms, s, m or h)")]
    UnknownUnit { unit: String, text: String },
    #[error("duration '{0}' must be positive")]
    NotPositive(String),
}

pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::NotANumber(text.to_string()))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_string(),
                text: text.to_string(),
            })
        }
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(DurationError::NotPositive(text.to_string()));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse("0s"), Err(DurationError::NotPositive("0s".into())));
        assert_eq!(parse("ten"), Err(DurationError::NotANumber("ten".into())));
        assert!(matches!(
            parse("5d"),
            Err(DurationError::UnknownUnit { .. })
        ));
    }
}
