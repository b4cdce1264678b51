//! What the own-subscription check says about each subscription this pod's connection must
//! hold.

use super::consumer::carried_phrase;
use super::standing::{standing_phrase, Checked};
use crate::rules::judged::JudgedSubscription;
use crate::rules::subscription::Held;

/// `subscription deliver.D in queue group D (consumer S/D)`.
pub fn subscription_name(s: &JudgedSubscription) -> String {
    format!("subscription {}", subscription_subject(s))
}

/// `deliver.D in queue group D (consumer S/D)`: what is held, without the word.
pub fn subscription_subject(s: &JudgedSubscription) -> String {
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
        Held::NotJudged(why) => format!(
            "not judged: {why}{}",
            standing_phrase(s.standing, Checked::Subscription)
        ),
    }
}
