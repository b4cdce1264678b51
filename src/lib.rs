//! natsprobe: a liveness probe for NATS clients, as a library with a thin binary.
//!
//! The layers (ARCHITECTURE.md), each a folder:
//! - [`cli`]: clap definitions and validation, the only place that knows flag names;
//! - [`config`]: the plain configuration the command line produces;
//! - [`facts`]: plain observed values, the vocabulary between observation and rules;
//! - [`observe`]: all I/O (socket and process tables, servers, JetStream, state, clock);
//! - [`rules`]: pure verdicts from facts, policy, the previous sample and `now`;
//! - [`report`]: typed reports, their JSON and their words;
//! - [`commands`]: each command composing the above.
//!
//! Plumbing: [`deadline`] (the run's SIGALRM deadline), [`budget`] (its memory budget), [`exit`] (the exit codes) and
//! [`error`] (runs that end without a verdict). `fuzz` (built only for the fuzzer and the tests)
//! holds the fuzzing entry points.

pub mod budget;
pub mod cli;
pub mod commands;
pub mod config;
pub mod deadline;
#[cfg(test)]
mod docs;
pub mod error;
pub mod exit;
pub use natsprobe_core::facts;
#[cfg(any(fuzzing, test))]
pub mod fuzz;
pub mod observe;
pub mod report;
pub use natsprobe_core::rules;
