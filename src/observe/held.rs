//! The NATS connection a `serve` look process holds from one look to the next: one login for
//! every look while it stays up, instead of one a look. Between looks the process waits for
//! `serve`'s next request on the connection's own runtime, so the connection answers the
//! server's pings and reconnects (without limit) as any client's does. A look takes it only
//! while it is connected, and keeps it for the next look only when it answered every ask of
//! this one: a connection that let an ask go unanswered (a server frozen, a path lost without
//! a word, which its pings notice only minutes later) is closed. One that is down, or was
//! closed, the look replaces by connecting afresh, as the exec probe does, and what that
//! connect finds is the look's evidence. Nothing here judges.

use super::http::{poll, pollfd};
use super::nats::Session;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tokio::runtime::Runtime;

static HOLDING: AtomicBool = AtomicBool::new(false);
static HELD: Mutex<Option<Held>> = Mutex::new(None);

struct Held {
    runtime: Runtime,
    session: Session,
    /// The connection's name (the probe finds its own connection in the server's list by it).
    name: String,
}

/// From now on this process holds its NATS connection from one look to the next, and its own
/// sockets are never the pod's (`observe::pod`).
pub fn hold() {
    HOLDING.store(true, Ordering::SeqCst);
}

/// Whether this process holds its connection between looks.
pub fn holding() -> bool {
    HOLDING.load(Ordering::SeqCst)
}

/// The connection a look before this one left, when it is up; a connection that is down is
/// closed here, and the look connects afresh.
pub fn take() -> Option<(Runtime, Session, String)> {
    let held = HELD.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    // What arrived since the last turn of the runtime (a close, an error) is seen first.
    held.runtime.block_on(tokio::task::yield_now());
    if held.session.connected() {
        held.session.begin_look();
        Some((held.runtime, held.session, held.name))
    } else {
        held.runtime.shutdown_background();
        None
    }
}

/// Keeps a look's connection for the next one (`observe::Nats` keeps only one that answered
/// every ask of its look).
pub fn keep(runtime: Runtime, session: Session, name: String) {
    let old = HELD
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .replace(Held {
            runtime,
            session,
            name,
        });
    if let Some(old) = old {
        old.runtime.shutdown_background();
    }
}

/// Waits until `fd` can be read (or is closed), turning the held connection's runtime
/// meanwhile; without one, a plain `poll`.
pub fn idle_until_readable(fd: BorrowedFd) {
    {
        let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = held.as_ref() {
            let waited = held.runtime.block_on(async {
                let interest = tokio::io::Interest::READABLE;
                // SAFETY: `fd` is borrowed for this whole block, and the registration is
                // dropped (deregistered) at its end, before the descriptor can be closed.
                let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, interest)? };
                let _ = fd.readable().await?;
                Ok::<(), std::io::Error>(())
            });
            if waited.is_ok() {
                return;
            }
        }
    }
    let mut fds = [pollfd(fd.as_raw_fd(), libc::POLLIN)];
    // A signal's interruption waits again; any other failure is left to the read that follows.
    while let Ok(false) = poll(&mut fds, -1) {}
}
