//! What one consumer's judgement says, in a line and in `-v`; shared by `check`, `diagnose`
//! and (the outcome alone) `guard`.

use super::standing::{standing_phrase, Checked};
use crate::facts::{ConsumerName, Loaded, Observed};
use crate::report::diagnose::{consumer::facts, text};
use crate::report::words::{display, retention};
use crate::rules::cause::Cause;
use crate::rules::consumer::{Fault, Healthy, Moved, Outcome, Unmeasured, Window, Withheld};
use crate::rules::judged::JudgedConsumer;
use crate::rules::remembered::Carried;

/// What one consumer's judgement says, without its name.
pub fn consumer_phrase(r: &JudgedConsumer) -> String {
    let standing = standing_phrase(r.standing, Checked::Consumer);
    match (r.standing, &r.seen.state_problem) {
        // Whatever this run saw, no later run can compare with it.
        (Some(s), Some(problem)) if s.cause == Cause::NoStateDir => {
            format!("not judged across runs: samples cannot be kept ({problem}){standing}")
        }
        _ => format!(
            "{}{}{standing}",
            outcome_phrase(&r.outcome, r.window, &r.seen.observed, &r.seen.name),
            carried_phrase(r.carried.as_ref())
        ),
    }
}

/// `; this run could not look: <why>, last look 600ms ago`: the fault is the last look's.
pub fn carried_phrase(carried: Option<&Carried>) -> String {
    match carried {
        Some(c) => format!(
            "; this run could not look: {}, last look {} ago",
            c.why,
            display(c.ago)
        ),
        None => String::new(),
    }
}

/// What a consumer outcome says, without the consumer's name; shared by `check` and `guard`.
pub fn outcome_phrase(
    outcome: &Outcome,
    window: Option<Window>,
    observed: &Observed,
    name: &ConsumerName,
) -> String {
    let w = window_phrase(window);
    match outcome {
        Outcome::NotJudged(why) => format!("not judged: {why}"),
        Outcome::Healthy(h) => healthy_phrase(h, &w, observed),
        Outcome::Unhealthy(f) => fault_phrase(f, &w, observed, name),
    }
}

/// `window 1m = 2 × ack_wait 30s`, `window 1m`, or nothing without a window.
fn window_phrase(window: Option<Window>) -> String {
    match window {
        Some(Window {
            duration,
            raised_for_ack_wait: Some(ack_wait),
        }) => {
            format!(
                "window {} = 2 × ack_wait {}",
                display(duration),
                display(ack_wait)
            )
        }
        Some(Window { duration, .. }) => format!("window {}", display(duration)),
        None => String::new(),
    }
}

/// A healthy outcome, with the window phrase `w`.
fn healthy_phrase(h: &Healthy, w: &str, observed: &Observed) -> String {
    match h {
    Healthy::Idle => "idle (nothing waiting)".into(),
    Healthy::Paused => "paused".into(),
    Healthy::Progressing(moved) => {
        let how = match moved {
            Moved::LastAck(since) => format!("last ack {} ago", display(*since)),
            Moved::Floor => "ack floor moved since the last run".into(),
            Moved::AboveFloor => {
                "acks since the last run; the ack floor waits on an older message".into()
            }
            Moved::Deliveries => "delivered since the last run, ack policy none".into(),
        };
        format!("progressing ({how}; {w})")
    }
    Healthy::Waiting {
        stalled,
        moved_without_ack,
        ..
    } => format!(
        "no progress for {} ({w}, not over){}",
        display(*stalled),
        without_ack(*moved_without_ack, observed)
    ),
    Healthy::CannotTell { deletes } => format!(
        "ack floor moving, but acks or losses: retention ({}) deletes unacknowledged messages too, and one look cannot tell which ({w})",
        retention(&deletes.settings)
    ),
    Healthy::Unmeasured(unmeasured) => {
        let what = match unmeasured {
            Unmeasured::FirstSample => "first sample",
            Unmeasured::Gap => "not measured: it could not be observed since the last run",
            Unmeasured::ServerRestarted => {
                "not measured: the server restarted since the last run"
            }
        };
        format!("{what} (progress is judged from the next run; {w})")
    }
    Healthy::YoungClient { stalled, client_age } => format!(
        "no progress for {}, but the client started {} ago ({w})",
        display(*stalled),
        display(*client_age)
    ),
    Healthy::ClientAgeUnknown { stalled } => format!(
        "no progress for {}, not judged: the client's start time is unreadable ({w})",
        display(*stalled)
    ),
    Healthy::ServerNotDelivering {
        stalled,
        since_delivery,
        withheld,
    } => {
        let waiting = match observed {
            Observed::Found { facts, .. } => facts.num_pending,
            _ => 0,
        };
        let why = match withheld {
            Withheld::Push { rate_limit_bps } => format!(
                "bound, nothing awaiting ack{}",
                rate_limit_bps.map_or(String::new(), |b| format!(", rate_limit_bps {b}"))
            ),
            Withheld::Pulls { requests: 1 } => "1 pull request waiting".into(),
            Withheld::Pulls { requests } => format!("{requests} pull requests waiting"),
        };
        let delivered = since_delivery.map_or("since the server started".into(), |d| {
            format!("for {}", display(d))
        });
        format!(
            "not judged: NATS is not delivering, a restart cannot help: {waiting} pending, {why}, nothing delivered {delivered}, no progress for {} ({w}); look at the consumer's leader",
            display(*stalled)
        )
    }
    Healthy::RestartDidNotHelp {
        stalled,
        state,
        client_age,
        since_first_failure,
    } => format!(
        "not judged: the restart did not help: {state} again, no progress for {} with a client started {} ago, first failed for it {} ago ({w}); look at its redeliveries and the app's log",
        display(*stalled),
        display(*client_age),
        display(*since_first_failure)
    ),
    }
}

/// A fault, with the window phrase `w`.
fn fault_phrase(f: &Fault, w: &str, observed: &Observed, name: &ConsumerName) -> String {
    match f {
    Fault::StreamMissing => format!("stream {} not found", name.stream),
    Fault::ConsumerMissing => format!("durable {} not found in stream {}", name.durable, name.stream),
    Fault::Unbound { waiting } => {
        format!("no subscriber bound to its deliver subject (push_bound false), {waiting} waiting")
    }
    Fault::Stalled {
        stalled,
        floor,
        waiting,
        no_pulls,
        moved_without_ack,
        ..
    } => format!(
        "no progress for {} ({w}): ack floor at {floor}, {waiting} waiting{}{}",
        display(*stalled),
        if *no_pulls { ", no pull request waiting" } else { "" },
        without_ack(*moved_without_ack, observed)
    ),
    Fault::Retention {
        stalled,
        first_seq,
        behind,
        deletes,
    } => format!(
        "losing messages: for {} its ack floor has stayed at the stream's first sequence {first_seq} with {behind} waiting behind it, and retention ({}) deletes them unacknowledged",
        display(*stalled),
        retention(&deletes.settings)
    ),
    }
}

/// `; its ack floor moved with no ack (dropped after max_deliver 2)`.
fn without_ack(moved: bool, observed: &Observed) -> String {
    if !moved {
        return String::new();
    }
    let max_deliver = match observed {
        Observed::Found { facts, .. } => facts.max_deliver,
        _ => None,
    };
    match max_deliver {
        Some(n) => format!("; its ack floor moved with no ack (dropped after max_deliver {n})"),
        None => "; its ack floor moved with no ack (a purge)".into(),
    }
}

/// The facts behind a consumer's verdict, for `-v`: `diagnose`'s lines of them, joined, and
/// whether the server sends its clock.
pub fn consumer_details(r: &JudgedConsumer, now_ms: i64) -> String {
    let mut lines: Vec<String> = facts(r, now_ms).iter().map(text).collect();
    if let Observed::Found { facts: f, .. } = &r.seen.observed {
        if f.ts.is_none() {
            lines.push("the server sends no ts (before 2.10): samples decide".into());
        }
    }
    match lines.is_empty() {
        true => consumer_phrase(r),
        false => format!("{} → {}", lines.join("; "), consumer_phrase(r)),
    }
}

/// What the state dir held, in words.
pub fn describe_previous(previous: &Loaded) -> String {
    match previous {
        Loaded::Sample(_) => "previous sample used".into(),
        Loaded::Missing => "no previous sample".into(),
        Loaded::Corrupt(why) => format!("previous sample ignored ({why})"),
        Loaded::Foreign => "previous sample ignored (another consumer's)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Unknown;
    use std::time::Duration;

    /// How a consumer progressed, and why it was not measured, each with the window.
    #[test]
    fn each_progress_and_each_unmeasured_look_is_said() {
        let name = ConsumerName {
            stream: "S".into(),
            durable: "d".into(),
        };
        let window = Some(Window {
            duration: Duration::from_secs(60),
            raised_for_ack_wait: None,
        });
        let said = |h: Healthy| {
            let observed = Observed::NotJudged(Unknown::TemporarilyUnavailable);
            outcome_phrase(&Outcome::Healthy(h), window, &observed, &name)
        };
        let progressing = Healthy::Progressing;
        let unmeasured = Healthy::Unmeasured;
        assert_eq!(
            [
                said(progressing(Moved::LastAck(Duration::from_millis(1500)))),
                said(progressing(Moved::Floor)),
                said(progressing(Moved::AboveFloor)),
                said(progressing(Moved::Deliveries)),
                said(unmeasured(Unmeasured::FirstSample)),
                said(unmeasured(Unmeasured::Gap)),
                said(unmeasured(Unmeasured::ServerRestarted)),
            ],
            [
                "progressing (last ack 1.5s ago; window 1m)",
                "progressing (ack floor moved since the last run; window 1m)",
                "progressing (acks since the last run; the ack floor waits on an older message; window 1m)",
                "progressing (delivered since the last run, ack policy none; window 1m)",
                "first sample (progress is judged from the next run; window 1m)",
                "not measured: it could not be observed since the last run (progress is judged from the next run; window 1m)",
                "not measured: the server restarted since the last run (progress is judged from the next run; window 1m)",
            ]
        );
    }
}
