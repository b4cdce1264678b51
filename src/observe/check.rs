//! The observations a check's run asks for (`natsprobe_core::run::Ask`), performed: the I/O
//! side of the run, with no decision of its own. Each ask gets its share of the deadline
//! (`natsprobe_core::timing`); the NATS connection is opened the first time an ask needs it
//! and closed before the state is kept.

use super::state::{Key, StateDir};
use super::{server, Nats};
use crate::config::CheckConfig;
use crate::error::Error;
use natsprobe_core::run::{Ask, ClientOf, Seen};
use natsprobe_core::timing::AFTER_THE_NETWORK;
use std::collections::HashSet;
use std::time::Instant;

/// What performs a check's asks.
pub struct Eyes<'a> {
    config: &'a CheckConfig,
    deadline: Instant,
    /// Where the network's asks end: set at the first of them.
    network: Option<Instant>,
    nats: Option<Nats>,
    /// Where the state is kept, and under which key.
    dir: Option<(&'a StateDir, Key)>,
    now_ms: i64,
}

impl<'a> Eyes<'a> {
    pub fn new(
        config: &'a CheckConfig,
        deadline: Instant,
        dir: Option<(&'a StateDir, Key)>,
        now_ms: i64,
    ) -> Eyes<'a> {
        Eyes {
            config,
            deadline,
            network: None,
            nats: None,
            dir,
            now_ms,
        }
    }

    /// Performs `ask`. Err: the run cannot go on (a PID that does not exist, a socket table
    /// that cannot be read, an unusable credentials file).
    pub fn see(&mut self, ask: Ask) -> Result<Seen, Error> {
        let config = self.config;
        let monitor = config.monitor.as_ref();
        Ok(match ask {
            Ask::Exact(known) => Seen::Exact(super::pod_again(config, known, self.deadline)),
            Ask::Walk(ports) => Seen::Walk(super::pod(config, ports, self.deadline)?),
            Ask::Servers => Seen::Servers(super::servers(&config.servers, self.network())?),
            Ask::Identities(addrs) => {
                Seen::Identities(server::identities(addrs, self.network()).ok())
            }
            Ask::Consumers(names) => {
                let (until, nats) = self.nats()?;
                Seen::Consumers {
                    observed: nats.consumers(names, until),
                    server_domain: nats.server_domain(),
                    server_jetstream: nats.server_jetstream(),
                }
            }
            Ask::Lookups(lookups) => {
                let (until, nats) = self.nats()?;
                let reached = nats.reached();
                Seen::Lookups(
                    lookups
                        .iter()
                        .map(|l| {
                            let at = monitor.filter(|_| l.direct);
                            let answer = nats.lookup(&l.server, l.cid, at, until);
                            (answer, l.direct || reached)
                        })
                        .collect(),
                )
            }
            Ask::Connz {
                wanted,
                ours,
                every,
            } => {
                let (until, nats) = self.nats()?;
                let reached = monitor.is_some() || nats.reached();
                Seen::Connz(nats.connz(wanted, ours, every, monitor, until), reached)
            }
            Ask::ClientAge(of) => {
                self.nats = None;
                let pids = match of {
                    ClientOf::Pids(pids) => pids,
                    ClientOf::Inodes(inodes) => super::sockets::owner::holders(
                        &inodes.iter().copied().collect::<HashSet<u64>>(),
                    ),
                };
                Seen::ClientAge(super::youngest(&pids))
            }
            Ask::Store(state) => {
                // The NATS connection is closed (or held for the next look) first.
                self.nats = None;
                crate::deadline::set_phase(crate::deadline::Phase::ComparingSamples);
                let stored = match &self.dir {
                    Some((dir, key)) => dir.store(key, state, self.now_ms),
                    None => Err("no state dir".into()),
                };
                Seen::Stored(stored)
            }
        })
    }

    /// When the network's asks end: what they leave of the time left, for keeping the state
    /// and answering, is `AFTER_THE_NETWORK`'s.
    fn network(&mut self) -> Instant {
        *self.network.get_or_insert_with(|| {
            let left = self.deadline.saturating_duration_since(Instant::now());
            server::network_deadline(self.deadline, AFTER_THE_NETWORK.of(left))
        })
    }

    /// When the network's asks end, and the NATS connection, opened the first time an ask
    /// needs it.
    fn nats(&mut self) -> Result<(Instant, &Nats), Error> {
        let until = self.network();
        if self.nats.is_none() {
            let c = self.config;
            self.nats = Some(Nats::open(&c.servers, &c.auth, &c.js_api, until)?);
        }
        Ok((until, self.nats.as_ref().expect("opened above")))
    }
}
