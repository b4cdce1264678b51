//! The rules: what the observations mean. Pure: facts, policy, the previous sample and `now`
//! in, a verdict out. Nothing here reads a socket, a file or a clock, or knows a flag: the core
//! is `no_std`, so the compiler keeps it so.

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
