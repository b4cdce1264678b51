//! The rules: what the observations mean. Pure: facts, policy, the previous sample and `now`
//! in, a verdict out. Nothing here reads a socket, a file or a clock, knows a flag, or
//! serializes; `architecture::the_rules_stay_pure` (src/architecture.rs) fails the tests if it
//! starts to.

pub mod advice;
pub mod answers;
pub mod cause;
pub mod check;
pub mod cidr;
pub mod connection;
pub mod consumer;
pub mod exact;
pub mod guard;
pub mod judged;
pub mod remembered;
#[cfg(any(test, feature = "sim"))]
pub mod restart;
pub mod retention;
pub mod serve;
pub mod subscription;
