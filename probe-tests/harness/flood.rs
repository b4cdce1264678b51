//! Many held loopback connections inside a namespace: a large socket table for the deadline
//! test and the benchmark. Several processes hold them, each far under the per-process fd
//! limit (20,000 here, and no CAP_SYS_RESOURCE to raise it).

use super::{NetNs, Peer};
use std::time::Duration;

const PER_PROCESS: usize = 8_000;

pub struct Flood {
    _holders: Vec<Peer>,
}

impl Flood {
    /// `connections` loopback connections (two sockets each) inside `ns`.
    pub fn new(ns: &NetNs, connections: usize) -> Flood {
        let mut holders = Vec::new();
        let mut left = connections;
        while left > 0 {
            let n = left.min(PER_PROCESS);
            holders.push(Peer::spawn(
                Some(ns),
                &["flood", "-connections", &n.to_string()],
            ));
            left -= n;
        }
        for h in &mut holders {
            h.wait_for("ready", Duration::from_secs(120));
        }
        Flood { _holders: holders }
    }
}
