//! `diagnose`'s closing words: each piece of advice (`rules::advice`) as a word for scripts
//! and a sentence for a person.

use super::consumer::{domain_hint, jetstream_asked};
use crate::report::human::standing::{fix, Checked};
use crate::report::input::CheckInput;
use crate::report::words::peer;
use crate::rules::advice::Advice;
use crate::rules::cause::Cause;

/// The advice's word for scripts (the JSON's `kind`).
pub fn kind(a: &Advice) -> &'static str {
    match a {
        Advice::Nothing => "nothing",
        Advice::ClientGaveUp => "client_gave_up",
        Advice::TellWithServer => "tell_with_server",
        Advice::NatsDown => "nats_down",
        Advice::PeerGone { .. } => "peer_gone",
        Advice::StillConnecting => "still_connecting",
        Advice::NeverClosed => "never_closed",
        Advice::StreamMissing(_) => "stream_missing",
        Advice::ConsumerMissing(_) => "consumer_missing",
        Advice::Unbound(_) => "unbound",
        Advice::Stalled { .. } => "stalled",
        Advice::Losing(_) => "losing_messages",
        Advice::Deaf { .. } => "deaf",
        Advice::NotPulling(_) => "not_pulling",
        Advice::NotJudged { .. } => "not_judged",
    }
}

/// The advice in words: what is wrong, and what to do.
pub fn words(a: &Advice, input: &CheckInput) -> String {
    let servers = input.servers.join(", ");
    let dead = input
        .connections
        .half_open
        .first()
        .map(|(s, _)| peer(s))
        .unwrap_or_default();
    match a {
        Advice::Nothing => "Nothing: the client holds its connection and every check passed.".into(),
        Advice::ClientGaveUp => format!(
            "The client gave up reconnecting while NATS answers ({servers}): restart the pod (the probe's exit 1 makes the kubelet do it). So it does not recur, let the client reconnect forever: nats.go `nats.MaxReconnects(-1)`."
        ),
        Advice::TellWithServer => "The client holds no connection: it gave up reconnecting, or NATS is down. Add --server URL (or set NATS_URL) and the probe tells which, and fails only when a restart helps.".into(),
        Advice::NatsDown => format!(
            "NATS does not answer at {servers}: restarting this pod would not help. Look at NATS itself; if it is up, the URL or port is not the one the client uses."
        ),
        Advice::PeerGone { counted_out: true } => format!(
            "The connection to {dead} is half-open: its peer is gone without a word (a node lost, a partition) and the kernel retransmits into the void. A restart reconnects to a live node; a shorter PingInterval lets the client notice by itself."
        ),
        Advice::PeerGone { counted_out: false } => format!(
            "The connection to {dead} is half-open (its peer is gone); another live connection holds, so nothing fails yet."
        ),
        Advice::StillConnecting => "A connection is still being opened (SYN_SENT): the server's address drops packets, or a NetworkPolicy or firewall blocks the way.".into(),
        Advice::NeverClosed => "The server closed a connection the client never closed (CLOSE_WAIT): the client is not reading its socket. If it stays, the client is wedged: restart the pod.".into(),
        Advice::StreamMissing(n) => format!(
            "Stream {} does not exist in {}: create it, or correct --consumer.{}",
            n.stream,
            jetstream_asked(input),
            domain_hint(input)
        ),
        Advice::ConsumerMissing(n) => format!(
            "Consumer {n} does not exist in {}: the application has not created it, or it was removed (an ephemeral consumer, inactive_threshold). Create it as a durable, or correct --consumer.{}",
            jetstream_asked(input),
            domain_hint(input)
        ),
        Advice::Unbound(n) => format!(
            "Nothing is subscribed to {n}'s deliver subject while work waits: the application lost its subscription. Restart the pod."
        ),
        Advice::Stalled { name, no_pulls: true } => format!(
            "{name} has work waiting and nobody is pulling: the application's fetch loop stopped. Restart the pod, and look in its logs for why the loop ended."
        ),
        Advice::Stalled { name, no_pulls: false } => format!(
            "{name} has work waiting and nothing is acknowledged: the application's handler is stuck (a blocked callback, a downstream that does not answer). Restart the pod, and look in its logs for the message it is stuck on."
        ),
        Advice::Losing(n) => format!(
            "The stream's retention deletes {n}'s messages before they are acknowledged: its limits are smaller than the backlog. Raise max_msgs, max_bytes or max_age, or make the consumer faster; a restart does not bring them back."
        ),
        Advice::Deaf { wanted, consumer } => {
            let of = consumer
                .as_ref()
                .map(|c| format!(" (consumer {c})"))
                .unwrap_or_default();
            format!(
                "This pod's connection does not hold {wanted}{of}: this replica is deaf while the server delivers to the others. Restart the pod."
            )
        }
        Advice::NotPulling(name) => format!(
            "This pod's connections have published no pull request and no ack to {name} for a whole window while the consumer delivered to others: this replica's pull loop stopped with its connection held. Restart the pod, and look in its logs for why the loop ended."
        ),
        Advice::NotJudged { what, consumer, why } => {
            let checked = match consumer {
                true => Checked::Consumer,
                false => Checked::Subscription,
            };
            let todo = fix(Cause::of(why), checked);
            format!("The probe could not judge {what} ({why}): {todo}.")
        }
    }
}
