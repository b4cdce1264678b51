//! `check`: the pod's liveness verdict. The core's run (`natsprobe_core::run::Run`) decides
//! what to observe, in which order, and what it all means; this drives it with the real
//! observations (`observe::check::Eyes`) and the check's state file, and returns the report.

use crate::config::{CheckConfig, ReaderChoice, Setting};
use crate::error::Error;
use crate::facts::StateDirUsed;
use crate::observe::check::Eyes;
use crate::observe::{self, state};
use crate::report::check::CheckReport;
use crate::report::input::CheckInput;
use natsprobe_core::run::{Ask, Check, Ended, Refusal, Run, Seen, Start};
use natsprobe_core::state::Kept;
use std::time::Instant;

/// One check's run as it ended, and the servers as shown: what `check` reports and
/// `diagnose` explains.
#[derive(Debug, Clone)]
pub struct Checked {
    pub ended: Ended,
    /// The servers as shown (never with userinfo).
    pub servers: Vec<String>,
}

impl Checked {
    pub fn input<'a>(&'a self, config: &'a CheckConfig) -> CheckInput<'a> {
        let e = &self.ended;
        CheckInput {
            verdict: e.verdict,
            policy: &config.policy,
            connections: &e.connections,
            observations: &e.observations,
            servers: &self.servers,
            consumers_configured: config.consumers.len(),
            js_api: &config.js_api,
            consumers: &e.consumers,
            subscriptions: &e.subscriptions,
            verbose: config.verbose,
        }
    }
}

pub fn run(config: &CheckConfig, deadline: Instant) -> Result<CheckReport, Error> {
    let checked = judge(config, deadline, false)?;
    Ok(crate::report::check::check(&checked.input(config)))
}

/// The check's configuration as the core decides with it; `diagnose` walks the table and
/// keeps no connections.
pub fn core_check(config: &CheckConfig, diagnose: bool) -> Check {
    Check {
        connection: config.policy.clone(),
        owner_named: config.owner != crate::config::Owner::Anyone,
        netns_of: config.netns_of,
        exact: config.reader != ReaderChoice::Proc,
        diagnose,
        consumers: config.consumers.clone(),
        consumer: config.consumer_policy,
        own_subscription: config.own_subscription,
        subscriptions: config.subscriptions.clone(),
        monitor: config.monitor.as_ref().map(ToString::to_string),
        sample_every: config.sample_every,
        subscription_every: config.subscription_every,
    }
}

/// Runs the check: the core asks, the observations answer, until it has ended.
pub fn judge(config: &CheckConfig, deadline: Instant, diagnose: bool) -> Result<Checked, Error> {
    let check = core_check(config, diagnose);
    let opened = observe::state::open(&config.state_dir);
    let key = state::key(config);
    let (kept, previous_run_ms) = match &opened {
        Ok(o) => o.dir.load(&key),
        Err(_) => (Kept::Missing, None),
    };
    let place = match &opened {
        Ok(o) => Ok(StateDirUsed {
            path: o.dir.path.display().to_string(),
            skipped: shown(&o.skipped),
        }),
        Err(tried) => Err(shown(tried)),
    };
    let now_ms = observe::now_ms();
    let start = Start {
        kept,
        place,
        previous_run_ms,
        now_ms,
    };
    let dir = opened.as_ref().ok().map(|o| (&o.dir, key));
    let mut eyes = Eyes::new(config, deadline, dir, now_ms);
    let ended = drive(&check, start, |ask| eyes.see(ask))?;
    Ok(Checked {
        ended: ended.map_err(|refusal| refused(config, refusal))?,
        servers: config.servers.iter().map(ToString::to_string).collect(),
    })
}

/// The run, driven to its end by `see`.
pub fn drive(
    check: &Check,
    start: Start,
    mut see: impl FnMut(Ask) -> Result<Seen, Error>,
) -> Result<Result<Ended, Refusal>, Error> {
    let mut run = Run::new(check, start);
    while let Some(ask) = run.ask() {
        let seen = see(ask)?;
        run.feed(seen);
    }
    Ok(run.end())
}

fn shown(places: &[(std::path::PathBuf, String)]) -> Vec<(String, String)> {
    places
        .iter()
        .map(|(p, why)| (p.display().to_string(), why.clone()))
        .collect()
}

/// A configuration the run found can never work, as the error that says so: exit 2.
pub fn refused(config: &CheckConfig, refusal: Refusal) -> Error {
    match refusal {
        Refusal::NoPlace(tried) => {
            let tried: Vec<String> = tried.into_iter().map(|(_, why)| why).collect();
            // The fix first: the kubelet's event may cut the line.
            let fix = match config.state_dir.explicit {
                true => "give --state-dir a directory this user can write (an emptyDir)",
                false => "mount a writable volume (an emptyDir) and pass it as --state-dir, or set TMPDIR to one",
            };
            Error::Setting {
                setting: Setting::StateDir,
                path: None,
                problem: format!(
                    "no place to keep samples, so no run could compare: {fix} ({})",
                    tried.join("; ")
                ),
            }
        }
        Refusal::PullConsumer(name) => Error::Setting {
            setting: Setting::OwnSubscription,
            path: None,
            problem: format!(
                "{name} is a pull consumer: it has no subscription to match (drop --own-subscription, or name push consumers only)"
            ),
        },
    }
}
