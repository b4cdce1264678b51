//! `serve`: the check's verdict behind the kubelet's httpGet probes, answered from memory.
//! One thread looks (a `check` every `--every` in the looks' own process, which holds its NATS
//! connection from one look to the next: the same flags, the same deadline and memory budget,
//! the same JSON); the main thread answers every connection
//! (`observe::http::serve`): it takes what the looks left (a lock held only to copy two
//! pointers and two times), asks the rule (`rules::serve`) and writes the answer. No probe
//! waits on a look, on NATS or on /proc.

use crate::config::{Look, ServeConfig};
use crate::error::Error;
use crate::facts::{Ended, ProbePath, Refusal, Request};
use crate::observe;
use crate::report::serve as words;
use crate::rules::serve::{self as rule, Memory};
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections held at once; a new one past it closes the oldest.
pub const MOST_CONNECTIONS: usize = 32;
/// A probe's whole exchange, request and answer; the kubelet's own timeout is at least 1 s.
const EXCHANGE_WITHIN: Duration = Duration::from_secs(2);
/// What a look is given beyond its own `--timeout` before it is killed.
const LOOK_GRACE: Duration = Duration::from_secs(1);

/// Binds `--listen` (the default, every IPv6 and IPv4 address, falls back to IPv4's when the
/// pod has no IPv6), then serves until a signal ends the process. `look_args` are `serve`'s
/// own arguments, given again to each look; `log` writes a line to `serve`'s log.
pub fn run(
    config: &ServeConfig,
    look_args: &[OsString],
    log: &'static (dyn Fn(&str) + Sync),
) -> Result<std::convert::Infallible, Error> {
    let listener = bind(config.listen)?;
    let shown = listener
        .local_addr()
        .map_or_else(|_| config.listen.to_string(), |a| a.to_string());
    log(&format!(
        "natsprobe serve: answering on {shown} (/livez{}, /selfz), a look every {}",
        if config.startup { ", /startupz" } else { "" },
        crate::config::duration::display(config.every)
    ));
    let stale = rule::stale_after(config.every, config.check.timeout + LOOK_GRACE);
    // Times in `Memory` run from `stale` before this start, so that a verdict a `serve`
    // before this one kept, younger than `stale`, has its place on the same clock.
    let started = Instant::now();
    let kept = observe::kept::Kept::open(&config.check.state_dir, look_args);
    let mut memory = Memory {
        beat: stale,
        ..Memory::default()
    };
    if let Some(left) = kept.as_ref().and_then(observe::kept::Kept::left) {
        if let Some(age) = rule::still_stands(left.at_ms, observe::now_ms(), stale) {
            log(&format!(
                "{} (kept by natsprobe serve before it started again, {}s ago)",
                words::look_line(&left.judged),
                age.as_secs()
            ));
            memory.startup_passed = left.startup_passed;
            memory.judged = Some((Arc::new(left.judged), stale - age));
        }
    }
    let looks = Arc::new(Mutex::new(memory));
    {
        let looks = Arc::clone(&looks);
        let config = config.clone();
        let look_args = look_args.to_vec();
        std::thread::Builder::new()
            .name("looks".into())
            .spawn(move || look_forever(&config, &look_args, &looks, (started, stale), kept, log))
            .map_err(|e| Error::CannotEvaluate(format!("could not start the looks: {e}")))?;
    }
    let startup = config.startup;
    let limits = observe::http::Limits {
        most_connections: MOST_CONNECTIONS,
        within: EXCHANGE_WITHIN,
    };
    let error = observe::http::serve(&listener, limits, &mut |request| {
        let (response, head) = match request {
            Request::Probe {
                path: ProbePath::Startup,
                head,
                ..
            } if !startup => (words::refusal(Refusal::StartupNotAsked), head),
            Request::Probe { path, json, head } => {
                let memory = looks.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let held = memory.held(started.elapsed() + stale);
                (words::answer(&rule::answer(path, &held, stale), json), head)
            }
            Request::Refused(refusal) => (words::refusal(refusal), false),
        };
        words::http(&response, head)
    });
    Err(Error::CannotEvaluate(format!(
        "could not answer on {shown}: {error}"
    )))
}

fn bind(listen: SocketAddr) -> Result<TcpListener, Error> {
    match TcpListener::bind(listen) {
        Ok(l) => Ok(l),
        // No IPv6 in the pod: the default's IPv4 half alone.
        Err(e)
            if listen.ip().is_unspecified()
                && listen.is_ipv6()
                && e.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
        {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, listen.port()))
                .map_err(|e| Error::Usage(format!("--listen 0.0.0.0:{}: {e}", listen.port())))
        }
        Err(e) => Err(Error::Usage(format!("--listen {listen}: {e}"))),
    }
}

/// The looks, one after another, a look starting every `--every` (or when the last ended,
/// if it took longer). Logs each change of what the looks say.
fn look_forever(
    config: &ServeConfig,
    look_args: &[OsString],
    looks: &Mutex<Memory>,
    (started, shift): (Instant, Duration),
    kept: Option<observe::kept::Kept>,
    log: &(dyn Fn(&str) + Sync),
) -> ! {
    let mut said: Option<(bool, String)> = None;
    let mut args: Vec<OsString> = vec!["serve".into(), "--look".into()];
    args.extend(look_args.iter().cloned());
    let mut process = observe::look::Looks::new(observe::look::own_executable(), args);
    loop {
        let began = Instant::now();
        let startup_passed = looks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .startup_passed;
        let startup = rule::look_is_startup(config.startup, startup_passed);
        let meaning = if startup { Look::Startup } else { Look::Live };
        let memory = observe::look::memory_limit();
        let ended = match memory {
            Some((limit, usage)) if !rule::room_to_look(memory) => {
                Ended::Trouble(words::no_room(limit, usage))
            }
            _ => process.look(meaning, config.check.timeout + LOOK_GRACE),
        };
        let (line, kind) = match &ended {
            Ended::Judged(j) => (words::look_line(j), format!("{} {}", j.code, j.verdict)),
            Ended::Trouble(what) => (words::trouble_line(what), "trouble".to_string()),
        };
        let at = started.elapsed() + shift;
        let keep = match (&ended, &kept) {
            (Ended::Judged(judged), Some(_)) => Some(judged.clone()),
            _ => None,
        };
        let startup_passed = {
            let mut memory = looks.lock().unwrap_or_else(|e| e.into_inner());
            memory.ended(ended, at);
            memory.startup_passed
        };
        if let (Some(judged), Some(kept)) = (keep, &kept) {
            kept.keep(&judged, observe::now_ms(), startup_passed);
        }
        let changed = said
            .as_ref()
            .is_none_or(|(startup_said, k)| *k != kind || *startup_said != startup);
        if changed || kind == "trouble" {
            log(&line);
            said = Some((startup, kind));
        }
        std::thread::sleep((began + config.every).saturating_duration_since(Instant::now()));
    }
}

/// SIGTERM and SIGINT end `serve` at once, exit 0: as a container's PID 1 it has no default
/// action for them, and the kubelet would wait out the grace period.
pub fn end_on_signals() {
    extern "C" fn end(_: libc::c_int) {
        // SAFETY: _exit is async-signal-safe; nothing is flushed or freed on the way out.
        unsafe { libc::_exit(0) }
    }
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `end` is an `extern "C"` handler that calls only async-signal-safe _exit;
        // signal() installs it for a signal whose default action the process may replace.
        unsafe {
            libc::signal(
                signal,
                end as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    /// The memory budget holds what serve keeps at its worst: every connection holding a
    /// whole request and the largest answer (a look's whole output), and the looks' two.
    #[test]
    fn the_budget_holds_every_connection_at_its_largest() {
        use crate::observe::{http::MOST_REQUEST, look::MOST_OUTPUT};
        let answer = MOST_OUTPUT + 4096;
        let worst = super::MOST_CONNECTIONS * (MOST_REQUEST + answer) + 3 * MOST_OUTPUT;
        assert!(crate::budget::SERVE >= worst + (2 << 20), "{worst}");
    }
}
