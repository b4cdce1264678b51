//! `check`: gathers the observations (the I/O edge), asks the verdict core, and returns a
//! report for the formatter. The order keeps the common case cheap: one socket read.

use crate::cli::{CheckConfig, Owner};
use crate::consumer::{self, Judgement, Observed, Outcome};
use crate::deadline::{set_phase, Phase};
use crate::error::Error;
use crate::nats::{self, ConsumerName, SetupError};
use crate::server::{self, Answer};
use crate::sockets::owner::{self, OwnerError, Process};
use crate::sockets::{self, Reader, ScanError};
use crate::state::{Key, Loaded, StateDir};
use crate::verdict::{self, Connections, ConsumerHealth, ServerState, Verdict};
use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

/// Kept back from the network's share of the deadline: shutting the runtime down and
/// formatting the answer.
const NETWORK_RESERVE: Duration = Duration::from_millis(15);

/// Everything the formatter needs to explain a verdict.
#[derive(Debug, Clone)]
pub struct Report {
    pub verdict: Verdict,
    pub config: CheckConfig,
    pub connections: Connections,
    /// The processes whose sockets counted; empty means the whole namespace.
    pub processes: Vec<Process>,
    pub reader: Reader,
    pub fallback: Option<String>,
    pub skipped_lines: usize,
    /// What each `--server` URL said, in order; empty when none was asked.
    pub answers: Vec<Answer>,
    /// Each `--consumer`, in order; empty when there is no connection to judge them by.
    pub consumers: Vec<ConsumerReport>,
}

/// One `--consumer`: what the server said, what it means, and what the state dir held.
#[derive(Debug, Clone)]
pub struct ConsumerReport {
    pub name: ConsumerName,
    pub observed: Observed,
    pub judgement: Judgement,
    /// None when the state dir could not be used.
    pub previous: Option<Loaded>,
    /// Why no sample was kept, when none was.
    pub state_problem: Option<String>,
}

impl ConsumerReport {
    pub fn health(&self) -> ConsumerHealth {
        match self.judgement.outcome {
            Outcome::Healthy(_) => ConsumerHealth::Healthy,
            Outcome::Unhealthy(_) => ConsumerHealth::Unhealthy,
            Outcome::NotJudged(_) => ConsumerHealth::NotJudged,
        }
    }
}

pub fn run(config: &CheckConfig, deadline: Instant) -> Result<Report, Error> {
    set_phase(Phase::LookingUpProcess);
    let processes = match &config.owner {
        Owner::Anyone => Vec::new(),
        Owner::Pid(pid) => vec![owner::process(*pid).map_err(|e| owner_error("--pid", e))?],
        Owner::Name(name) => {
            owner::processes_named(name).map_err(|e| owner_error("--process", e))?
        }
    };
    // The process's descriptors are read before the table, so a PID that vanished is
    // reported as such rather than as "no connection".
    let owned = if processes.is_empty() {
        None
    } else {
        set_phase(Phase::ReadingDescriptors);
        let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();
        let flag = if matches!(config.owner, Owner::Pid(_)) {
            "--pid"
        } else {
            "--process"
        };
        Some(owner::socket_inodes(&pids).map_err(|e| owner_error(flag, e))?)
    };
    if let Some(pid) = config.netns_of {
        owner::process(pid).map_err(|e| owner_error("--netns-of", e))?;
    }

    set_phase(Phase::ReadingSockets);
    let scan = sockets::scan(
        &config.policy.ports,
        config.netns_of,
        config.reader,
        deadline,
    )
    .map_err(scan_error)?;
    let connections = verdict::connections(&scan.sockets, &config.policy, owned.as_ref());

    let mut answers = Vec::new();
    if verdict::needs_server(&connections, &config.policy) {
        set_phase(Phase::AskingServer);
        let network_deadline = server::network_deadline(deadline, NETWORK_RESERVE);
        answers = server::ask_blocking(&config.servers, network_deadline)
            .map_err(Error::CannotEvaluate)?;
    }
    let state = (!answers.is_empty()).then(|| match answers.iter().any(Answer::is_nats) {
        true => ServerState::Answers,
        false => ServerState::NotAnswering,
    });

    let mut consumers = Vec::new();
    if !config.consumers.is_empty() && verdict::connected(&connections, &config.policy) {
        set_phase(Phase::AskingJetStream);
        let network_deadline = server::network_deadline(deadline, NETWORK_RESERVE);
        let observed = nats::observe(
            &config.servers,
            &config.auth,
            &config.consumers,
            network_deadline,
        )
        .map_err(|e| match e {
            SetupError::Config(m) => Error::Usage(m),
            SetupError::Runtime(m) => Error::CannotEvaluate(m),
        })?;
        set_phase(Phase::ComparingSamples);
        let inodes: HashSet<u64> = connections.established.iter().map(|s| s.inode).collect();
        consumers = judge_consumers(config, observed, &processes, &inodes);
    }
    let healths: Vec<ConsumerHealth> = consumers.iter().map(ConsumerReport::health).collect();
    let verdict = verdict::decide(&connections, state, &healths, &config.policy);
    Ok(Report {
        verdict,
        config: config.clone(),
        connections,
        processes,
        reader: scan.reader,
        fallback: scan.fallback,
        skipped_lines: scan.skipped_lines,
        answers,
        consumers,
    })
}

/// Judges each observed consumer against its previous sample and keeps the new one.
fn judge_consumers(
    config: &CheckConfig,
    observed: Vec<Observed>,
    processes: &[Process],
    inodes: &HashSet<u64>,
) -> Vec<ConsumerReport> {
    let (path, explicit) = &config.state_dir;
    let dir = StateDir::open(path.clone(), *explicit);
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let server: Vec<String> = config.servers.iter().map(ToString::to_string).collect();
    // The youngest holder of the client's connection, read at most once, and only if a
    // consumer is about to be called stalled.
    let mut age: Option<Option<Duration>> = None;
    let mut client_age = || *age.get_or_insert_with(|| client_age(processes, inodes));
    config
        .consumers
        .iter()
        .zip(observed)
        .map(|(name, observed)| {
            let key = Key {
                server: server.join(","),
                stream: name.stream.clone(),
                durable: name.durable.clone(),
            };
            let previous = dir.as_ref().ok().map(|d| d.load(&key));
            let prev = previous.as_ref().and_then(Loaded::sample);
            let judgement = consumer::judge(
                &observed,
                prev,
                &config.consumer_policy,
                now_ms,
                &mut client_age,
            );
            let state_problem = match (&dir, &judgement.sample) {
                (Err(e), _) => Some(e.clone()),
                (Ok(d), Some(sample)) => d.store(&key, sample).err(),
                (Ok(_), None) => None,
            };
            ConsumerReport {
                name: name.clone(),
                observed,
                judgement,
                previous,
                state_problem,
            }
        })
        .collect()
}

/// With --pid/--process the named processes, else whoever holds the connection.
fn client_age(processes: &[Process], inodes: &HashSet<u64>) -> Option<Duration> {
    let pids: Vec<u32> = match processes {
        [] => owner::holders(inodes),
        named => named.iter().map(|p| p.pid).collect(),
    };
    pids.into_iter().filter_map(owner::age).min()
}

fn owner_error(flag: &str, e: OwnerError) -> Error {
    match e {
        OwnerError::NoSuchPid(_) | OwnerError::NoSuchName(_) => {
            Error::Usage(format!("{flag}: {e}"))
        }
        OwnerError::Unreadable { .. } => Error::CannotEvaluate(format!(
            "{e} (the probe must run as the client's user, or with CAP_SYS_PTRACE)"
        )),
    }
}

fn scan_error(e: ScanError) -> Error {
    Error::CannotEvaluate(format!("cannot read the socket table: {e}"))
}
