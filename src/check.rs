//! `check`: gathers the observations (the I/O edge), asks the verdict core, and returns a
//! report for the formatter. The order keeps the common case cheap: one socket read.

use crate::cli::{CheckConfig, Owner};
use crate::error::Error;
use crate::server::{self, Answer};
use crate::sockets::owner::{self, OwnerError, Process};
use crate::sockets::{self, Reader, ScanError};
use crate::verdict::{self, Connections, ServerState, Verdict};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
}

/// What the run is doing, so a deadline can say where it was hit.
#[derive(Debug)]
pub struct Phase(Mutex<&'static str>);

impl Phase {
    pub fn new() -> Phase {
        Phase(Mutex::new("starting"))
    }

    pub fn set(&self, what: &'static str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = what;
    }

    pub fn get(&self) -> &'static str {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub fn run(config: &CheckConfig, deadline: Instant, phase: &Phase) -> Result<Report, Error> {
    phase.set("looking up the process");
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
        phase.set("reading the process's descriptors");
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

    phase.set("reading the socket table");
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
        phase.set("asking the server");
        let network_deadline = server::network_deadline(deadline, NETWORK_RESERVE);
        answers = server::ask_blocking(&config.servers, network_deadline)
            .map_err(Error::CannotEvaluate)?;
    }
    let state = (!answers.is_empty()).then(|| match answers.iter().any(Answer::is_nats) {
        true => ServerState::Answers,
        false => ServerState::NotAnswering,
    });
    let verdict = verdict::decide(&connections, state, &config.policy);
    Ok(Report {
        verdict,
        config: config.clone(),
        connections,
        processes,
        reader: scan.reader,
        fallback: scan.fallback,
        skipped_lines: scan.skipped_lines,
        answers,
    })
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
