//! `serve`'s flags: the check's, and where and how often it looks; validated into a
//! `ServeConfig` before anything is read.

use super::check::CheckArgs;
use crate::config::{duration, Look, ServeConfig};
use crate::error::Error;
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;

/// The check's flags, and `serve`'s own.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub check: CheckArgs,

    /// Where to answer the kubelet's probes: an address and port in the pod's network
    /// namespace. The default listens on every address, IPv6 and IPv4
    #[arg(
        long,
        value_name = "ADDR:PORT",
        env = "NATSPROBE_LISTEN",
        hide_env_values = true,
        default_value = "[::]:8281",
        help_heading = "Serve"
    )]
    pub listen: SocketAddr,

    /// How often to look (one check each time, in a process of its own); a probe is answered
    /// from the last look, never by a look of its own. The app's probe's periodSeconds is a
    /// good choice
    #[arg(
        long,
        value_name = "DUR",
        env = "NATSPROBE_EVERY",
        hide_env_values = true,
        default_value = "10s",
        value_parser = duration::parse,
        help_heading = "Serve"
    )]
    pub every: Duration,

    /// One look, run by `serve` itself: the check's JSON, with or without --startup's meaning
    #[arg(long = "look", value_enum, hide = true)]
    pub look: Option<LookArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LookArg {
    Live,
    Startup,
}

/// The shortest `--every`: a look is a process start and a check, about a millisecond of the
/// node's CPU; ten a second is as often as a probe could want an answer.
const SHORTEST_EVERY: Duration = Duration::from_millis(100);

impl ServeArgs {
    /// Checks the check's flags as `check` does, and `serve`'s own. No I/O.
    pub fn validate(self, env: &dyn Fn(&str) -> Option<String>) -> Result<ServeConfig, Error> {
        if self.every < SHORTEST_EVERY {
            return Err(Error::Usage(format!(
                "--every must be at least {}",
                duration::display(SHORTEST_EVERY)
            )));
        }
        let mut check = self.check.validate(env)?;
        let startup = check.policy.startup;
        let look = self.look.map(|look| match look {
            LookArg::Live => Look::Live,
            LookArg::Startup => Look::Startup,
        });
        if let Some(look) = look {
            // A look answers `serve`, which reads the JSON document and gives the line.
            check.json = true;
            check.policy.startup = look == Look::Startup;
        }
        Ok(ServeConfig {
            check,
            listen: self.listen,
            every: self.every,
            startup,
            look,
        })
    }
}
