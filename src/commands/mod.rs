//! Commands: each composes the layers into one run (observe → rules → report) and returns a
//! report or an error; none prints or exits (`main` does).

pub mod check;
pub mod diagnose;
pub mod guard;
pub mod install;
pub mod serve;
