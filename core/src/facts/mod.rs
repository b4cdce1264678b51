//! Facts: plain values the observation layer returns and the rules read. No I/O and no
//! decisions here; every field is something the kernel, a process table or a server said.

mod jetstream;
mod observations;
mod serve;
mod server;
mod sockets;

pub use jetstream::*;
pub use observations::*;
pub use serve::{Ended, Judged, Meaning, Part, PartName, ProbePath, Refusal, Request};
pub use server::*;
pub use sockets::*;
