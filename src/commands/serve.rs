//! `serve`: the check's verdict behind the kubelet's httpGet probes, answered from memory.
//! The core's `rules::serve::Looks` decides when each look starts, with which meaning, and
//! what a probe is answered; this drives it. One thread looks (a `check` in the looks' own
//! process, which holds its NATS connection from one look to the next: the same flags, the
//! same deadline and memory budget, the same JSON); the main thread answers every connection
//! (`observe::http::serve`): it takes what the looks left (a lock held only to copy two
//! pointers and two times) and writes the answer. No probe waits on a look, on NATS or on
//! /proc.

use crate::config::ServeConfig;
use crate::error::Error;
use crate::facts::{Ended, ProbePath, Refusal, Request};
use crate::observe;
use crate::report::{metrics, serve as words};
use crate::rules::serve::{self as rule, Looks};
use natsprobe_core::timing::EXCHANGE_WITHIN;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Connections held at once; a new one past it closes the oldest.
pub const MOST_CONNECTIONS: usize = 32;

/// Binds `--listen` (the default, every IPv6 and IPv4 address, falls back to IPv4's when the
/// pod has no IPv6), then serves until a signal ends the process, or `--exit-unhealthy` does
/// through `end`. `look_args` are `serve`'s own arguments, given again to each look; `log`
/// writes a line to `serve`'s log.
pub fn run(
    config: &ServeConfig,
    look_args: &[OsString],
    log: &'static (dyn Fn(&str) + Sync),
    end: fn(u8) -> !,
) -> Result<std::convert::Infallible, Error> {
    let listener = bind(config.listen, TcpListener::bind)?;
    let startup = config.check.core.connection.startup;
    let shown = listener
        .local_addr()
        .map_or_else(|_| config.listen.to_string(), |a| a.to_string());
    log(&format!(
        "natsprobe serve: answering on {shown} (/livez{}, /selfz, /metrics), a look every {}",
        if startup { ", /startupz" } else { "" },
        crate::config::duration::display(config.every)
    ));
    let started = Instant::now();
    let kept = observe::kept::Kept::open(&config.check.state_dir, look_args);
    let left = kept.as_ref().and_then(observe::kept::Kept::left);
    let now_ms = observe::now_ms();
    let looks = Looks::new(
        config.every,
        config.check.timeout,
        startup,
        left.clone(),
        now_ms,
    );
    let looks = match config.exit_unhealthy {
        Some(exit) => looks.exiting(exit),
        None => looks,
    };
    if let Some(left) = left.filter(|_| looks.memory().judged.is_some()) {
        log(&format!(
            "{} (kept by natsprobe serve before it started again, {}s ago)",
            words::look_line(&left.judged),
            (now_ms - left.at_ms).max(0) / 1000
        ));
    }
    let looks = Arc::new(Mutex::new(looks));
    {
        let looks = Arc::clone(&looks);
        let config = config.clone();
        let look_args = look_args.to_vec();
        std::thread::Builder::new()
            .name("looks".into())
            .spawn(move || look_forever(&config, &look_args, &looks, started, kept, (log, end)))
            .map_err(|e| Error::CannotEvaluate(format!("could not start the looks: {e}")))?;
    }
    let limits = observe::http::Limits {
        most_connections: MOST_CONNECTIONS,
        within: EXCHANGE_WITHIN,
    };
    let parts = config.check.parts();
    let error = observe::http::serve(&listener, limits, &mut |request| {
        let memory = looks.lock().unwrap_or_else(|e| e.into_inner()).memory();
        let now = metrics::Scrape {
            memory: &memory,
            since_start: started.elapsed(),
            now_ms: observe::now_ms(),
            parts: &parts,
            version: crate::cli::VERSION,
        };
        respond(request, startup, &now)
    });
    Err(Error::CannotEvaluate(format!(
        "could not answer on {shown}: {error}"
    )))
}

/// The bytes a request is answered with, from what the looks left at `now`.
fn respond(request: Request, startup: bool, now: &metrics::Scrape) -> Vec<u8> {
    let (response, head) = match request {
        Request::Metrics { open_metrics, head } => (words::metrics(now, open_metrics), head),
        Request::Probe {
            path: ProbePath::Startup,
            head,
            ..
        } if !startup => (words::refusal(Refusal::StartupNotAsked), head),
        Request::Probe { path, json, head } => (
            words::answer(&now.memory.answer(path, now.since_start), json),
            head,
        ),
        Request::Refused(refusal) => (words::refusal(refusal), false),
    };
    words::http(&response, head)
}

/// Whether `--listen` falls back to IPv4's every address: the default's, in a pod without
/// IPv6.
fn ipv4_instead(listen: SocketAddr, error: Option<i32>) -> bool {
    listen.ip().is_unspecified() && listen.is_ipv6() && error == Some(libc::EAFNOSUPPORT)
}

/// Binds `listen` with `bind` (a test's may refuse IPv6).
fn bind(
    listen: SocketAddr,
    bind: impl Fn(SocketAddr) -> std::io::Result<TcpListener>,
) -> Result<TcpListener, Error> {
    match bind(listen) {
        Ok(l) => Ok(l),
        // No IPv6 in the pod: the default's IPv4 half alone.
        Err(e) if ipv4_instead(listen, e.raw_os_error()) => {
            bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, listen.port())))
                .map_err(|e| Error::Usage(format!("--listen 0.0.0.0:{}: {e}", listen.port())))
        }
        Err(e) => Err(Error::Usage(format!("--listen {listen}: {e}"))),
    }
}

/// Where `serve` writes a line of its log, and how it ends the process with a code.
type LogAndEnd<'a> = (&'a (dyn Fn(&str) + Sync), fn(u8) -> !);

/// The looks, one after another, when and as `Looks` says; each change of what they say
/// logged, each verdict kept for a `serve` started again, and `serve` ended when `Looks`
/// says to exit.
fn look_forever(
    config: &ServeConfig,
    look_args: &[OsString],
    looks: &Mutex<Looks>,
    started: Instant,
    kept: Option<observe::kept::Kept>,
    (log, end): LogAndEnd,
) -> ! {
    let lock = || looks.lock().unwrap_or_else(|e| e.into_inner());
    let mut args: Vec<OsString> = vec!["serve".into(), "--look".into()];
    args.extend(look_args.iter().cloned());
    let mut process = observe::look::Looks::new(observe::look::own_executable(), args);
    let limit = Looks::limit(config.check.timeout);
    loop {
        let (at, meaning) = lock().next();
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        let began = started.elapsed();
        let ended = match no_room(observe::look::memory_limit()) {
            Some(trouble) => Ended::Trouble(trouble),
            None => process.look(meaning, limit),
        };
        let line = match &ended {
            Ended::Judged(j) => words::look_line(j),
            Ended::Trouble(what) => words::trouble_line(what),
        };
        // Kept before it is the answer: a probe is never given a verdict a `serve` killed the
        // next moment would not find.
        let left = lock().to_keep(&ended, observe::now_ms());
        if let (Some(left), Some(kept)) = (left, &kept) {
            kept.keep(&left);
        }
        let logins = process.logins();
        let (said, exit) = {
            let mut looks = lock();
            looks.logged_in(logins);
            let said = looks.ended(ended, began, started.elapsed());
            (said, looks.exit())
        };
        if said {
            log(&line);
        }
        if let (Some(code), Some(e)) = (exit, config.exit_unhealthy) {
            log(&words::exiting(e.after, code));
            end(code);
        }
    }
}

/// Why a look may not start: the container's memory limit leaves no room for it.
fn no_room(memory: Option<(u64, u64)>) -> Option<String> {
    match memory {
        Some((limit, usage)) if !rule::room_to_look(memory) => Some(words::no_room(limit, usage)),
        _ => None,
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
    use super::*;
    use crate::facts::Judged;
    use std::time::Duration;

    /// A probe's answer: the verdict from memory, `/startupz` refused without `--startup`,
    /// anything else refused; HEAD without a body.
    #[test]
    fn each_request_gets_its_answer() {
        let mut looks = Looks::new(
            Duration::from_secs(10),
            Duration::from_millis(800),
            false,
            None,
            0,
        );
        let judged = |code| {
            Ended::Judged(Judged {
                code,
                verdict: "unhealthy".into(),
                summary: "consumer S/D: no progress".into(),
                json: "{}".into(),
                startup: false,
                ..Judged::default()
            })
        };
        looks.ended(judged(1), Duration::ZERO, Duration::from_millis(5));
        let memory = looks.memory();
        // The answer to `request`, `startup` asked or not, `s` seconds after the start.
        let answer = |request, startup, s| {
            let now = metrics::Scrape {
                memory: &memory,
                since_start: Duration::from_secs(s),
                now_ms: 1_700_000_000_000,
                parts: &[],
                version: crate::cli::VERSION,
            };
            String::from_utf8(respond(request, startup, &now)).unwrap()
        };
        let probe = |path, head| Request::Probe {
            path,
            json: false,
            head,
        };
        let live = answer(probe(ProbePath::Live, false), false, 1);
        assert!(live.starts_with("HTTP/1.1 503"), "{live}");
        assert!(live.contains("no progress"), "{live}");
        let head = answer(probe(ProbePath::Live, true), false, 1);
        assert!(
            head.starts_with("HTTP/1.1 503") && !head.contains("no progress"),
            "{head}"
        );
        let startup = answer(probe(ProbePath::Startup, false), false, 1);
        assert!(startup.starts_with("HTTP/1.1 404"), "{startup}");
        let asked = answer(probe(ProbePath::Startup, false), true, 1);
        assert!(asked.starts_with("HTTP/1.1 503"), "{asked}");
        let own = answer(probe(ProbePath::Own, false), false, 1);
        assert!(own.starts_with("HTTP/1.1 200"), "{own}");
        let refused = answer(Request::Refused(Refusal::Method), false, 0);
        assert!(refused.starts_with("HTTP/1.1 405"), "{refused}");
    }

    /// Only the default's every-address IPv6 falls back to IPv4's, and only where the pod has
    /// no IPv6.
    #[test]
    fn only_the_default_falls_back_to_ipv4() {
        let any6: SocketAddr = "[::]:8281".parse().unwrap();
        let one6: SocketAddr = "[::1]:8281".parse().unwrap();
        let any4: SocketAddr = "0.0.0.0:8281".parse().unwrap();
        assert!(ipv4_instead(any6, Some(libc::EAFNOSUPPORT)));
        assert!(!ipv4_instead(any6, Some(libc::EADDRINUSE)));
        assert!(!ipv4_instead(any6, None));
        assert!(!ipv4_instead(one6, Some(libc::EAFNOSUPPORT)));
        assert!(!ipv4_instead(any4, Some(libc::EAFNOSUPPORT)));
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let err = bind(taken.local_addr().unwrap(), TcpListener::bind).unwrap_err();
        assert!(
            format!("{err:?}").contains("--listen 127.0.0.1:"),
            "{err:?}"
        );
        assert!(bind("127.0.0.1:0".parse().unwrap(), TcpListener::bind).is_ok());
        // A pod without IPv6: the default binds IPv4's every address instead.
        let tried = std::cell::RefCell::new(Vec::new());
        let no_ipv6 = |address: SocketAddr| {
            tried.borrow_mut().push(address);
            match address.is_ipv6() {
                true => Err(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
                false => TcpListener::bind("127.0.0.1:0"),
            }
        };
        assert!(bind("[::]:8281".parse().unwrap(), no_ipv6).is_ok());
        assert_eq!(*tried.borrow(), [any6, any4]);
    }

    /// A look starts only where the container's memory limit leaves room for it.
    #[test]
    fn a_look_needs_room() {
        assert_eq!(no_room(None), None);
        assert_eq!(no_room(Some((64 << 20, 8 << 20))), None);
        let none = no_room(Some((8 << 20, 6 << 20))).unwrap();
        assert!(none.contains("MiB"), "{none}");
    }

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
