//! What the servers said to a connect: their INFO, or why not.

use std::fmt;

/// What one server said to a connect: NATS sends `INFO {...}` the moment it accepts one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It sent its INFO line: NATS is up.
    Nats {
        version: Option<String>,
    },
    Refused,
    /// Connected or not, nothing arrived before the deadline.
    Silent,
    /// Something answered, but not NATS (an HTTP server, SSH...): its first bytes.
    NotNats(String),
    Unresolved(String),
    Failed(String),
}

impl Answer {
    pub fn is_nats(&self) -> bool {
        matches!(self, Answer::Nats { .. })
    }

    /// A word for scripts (the JSON `answer` field).
    pub fn kind(&self) -> &'static str {
        match self {
            Answer::Nats { .. } => "nats",
            Answer::Refused => "refused",
            Answer::Silent => "silent",
            Answer::NotNats(_) => "not_nats",
            Answer::Unresolved(_) => "unresolved",
            Answer::Failed(_) => "failed",
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Nats { version: Some(v) } => write!(f, "nats-server {v}"),
            Answer::Nats { version: None } => f.write_str("nats-server"),
            Answer::Refused => f.write_str("connection refused"),
            Answer::Silent => f.write_str("no answer"),
            Answer::NotNats(first) => write!(f, "answered '{first}', not NATS"),
            Answer::Unresolved(e) => write!(f, "name not resolved: {e}"),
            Answer::Failed(e) => f.write_str(e),
        }
    }
}

/// One `--server` URL's answer; `url` is shown as the user may see it (never its userinfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAnswer {
    pub url: String,
    pub answer: Answer,
}
