//! The two ways a run fails without a verdict; `main` maps them to exit codes.

use crate::exit::Exit;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Flags, environment or a named process are wrong: exit 2.
    #[error("{0}")]
    Usage(String),
    /// The check could not be carried out: exit 3.
    #[error("{0}")]
    CannotEvaluate(String),
}

impl Error {
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) => Exit::Usage,
            Error::CannotEvaluate(_) => Exit::CannotEvaluate,
        }
    }
}
