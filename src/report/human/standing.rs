//! After a check that could not run: how long its cause has lasted, whether it can still
//! become an error, and what fixes it (the README's table of causes).

use crate::report::words::{display, display_step};
use crate::rules::cause::{Cause, Class, Standing};

/// Which kind of check a cause kept from running.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Consumer,
    Subscription,
}

/// After a check that could not run: for a cause that is or may become a configuration
/// error, how long it has lasted and what fixes it; for one judged before, that NATS changed
/// under a working configuration. Nothing for a transient cause.
pub fn standing_phrase(standing: Option<Standing>, checked: Checked) -> String {
    let Some(s) = standing else {
        return String::new();
    };
    let fix = || fix(s.cause, checked);
    if s.is_configuration_error() {
        // Rounded up: "for 2s, longer than the window 2s" would read as a contradiction.
        let never = match s.class {
            Class::ConfigurationIfNeverJudged => ", never judged",
            _ => "",
        };
        return format!(
            "; for {}{never}, longer than the window {}: {}",
            display(s.lasted.max(s.window + display_step(s.window))),
            display(s.window),
            fix()
        );
    }
    match (s.class, s.judged_before) {
        (Class::Transient, _) => String::new(),
        (Class::ConfigurationIfNeverJudged, true) => format!(
            " (judged before: NATS changed under it, not a restart; if it lasts: {})",
            fix()
        ),
        (Class::ConfigurationIfNeverJudged, false) => format!(
            " (never judged with this configuration: if this still holds in {}, it is a configuration error, exit 2; the fix: {})",
            display(s.window.saturating_sub(s.lasted)),
            fix()
        ),
        (Class::ConfigurationIfItPersists, _) => format!(
            " (if this still holds in {}, it is a configuration error, exit 2; the fix: {})",
            display(s.window.saturating_sub(s.lasted)),
            fix()
        ),
    }
}

/// What to do about a cause (the README's table of causes): the fix of a configuration, or
/// for a transient cause what it waits for. `window`: the check's, where the fix names it.
pub fn fix(cause: Cause, checked: Checked) -> String {
    match (cause, checked) {
        (Cause::Credentials, _) => "give the probe credentials the server accepts (--creds, --user and --password, --token or --nkey, or their NATS_* variables); if they worked before, the server's auth service (auth callout, account resolver) may be down".into(),
        (Cause::NotPermitted, Checked::Consumer) => "allow the probe's user to publish to $JS.API.CONSUMER.INFO.> and $JS.API.STREAM.INFO.> (in its domain's API)".into(),
        (Cause::NotPermitted, Checked::Subscription) => "allow the probe's user to publish to $SYS.REQ.ACCOUNT.PING.CONNZ and $SYS.REQ.ACCOUNT.PING.STATZ, or give --monitor".into(),
        (Cause::InboxDenied, _) => "allow the probe's user to subscribe to _INBOX.> (every answer arrives there)".into(),
        (Cause::NoJetStream, _) => "give --js-domain the stream's domain, or --server one with JetStream".into(),
        (Cause::JetStreamNotEnabled, _) => "give the probe the credentials of the account that holds the stream (the app's), or enable JetStream for its account".into(),
        (Cause::NoSystemAccount, _) => "give the servers a system account (system_account), or pass --monitor with the monitoring URL of the server the pod connects to".into(),
        (Cause::CannotSee, _) => "point --server (or --monitor) at the leaf node the pod connects to".into(),
        (Cause::CannotMatch, _) => "drop --own-subscription and --subscription for this pod (the guard still watches its consumers)".into(),
        (Cause::NoStateDir, _) => "give --state-dir a writable volume with room (an emptyDir)".into(),
        (Cause::ClientAgeUnreadable, _) => "run the probe as the app's user (it reads /proc/PID/fd to find the process holding the connection), or give --pid".into(),
        (Cause::Unreachable, _) => "nothing, if NATS is down: it passes; else check --server and the network path to it".into(),
        (Cause::Timeout, _) => "nothing: it passes when the server answers in time (a server that never does: look at its load, or raise --timeout)".into(),
        (Cause::JetStreamUnavailable, _) => "nothing: it passes once JetStream has a leader again".into(),
        (Cause::NotListed, _) => "nothing: it passes when the server holding the pod's connection answers in time".into(),
        (Cause::Failed, _) => "run again with -v and read the server's answer".into(),
        (Cause::ServerNotDelivering, _) => "nothing in the pod: NATS holds this consumer's work back; look at the consumer's leader (its rate_limit_bps, priority groups, the server's log)".into(),
        (Cause::RestartDidNotHelp, _) => "look at the consumer's redeliveries (a message NAKed with a delay, a poison message) and the app's log; a restart is tried again --restart-again-after past the first failure".into(),
    }
}
