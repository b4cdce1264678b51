//! The run's deadline: a SIGALRM timer armed for `--timeout`. If the check is still going when
//! it fires, whatever it is blocked on (a hung /proc entry, a silent server, a resolver), the
//! handler writes the prepared "could not evaluate" line, naming what the check was doing,
//! and exits 3. The runtime SIGKILLs a probe that overstays, and a killed probe says nothing.
//!
//! This and the panic hook are the only exits outside `main`: both end a run that cannot
//! return to it. The handler only loads atomics and calls write(2) and _exit(2), which are
//! async-signal-safe.

use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use std::time::Duration;

/// What the run is doing, for the deadline's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Starting,
    LookingUpProcess,
    ReadingDescriptors,
    ReadingSockets,
    AskingServer,
    AskingJetStream,
    ComparingSamples,
}

impl Phase {
    const ALL: [Phase; 7] = [
        Phase::Starting,
        Phase::LookingUpProcess,
        Phase::ReadingDescriptors,
        Phase::ReadingSockets,
        Phase::AskingServer,
        Phase::AskingJetStream,
        Phase::ComparingSamples,
    ];

    pub fn text(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::LookingUpProcess => "looking up the process",
            Phase::ReadingDescriptors => "reading the process's descriptors",
            Phase::ReadingSockets => "reading the socket table",
            Phase::AskingServer => "asking the server",
            Phase::AskingJetStream => "asking JetStream about the consumers",
            Phase::ComparingSamples => "comparing with the previous samples",
        }
    }
}

static PHASE: AtomicU8 = AtomicU8::new(Phase::Starting as u8);

/// The message around the phase, made before the timer is armed; leaked, so the handler
/// only ever reads memory that lives as long as the process.
static PREFIX: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
static SUFFIX: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
static FD: AtomicU8 = AtomicU8::new(2);

pub fn set_phase(phase: Phase) {
    PHASE.store(phase as u8, Ordering::SeqCst);
}

pub fn phase() -> Phase {
    Phase::ALL[usize::from(PHASE.load(Ordering::SeqCst)).min(Phase::ALL.len() - 1)]
}

/// Arms the timer to fire after `after`. `prefix` and `suffix` surround the phase's text;
/// they go to stdout when `json`, else to stderr.
pub fn arm(after: Duration, prefix: String, suffix: String, json: bool) {
    PREFIX.store(
        Box::into_raw(Box::new(prefix.into_bytes())),
        Ordering::SeqCst,
    );
    SUFFIX.store(
        Box::into_raw(Box::new(suffix.into_bytes())),
        Ordering::SeqCst,
    );
    FD.store(if json { 1 } else { 2 }, Ordering::SeqCst);
    // SAFETY: a plain handler for SIGALRM; a zeroed sigaction with only the handler set is
    // valid (empty mask, no flags).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_alarm as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
    }
    set_timer(after.max(Duration::from_micros(1)));
}

/// Stops the timer: the answer is ready and must not be interleaved with the message.
pub fn disarm() {
    set_timer(Duration::ZERO);
}

fn set_timer(after: Duration) {
    let value = libc::timeval {
        tv_sec: after.as_secs() as _,
        tv_usec: after.subsec_micros() as _,
    };
    let timer = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: value,
    };
    // SAFETY: setitimer with a valid itimerval.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
}

extern "C" fn on_alarm(_: libc::c_int) {
    let fd = i32::from(FD.load(Ordering::SeqCst));
    let write = |bytes: &[u8]| {
        // SAFETY: write(2) of a live buffer; async-signal-safe.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    };
    for part in [&PREFIX, &SUFFIX] {
        if part.load(Ordering::SeqCst).is_null() {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(3) };
        }
    }
    // SAFETY: both pointers came from Box::into_raw in `arm` and are never freed.
    let (prefix, suffix) = unsafe {
        (
            &*PREFIX.load(Ordering::SeqCst),
            &*SUFFIX.load(Ordering::SeqCst),
        )
    };
    write(prefix);
    write(phase().text().as_bytes());
    write(suffix);
    // SAFETY: _exit is async-signal-safe; exit code 3 is "could not evaluate".
    unsafe { libc::_exit(3) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_has_words_and_round_trips() {
        for p in Phase::ALL {
            set_phase(p);
            assert_eq!(phase(), p);
            assert!(!p.text().is_empty());
            // Written raw into the JSON line by the handler.
            assert!(p
                .text()
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' '));
        }
        set_phase(Phase::Starting);
    }
}
