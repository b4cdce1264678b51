//! Humane durations for flags: `800ms`, `60s`, `2m`, `1h`, `1m30s`, `1.5s`.

use std::time::Duration;

/// Parses a duration with a mandatory unit. A bare number is refused: `--timeout 1`
/// could mean a second (the kubelet's unit) or a millisecond, and guessing wrong either
/// kills healthy pods or never times out. Zero is zero in every unit: a bare `0` is taken,
/// as Go, the nats CLI and Kubernetes take it.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        // No digits at all (`ms`, `-1s`) are no number either.
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("'{text}' is not a duration (try 800ms, 60s, 2m)"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "'{text}' needs a unit: ms, s, m or h (e.g. {number}s)"
                ))
            }
            unit => {
                return Err(format!(
                    "'{text}': unknown unit '{unit}' (use ms, s, m or h)"
                ))
            }
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 1e9 {
        return Err(format!("'{text}' is too long"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration the way `parse` reads it, for messages: `800ms`, `30s`, `2m`, `1m30s`.
pub fn display(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms % 1000 != 0 {
        return format!("{:.1}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_humane_forms() {
        let cases = [
            ("800ms", 800),
            ("60s", 60_000),
            ("2m", 120_000),
            ("1h", 3_600_000),
            ("1m30s", 90_000),
            ("1.5s", 1_500),
            (" 5s ", 5_000),
            ("0ms", 0),
            ("0", 0),
        ];
        for (text, ms) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(ms)), "{text}");
        }
    }

    #[test]
    fn refuses_ambiguous_or_broken_forms() {
        for text in [
            "", "1", "60", "00", "0.0", "s", "5 s", "5sec", "-1s", "1..2s", "ms5", "1e3s",
        ] {
            assert!(parse(text).is_err(), "{text:?} should be refused");
        }
        assert!(parse("60").unwrap_err().contains("needs a unit"));
    }

    #[test]
    fn display_round_trips() {
        for text in ["800ms", "30s", "2m", "1m30s", "1h", "1h5m", "1.5s"] {
            assert_eq!(display(parse(text).unwrap()), text);
        }
    }
}
