//! `guard`'s flags and their validation into a `GuardConfig`.

use super::check::consumer_name;
use super::nats::{auth, no_server, servers, AuthArgs, JsArgs};
use super::not_zero;
use crate::config::{duration, GuardConfig};
use crate::error::Error;
use crate::facts::ConsumerName;
use crate::rules::consumer;
use clap::builder::FalseyValueParser;
use clap::Args;
use std::time::Duration;

/// Every flag also reads a `NATSPROBE_*` environment variable; the command line wins.
#[derive(Debug, Args)]
#[command(next_help_heading = "Guard")]
pub struct GuardArgs {
    /// NATS server URL(s), nats:// or tls://, comma-separated (else NATS_URL)
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,

    /// A durable that must exist, STREAM/DURABLE, or STREAM/* for a stream that must
    /// (repeatable, or comma-separated)
    #[arg(long = "expect", value_name = "STREAM/DURABLE", value_delimiter = ',')]
    pub expect: Vec<String>,

    /// A durable, or STREAM/* for a whole stream, listed as ignored and never judged
    /// (repeatable, or comma-separated)
    #[arg(long = "ignore", value_name = "STREAM/DURABLE", value_delimiter = ',')]
    pub ignore: Vec<String>,

    /// Time between the two looks; a fault must be seen in both. At least twice the longest
    /// ack_wait, so a redelivery falls between them (nats.go's default ack_wait 30s: 1m)
    #[arg(long, value_name = "DUR", default_value = "1m", value_parser = duration::parse)]
    pub interval: Duration,

    /// Work waiting and no progress this long is a stall (never less than 2 × the
    /// consumer's ack_wait) [default: --interval]
    #[arg(long, value_name = "DUR", value_parser = duration::parse)]
    pub stall_after: Option<Duration>,

    /// Deadline for each look (the listings and the infos)
    #[arg(
        long,
        value_name = "DUR",
        default_value = "10s",
        value_parser = duration::parse,
        help_heading = "Output and limits"
    )]
    pub timeout: Duration,

    /// Print one JSON document instead of the table
    #[arg(long, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
    pub json: bool,

    #[command(flatten)]
    pub js: JsArgs,

    #[command(flatten)]
    pub auth: AuthArgs,
}

impl GuardArgs {
    /// Checks what clap cannot and builds the config. No I/O.
    pub fn validate(self, env: &dyn Fn(&str) -> Option<String>) -> Result<GuardConfig, Error> {
        let servers = servers(&self.servers, env)?;
        if servers.is_empty() {
            return Err(no_server("guard", "the server to ask about every durable"));
        }
        not_zero("--interval", self.interval, "0s")?;
        not_zero("--timeout", self.timeout, "0ms")?;
        let stall_after = self.stall_after.unwrap_or(self.interval);
        not_zero("--stall-after", stall_after, "0s")?;
        let selectors = |flag: &str, texts: &[String]| -> Result<Vec<ConsumerName>, Error> {
            texts
                .iter()
                .filter(|t| !t.trim().is_empty())
                .map(|t| consumer_name(flag, t, true))
                .collect()
        };
        let expect = selectors("--expect", &self.expect)?;
        let ignore = selectors("--ignore", &self.ignore)?;
        if let Some(both) = expect.iter().find(|e| {
            ignore
                .iter()
                .any(|i| i == *e || (i.durable == "*" && i.stream == e.stream))
        }) {
            return Err(Error::Usage(format!(
                "{both} is both expected (--expect) and ignored (--ignore): choose one"
            )));
        }
        let js_api = self.js.validate()?;
        Ok(GuardConfig {
            servers,
            auth: auth(self.auth, env)?,
            js_api,
            expect,
            ignore,
            interval: self.interval,
            consumer_policy: consumer::Policy { stall_after },
            timeout: self.timeout,
            json: self.json,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cli::Command;

    pub(crate) fn guard(args: &[&str], env: &[(&str, &str)]) -> Result<GuardConfig, String> {
        crate::cli::validated(&crate::cli::argv(args), env, |command, env| match command {
            Command::Guard(guard) => guard.validate(env),
            _ => Err(Error::Usage("not a guard".into())),
        })
    }

    #[test]
    fn guard_lists_keep_their_last_element_and_take_whole_streams() {
        let g = guard(
            &[
                "natsprobe",
                "guard",
                "--server",
                "nats",
                "--expect",
                "TF_RAW/latest-kv,TF_RAW/alarms,ALARMS/materializer",
                "--expect",
                "QDB/*",
                "--ignore",
                "OLD/*,TF_RAW/questdb",
            ],
            &[],
        )
        .unwrap();
        let names: Vec<String> = g.expect.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "TF_RAW/latest-kv",
                "TF_RAW/alarms",
                "ALARMS/materializer",
                "QDB/*"
            ],
            "the last element of a list is kept"
        );
        let ignored: Vec<String> = g.ignore.iter().map(ToString::to_string).collect();
        assert_eq!(ignored, ["OLD/*", "TF_RAW/questdb"]);
        assert_eq!(g.interval, Duration::from_secs(60));
        assert_eq!(
            g.consumer_policy.stall_after, g.interval,
            "the stall window defaults to the interval"
        );
        let g = guard(
            &["natsprobe", "guard", "--interval", "2m"],
            &[("NATS_URL", "nats://u:p@x:4222")],
        )
        .unwrap();
        assert_eq!(
            g.servers[0].to_string(),
            "nats://x:4222",
            "NATS_URL serves too"
        );
        assert_eq!(g.consumer_policy.stall_after, Duration::from_secs(120));
        for (args, fragment) in [
            (&["natsprobe", "guard"][..], "guard needs --server"),
            (
                &["natsprobe", "guard", "--server", "n", "--expect", "S.x/D"],
                "--expect 'S.x/D'",
            ),
            (
                &["natsprobe", "guard", "--server", "n", "--ignore", "S/*/x"],
                "--ignore",
            ),
            (
                &[
                    "natsprobe",
                    "guard",
                    "--server",
                    "n",
                    "--expect",
                    "S/d",
                    "--ignore",
                    "S/*",
                ],
                "both expected (--expect) and ignored (--ignore)",
            ),
            (
                &["natsprobe", "guard", "--server", "n", "--interval", "0s"],
                "--interval",
            ),
        ] {
            let err = guard(args, &[]).unwrap_err();
            assert!(err.contains(fragment), "{args:?}: {err}");
        }
    }
}
