//! `check`: the pod's liveness verdict. The core's run (`natsprobe_core::run::Run`) decides
//! what to observe, in which order, and what it all means; this drives it with the real
//! observations (`observe::check::Eyes`) and the check's state file, and returns the report.

use crate::config::{CheckConfig, Setting};
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
            policy: &config.core.connection,
            connections: &e.connections,
            observations: &e.observations,
            servers: &self.servers,
            consumers_configured: config.core.consumers.len(),
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

/// Runs the check: the core asks, the observations answer, until it has ended. `diagnose`
/// walks the table and keeps no connections.
pub fn judge(config: &CheckConfig, deadline: Instant, diagnose: bool) -> Result<Checked, Error> {
    let check = Check {
        diagnose,
        ..config.core.clone()
    };
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::check::tests::parse;
    use crate::facts::{Lookup, Pod};
    use crate::rules::check::{Health, Reason};
    use std::net::{TcpListener, TcpStream};

    /// The run is driven by what the observations answer, to its end.
    #[test]
    fn the_run_is_driven_to_its_end() {
        let config = parse(&["natsprobe", "--port", "4222"]).unwrap();
        let check = &config.core;
        let start = Start {
            kept: Kept::Missing,
            place: Err(Vec::new()),
            previous_run_ms: None,
            now_ms: 0,
        };
        let mut asked = Vec::new();
        let ended = drive(check, start.clone(), |ask| {
            asked.push(format!("{ask:?}"));
            Ok(Seen::Walk(Pod::default()))
        })
        .unwrap()
        .unwrap();
        assert_eq!(asked, ["Walk([4222])"]);
        assert_eq!(ended.verdict.reason, Reason::NotConnected);
        // An observation that cannot be made ends the run with its error.
        let failed = drive(check, start, |_| {
            Err(Error::CannotEvaluate("no /proc".into()))
        });
        assert!(matches!(failed, Err(Error::CannotEvaluate(_))));
    }

    /// A refusal names its setting and says the fix first.
    #[test]
    fn a_refusal_names_its_setting_and_fix() {
        let explicit = parse(&["natsprobe", "--state-dir", "/x"]).unwrap();
        let tried = vec![
            ("/x".to_string(), "/x is a symlink".to_string()),
            ("/y".to_string(), "no room left on /y".to_string()),
        ];
        let Error::Setting {
            setting, problem, ..
        } = refused(&explicit, Refusal::NoPlace(tried.clone()))
        else {
            panic!("not a setting")
        };
        assert_eq!(setting, Setting::StateDir);
        assert_eq!(
            problem,
            "no place to keep samples, so no run could compare: give --state-dir a directory this user can write (an emptyDir) (/x is a symlink; no room left on /y)"
        );
        let default = parse(&["natsprobe"]).unwrap();
        let Error::Setting { problem, .. } = refused(&default, Refusal::NoPlace(tried)) else {
            panic!("not a setting")
        };
        assert!(problem.contains("mount a writable volume (an emptyDir) and pass it as --state-dir, or set TMPDIR to one"));
        assert_eq!(
            shown(&[(std::path::PathBuf::from("/a"), "why".into())]),
            [("/a".to_string(), "why".to_string())]
        );
    }

    /// The whole check on this machine's own socket table: a connection held on loopback
    /// passes, kept in the state dir and found by the exact lookup the next run; none is
    /// unhealthy; the report says so.
    #[test]
    fn a_check_of_this_machines_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port().to_string();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().to_string_lossy().to_string();
        let config = parse(&["natsprobe", "--port", &port, "--state-dir", &dir]).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let first = judge(&config, deadline, false).unwrap();
        assert_eq!(first.ended.verdict.health, Health::Healthy);
        assert!(matches!(
            first.ended.observations.pod.scan.lookup,
            Lookup::Walk(_)
        ));
        let second = run(&config, deadline).unwrap();
        assert_eq!(second.health, Health::Healthy);
        assert_eq!(second.connection.lookup, "exact");
        assert_eq!(first.servers, Vec::<String>::new());
        let input = first.input(&config);
        assert_eq!(input.consumers_configured, 0);
        drop(listener);
        let unused = TcpListener::bind("127.0.0.1:0").unwrap();
        let none = unused.local_addr().unwrap().port().to_string();
        let config = parse(&["natsprobe", "--port", &none, "--state-dir", &dir]).unwrap();
        assert_eq!(run(&config, deadline).unwrap().health, Health::Unhealthy);
    }
}
