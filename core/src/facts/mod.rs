//! Facts: plain values the observation layer returns and the rules read. No I/O and no
//! decisions here; every field is something the kernel, a process table or a server said.

use crate::prelude::*;

mod jetstream;
mod observations;
mod serve;
mod server;
mod sockets;

pub use jetstream::*;
pub use observations::*;
pub use serve::{Ended, Judged, ProbePath, Refusal, Request};
pub use server::*;
pub use sockets::*;

/// A cause that kept a check from running, as the last run left it (`rules::cause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persisting {
    /// `rules::cause::Cause::as_str`.
    pub cause: String,
    /// Local clock, ms since the epoch: the first run of the stretch that saw it.
    pub since_ms: i64,
    /// The last run that saw it.
    pub last_ms: i64,
}
