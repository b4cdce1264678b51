//! What the own-subscription check says about each subscription this pod's connection must
//! hold.

use super::consumer::carried_phrase;
use super::standing::{standing_phrase, Checked};
use crate::rules::judged::JudgedSubscription;
use crate::rules::subscription::Held;

/// `subscription deliver.D in queue group D (consumer S/D)`; `this pod's pulls of consumer
/// S/P`.
pub fn subscription_name(s: &JudgedSubscription) -> String {
    match s.pull {
        true => format!("this pod's {}", subscription_subject(s)),
        false => format!("subscription {}", subscription_subject(s)),
    }
}

/// `deliver.D in queue group D (consumer S/D)`: what is held, without the word; a pull
/// consumer's part: `pulls of consumer S/P`.
pub fn subscription_subject(s: &JudgedSubscription) -> String {
    if s.pull {
        let of = s
            .consumer
            .as_ref()
            .map_or(s.wanted.subject.clone(), ToString::to_string);
        return format!("pulls of consumer {of}");
    }
    match &s.consumer {
        Some(c) => format!("{} (consumer {c})", s.wanted),
        None => s.wanted.to_string(),
    }
}

/// What the own-subscription check says, without the subscription's name.
pub fn subscription_phrase(s: &JudgedSubscription) -> String {
    match &s.held {
        Held::Yes { by } => format!("held ({by})"),
        Held::NotByThisConnection { connection } => format!(
            "this pod's connection {connection} holds no such subscription{}",
            carried_phrase(s.carried.as_ref())
        ),
        Held::Pulls { by, quiet } if quiet.is_zero() => format!("taking part ({by} published since the last look)"),
        Held::Pulls { by, quiet } => format!(
            "taking part ({by} published nothing for {}, less than the window, or nothing was delivered meanwhile)",
            crate::report::words::display(*quiet)
        ),
        Held::NotPulling {
            connection,
            quiet,
            delivered,
        } => format!(
            "none of this pod's connections ({connection}) published a pull request or an ack for {} while the consumer delivered {delivered} messages to others{}",
            crate::report::words::display(*quiet),
            carried_phrase(s.carried.as_ref())
        ),
        Held::NotJudged(why) => format!(
            "not judged: {why}{}",
            standing_phrase(s.standing, Checked::Subscription)
        ),
    }
}
