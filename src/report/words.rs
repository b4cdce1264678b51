//! The small words every report shares: durations, byte counts, lists, a clipped line, a
//! peer's address, and the stream settings under which retention deletes.

use crate::config::duration;
use crate::facts::{unmap, Socket};
use crate::rules::consumer::RetentionSetting;
use std::time::Duration;

/// The kubelet cuts event messages at 1024 characters and operators read them in
/// `kubectl describe`: the verdict line stays under 300.
pub const MAX_LINE: usize = 299;

/// The smallest step `display` shows near `d`: a tenth below 10 s, else a second.
pub fn display_step(d: Duration) -> Duration {
    match d.as_secs() {
        0..=9 => Duration::from_millis(100),
        _ => Duration::from_secs(1),
    }
}

pub fn display(d: Duration) -> String {
    // Whole seconds read best in an event; below 10 s a tenth still says something.
    let d = match d.as_secs() {
        0..=9 => Duration::from_millis(d.as_millis() as u64 / 100 * 100),
        _ => Duration::from_secs(d.as_secs()),
    };
    duration::display(d)
}

/// `512 bytes`, `1.2 KiB`, `3.4 MiB`.
pub fn bytes(n: u32) -> String {
    match n {
        0..=1023 => format!("{n} bytes"),
        1024..=1_048_575 => format!("{:.1} KiB", f64::from(n) / 1024.0),
        _ => format!("{:.1} MiB", f64::from(n) / 1_048_576.0),
    }
}

pub fn peer(s: &Socket) -> String {
    match unmap(s.remote.ip()) {
        std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", s.remote.port()),
        ip => format!("{ip}:{}", s.remote.port()),
    }
}

/// `a, b, c and 2 more`.
pub fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        return items.join(", ");
    }
    format!("{} and {} more", items[..max].join(", "), items.len() - max)
}

pub fn clip(mut line: String) -> String {
    if line.chars().count() > MAX_LINE {
        line = line.chars().take(MAX_LINE - 1).collect();
        line.push('…');
    }
    line
}

/// `max_msgs 200, discard old`: the settings as an operator would write them.
pub fn retention(settings: &[RetentionSetting]) -> String {
    let words: Vec<String> = settings
        .iter()
        .map(|s| match s {
            RetentionSetting::Retention(r) => r.clone(),
            RetentionSetting::MaxMsgs(n) => format!("max_msgs {n}"),
            RetentionSetting::MaxBytes(n) => format!("max_bytes {n}"),
            RetentionSetting::MaxAge(age) => format!("max_age {}", duration::display(*age)),
            RetentionSetting::MaxMsgsPerSubject(n) => format!("max_msgs_per_subject {n}"),
            RetentionSetting::Discard(d) => format!("discard {d}"),
        })
        .collect();
    words.join(", ")
}
