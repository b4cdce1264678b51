//! Observation: all I/O. Reads the pod's socket and process tables, asks servers and
//! JetStream, reads and keeps samples, reads the clock; returns plain facts (`crate::facts`).
//! It makes no verdict: what to ask, and when, the core's run decides (`natsprobe_core::run`),
//! and `observe::check` performs its asks. Each function here is one observation;
//! `facts::Observations` holds a run's worth of them.

pub mod advisories;
pub mod check;
pub mod connz;
pub mod held;
pub mod http;
pub mod jetstream;
pub mod kept;
pub mod listing;
pub mod look;
pub mod nats;
pub mod server;
pub mod sockets;
pub mod state;
pub use server::servers;

use crate::config::{Auth, CheckConfig, JsApi, Owner, ServerUrl, Setting};
use crate::error::Error;
use crate::facts::{ConsumerName, KnownSocket, Observed, Pod, Process, Rechecked};
use natsprobe_core::timing::{LOOKUP_SHARE, MONITOR_SHARE};
use sockets::owner::{self, OwnerError};
use std::time::{Duration, Instant, SystemTime};

/// Whether each socket's `tcp_info` is asked for: the half-open rule needs it, and `-v` shows
/// it.
fn tcp_info(config: &CheckConfig) -> bool {
    config.core.connection.half_open_after.is_some() || config.verbose
}

/// The processes `config` names, their sockets, and the socket table (to `ports`, from the
/// namespace `config` names, with its reader). The descriptors are read before the table, so
/// a PID that does not exist is reported as such rather than as "no connection".
pub fn pod(config: &CheckConfig, ports: &[u16], deadline: Instant) -> Result<Pod, Error> {
    use crate::deadline::{set_phase, Phase};
    set_phase(Phase::LookingUpProcess);
    // The owner's processes, and the flag that named it, for its errors.
    let (processes, setting) = match &config.owner {
        Owner::Anyone => (Ok(Vec::new()), Setting::Process),
        Owner::Pid(pid) => (owner::process(*pid).map(|p| vec![p]), Setting::Pid),
        Owner::Name(name) => (owner::processes_named(name), Setting::Process),
    };
    let processes = processes.map_err(|e| owner_error(setting, e))?;
    let owned = match &config.owner {
        Owner::Anyone => None,
        _ => {
            set_phase(Phase::ReadingDescriptors);
            let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();
            Some(owner::socket_inodes(&pids).map_err(|e| owner_error(setting, e))?)
        }
    };
    if let Some(pid) = config.netns_of {
        owner::process(pid).map_err(|e| owner_error(Setting::NetnsOf, e))?;
    }
    set_phase(Phase::ReadingSockets);
    let mut scan = sockets::scan(
        ports,
        config.netns_of,
        config.reader,
        tcp_info(config),
        deadline,
    )
    .map_err(|e| Error::CannotEvaluate(format!("cannot read the socket table: {e}")))?;
    // natsprobe's own connection, held for the next look, is never the pod's.
    if held::holding() {
        let own = owner::socket_inodes(&[std::process::id()]).unwrap_or_default();
        scan.sockets.retain(|s| !own.contains_key(&s.inode));
    }
    Ok(Pod {
        processes,
        owned,
        scan,
        netns_of: config.netns_of,
    })
}

/// The connections the last healthy run counted, asked for again, each by its exact identity
/// (`sockets::exact`, one hash lookup each rather than a walk of the table): what the kernel
/// answers for each, and whether the owner still holds it through the remembered descriptor
/// (one readlink each, not a walk of /proc/PID/fd); and the owner's processes that do, for the
/// report. Err: why the questions could not be asked; the walk then finds out the rest.
pub fn pod_again(
    config: &CheckConfig,
    known: &[KnownSocket],
    deadline: Instant,
) -> Result<(Vec<Rechecked>, Vec<Process>), String> {
    use crate::deadline::{set_phase, Phase};
    set_phase(Phase::ReadingSockets);
    let answers = sockets::exact::look_up(known, config.netns_of, tcp_info(config), deadline)?;
    // A few holders at most: a list, not a HashMap (whose first use asks the kernel for random
    // keys).
    let mut named: Vec<(u32, bool)> = Vec::new();
    let rechecked: Vec<Rechecked> = known
        .iter()
        .zip(answers)
        .map(|(k, socket)| {
            let held = match (&config.owner, k.holder) {
                (Owner::Anyone, _) => true,
                (_, None) => false,
                (Owner::Pid(pid), Some(h)) => h.pid == *pid && owner::still_holds(h, k.inode),
                (Owner::Name(name), Some(h)) => {
                    owner::still_holds(h, k.inode)
                        && match named.iter().find(|(pid, _)| *pid == h.pid) {
                            Some(&(_, is)) => is,
                            None => {
                                let is = owner::named(h.pid, name);
                                named.push((h.pid, is));
                                is
                            }
                        }
                }
            };
            Rechecked { socket, held }
        })
        .collect();
    let processes = match &config.owner {
        Owner::Anyone => Vec::new(),
        Owner::Pid(pid) => vec![owner::process(*pid).map_err(|e| e.to_string())?],
        Owner::Name(name) => {
            let pids: std::collections::BTreeSet<u32> = known
                .iter()
                .zip(&rechecked)
                .filter(|(_, r)| r.held)
                .filter_map(|(k, _)| k.holder.map(|h| h.pid))
                .collect();
            pids.into_iter()
                .map(|pid| Process {
                    pid,
                    name: name.clone(),
                })
                .collect()
        }
    };
    Ok((rechecked, processes))
}

/// One NATS connection with the pod's credentials, on its own runtime, for the observations
/// that need the server: the consumers and the connection list. Closed when dropped.
pub struct Nats {
    runtime: tokio::runtime::Runtime,
    session: Result<nats::Session, crate::facts::Unknown>,
    /// The connection's name: the probe finds its own connection in the server's list by it.
    name: String,
}

impl Nats {
    /// Connects by `deadline`. An unreachable server is no error here: every observation
    /// through it is then "not judged" with the reason.
    pub fn open(
        urls: &[ServerUrl],
        auth: &Auth,
        api: &JsApi,
        deadline: Instant,
    ) -> Result<Nats, Error> {
        crate::deadline::set_phase(crate::deadline::Phase::AskingJetStream);
        if let Some((runtime, session, name)) = held::take() {
            return Ok(Nats {
                runtime,
                session: Ok(session),
                name,
            });
        }
        let runtime = server::network_runtime().map_err(Error::CannotEvaluate)?;
        let name = connz::probe_name();
        let session = runtime.block_on(nats::Session::connect(
            urls,
            auth,
            api,
            &name,
            deadline,
            held::holding(),
        ))?;
        Ok(Nats {
            runtime,
            session,
            name,
        })
    }

    /// The JetStream domain the connected server announced, if any.
    pub fn server_domain(&self) -> Option<String> {
        self.session.as_ref().ok()?.server_domain()
    }

    /// Whether the connected server announced JetStream of its own.
    pub fn server_jetstream(&self) -> bool {
        self.session
            .as_ref()
            .is_ok_and(|s| s.client.server_info().jetstream)
    }

    /// Every consumer at once (and the streams where work waits).
    pub fn consumers(&self, names: &[ConsumerName], deadline: Instant) -> Vec<Observed> {
        crate::deadline::set_phase(crate::deadline::Phase::AskingJetStream);
        match &self.session {
            Ok(session) => self.runtime.block_on(session.consumers(names, deadline)),
            Err(why) => names
                .iter()
                .map(|_| Observed::NotJudged(why.clone()))
                .collect(),
        }
    }

    /// The server's connection list, as far as the wanted subscriptions need it. With
    /// `monitor`, from its monitoring port first: where it lists this pod's connection, every
    /// later lookup of it goes there, directly (`/connz?cid=N`). Else, or when it does not list
    /// it (the pod is on another server), from the account's connection report; the
    /// monitoring port's answer stands when that report cannot be had.
    pub fn connz(
        &self,
        wanted: &[crate::facts::Wanted],
        ours: &[std::net::SocketAddr],
        every: bool,
        monitor: Option<&crate::config::MonitorUrl>,
        deadline: Instant,
    ) -> Result<crate::facts::Connz, crate::facts::Unknown> {
        crate::deadline::set_phase(crate::deadline::Phase::AskingConnections);
        let from_monitor = monitor.map(|url| {
            // Its share of the time that is left, the rest for the account's report.
            let until = Instant::now()
                + MONITOR_SHARE.of(deadline.saturating_duration_since(Instant::now()));
            self.runtime.block_on(connz::monitor::from_monitor(
                url, wanted, ours, &self.name, until,
            ))
        });
        let listed = |c: &crate::facts::Connz| {
            c.holding
                .iter()
                .chain(c.all.iter().flatten())
                .any(|conn| ours.contains(&conn.addr))
        };
        if let Some(Ok(c)) = &from_monitor {
            if listed(c) {
                return Ok(c.clone());
            }
        }
        let account = match &self.session {
            Ok(session) => self.runtime.block_on(connz::from_account(
                session, wanted, ours, every, &self.name, deadline,
            )),
            Err(why) => Err(why.clone()),
        };
        match (account, from_monitor) {
            (Ok(connz), _) => Ok(connz),
            (Err(_), Some(Ok(connz))) => Ok(connz),
            (Err(why), _) => Err(why),
        }
    }

    /// Whether the probe's login went through: an ask over a session that never opened (the
    /// login refused, or late) never reached the server.
    pub fn reached(&self) -> bool {
        self.session.is_ok()
    }

    /// One remembered connection by its cid (`rules::remembered`): from the monitoring port
    /// `monitor` when given (it was matched there), else from the account's connection report.
    pub fn lookup(
        &self,
        at: &crate::facts::ServerIdent,
        cid: u64,
        monitor: Option<&crate::config::MonitorUrl>,
        deadline: Instant,
    ) -> Result<Vec<crate::facts::LookedUp>, crate::facts::Unknown> {
        crate::deadline::set_phase(crate::deadline::Phase::AskingConnections);
        // Its share of the time that is left: a server that does not answer by name leaves the
        // rest to matching by address.
        let until =
            Instant::now() + LOOKUP_SHARE.of(deadline.saturating_duration_since(Instant::now()));
        if let Some(url) = monitor {
            return self
                .runtime
                .block_on(connz::monitor::lookup_monitor(url, cid, until));
        }
        match &self.session {
            Ok(session) => self
                .runtime
                .block_on(connz::lookup_account(session, at, cid, until)),
            Err(why) => Err(why.clone()),
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let runtime = std::mem::replace(
            &mut self.runtime,
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("an empty runtime"),
        );
        let session = std::mem::replace(&mut self.session, Err(crate::facts::Unknown::Deadline));
        match session {
            // Held for the next look, where a look holds it (`held`), once it has answered
            // every ask of this one.
            Ok(session) if held::holding() && session.answered() => {
                held::keep(runtime, session, std::mem::take(&mut self.name))
            }
            // The connection's background task is not waited for: the answer is ready.
            _ => runtime.shutdown_background(),
        }
    }
}

/// How long ago the youngest of `pids` started; None when none can be read.
pub fn youngest(pids: &[u32]) -> Option<Duration> {
    pids.iter().filter_map(|&pid| owner::age(pid)).min()
}

/// The local clock, ms since the epoch: the one wall-clock reading a run makes.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn owner_error(setting: Setting, e: OwnerError) -> Error {
    match e {
        OwnerError::NoSuchPid(_) | OwnerError::NoSuchName(_) => Error::Setting {
            setting,
            path: None,
            problem: e.to_string(),
        },
        OwnerError::Unreadable { .. } => Error::CannotEvaluate(format!(
            "{e} (the probe must run as the client's user, or with CAP_SYS_PTRACE)"
        )),
    }
}
