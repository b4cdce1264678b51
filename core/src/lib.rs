//! natsprobe's pure core: the facts a run observes and every decision made from them. `no_std`
//! (with `alloc`): nothing here can read a socket, a file, the environment or a clock, so the
//! compiler, not a review, keeps it pure. The binary's shell performs the observations the
//! core asks for and writes what it is given.

#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod exit;
pub mod facts;
pub mod rules;
pub mod run;
#[cfg(test)]
mod serve_timelines;
pub mod state;
#[cfg(test)]
mod timelines;
pub mod timing;
#[cfg(any(test, feature = "sim"))]
pub mod world;

/// What every module of the core uses from `alloc`.
pub(crate) mod prelude {
    pub use alloc::format;
    pub use alloc::string::{String, ToString};
    #[cfg(test)]
    pub use alloc::vec;
    pub use alloc::vec::Vec;
}
