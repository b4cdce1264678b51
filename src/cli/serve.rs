//! `serve`'s flags: the check's, and where and how often it looks; validated into a
//! `ServeConfig` before anything is read.

use super::check::CheckArgs;
use crate::config::{duration, ServeConfig};
use crate::error::Error;
use clap::Args;
use natsprobe_core::rules::serve::ExitUnhealthy;
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
        default_value = "10s",
        value_parser = duration::parse,
        help_heading = "Serve"
    )]
    pub every: Duration,

    /// Exit with CODE once --failure-threshold looks in a row judged the app unhealthy: for a
    /// kubelet that restarts the pod's containers in place on that code (a native sidecar's
    /// restartPolicyRules, action RestartAllContainers). Only "unhealthy" counts, never "not
    /// judged", a configuration error or natsprobe's own trouble. 1 or 4 to 255
    #[arg(long, value_name = "CODE", help_heading = "Serve")]
    pub exit_unhealthy: Option<u8>,

    /// With --exit-unhealthy: how many looks in a row must judge the app unhealthy
    /// [default: 3]
    #[arg(long, value_name = "N", help_heading = "Serve")]
    pub failure_threshold: Option<u32>,

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
        let exit_unhealthy = exit_unhealthy(self.exit_unhealthy, self.failure_threshold)?;
        let mut check = self.check.validate(env)?;
        if self.look {
            // A look answers `serve`, which reads the JSON document and gives the line.
            check.json = true;
        }
        Ok(ServeConfig {
            check,
            listen: self.listen,
            every: self.every,
            look: self.look,
            exit_unhealthy,
        })
    }
}

/// `--failure-threshold` when none is given: the kubelet's own default.
pub const FAILURE_THRESHOLD: u32 = 3;

/// `--exit-unhealthy` and `--failure-threshold`. Codes 0, 2 and 3 are refused: 0 is
/// success, and 2 and 3 are `serve`'s own when it cannot start, which a restart of the pod
/// would not mend.
fn exit_unhealthy(code: Option<u8>, after: Option<u32>) -> Result<Option<ExitUnhealthy>, Error> {
    match (code, after) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(Error::Usage(
            "--failure-threshold counts looks for --exit-unhealthy, which is not given".into(),
        )),
        (Some(0 | 2 | 3), _) => Err(Error::Usage(
            "--exit-unhealthy must be 1 or 4 to 255: 0 is success, 2 and 3 are natsprobe's own"
                .into(),
        )),
        (Some(_), Some(0)) => Err(Error::Usage(
            "--failure-threshold must be at least 1".into(),
        )),
        (Some(code), after) => Ok(Some(ExitUnhealthy {
            code,
            after: after.unwrap_or(FAILURE_THRESHOLD),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--exit-unhealthy` takes a code no other exit of `serve` has, `--failure-threshold`
    /// only beside it, and the kubelet's default of 3.
    #[test]
    fn exit_unhealthy_takes_a_code_of_its_own() {
        assert!(matches!(exit_unhealthy(None, None), Ok(None)));
        assert_eq!(
            exit_unhealthy(Some(88), None).unwrap(),
            Some(ExitUnhealthy { code: 88, after: 3 })
        );
        assert_eq!(
            exit_unhealthy(Some(1), Some(5)).unwrap(),
            Some(ExitUnhealthy { code: 1, after: 5 })
        );
        for (code, after) in [(Some(0), None), (Some(2), None), (Some(3), Some(2))] {
            assert!(matches!(exit_unhealthy(code, after), Err(Error::Usage(_))));
        }
        assert!(matches!(
            exit_unhealthy(None, Some(3)),
            Err(Error::Usage(_))
        ));
        assert!(matches!(
            exit_unhealthy(Some(88), Some(0)),
            Err(Error::Usage(_))
        ));
    }
}
