//! What JetStream said about a consumer and its stream, and the previous sample kept between
//! runs. Decoded from the server's raw JSON by the observation layer.

use crate::prelude::*;
use serde::{Deserialize, Serialize};

use alloc::collections::BTreeMap;
use core::fmt;
use core::time::Duration;

/// Nanoseconds since the Unix epoch, on the server's clock (an i64 holds them until 2262; a
/// later or earlier time is no time).
pub type ServerTime = i64;

/// `STREAM/DURABLE`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConsumerName {
    pub stream: String,
    pub durable: String,
}

impl fmt::Display for ConsumerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stream, self.durable)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub consumer_seq: u64,
    pub stream_seq: u64,
    pub last_active: Option<ServerTime>,
}

/// How a consumer wants its messages acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    Explicit,
    All,
    None,
}

impl AckPolicy {
    pub fn name(self) -> &'static str {
        match self {
            AckPolicy::Explicit => "explicit",
            AckPolicy::All => "all",
            AckPolicy::None => "none",
        }
    }
}

/// What the probe needs from consumer info.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerFacts {
    pub stream: String,
    pub name: String,
    /// The consumer's creation time as the server wrote it: its identity across samples.
    pub created: String,
    /// Push consumers have a deliver subject; pull consumers do not.
    pub deliver_subject: Option<String>,
    pub deliver_group: Option<String>,
    pub push_bound: bool,
    pub num_pending: u64,
    pub num_ack_pending: u64,
    pub num_waiting: u64,
    pub num_redelivered: u64,
    pub ack_floor: Sequence,
    pub delivered: Sequence,
    pub ack_policy: AckPolicy,
    pub ack_wait: Option<Duration>,
    /// None: unlimited.
    pub max_deliver: Option<u64>,
    pub max_ack_pending: Option<i64>,
    /// A push consumer's flow control: the server stops delivering until the client answers,
    /// which it may do only once its handler is done with a message.
    pub flow_control: bool,
    /// A push consumer's delivery limit, in bits a second (None: unlimited).
    pub rate_limit_bps: Option<u64>,
    pub paused: bool,
    /// The server's clock when it answered (2.10+).
    pub ts: Option<ServerTime>,
}

impl ConsumerFacts {
    pub fn push(&self) -> bool {
        self.deliver_subject.is_some()
    }

    /// Messages this consumer still has to get through: not yet delivered, or delivered and
    /// not yet acknowledged.
    pub fn waiting(&self) -> u64 {
        self.num_pending + self.num_ack_pending
    }

    /// The work the consumer could do: none while paused or unbound (a push consumer with no
    /// subscriber on its deliver subject), else what waits.
    pub fn workable(&self) -> u64 {
        match self.paused || self.push() && !self.push_bound {
            true => 0,
            false => self.waiting(),
        }
    }

    /// A bound push consumer in a deliver group (`max_ack_pending: 1`, `ack_wait` 30 s), as a
    /// 2.10 server describes it at `ts` with no ack since it started: where the examples and the
    /// simulated world begin.
    #[cfg(any(test, feature = "sim"))]
    pub fn example(pending: u64, ack_pending: u64, floor: u64, ts: ServerTime) -> ConsumerFacts {
        ConsumerFacts {
            stream: "TF_RAW".into(),
            name: "latest-kv".into(),
            created: "2026-08-20T00:00:00Z".into(),
            deliver_subject: Some("deliver.latest-kv".into()),
            deliver_group: Some("latest-kv".into()),
            push_bound: true,
            num_pending: pending,
            num_ack_pending: ack_pending,
            num_waiting: 0,
            num_redelivered: 0,
            ack_floor: Sequence {
                consumer_seq: floor,
                stream_seq: floor,
                last_active: None,
            },
            delivered: Sequence {
                consumer_seq: floor + ack_pending,
                stream_seq: floor + ack_pending,
                last_active: None,
            },
            ack_policy: AckPolicy::Explicit,
            ack_wait: Some(Duration::from_secs(30)),
            max_deliver: None,
            max_ack_pending: Some(1),
            flow_control: false,
            rate_limit_bps: None,
            paused: false,
            ts: Some(ts),
        }
    }

    /// `ts - t`, when the server gave both.
    pub fn age(&self, t: Option<ServerTime>) -> Option<Duration> {
        let ns = u64::try_from(self.ts?.saturating_sub(t?).max(0)).ok()?;
        Some(Duration::from_nanos(ns))
    }
}

/// Its JSON is the check's `facts`: as the server said them, its times as ages on its own
/// clock (`last_active_ago_ms`), and whether it sent that clock (`server_ts`, 2.10+).
impl Serialize for ConsumerFacts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        #[derive(Serialize)]
        struct Ages {
            consumer_seq: u64,
            stream_seq: u64,
            last_active_ago_ms: Option<u64>,
        }
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        let sequence = |q: &Sequence| Ages {
            consumer_seq: q.consumer_seq,
            stream_seq: q.stream_seq,
            last_active_ago_ms: ms(self.age(q.last_active)),
        };
        let mut o = s.serialize_struct("ConsumerFacts", 18)?;
        o.serialize_field("push", &self.push())?;
        o.serialize_field("deliver_subject", &self.deliver_subject)?;
        o.serialize_field("deliver_group", &self.deliver_group)?;
        o.serialize_field("push_bound", &self.push_bound)?;
        o.serialize_field("num_pending", &self.num_pending)?;
        o.serialize_field("num_ack_pending", &self.num_ack_pending)?;
        o.serialize_field("num_waiting", &self.num_waiting)?;
        o.serialize_field("num_redelivered", &self.num_redelivered)?;
        o.serialize_field("ack_floor", &sequence(&self.ack_floor))?;
        o.serialize_field("delivered", &sequence(&self.delivered))?;
        o.serialize_field("ack_policy", self.ack_policy.name())?;
        o.serialize_field("ack_wait_ms", &ms(self.ack_wait))?;
        o.serialize_field("max_deliver", &self.max_deliver)?;
        o.serialize_field("max_ack_pending", &self.max_ack_pending)?;
        o.serialize_field("flow_control", &self.flow_control)?;
        o.serialize_field("rate_limit_bps", &self.rate_limit_bps)?;
        o.serialize_field("paused", &self.paused)?;
        o.serialize_field("server_ts", &self.ts.is_some())?;
        o.end()
    }
}

/// A stream's retention settings and where it now begins: what decides whether the server can
/// delete a message a consumer has not acknowledged. Its JSON is the check's `stream_facts`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamFacts {
    /// `limits`, `interest` or `workqueue`.
    pub retention: String,
    /// `old` or `new`.
    pub discard: String,
    /// None: unlimited (the server's -1 or 0).
    pub max_msgs: Option<u64>,
    pub max_bytes: Option<u64>,
    #[serde(rename = "max_age_ms", serialize_with = "millis")]
    pub max_age: Option<Duration>,
    pub max_msgs_per_subject: Option<u64>,
    #[serde(skip)]
    pub discard_new_per_subject: bool,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// A duration in JSON: whole milliseconds.
fn millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    d.map(|d| d.as_millis() as u64).serialize(s)
}

/// Why the server could not say how a consumer is: the consumer is not judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unknown {
    /// The probe could not connect.
    Unreachable(String),
    /// The server refused the probe's credentials.
    Credentials,
    /// The probe's user may not ask (a permissions violation on the request's subject).
    NotPermitted(String),
    /// Nothing came back before the deadline.
    Deadline,
    /// The request went out and JetStream did not answer in time.
    JetStreamTimeout,
    /// No responders on the JetStream API: no JetStream in the domain asked (a wrong
    /// `--js-domain` or prefix, a server without JetStream, a leaf node's link to its hub down).
    NoResponders,
    /// 10039: JetStream is not enabled for the probe's account.
    JetStreamNotEnabled,
    /// No responders on the account's connection report: no system account.
    NoSystemAccount,
    /// The server refused the probe's subscription to its reply inbox (`_INBOX.>`): no
    /// request can be answered. The subject refused.
    InboxDenied(String),
    /// 10008: JetStream temporarily unavailable (an election).
    TemporarilyUnavailable,
    /// A listing named it among those it could not report (in a cluster: its leader did not
    /// answer in time).
    NotReported,
    /// The server does not see this pod's address (NAT, a proxy, a service-mesh sidecar):
    /// its connection list cannot be matched to this pod's sockets. How it sees the probe.
    CannotMatch(Option<core::net::SocketAddr>),
    /// The pod's connection may be on a server whose connection list cannot be had from
    /// here (a leaf node, behind the server asked): why.
    OutOfSight(String),
    /// The pod's connection is not in the lists of the servers that answered in time: a
    /// server holding it answered late or not at all. No evidence either way: why.
    NotListed(String),
    /// Earlier lookups of the pod's connection went unanswered; the next is not due yet (the
    /// server is not asked again before then).
    Waiting(core::time::Duration),
    /// Anything else: an unexpected API error or answer.
    Failed(String),
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unknown::Unreachable(why) => write!(f, "server unreachable: {why}"),
            Unknown::Credentials => {
                f.write_str("authorization error: the server refused the probe's credentials")
            }
            Unknown::NotPermitted(subject) => write!(
                f,
                "not permitted: the server refused the probe's request on {subject} (permissions violation)"
            ),
            Unknown::Deadline => f.write_str("no answer before the deadline"),
            Unknown::JetStreamTimeout => f.write_str("JetStream did not answer before the deadline"),
            Unknown::NoResponders => f.write_str("no JetStream answers in the domain asked"),
            Unknown::JetStreamNotEnabled => {
                f.write_str("JetStream is not enabled for the probe's account (10039)")
            }
            Unknown::NoSystemAccount => f.write_str(
                "no server answers the account's connection report (no responders: the server has no system account)",
            ),
            Unknown::InboxDenied(subject) => write!(
                f,
                "not permitted: the server refused the probe's subscription to {subject}, where answers arrive"
            ),
            Unknown::NotListed(why) => write!(f, "the pod's connection is not listed: {why}"),
            Unknown::Waiting(next) => {
                let s = next.as_secs();
                let when = match s >= 60 && s % 60 == 0 {
                    true => format!("{}m", s / 60),
                    false => format!("{s}s"),
                };
                write!(
                    f,
                    "the server did not answer the last lookups in time; asking again in {when}"
                )
            }
            Unknown::TemporarilyUnavailable => {
                f.write_str("JetStream temporarily unavailable (10008)")
            }
            Unknown::NotReported => {
                f.write_str("not reported by the listing (its leader did not answer in time)")
            }
            Unknown::CannotMatch(Some(seen)) => write!(
                f,
                "cannot match this pod's connection at the server: it sees the probe as {seen} (NAT, a proxy or a sidecar)"
            ),
            Unknown::CannotMatch(None) => f.write_str(
                "cannot match this pod's connection at the server: it does not list the probe's own (NAT, a proxy or a sidecar)",
            ),
            Unknown::OutOfSight(why) => {
                write!(f, "cannot see the pod's connection from here: {why}")
            }
            Unknown::Failed(why) => f.write_str(why),
        }
    }
}

/// One consumer as the server described it.
// A few of these live for one run: boxing the common variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    Found {
        facts: ConsumerFacts,
        /// Fetched only when work is waiting (what retention may do to it matters then).
        stream: Option<StreamFacts>,
    },
    StreamMissing,
    ConsumerMissing,
    /// The server could not say.
    NotJudged(Unknown),
}

/// One consumer's previous observation, kept between runs in the state dir: what was seen,
/// and how long work had been seen waiting without progress. Never a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The consumer's creation time: a recreated consumer is not the same one.
    pub created: String,
    pub floor_consumer_seq: u64,
    pub floor_stream_seq: u64,
    pub delivered_stream_seq: u64,
    /// `ack_floor.last_active`: a later one means acks (or terminations) since.
    pub ack_last_active: Option<ServerTime>,
    /// `delivered.last_active`: held in memory like the other, so its loss shows a restart.
    pub delivered_last_active: Option<ServerTime>,
    /// Messages waiting (pending + awaiting ack) then, for a consumer that could work on them
    /// (0 when paused or unbound).
    pub waiting: u64,
    /// Time seen with work waiting and no progress, up to `seen_at_ms`.
    pub stalled_ms: i64,
    /// Time seen with the floor at the front of a stream that deletes from the front and work
    /// behind it, up to `seen_at_ms`; None when not so then.
    pub pinned_ms: Option<i64>,
    /// Local clock, ms since the epoch.
    pub seen_at_ms: i64,
    /// The server's clock then (`ts`, 2.10+): an ack after it is an ack since.
    pub seen_ts: Option<ServerTime>,
    /// What the runs since `seen_at_ms` that could not look did to the clocks
    /// (`rules::answers`: the one table of NATS's answers).
    pub gap: Gap,
    /// The consumer's window then (`--stall-after`, or 2 × its `ack_wait` when longer): what
    /// a run that cannot see its `ack_wait` goes by.
    pub window_ms: i64,
}

/// What the runs since a sample that could not look at the consumer did to its clocks: the
/// time since counts (none, or only refusals and late answers), or the clocks start over
/// (anything else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gap {
    None,
    Resets,
}

/// What was found where a consumer's previous sample should be.
#[derive(Debug, Clone, PartialEq)]
pub enum Loaded {
    Sample(Sample),
    Missing,
    /// Unreadable, not JSON, or a symlink.
    Corrupt(String),
    /// Another key (or format version) in this file.
    Foreign,
}

/// What one look at the account learnt besides its consumers, which are handed on one by one
/// as they come (`observe::listing::look`).
#[derive(Debug, Clone, Default)]
pub struct Look {
    /// Streams whose consumers the server could not list, and why.
    pub unknown_streams: BTreeMap<String, Unknown>,
}

/// What the server's consumer advisories said about one consumer during an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Losses {
    /// Retention deleted them before they were acknowledged (`MSG_TERMINATED`, "Unacknowledged
    /// message was deleted" or "Message deleted by stream limits").
    pub deleted_unacked: u64,
    /// They exhausted `max_deliver` (`MAX_DELIVERIES`).
    pub exhausted: u64,
    /// The client terminated them itself (`+TERM`).
    pub terminated_by_client: u64,
}

/// The advisories counted during an interval, or why they could not be.
#[derive(Debug, Clone, PartialEq)]
pub enum Advisories {
    Counted(BTreeMap<ConsumerName, Losses>),
    Unavailable(String),
}

/// A subscription the pod's client must hold: a consumer's deliver subject (and group), or
/// a core subscription (`--subscription SUBJECT[@QUEUE]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Wanted {
    pub subject: String,
    pub queue: Option<String>,
}

impl Wanted {
    /// What a pull consumer's part is kept and shown by: the subject its pull requests go to
    /// (in the default JetStream API).
    pub fn pulls_of(consumer: &ConsumerName) -> Wanted {
        Wanted {
            subject: format!(
                "$JS.API.CONSUMER.MSG.NEXT.{}.{}",
                consumer.stream, consumer.durable
            ),
            queue: None,
        }
    }
}

impl fmt::Display for Wanted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.queue {
            Some(q) => write!(f, "{} in queue group {q}", self.subject),
            None => f.write_str(&self.subject),
        }
    }
}

/// One client connection as a server lists it (`/connz`): its address as the server sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConnection {
    pub addr: core::net::SocketAddr,
    pub name: Option<String>,
    /// Its subscriptions (subject, queue group); None when listed without them.
    pub subscriptions: Option<Vec<(String, Option<String>)>>,
    /// The server's number for it: unique on that server only, and reused after a restart.
    pub cid: u64,
    /// The server that listed it, when the answer said.
    pub server: Option<ServerIdent>,
    /// How many connections that server listed for the account (its answer's `total`): what
    /// a lookup by cid through the account's report costs grows with it.
    pub account_connections: u64,
    /// How many messages it has published (`in_msgs`): a pull request and an ack are each one.
    pub in_msgs: u64,
}

/// A server as its connection report names it. The id is new at every start, so a restarted
/// server (whose cids start again from 1) is another one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServerIdent {
    pub name: String,
    pub id: String,
}

/// What identifies this pod's connection at the server between runs, once matched by address:
/// the server, the connection's cid there, and the socket it was matched by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub server: ServerIdent,
    pub cid: u64,
    /// The pod's socket (local address, IPv4 unmapped) and its inode: another socket on the
    /// same port is another connection.
    pub local: core::net::SocketAddr,
    pub inode: u64,
    /// When (local clock, ms since the epoch) the server last showed this connection holding
    /// the subscription; None when it showed it without.
    pub held_at_ms: Option<i64>,
    /// How many connections the server listed for the account when it last answered.
    pub account_connections: u64,
}

/// Asks of the server about a subscription's connection (a lookup by cid, or a match) that
/// went unanswered run after run: a server that answers late is asked less often, not more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unanswered {
    /// How many in a row.
    pub count: u32,
    /// Local clock, ms since the epoch: the last of them.
    pub last_ms: i64,
}

/// What the state dir keeps for one wanted subscription: the pod's connection at the server
/// once matched, and the asks that went unanswered since the last answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SubscriptionMemo {
    pub connection: Option<Remembered>,
    pub unanswered: Option<Unanswered>,
    /// A pull consumer's part: what this pod's connections had published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<Published>,
}

/// What a pull consumer's part goes on from: this pod's connections at the server and what
/// each had published, when one of them last published more (or they were first seen), and
/// what the consumer had delivered by then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// Each connection, with its `in_msgs`.
    pub connections: Vec<(Remembered, u64)>,
    /// The consumer's creation time: a consumer made again starts over.
    pub created: String,
    /// Its `delivered.consumer_seq`.
    pub delivered: u64,
    /// Local clock, ms since the epoch.
    pub moved_at_ms: i64,
}

/// One server's answer to a lookup by cid: the connection with that cid, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookedUp {
    pub server: ServerIdent,
    pub connection: Option<ServerConnection>,
}

/// What the servers said about the account's client connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connz {
    /// Where the list came from: the account's connection report, or a monitoring URL.
    pub source: String,
    /// Connections holding a subscription on a wanted subject, with their subscriptions.
    pub holding: Vec<ServerConnection>,
    /// Every connection of the account, listed only when `holding` did not show this pod's.
    pub all: Option<Vec<ServerConnection>>,
    /// How the servers see the probe's own connection, when it was found in `all`: whether
    /// addresses are seen as this pod's (no NAT, proxy or sidecar in between).
    pub probe_seen_as: Option<core::net::SocketAddr>,
    /// How many servers answered.
    pub servers: usize,
    /// Why this pod's connection may be on a server whose list can never be had from here:
    /// the monitoring port's server has leaf nodes, whose clients its `/connz` does not list.
    /// Then a connection absent from the list is no evidence.
    pub out_of_sight: Option<String>,
    /// Why the lists may lack this pod's connection or its subscriptions: a server holding
    /// the account's connections, or a leaf node, did not answer in time. Then absence is no
    /// evidence.
    pub incomplete: Option<String>,
}
