//! The words for what a run took from the runs before it: whether the consumers
//! were asked or skipped between looks, and how the pod's connection was found at the server.

use super::words::display;
use crate::facts::{Due, Sampling};
use crate::rules::remembered::{Found, Rematch, Trust};

/// The consumers' look in words, for `-v` and `diagnose`: asked and why, skipped, or not
/// asked for want of a connection (None).
pub fn sampling_phrase(s: Option<Sampling>) -> String {
    match s {
        None => "not asked: the client holds no connection to judge them by".into(),
        Some(Sampling::Skip { asked_ago }) => format!(
            "not asked this run: calm when asked {} ago, on the same connections (--sample-every)",
            display(asked_ago)
        ),
        Some(Sampling::Ask(due)) => format!("asked: {}", due_phrase(due)),
    }
}

fn due_phrase(d: Due) -> &'static str {
    match d {
        Due::EveryRun => "every run (--sample-every 0)",
        Due::FirstLook => "no earlier look remembered",
        Due::NotCalm => "the last look was not calm",
        Due::Old => "the last look is --sample-every old",
        Due::NewConnection => "a connection the last look did not see",
        Due::WindowEnds => "waiting for the next run would put the next look past the window",
    }
}

/// `asked` or `skipped`, for the JSON.
pub fn sampling_word(s: Sampling) -> &'static str {
    match s {
        Sampling::Skip { .. } => "skipped",
        Sampling::Ask(_) => "asked",
    }
}

/// How the pod's connection was found at the server, for `-v` and `diagnose`.
pub fn found_phrase(f: Found) -> String {
    match f {
        Found::Trusted { held_ago, trust } => format!(
            "trusted: seen holding it {} ago, on the same socket since (trusted for {}: {})",
            display(held_ago),
            display(trust.length),
            trust_reason(trust)
        ),
        Found::LookedUp { cid } => format!("asked for this pod's connection alone (cid {cid})"),
        Found::Matched(why) => format!("matched by address ({})", rematch_phrase(why)),
        Found::Waited => "not asked: the last asks went unanswered, and the next is not due".into(),
        Found::NothingDelivered => {
            "not asked: the consumer delivered nothing since this pod's connections were last read"
                .into()
        }
        Found::WithinWindow => {
            "not asked: this pod's connections last published less than the window ago".into()
        }
    }
}

/// For the JSON: `trusted` (seen holding it on the same socket within --subscription-every),
/// `looked_up` (by cid) or `matched` (by address); not asked: `waited`, `nothing_delivered`
/// or `within_window`.
pub fn found_word(f: Found) -> &'static str {
    match f {
        Found::Trusted { .. } => "trusted",
        Found::LookedUp { .. } => "looked_up",
        Found::Matched(_) => "matched",
        Found::Waited => "waited",
        Found::NothingDelivered => "nothing_delivered",
        Found::WithinWindow => "within_window",
    }
}

fn trust_reason(t: Trust) -> String {
    match (t.stretched_for, t.at_look) {
        (Some(n), _) => format!(
            "--subscription-every auto, {n} connections in the account make each lookup dearer"
        ),
        (None, true) => "--subscription-every auto: asked with each look at the consumers, the lookup being cheap for the server".into(),
        (None, false) => "--subscription-every".into(),
    }
}

fn rematch_phrase(r: Rematch) -> String {
    match r {
        Rematch::FirstTime => "no connection remembered".into(),
        Rematch::SocketChanged => "the remembered socket is gone".into(),
        Rematch::ServerRestarted => "the server restarted: its cids start again".into(),
        Rematch::Closed => "the server has no connection with the remembered cid".into(),
        Rematch::AnotherConnection(addr) => {
            format!("the remembered cid is now another connection's, from {addr}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_path_is_said() {
        assert_eq!(
            found_phrase(Found::Trusted {
                held_ago: Duration::from_secs(70),
                trust: Trust {
                    length: Duration::from_secs(300),
                    stretched_for: None,
                    at_look: false,
                }
            }),
            "trusted: seen holding it 1m10s ago, on the same socket since (trusted for 5m: --subscription-every)"
        );
        assert_eq!(
            found_phrase(Found::Trusted {
                held_ago: Duration::from_secs(70),
                trust: Trust {
                    length: Duration::from_secs(1200),
                    stretched_for: Some(10_000),
                    at_look: false,
                }
            }),
            "trusted: seen holding it 1m10s ago, on the same socket since (trusted for 20m: --subscription-every auto, 10000 connections in the account make each lookup dearer)"
        );
        assert_eq!(
            found_phrase(Found::LookedUp { cid: 12 }),
            "asked for this pod's connection alone (cid 12)"
        );
        assert_eq!(
            found_phrase(Found::Matched(Rematch::AnotherConnection(
                "10.0.0.3:4000".parse().unwrap()
            ))),
            "matched by address (the remembered cid is now another connection's, from 10.0.0.3:4000)"
        );
        assert_eq!(
            sampling_phrase(Some(Sampling::Skip {
                asked_ago: Duration::from_secs(20)
            })),
            "not asked this run: calm when asked 20s ago, on the same connections (--sample-every)"
        );
        assert_eq!(
            sampling_phrase(Some(Sampling::Ask(Due::NotCalm))),
            "asked: the last look was not calm"
        );
    }
}
