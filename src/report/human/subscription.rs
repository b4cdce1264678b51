//! What the own-subscription check says about each subscription this pod's connection must
//! hold.

use super::consumer::carried_phrase;
use super::standing::{standing_phrase, Checked};
use crate::facts::Connz;
use crate::rules::judged::JudgedSubscription;
use crate::rules::remembered::Found;
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

/// `from $SYS.REQ.ACCOUNT.PING.CONNZ (2 servers)`: where the server's connection list came
/// from, and how many servers gave it.
pub fn listed_from(connz: &Connz) -> String {
    let plural = if connz.servers == 1 { "" } else { "s" };
    format!("from {} ({} server{plural})", connz.source, connz.servers)
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
        // Not read this look: said as last seen.
        Held::Pulls { by, quiet } if s.found == Some(Found::WithinWindow) => format!(
            "taking part ({by} last seen publishing {} ago, less than the window)",
            crate::report::words::display(*quiet)
        ),
        Held::Pulls { by, quiet } if s.found == Some(Found::NothingDelivered) => format!(
            "taking part ({by} last seen publishing {} ago, and nothing delivered since)",
            crate::report::words::display(*quiet)
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Wanted;
    use std::time::Duration;

    /// A pull consumer's part says what was read: published since the last look, quiet as
    /// read, or (not read this look) as last seen, and why it was not read.
    #[test]
    fn a_pull_part_says_what_was_read() {
        let part = |quiet: u64, found: Found| JudgedSubscription {
            wanted: Wanted {
                subject: "$JS.API.CONSUMER.MSG.NEXT.S.P".into(),
                queue: None,
            },
            pull: true,
            consumer: None,
            held: Held::Pulls {
                by: "10.0.0.5:51828".parse().unwrap(),
                quiet: Duration::from_secs(quiet),
            },
            carried: None,
            standing: None,
            found: Some(found),
            judged_before: true,
        };
        let read = Found::LookedUp { cid: 7 };
        assert_eq!(
            subscription_phrase(&part(0, read)),
            "taking part (10.0.0.5:51828 published since the last look)"
        );
        assert_eq!(
            subscription_phrase(&part(3, read)),
            "taking part (10.0.0.5:51828 published nothing for 3s, less than the window, or nothing was delivered meanwhile)"
        );
        assert_eq!(
            subscription_phrase(&part(50, Found::WithinWindow)),
            "taking part (10.0.0.5:51828 last seen publishing 50s ago, less than the window)"
        );
        assert_eq!(
            subscription_phrase(&part(90, Found::NothingDelivered)),
            "taking part (10.0.0.5:51828 last seen publishing 1m30s ago, and nothing delivered since)"
        );
    }

    #[test]
    fn the_list_says_where_it_came_from() {
        let connz = |servers| Connz {
            source: "$SYS.REQ.ACCOUNT.PING.CONNZ".into(),
            holding: vec![],
            all: None,
            probe_seen_as: None,
            servers,
            out_of_sight: None,
            incomplete: None,
        };
        assert_eq!(
            listed_from(&connz(1)),
            "from $SYS.REQ.ACCOUNT.PING.CONNZ (1 server)"
        );
        assert_eq!(
            listed_from(&connz(3)),
            "from $SYS.REQ.ACCOUNT.PING.CONNZ (3 servers)"
        );
    }
}
