//! After a check that could not run: how long its cause has lasted and, for the
//! configuration's causes, what fixes it (the README's troubleshooting table).

use crate::report::words::{display, display_step};
use crate::rules::cause::{Cause, Class, Standing};

/// Which kind of check a cause kept from running.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Consumer,
    Subscription,
}

/// After a check that could not run: how long its cause has lasted and, for the
/// configuration's causes, what fixes it. Nothing for a transient cause.
pub fn standing_phrase(standing: Option<Standing>, checked: Checked) -> String {
    let Some(s) = standing else {
        return String::new();
    };
    match s.class {
        Class::Transient => String::new(),
        Class::ConfigurationAtOnce => format!(": {}", fix(s, checked)),
        // Rounded up: "for 2s, longer than the window 2s" would read as a contradiction.
        Class::ConfigurationIfItPersists if s.is_configuration_error() => format!(
            "; for {}, longer than the window {}: {}",
            display(s.lasted.max(s.window + display_step(s.window))),
            display(s.window),
            fix(s, checked)
        ),
        Class::ConfigurationIfItPersists => format!(
            " (seen for {}; a configuration error, exit 2, if it lasts longer than the window {})",
            display(s.lasted),
            display(s.window)
        ),
    }
}

/// What fixes a cause of the configuration (the README's troubleshooting table).
fn fix(s: Standing, checked: Checked) -> String {
    match (s.cause, checked) {
        (Cause::Credentials, _) => "give the probe credentials the server accepts (--creds, --user and --password, --token or --nkey, or their NATS_* variables)".into(),
        (Cause::NotPermitted, Checked::Consumer) => "allow the probe's user to publish to $JS.API.CONSUMER.INFO.> and $JS.API.STREAM.INFO.>".into(),
        (Cause::NotPermitted, Checked::Subscription) => "allow the probe's user to request $SYS.REQ.ACCOUNT.PING.CONNZ, or give --monitor".into(),
        (Cause::CannotSee, _) => "point --server (or --monitor) at the leaf node the pod connects to".into(),
        (Cause::CannotMatch, _) => "drop --own-subscription and --subscription for this pod (the guard still watches its consumers)".into(),
        (Cause::TooFarApart, _) => format!(
            "run the probe at least once a window (periodSeconds below {}), or raise --stall-after",
            display(s.window)
        ),
        (Cause::NoStateDir, _) => "give --state-dir a writable volume with room (an emptyDir)".into(),
        (Cause::ClientAgeUnreadable, _) => "run the probe as the app's user (it reads /proc/PID/fd to find the process holding the connection), or give --pid".into(),
        (Cause::Unreachable | Cause::Timeout | Cause::JetStreamUnavailable | Cause::Failed, _) => {
            "wait: it passes".into()
        }
    }
}
