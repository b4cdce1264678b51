//! `serve`'s flags: the check's, and where and how often it looks; validated into a
//! `ServeConfig` before anything is read.

use super::check::CheckArgs;
use crate::config::{duration, ServeConfig};
use crate::error::Error;
use clap::Args;
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

    /// How often to look (one check each time, in the looks' own process, which holds its NATS
    /// connection between looks); a probe is answered from the last look, never by a look of
    /// its own. The app's probe's periodSeconds is a good choice
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

    /// The looks' own process, run by `serve` itself: a check each time `serve` asks, its
    /// JSON, the NATS connection held between them
    #[arg(long = "look", hide = true)]
    pub look: bool,
}

/// The shortest `--every`: a look is a check, a fraction of a millisecond of the node's CPU
/// (more where it asks NATS); ten a second is as often as a probe could want an answer.
use natsprobe_core::timing::SHORTEST_EVERY;

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
        if self.look {
            // A look answers `serve`, which reads the JSON document and gives the line.
            check.json = true;
        }
        Ok(ServeConfig {
            check,
            listen: self.listen,
            every: self.every,
            startup,
            look: self.look,
        })
    }
}
