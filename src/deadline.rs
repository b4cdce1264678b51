//! The run's deadline: a one-shot POSIX timer (monotonic clock) that raises SIGALRM at
//! `--timeout`. If the command is still going when it fires, whatever it is blocked on (a hung
//! /proc entry, a silent server, a resolver), the handler writes a prepared line naming what
//! the run was doing and ends the process. The runtime SIGKILLs a probe that overstays, and a
//! killed probe says nothing.
//!
//! Which line, and which exit, depends on where the run is. Reading this pod's own tables (its
//! processes, their descriptors, its socket table) a run that runs out of time could not
//! evaluate: `Exit::CannotEvaluate`. Past them, it waits on NATS (its INFO, JetStream, the
//! connection reports) or on what NATS left it little time for (comparing and keeping the
//! samples): not judged, as for any slow answer (`prepare_not_judged`). The kubelet counts
//! every non-zero exit as a failure, and a slow server must never restart the fleet; the
//! check's own network phase ends an eighth of the time early, so this is the backstop.
//!
//! This and the panic hook are the only ends outside `main`: both end a run that cannot
//! return to it, with the same `Exit` codes. The handler only loads atomics and calls
//! write(2) and _exit(2), which are async-signal-safe.

use crate::exit::Exit;
use nix::sys::signal::{
    self, SaFlags, SigAction, SigEvent, SigHandler, SigSet, SigevNotify, Signal,
};
use nix::sys::time::TimeSpec;
use nix::sys::timer::{Expiration, Timer, TimerSetTimeFlags};
use nix::time::ClockId;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};
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
    Waiting,
    AskingConnections,
    Serving,
}

impl Phase {
    const ALL: [Phase; 10] = [
        Phase::Starting,
        Phase::LookingUpProcess,
        Phase::ReadingDescriptors,
        Phase::ReadingSockets,
        Phase::AskingServer,
        Phase::AskingJetStream,
        Phase::ComparingSamples,
        Phase::Waiting,
        Phase::AskingConnections,
        Phase::Serving,
    ];

    /// Whether the run is reading this pod's own tables (its processes, their descriptors,
    /// its socket table), not yet waiting on NATS or on what follows it.
    pub fn is_the_pods_own(self) -> bool {
        matches!(
            self,
            Phase::Starting
                | Phase::LookingUpProcess
                | Phase::ReadingDescriptors
                | Phase::ReadingSockets
        )
    }

    pub fn text(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::LookingUpProcess => "looking up the process",
            Phase::ReadingDescriptors => "reading the process's descriptors",
            Phase::ReadingSockets => "reading the socket table",
            Phase::AskingServer => "asking the server",
            Phase::AskingJetStream => "asking JetStream about the consumers",
            Phase::ComparingSamples => "comparing with the previous samples",
            Phase::Waiting => "waiting between the two looks",
            Phase::AskingConnections => "asking the server for its connection list",
            Phase::Serving => "serving",
        }
    }
}

static PHASE: AtomicU8 = AtomicU8::new(Phase::Starting as u8);

/// The deadline's message (`arm`).
static DEADLINE: Prepared = Prepared::new();
/// Where every prepared line goes: stdout (1) for a JSON run, else stderr (2).
static OUT: AtomicI32 = AtomicI32::new(2);
/// The line and exit code of a run out of time while it waits on NATS (`prepare_not_judged`).
static NATS: Prepared = Prepared::new();
static NATS_CODE: AtomicU8 = AtomicU8::new(0);
/// The memory budget's message (`budget`).
static BUDGET: Prepared = Prepared::new();
/// The memory budget's message while the run waits on NATS (`prepare_not_judged`).
static NATS_BUDGET: Prepared = Prepared::new();

pub fn set_phase(phase: Phase) {
    PHASE.store(phase as u8, Ordering::SeqCst);
}

pub fn phase() -> Phase {
    Phase::ALL[usize::from(PHASE.load(Ordering::SeqCst)).min(Phase::ALL.len() - 1)]
}

/// Arms the timer to fire after `after`; dropping it stops it. `prefix` and `suffix` surround
/// the phase's text; they go to stdout when `json`, else to stderr. If no timer can be made (a
/// seccomp profile that forbids timer_create), the run goes on without one (`None`): the
/// kubelet's own timeout is then the backstop, as for any exec probe.
pub fn arm(after: Duration, prefix: String, suffix: String, json: bool) -> Option<Timer> {
    DEADLINE.keep(prefix, suffix);
    OUT.store(if json { 1 } else { 2 }, Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(on_alarm),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only does async-signal-safe work (atomic loads, write, _exit).
    if unsafe { signal::sigaction(Signal::SIGALRM, &action) }.is_err() {
        return None;
    }
    let event = SigEvent::new(SigevNotify::SigevSignal {
        signal: Signal::SIGALRM,
        si_value: 0,
    });
    let timer = Timer::new(ClockId::CLOCK_MONOTONIC, event).and_then(|mut timer| {
        let after = TimeSpec::from_duration(after.max(Duration::from_micros(1)));
        timer.set(Expiration::OneShot(after), TimerSetTimeFlags::empty())?;
        Ok(timer)
    });
    timer.ok()
}

/// Prepares the line written, and the exit code, when the deadline passes while the run
/// waits on NATS: `prefix`, the phase, `suffix`. Without it, that is "could not evaluate" too
/// (the guard: a CronJob, not a probe).
pub fn prepare_not_judged(prefix: String, suffix: String, code: u8) {
    NATS.keep(prefix, suffix);
    NATS_CODE.store(code, Ordering::SeqCst);
}

/// Prepares the line written when the memory budget runs out while the run waits on NATS:
/// what NATS sent took it (a server sending without end), so it is not judged, with the code
/// `prepare_not_judged` keeps.
pub fn prepare_budget_not_judged(prefix: String, suffix: String) {
    NATS_BUDGET.keep(prefix, suffix);
}

/// Prepares the line `over_budget` writes: `prefix`, the phase, `suffix`.
pub fn prepare_budget_message(prefix: String, suffix: String) {
    BUDGET.keep(prefix, suffix);
}

/// The memory budget ran out (`budget`): the prepared line, naming the phase, and
/// `Exit::CannotEvaluate`; while the run waits on NATS, what NATS sent took it: not judged, as
/// for a server that answers too late. Called from inside the allocator, so it allocates
/// nothing.
pub fn over_budget() -> ! {
    if !phase().is_the_pods_own() && !NATS_BUDGET.prefix.load(Ordering::SeqCst).is_null() {
        NATS_BUDGET.end(
            b"not judged: the memory budget ran out\n",
            NATS_CODE.load(Ordering::SeqCst),
        )
    }
    BUDGET.end(
        b"could not evaluate: the memory budget ran out\n",
        Exit::CannotEvaluate.code(),
    )
}

extern "C" fn on_alarm(_: libc::c_int) {
    if !phase().is_the_pods_own() && !NATS.prefix.load(Ordering::SeqCst).is_null() {
        NATS.end(
            b"not judged: the deadline passed\n",
            NATS_CODE.load(Ordering::SeqCst),
        )
    }
    DEADLINE.end(
        b"could not evaluate: the deadline passed\n",
        Exit::CannotEvaluate.code(),
    )
}

/// A message around the phase, made before the timer is armed; leaked, so the handler only
/// ever reads memory that lives as long as the process.
struct Prepared {
    prefix: AtomicPtr<Vec<u8>>,
    suffix: AtomicPtr<Vec<u8>>,
}

impl Prepared {
    const fn new() -> Prepared {
        Prepared {
            prefix: AtomicPtr::new(std::ptr::null_mut()),
            suffix: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Stores the message, leaked: it lives as long as the process. The same message prepared
    /// again (`serve`'s looks' process prepares each look's) is kept once.
    fn keep(&self, prefix: String, suffix: String) {
        let holds = |kept: &AtomicPtr<Vec<u8>>, text: &str| {
            let kept = kept.load(Ordering::SeqCst);
            // SAFETY: a non-null pointer here came from Box::into_raw and is never freed.
            !kept.is_null() && unsafe { (*kept).as_slice() } == text.as_bytes()
        };
        if holds(&self.prefix, &prefix) && holds(&self.suffix, &suffix) {
            return;
        }
        let leak = |text: String| Box::into_raw(Box::new(text.into_bytes()));
        self.prefix.store(leak(prefix), Ordering::SeqCst);
        self.suffix.store(leak(suffix), Ordering::SeqCst);
    }

    /// Writes the message (or `fallback` when none was prepared) and `_exit`s with `code`.
    /// Async-signal-safe, and allocation-free.
    fn end(&self, fallback: &[u8], code: u8) -> ! {
        let code = i32::from(code);
        // SAFETY: stdout and stderr stay open for the life of the process. (std's stdout()
        // handle is not used here: its first use allocates, which a signal handler must not.)
        let out = unsafe { std::os::fd::BorrowedFd::borrow_raw(OUT.load(Ordering::SeqCst)) };
        let write = |bytes: &[u8]| {
            let _ = nix::unistd::write(out, bytes);
        };
        let prefix = self.prefix.load(Ordering::SeqCst);
        let suffix = self.suffix.load(Ordering::SeqCst);
        if !prefix.is_null() && !suffix.is_null() {
            // SAFETY: both pointers came from Box::into_raw and are never freed.
            let (prefix, suffix) = unsafe { (&*prefix, &*suffix) };
            write(prefix);
            write(phase().text().as_bytes());
            write(suffix);
        } else {
            write(fallback);
        }
        // SAFETY: _exit is async-signal-safe; unlike exit(3) it runs no atexit handlers, which
        // could deadlock on a lock the interrupted code holds.
        unsafe { libc::_exit(code) };
    }
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
