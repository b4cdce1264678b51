//! The ways a run fails without a verdict; `main` maps them to exit codes and words.

use crate::config::Setting;
use crate::exit::Exit;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// Flags or environment are wrong, worded by the command line: exit 2.
    Usage(String),
    /// A setting's value turned out wrong when it was used (a PID that does not exist, a
    /// credentials file that holds none): exit 2. The command line names the flag.
    Setting {
        setting: Setting,
        path: Option<PathBuf>,
        problem: String,
    },
    /// The check could not be carried out: exit 3.
    CannotEvaluate(String),
}

impl Error {
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) | Error::Setting { .. } => Exit::Usage,
            Error::CannotEvaluate(_) => Exit::CannotEvaluate,
        }
    }
}
