//! What the servers said to a connect: their INFO, or why not; and where the kernel holds a
//! connection to each.

use crate::prelude::*;

use core::fmt;
use core::net::SocketAddr;
use serde::Serialize;

/// What one server said to a connect: NATS sends `INFO {...}` the moment it accepts one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It sent its INFO line: NATS is up.
    Nats {
        version: Option<String>,
    },
    Refused,
    /// Connected or not, nothing arrived before the deadline.
    Silent,
    /// Something answered, but not NATS (an HTTP server, SSH...): its first bytes.
    NotNats(String),
    Unresolved(String),
    Failed(String),
}

impl Answer {
    pub fn is_nats(&self) -> bool {
        matches!(self, Answer::Nats { .. })
    }

    /// A word for scripts (the JSON `answer` field).
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Nats { .. } => "nats",
            Answer::Refused => "refused",
            Answer::Silent => "silent",
            Answer::NotNats(_) => "not_nats",
            Answer::Unresolved(_) => "unresolved",
            Answer::Failed(_) => "failed",
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Nats { version: Some(v) } => write!(f, "nats-server {v}"),
            Answer::Nats { version: None } => f.write_str("nats-server"),
            Answer::Refused => f.write_str("connection refused"),
            Answer::Silent => f.write_str("no answer"),
            Answer::NotNats(first) => write!(f, "answered '{first}', not NATS"),
            Answer::Unresolved(e) => write!(f, "name not resolved: {e}"),
            Answer::Failed(e) => f.write_str(e),
        }
    }
}

/// One `--server` URL's answer; `url` is shown as the user may see it (never its userinfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAnswer {
    pub url: String,
    pub answer: Answer,
    /// The probe's own connection that got the answer, when NATS answered.
    pub reached: Option<Reached>,
    /// The other members of its cluster the server announced (`connect_urls`, addresses only).
    pub peers: Vec<SocketAddr>,
    /// Which NATS answered (its INFO), when one did.
    pub identity: Option<Identity>,
}

/// The probe's own connection to a server: the address it dialled, its local address, and the
/// remote the kernel's socket table showed for it (None: not found in time). A socket-level
/// load balancer rewrites `connect()` before the socket connects, so `held_as` is the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reached {
    pub dialled: SocketAddr,
    pub local: SocketAddr,
    pub held_as: Option<SocketAddr>,
}

/// Which NATS a server is, as its INFO says: its `server_id` (new at every start) and the
/// name of the cluster it belongs to (`cluster`; none for a server alone).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    pub server_id: String,
    pub cluster: Option<String>,
}

/// A socket to `held_as` is a connection to `dialled`, a server URL's address: the probe's
/// own connection to `dialled` was held by the kernel as `held_as` (`Via::SocketLb`), or the
/// server at `dialled` announced `held_as` as a member of its cluster (`Via::ClusterPeer`), or
/// a healthy run counted a connection held as `held_as` for `dialled` (`Via::Counted`: that
/// connection only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Route {
    pub dialled: SocketAddr,
    pub held_as: SocketAddr,
    pub via: Via,
}

/// How a route was learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// The probe's own connection to the address was held as another: socket-level load
    /// balancing rewrote its `connect()` (its local address is the probe's own, never counted).
    SocketLb { probe: SocketAddr },
    /// The server's INFO named it in `connect_urls`: a client may reconnect to it directly.
    ClusterPeer,
    /// The address a client's socket was held as answered, asked directly, as a member of the
    /// same NATS as the URL (the same cluster, or the same server): another backend of the
    /// same Service.
    SameNats,
    /// A healthy run counted the connection from `local` held so (the exact lookup's memory):
    /// that connection, while it lasts, and no other.
    Counted { local: SocketAddr },
}

/// A route's JSON says how it was learned, in its word.
impl Serialize for Via {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.kind())
    }
}

impl Via {
    /// A word for scripts (the JSON `via` field).
    pub fn kind(&self) -> &'static str {
        match self {
            Via::SocketLb { .. } => "socket_lb",
            Via::ClusterPeer => "cluster_peer",
            Via::SameNats => "same_nats",
            Via::Counted { .. } => "counted",
        }
    }
}
