//! The small words every report shares: durations, byte counts, lists, a clipped line, a
//! peer's address, and the stream settings under which retention deletes.

use crate::config::duration;
use crate::facts::{unmap, Socket};
use crate::rules::consumer::RetentionSetting;
use std::time::Duration;

/// The kubelet keeps a failed probe's output (up to 10 KiB) as the event `<Kind> probe
/// failed: <output>` (pkg/kubelet/prober), whose message is cut at 1,024 characters: the line
/// and its newline fit after the longest kind's words (`Readiness probe failed: `, 23).
pub const MAX_LINE: usize = 1000;

/// The smallest step `display` shows near `d`: a tenth below 10 s, else a second.
pub fn display_step(d: Duration) -> Duration {
    match d.as_secs() {
        0..=9 => Duration::from_millis(100),
        _ => Duration::from_secs(1),
    }
}

pub fn display(d: Duration) -> String {
    // Whole seconds read best in an event; below 10 s a tenth still says something.
    let below_step = d.as_nanos() % display_step(d).as_nanos();
    duration::display(d - Duration::from_nanos(below_step as u64))
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

/// The line, at most `MAX_LINE` characters: a longer one is cut after its last whole word
/// that fits, and says so with `…`. The verdict and the fault come first in every line, so
/// the cut drops the evidence after them.
pub fn clip(line: String) -> String {
    if line.chars().count() <= MAX_LINE {
        return line;
    }
    let fits: String = line.chars().take(MAX_LINE - 1).collect();
    let word_ends = fits.rfind(' ').filter(|&i| i > 0).unwrap_or(fits.len());
    let mut cut = fits[..word_ends]
        .trim_end_matches([' ', ',', ';', ':', '('])
        .to_string();
    cut.push('…');
    cut
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::StreamFacts;
    use crate::rules::consumer::deletes_unacked;
    use std::time::Duration;

    /// Every setting under which the server deletes unacknowledged messages
    /// (measured on 2.10.26), and the ones under which it does not.
    #[test]
    fn which_retention_settings_delete_unacknowledged_messages() {
        let with = |f: fn(&mut StreamFacts)| {
            let mut s = StreamFacts {
                retention: "limits".into(),
                discard: "old".into(),
                max_msgs: None,
                max_bytes: None,
                max_age: None,
                max_msgs_per_subject: None,
                discard_new_per_subject: false,
                first_seq: 1,
                last_seq: 200,
            };
            f(&mut s);
            deletes_unacked(&s).map(|d| (d.front_only, retention(&d.settings)))
        };
        type Row = (fn(&mut StreamFacts), Option<(bool, &'static str)>);
        let rows: [Row; 9] = [
            (|_| {}, None),
            (
                |s| s.max_msgs = Some(200),
                Some((true, "max_msgs 200, discard old")),
            ),
            (
                |s| s.max_bytes = Some(4096),
                Some((true, "max_bytes 4096, discard old")),
            ),
            (
                |s| {
                    s.max_msgs = Some(200);
                    s.discard = "new".into();
                },
                None,
            ),
            (
                |s| {
                    s.max_age = Some(Duration::from_secs(60));
                    s.discard = "new".into();
                },
                Some((true, "max_age 1m, discard new")),
            ),
            (
                |s| {
                    s.max_msgs_per_subject = Some(1);
                    s.discard = "new".into();
                },
                Some((false, "max_msgs_per_subject 1, discard new")),
            ),
            (
                |s| {
                    s.max_msgs_per_subject = Some(1);
                    s.discard = "new".into();
                    s.discard_new_per_subject = true;
                },
                None,
            ),
            (
                |s| {
                    s.retention = "workqueue".into();
                    s.max_msgs = Some(10);
                },
                Some((false, "workqueue, max_msgs 10, discard old")),
            ),
            (
                |s| {
                    s.retention = "interest".into();
                    s.max_age = Some(Duration::from_secs(90));
                },
                Some((false, "interest, max_age 1m30s, discard old")),
            ),
        ];
        for (i, (set, expected)) in rows.into_iter().enumerate() {
            assert_eq!(
                with(set),
                expected.map(|(f, s)| (f, s.to_string())),
                "row {i}"
            );
        }
    }
}
