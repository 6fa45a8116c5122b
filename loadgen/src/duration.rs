//! Parses `10s`, `500ms`, `2m`, `1h` (and a bare number of seconds) for `--duration`.

use std::time::Duration;

pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 10s or 500ms"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{text}' (use ms, s, m or h)"
            ))
        }
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("duration '{text}' must be positive"));
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
        assert!(parse("0s").is_err());
        assert!(parse("ten").is_err());
        assert!(parse("5d").is_err());
    }
}
