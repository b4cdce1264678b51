//! The connections the last healthy run counted: asked for again by the exact lookup (which
//! decides the run when enough are as they were), and kept after a walk for the next run.

use crate::config::{CheckConfig, Owner};
use crate::facts::{Holder, KnownSocket, Lookup, Pod, Reader, Route, SocketScan, Via, Walked};
use crate::observe::state::{Of, StateDir};
use crate::observe::{self, PodTarget};
use crate::rules::check::{self as verdict, Verdict};
use crate::rules::connection::{self, Connections};
use crate::rules::exact;
use std::collections::BTreeMap;
use std::time::Instant;

/// A run decided by the exact lookup: its verdict, connections and pod.
pub(super) struct Decided {
    pub verdict: Verdict,
    pub connections: Connections,
    pub pod: Pod,
}

/// The connections the last healthy run counted, where the state dir keeps them for these
/// sockets (the ports, whose, which namespace).
pub(super) struct Remembered<'a> {
    dir: &'a StateDir,
    of: Of<'a>,
    known: Vec<KnownSocket>,
}

impl<'a> Remembered<'a> {
    /// What the state dir holds (without a usable state dir nothing is loaded, and every run
    /// walks, as a socket check needs no state dir).
    pub(super) fn load(config: &'a CheckConfig, dir: &'a StateDir) -> Remembered<'a> {
        let of = Of::Sockets {
            ports: &config.policy.ports,
            owner: &config.owner,
            netns_of: config.netns_of,
        };
        let known = observe::remembered::load_sockets(dir, of);
        Remembered { dir, of, known }
    }

    /// The run decided by asking the kernel for exactly the remembered connections, when
    /// enough of them are unchanged and live; else why the table must be walked.
    pub(super) fn look_up(
        &self,
        config: &CheckConfig,
        deadline: Instant,
    ) -> Result<Decided, Walked> {
        if self.known.is_empty() {
            return Err(Walked::NothingRemembered);
        }
        let (rechecked, processes) = observe::pod_again(target(config), &self.known, deadline)
            .map_err(|_| Walked::LookupFailed)?;
        let found: Vec<(KnownSocket, _)> = self
            .known
            .iter()
            .zip(&rechecked)
            .filter_map(|(k, again)| Some((*k, exact::unchanged(k, again)?)))
            .collect();
        let owned: Option<BTreeMap<u64, Holder>> = match config.owner {
            Owner::Anyone => None,
            _ => Some(
                found
                    .iter()
                    .filter_map(|(k, _)| Some((k.inode, k.holder?)))
                    .collect(),
            ),
        };
        // A connection counted through a route counts for the same server while unchanged.
        let routes = self.routes();
        let sockets: Vec<_> = found.into_iter().map(|(_, s)| s).collect();
        let connections =
            connection::connections(&sockets, &config.policy, owned.as_ref(), &routes);
        if !connection::connected(&connections, &config.policy) {
            return Err(Walked::Changed {
                remembered: self.known.len(),
                live: connection::live(&connections),
            });
        }
        // Enough of them are as they were: the ones that are not are asked for no more.
        self.keep(config, &connections, owned.as_ref());
        let verdict = verdict::decide(&connections, None, &[], &config.policy);
        let scan = SocketScan {
            sockets,
            reader: Reader::Netlink,
            fallback: None,
            skipped_lines: 0,
            lookup: Lookup::Exact {
                remembered: self.known.len(),
            },
        };
        let pod = Pod {
            processes,
            owned,
            scan,
            netns_of: config.netns_of,
        };
        Ok(Decided {
            verdict,
            connections,
            pod,
        })
    }

    /// The routes the remembered connections were counted by: each of those connections, while
    /// it lasts, stands for the same server address (`Via::Counted`).
    pub(super) fn routes(&self) -> Vec<Route> {
        self.known
            .iter()
            .filter_map(|k| {
                Some(Route {
                    dialled: k.stands_for?,
                    held_as: k.remote,
                    via: Via::Counted { local: k.local },
                })
            })
            .collect()
    }

    /// Keeps what the next run looks up (`rules::exact::remember`), written only when it
    /// changed. Best effort: a run with nothing remembered walks.
    pub(super) fn keep(
        &self,
        config: &CheckConfig,
        connections: &Connections,
        owned: Option<&BTreeMap<u64, Holder>>,
    ) {
        // An unhealthy run leaves the file: a remembered connection that is gone costs the next
        // run one lookup, and one that is back is found again.
        if !connection::connected(connections, &config.policy) {
            return;
        }
        let keep = exact::remember(connections, &config.policy, owned);
        if keep != self.known {
            let _ = observe::remembered::store_sockets(self.dir, self.of, &keep);
        }
    }
}

/// Which sockets to read: whose, from which namespace, with which reader, to which ports.
pub(super) fn target(config: &CheckConfig) -> PodTarget<'_> {
    PodTarget {
        owner: &config.owner,
        netns_of: config.netns_of,
        reader: config.reader,
        ports: &config.policy.ports,
        tcp_info: config.policy.half_open_after.is_some() || config.verbose,
    }
}
