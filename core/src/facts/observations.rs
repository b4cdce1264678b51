//! One run's observations, as the command gathered them for the rules and the report: the
//! pod's sockets, the servers' answers, the consumers with their previous samples, and whether
//! the consumers were asked this run at all.

use crate::prelude::*;

use super::jetstream::{Connz, ConsumerName, Loaded, Observed, Unknown};
use super::server::ServerAnswer;
use super::sockets::{Holder, Process, SocketScan};
use alloc::collections::BTreeMap;
use core::time::Duration;
use serde::Serialize;

/// Everything one run observed. Filled lazily, in the order the rules ask for it: the common
/// path is one socket read; the servers and JetStream are asked only when the verdict needs
/// them (an empty list means "not asked").
#[derive(Debug, Clone, Default)]
pub struct Observations {
    pub pod: Pod,
    /// What each server URL said, in order.
    pub servers: Vec<ServerAnswer>,
    /// Each consumer asked about, in order, with its previous sample.
    pub consumers: Vec<ConsumerSeen>,
    /// The age of the youngest process holding the counted connections: outer None when not
    /// read, inner None when unreadable.
    pub client_age: Option<Option<Duration>>,
    /// Local clock at the consumers' observation, ms since the epoch.
    pub now_ms: i64,
    /// The server's connection list, when a subscription had to be matched.
    pub connz: Option<Result<Connz, Unknown>>,
    /// Where the samples were kept, and the places passed over with why; None when no
    /// sample was needed.
    pub state_dir: Option<StateDirUsed>,
    /// The JetStream domain the connected server announced in its INFO (when JetStream was
    /// asked, and it has one): a leaf node's own domain, which is not its hub's.
    pub server_domain: Option<String>,
    /// Whether that server announced JetStream of its own (a leaf node may carry only its
    /// hub's).
    pub server_jetstream: bool,
    /// Whether the consumers were asked this run or skipped between looks (`--sample-every`);
    /// None when there are none, or no connection to judge them by.
    pub sampling: Option<Sampling>,
}

/// The state dir a run used, and each place passed over before it, with why (the check's
/// JSON `state_dir`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateDirUsed {
    pub path: String,
    #[serde(rename = "passed_over")]
    pub skipped: Vec<(String, String)>,
}

/// This pod's side: whose sockets count, and the socket table.
#[derive(Debug, Clone, Default)]
pub struct Pod {
    /// The processes named by PID or name; empty when anyone's sockets count.
    pub processes: Vec<Process>,
    /// Socket inode → the named process holding it, and by which descriptor; None when
    /// anyone's sockets count.
    pub owned: Option<BTreeMap<u64, Holder>>,
    pub scan: SocketScan,
    /// The network namespace read, when another process's.
    pub netns_of: Option<u32>,
}

/// One consumer as the server described it, and what the state dir held for it.
#[derive(Debug, Clone)]
pub struct ConsumerSeen {
    pub name: ConsumerName,
    pub observed: Observed,
    pub previous: Option<Loaded>,
    /// Why this run's sample could not be kept, when it could not.
    pub state_problem: Option<String>,
}

/// Why this run asks about the consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// `--sample-every 0`.
    EveryRun,
    /// No look remembered (the first run, or an unusable state dir).
    FirstLook,
    /// The last look found a fault, a running stall clock, or a consumer it could not judge.
    NotCalm,
    /// The last look is `--sample-every` old (or from the future: the clock moved back).
    Old,
    /// A connection the last look did not see: the client reconnected.
    NewConnection,
    /// Waiting for the next run would put the next look past the window.
    WindowEnds,
}

/// Whether this run asks about the consumers, or skips them between looks
/// (`rules::remembered::sampling` decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    Ask(Due),
    /// Between looks: the sockets only.
    Skip {
        asked_ago: Duration,
    },
}
