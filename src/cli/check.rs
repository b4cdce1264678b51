//! `check`'s flags (`diagnose` takes the same) and their validation into a `CheckConfig`:
//! contradictions refused, also between the environment and the flags, before anything is
//! read.

use super::nats::{auth, no_server, servers, AuthArgs, JsArgs};
use super::not_zero;
use crate::config::{self, duration, CheckConfig, Owner, ReaderChoice, StateDirChoice};
use crate::error::Error;
use crate::facts::{ConsumerName, Wanted};
use crate::observe::state;
use crate::rules::cidr::Cidr;
use crate::rules::connection::{Policy, WhenServerDown};
use crate::rules::consumer;
use crate::rules::remembered::TrustSetting;
use clap::builder::FalseyValueParser;
use clap::{Args, ValueEnum};
use natsprobe_core::run::Check;
use std::path::PathBuf;
use std::time::Duration;

/// Every flag also reads a `NATSPROBE_*` environment variable; the command line wins.
/// Environment values are never shown in help: they may hold credentials.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct CheckArgs {
    /// Remote port of the client's connection to NATS (repeatable, or comma-separated); under
    /// socket-level load balancing without --server, the Service's target port [default: the
    /// --server URLs' ports, else 4222]
    #[arg(
        long = "port",
        value_name = "P",
        value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub ports: Vec<u16>,

    /// Only count connections to this address or network (repeatable, or comma-separated): the
    /// Service's ClusterIP or CIDR under kube-proxy, e.g. 10.96.0.0/12; under socket-level load
    /// balancing (Cilium, GKE Dataplane V2) the NATS pods' network, e.g. 10.244.0.0/16, unless
    /// --server is given (it learns where the kernel holds the connection)
    #[arg(long = "remote", value_name = "ADDR[/LEN]", value_delimiter = ',')]
    pub remotes: Vec<Cidr>,

    /// Fewest live connections (ESTABLISHED, not half-open) that count as healthy
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub min_connections: u32,

    /// Only count sockets held by this process (so a sidecar's connection cannot mask a
    /// dead client)
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,

    /// Only count sockets held by processes of this name (comm, or argv[0]'s base name)
    #[arg(long, value_name = "NAME")]
    pub process: Option<String>,

    /// Read the socket table of this process's network namespace instead of our own
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub netns_of: Option<u32>,

    /// A connection with sent data unacknowledged this long (the retransmission timer fired)
    /// is half-open and does not count; `off` not to look
    #[arg(long, value_name = "DUR|off", default_value = "30s", value_parser = half_open_after)]
    pub half_open_after: HalfOpenAfter,

    /// Socket reader: netlink sock_diag with /proc fallback, or one of them only
    #[arg(long, value_enum, value_name = "READER", default_value_t)]
    pub reader: ReaderChoice,

    /// NATS server URL(s), nats:// or tls://, comma-separated; asked only when the client
    /// holds no connection, to tell "the client gave up" from "NATS is down" (else NATS_URL)
    #[arg(long = "server", value_name = "URL", help_heading = "Server")]
    pub servers: Vec<String>,

    /// With --server: when the client holds no connection and no server answers either, or
    /// NATS does not answer for a consumer or subscription, pass (a restart would not help)
    /// or fail [default: pass]
    #[arg(long, value_enum, value_name = "WHAT", help_heading = "Server")]
    pub when_server_down: Option<WhenDownArg>,

    /// This pod's JetStream consumer, STREAM/DURABLE (repeatable, or comma-separated): must be
    /// bound, and progressing when work is waiting. Needs --server (or NATS_URL)
    #[arg(
        long = "consumer",
        value_name = "STREAM/DURABLE",
        value_delimiter = ',',
        help_heading = "Consumer"
    )]
    pub consumers: Vec<String>,

    /// Work waiting and no progress this long is a stall (never less than 2 × the
    /// consumer's ack_wait)
    #[arg(
        long,
        value_name = "DUR",
        default_value = "60s",
        value_parser = duration::parse,
        help_heading = "Consumer"
    )]
    pub stall_after: Duration,

    /// After a restart for a stall did not help (the new client's window passed with the same
    /// stall and no progress), restart for it again only this long after natsprobe first
    /// failed for it
    #[arg(
        long,
        value_name = "DUR",
        default_value = "1h",
        value_parser = duration::parse,
        help_heading = "Consumer"
    )]
    pub restart_again_after: Duration,

    /// Ask the server about the consumers at most this often while the last answer was calm
    /// (every one idle or progressing); between looks only the sockets are read. 0: every run
    /// [default: 3/4 of --stall-after, 45s]
    #[arg(long, value_name = "DUR", value_parser = duration::parse, help_heading = "Consumer")]
    pub sample_every: Option<Duration>,

    /// Trust this pod's connection, on the same socket since it was seen holding the
    /// subscription, this long before asking the server again. 0: ask every run. auto: with
    /// each look at the consumers where a lookup is cheap (--monitor, or up to 1,000
    /// connections in the account); else 5m, longer past 2,500 connections (120ms per
    /// connection, at most 1h), where each lookup costs the server more
    #[arg(
        long,
        value_name = "DUR|auto",
        default_value = "auto",
        value_parser = trust_setting,
        help_heading = "Subscriptions"
    )]
    pub subscription_every: TrustSetting,

    /// With --consumer: one of this pod's connections must hold each push consumer's
    /// deliver subscription, matched by address in the server's connection list; for a pull
    /// consumer, this pod's connections must publish (pull requests, acks) within the window
    /// while the consumer delivers to others
    #[arg(long, value_parser = FalseyValueParser::new(), help_heading = "Subscriptions")]
    pub own_subscription: bool,

    /// A core NATS subscription one of this pod's connections must hold, SUBJECT[@QUEUE]
    /// (repeatable, or comma-separated). Needs --server (or NATS_URL)
    #[arg(
        long = "subscription",
        value_name = "SUBJECT[@QUEUE]",
        value_delimiter = ',',
        help_heading = "Subscriptions"
    )]
    pub subscriptions: Vec<String>,

    /// The HTTP monitoring endpoint (http://host:8222) of the server the pod connects to: its
    /// connection is matched and then looked up there directly; else, or when it is not
    /// there, the account's own report ($SYS.REQ.ACCOUNT.PING.CONNZ)
    #[arg(long, value_name = "URL", help_heading = "Subscriptions")]
    pub monitor: Option<String>,

    /// Where the check's state is kept, one file per check (the consumers' samples, the last
    /// look, the connections counted, the faults seen); a DIR others may write to (an emptyDir)
    /// holds it in a private natsprobe-UID inside. No usable place is exit 2 where samples are
    /// needed [default: $TMPDIR/natsprobe-UID, else /dev/shm/natsprobe-UID]
    #[arg(long, value_name = "DIR", help_heading = "Consumer")]
    pub state_dir: Option<PathBuf>,

    /// For a startupProbe: fail while a consumer or subscription asked for has never been
    /// judged with this configuration (wrong credentials, domain or permissions show at the
    /// deploy); once judged, pass as the check does. Keep --state-dir on an emptyDir
    #[arg(long, value_parser = FalseyValueParser::new(), help_heading = "Consumer")]
    pub startup: bool,

    #[command(flatten)]
    pub js: JsArgs,

    #[command(flatten)]
    pub auth: AuthArgs,

    /// Deadline for the whole run; keep it below the probe's timeoutSeconds
    #[arg(
        long,
        value_name = "DUR",
        default_value = "800ms",
        value_parser = duration::parse,
        help_heading = "Output and limits"
    )]
    pub timeout: Duration,

    /// Print one JSON object instead of a line
    #[arg(long, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
    pub json: bool,

    /// Also print the reader used and the matching sockets
    #[arg(short, long, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
    pub verbose: bool,
}

/// `--half-open-after`: a duration, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalfOpenAfter(pub Option<Duration>);

fn half_open_after(text: &str) -> Result<HalfOpenAfter, String> {
    match text.trim() {
        "off" => Ok(HalfOpenAfter(None)),
        // Zero, as the nats CLI and Go read a zero timeout: never.
        other => match duration::parse(other)? {
            d if d.is_zero() => Ok(HalfOpenAfter(None)),
            d => Ok(HalfOpenAfter(Some(d))),
        },
    }
}

/// `--when-server-down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WhenDownArg {
    /// healthy: restarting every pod during an outage only adds a restart storm
    Pass,
    /// unhealthy: restart anyway
    Fail,
}

impl CheckArgs {
    /// Checks what clap cannot (contradictions, also between environment and flags) and
    /// builds the config. No I/O; `env` looks up the nats CLI's variables (NATS_URL).
    pub fn validate(self, env: &dyn Fn(&str) -> Option<String>) -> Result<CheckConfig, Error> {
        let owner = owner(self.pid, self.process)?;
        not_zero("--timeout", self.timeout, "0ms")?;
        let servers = servers(&self.servers, env)?;
        if self.when_server_down.is_some() && servers.is_empty() {
            let why = "without a server to ask there is no \"down\"";
            return Err(no_server("--when-server-down", why));
        }
        let ports = ports(self.ports, &servers);
        let consumers = consumers(&self.consumers, &servers)?;
        not_zero("--stall-after", self.stall_after, "0s")?;
        let subscriptions = subscriptions(
            &self.subscriptions,
            self.own_subscription,
            &consumers,
            &servers,
        )?;
        let monitor = monitor(self.monitor, self.own_subscription, &subscriptions)?;
        let js_api = self.js.validate()?;
        let sample_every = sample_every(self.sample_every, self.stall_after)?;
        let auth = auth(self.auth, env)?;
        let core = Check {
            connection: Policy {
                ports,
                remotes: self.remotes,
                min_connections: self.min_connections as usize,
                half_open_after: self.half_open_after.0,
                server: !servers.is_empty(),
                when_server_down: match self.when_server_down {
                    Some(WhenDownArg::Fail) => WhenServerDown::Fail,
                    Some(WhenDownArg::Pass) | None => WhenServerDown::Pass,
                },
                startup: self.startup,
            },
            owner_named: owner != Owner::Anyone,
            netns_of: self.netns_of,
            exact: self.reader != ReaderChoice::Proc,
            diagnose: false,
            consumers,
            consumer: consumer::Policy {
                stall_after: self.stall_after,
            },
            own_subscription: self.own_subscription,
            subscriptions,
            monitor: monitor.as_ref().map(ToString::to_string),
            sample_every,
            subscription_every: self.subscription_every,
            restart_again_after: self.restart_again_after,
        };
        Ok(CheckConfig {
            core,
            js_api,
            monitor,
            state_dir: state_dir(self.state_dir, env),
            auth,
            servers,
            owner,
            netns_of: self.netns_of,
            reader: self.reader,
            timeout: self.timeout,
            json: self.json,
            verbose: self.verbose,
        })
    }
}

/// `--pid` or `--process` (or anyone's sockets): one of them at most.
fn owner(pid: Option<u32>, process: Option<String>) -> Result<Owner, Error> {
    let owner = match (pid, process) {
        (Some(_), Some(_)) => return Err(Error::Usage(
            "--pid and --process both given (also via NATSPROBE_PID/NATSPROBE_PROCESS); choose one"
                .into(),
        )),
        (Some(pid), None) => Owner::Pid(pid),
        (None, Some(name)) if name.trim().is_empty() => {
            return Err(Error::Usage("--process: empty process name".into()))
        }
        (None, Some(name)) => Owner::Name(name),
        (None, None) => Owner::Anyone,
    };
    Ok(owner)
}

/// `--port`, else the servers' ports: a client of nats://x:4333 connects to port 4333.
fn ports(given: Vec<u16>, servers: &[config::ServerUrl]) -> Vec<u16> {
    let mut ports = match (given.is_empty(), servers.is_empty()) {
        (false, _) => given,
        (true, false) => servers.iter().map(|s| s.port).collect(),
        (true, true) => vec![config::DEFAULT_PORT],
    };
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// `--consumer`: well-formed names, and a server to ask about them.
fn consumers(given: &[String], servers: &[config::ServerUrl]) -> Result<Vec<ConsumerName>, Error> {
    let consumers = given
        .iter()
        .map(|c| consumer_name("--consumer", c, false))
        .collect::<Result<Vec<_>, _>>()?;
    if !consumers.is_empty() && servers.is_empty() {
        return Err(no_server(
            "--consumer",
            "the probe asks the server about it",
        ));
    }
    Ok(consumers)
}

/// `--own-subscription` (which needs consumers) and `--subscription` (which needs a server
/// to list who holds it).
fn subscriptions(
    given: &[String],
    own_subscription: bool,
    consumers: &[ConsumerName],
    servers: &[config::ServerUrl],
) -> Result<Vec<Wanted>, Error> {
    if own_subscription && consumers.is_empty() {
        return Err(Error::Usage(
            "--own-subscription needs --consumer: it checks this pod's part of each consumer"
                .into(),
        ));
    }
    let subscriptions = given
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| subscription(s))
        .collect::<Result<Vec<_>, _>>()?;
    if !subscriptions.is_empty() && servers.is_empty() {
        return Err(no_server("--subscription", "the server lists who holds it"));
    }
    Ok(subscriptions)
}

/// `--monitor`: only for the subscriptions, which it lists connections for.
fn monitor(
    given: Option<String>,
    own_subscription: bool,
    subscriptions: &[Wanted],
) -> Result<Option<config::MonitorUrl>, Error> {
    let monitor = match given {
        None => None,
        Some(_) if !own_subscription && subscriptions.is_empty() => {
            return Err(Error::Usage(
                "--monitor is for --own-subscription and --subscription: give one of them".into(),
            ))
        }
        Some(url) => {
            Some(config::parse_monitor(&url).map_err(|e| Error::Usage(format!("--monitor: {e}")))?)
        }
    };
    Ok(monitor)
}

/// `--state-dir` alone, else the default under `TMPDIR` and then the fallbacks.
fn state_dir(given: Option<PathBuf>, env: &dyn Fn(&str) -> Option<String>) -> StateDirChoice {
    match given {
        Some(path) => StateDirChoice {
            path,
            explicit: true,
            fallbacks: Vec::new(),
        },
        None => StateDirChoice {
            path: state::default_dir(env("TMPDIR").as_deref()),
            explicit: false,
            fallbacks: state::fallback_dirs(),
        },
    }
}

/// `SUBJECT[@QUEUE]`: a subject (no whitespace) and, after the last `@`, a queue group.
fn subscription(text: &str) -> Result<Wanted, Error> {
    let bad = || {
        Error::Usage(format!(
            "--subscription '{text}': expected SUBJECT or SUBJECT@QUEUE (no whitespace)"
        ))
    };
    let text = text.trim();
    let (subject, queue) = match text.rsplit_once('@') {
        Some((s, q)) => (s, Some(q)),
        None => (text, None),
    };
    let ok = |t: &str| !t.is_empty() && !t.contains(char::is_whitespace);
    if !ok(subject) || queue.is_some_and(|q| !ok(q)) || subject.split('.').any(str::is_empty) {
        return Err(bad());
    }
    Ok(Wanted {
        subject: subject.to_string(),
        queue: queue.map(str::to_string),
    })
}

/// `--subscription-every`: `auto` or a duration.
fn trust_setting(text: &str) -> Result<TrustSetting, String> {
    match text.trim() {
        "auto" => Ok(TrustSetting::Auto),
        other => duration::parse(other)
            .map(TrustSetting::Fixed)
            .map_err(|e| format!("{e} (or auto)")),
    }
}

/// `--sample-every`, shorter than `--stall-after`: looks further apart than the stall window
/// would never count towards it.
fn sample_every(given: Option<Duration>, stall_after: Duration) -> Result<Duration, Error> {
    match given {
        Some(every) if every >= stall_after => Err(Error::Usage(format!(
            "--sample-every {} must be shorter than --stall-after {}: looks further apart than the stall window never count towards it",
            duration::display(every),
            duration::display(stall_after)
        ))),
        Some(every) => Ok(every),
        None => Ok(natsprobe_core::timing::sample_every(stall_after)),
    }
}

/// `STREAM/DURABLE` given to `flag`, with names JetStream accepts: no whitespace, `.`, `*`,
/// `>`, `/` or `\\`; with `whole`, also `STREAM/*` (durable `*`: the whole stream).
pub(super) fn consumer_name(flag: &str, text: &str, whole: bool) -> Result<ConsumerName, Error> {
    let bad = || {
        let or = if whole { " or STREAM/*" } else { "" };
        Error::Usage(format!(
            "{flag} '{text}': expected STREAM/DURABLE{or} (JetStream names, without spaces, '.', '*', '>', '/' or '\\')"
        ))
    };
    let (stream, durable) = text.trim().split_once('/').ok_or_else(bad)?;
    let valid = |name: &str| {
        !name.is_empty()
            && name.len() <= 255
            && !name.contains(|c: char| c.is_whitespace() || ".*>/\\".contains(c))
    };
    if !valid(stream) || !(valid(durable) || whole && durable == "*") {
        return Err(bad());
    }
    Ok(ConsumerName {
        stream: stream.to_string(),
        durable: durable.to_string(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cli::{with_default_subcommand, CheckCommand, Command};
    use crate::rules::connection::WhenServerDown;
    use std::ffi::OsString;

    pub(crate) fn parse(args: &[&str]) -> Result<CheckConfig, String> {
        parse_env(args, &[])
    }

    pub(crate) fn parse_env(args: &[&str], env: &[(&str, &str)]) -> Result<CheckConfig, String> {
        let argv = with_default_subcommand(args.iter().map(OsString::from));
        crate::cli::validated(&argv, env, |command, env| match command {
            Command::Check(CheckCommand::Check(check)) => check.validate(env),
            _ => Err(Error::Usage("not a check".into())),
        })
    }

    #[test]
    fn servers_from_the_flag_or_nats_url_and_ports_from_the_servers() {
        let c = parse(&["natsprobe", "--server", "nats://a:4333,tls://b:4334"]).unwrap();
        assert_eq!(c.servers.len(), 2);
        assert!(c.core.connection.server);
        assert_eq!(c.core.connection.ports, [4333, 4334]);
        let c = parse(&["natsprobe", "--server", "nats://a:4333", "--port", "4222"]).unwrap();
        assert_eq!(c.core.connection.ports, [4222], "an explicit --port wins");
        let c = parse_env(&["natsprobe"], &[("NATS_URL", "nats://u:p@nats:4222")]).unwrap();
        assert_eq!(c.servers[0].to_string(), "nats://nats:4222");
        let c = parse_env(&["natsprobe", "--server", "x:1"], &[("NATS_URL", "y:2")]).unwrap();
        assert_eq!(c.servers[0].host, "x", "the flag wins over NATS_URL");
        let c = parse(&["natsprobe"]).unwrap();
        assert!(!c.core.connection.server);
        assert_eq!(c.core.connection.when_server_down, WhenServerDown::Pass);
    }

    #[test]
    fn consumers_need_a_server_and_well_formed_names() {
        let c = parse(&[
            "natsprobe",
            "--server",
            "nats",
            "--consumer",
            "TF_RAW/latest-kv,ORDERS/proc",
        ])
        .unwrap();
        assert_eq!(
            c.core
                .consumers
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["TF_RAW/latest-kv", "ORDERS/proc"]
        );
        assert_eq!(c.core.consumer.stall_after, Duration::from_secs(60));
        let err = parse(&["natsprobe", "--consumer", "S/D"]).unwrap_err();
        assert!(err.contains("--consumer needs --server"), "{err}");
        for bad in ["S", "/D", "S/", "S/D/E", "S.x/D", "S/D*", "S/ D", "S/>"] {
            let err = parse(&["natsprobe", "--server", "nats", "--consumer", bad]).unwrap_err();
            assert!(err.contains("STREAM/DURABLE"), "{bad}: {err}");
        }
        assert!(
            parse(&["natsprobe", "--server", "nats", "--stall-after", "0s"])
                .unwrap_err()
                .contains("--stall-after")
        );
    }

    #[test]
    fn sampling_defaults_and_bounds() {
        let base = [
            "natsprobe",
            "--server",
            "nats://n:4222",
            "--consumer",
            "S/D",
        ];
        let c = parse(&base).unwrap();
        assert_eq!(c.core.sample_every, Duration::from_secs(45));
        assert_eq!(c.core.subscription_every, TrustSetting::Auto);
        let c = parse(&[&base[..], &["--stall-after", "2m"]].concat()).unwrap();
        assert_eq!(c.core.sample_every, Duration::from_secs(90));
        let c = parse(&[&base[..], &["--sample-every", "0s"]].concat()).unwrap();
        assert_eq!(c.core.sample_every, Duration::ZERO);
        let c = parse(
            &[
                &base[..],
                &["--own-subscription", "--subscription-every", "1m"],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(
            c.core.subscription_every,
            TrustSetting::Fixed(Duration::from_secs(60))
        );
        let err = parse(&[&base[..], &["--subscription-every", "often"]].concat()).unwrap_err();
        assert!(err.contains("(or auto)"), "{err}");
        let err = parse(&[&base[..], &["--sample-every", "60s"]].concat()).unwrap_err();
        assert!(
            err.contains("--sample-every 1m must be shorter than --stall-after 1m"),
            "{err}"
        );
    }

    /// The configuration as the core takes it: every field its flag's.
    #[test]
    fn the_core_takes_the_flags_as_given() {
        let config = parse(&[
            "natsprobe",
            "--server",
            "nats://10.0.0.1:4222",
            "--consumer",
            "S/D",
            "--own-subscription",
            "--subscription",
            "j.>@q",
            "--monitor",
            "http://10.0.0.1:8222",
            "--sample-every",
            "5s",
            "--subscription-every",
            "7s",
            "--process",
            "bento",
            "--netns-of",
            "42",
            "--reader",
            "proc",
        ])
        .unwrap();
        let check = &config.core;
        assert!(check.owner_named && !check.exact && !check.diagnose);
        assert_eq!(check.netns_of, Some(42));
        assert_eq!((check.consumers.len(), check.subscriptions.len()), (1, 1));
        assert!(check.own_subscription);
        assert_eq!(check.monitor.as_deref(), Some("http://10.0.0.1:8222"));
        assert_eq!(check.sample_every, Duration::from_secs(5));
        assert_eq!(
            check.subscription_every,
            TrustSetting::Fixed(Duration::from_secs(7))
        );
        let plain = parse(&["natsprobe"]).unwrap().core;
        assert!(!plain.owner_named && plain.exact && plain.monitor.is_none());
    }

    #[test]
    fn the_reader_as_named() {
        assert_eq!(parse(&["natsprobe"]).unwrap().reader, ReaderChoice::Auto);
        for (name, reader) in [
            ("auto", ReaderChoice::Auto),
            ("netlink", ReaderChoice::Netlink),
            ("proc", ReaderChoice::Proc),
        ] {
            assert_eq!(
                parse(&["natsprobe", "--reader", name]).unwrap().reader,
                reader
            );
        }
    }

    #[test]
    fn repeated_and_comma_separated_ports() {
        let c = parse(&["natsprobe", "--port", "7422", "--port", "4222,7422"]).unwrap();
        assert_eq!(c.core.connection.ports, [4222, 7422]);
    }

    #[test]
    fn bad_values_name_their_flag() {
        let cases = [
            (&["natsprobe", "--port", "0"][..], "--port"),
            (&["natsprobe", "--port", "70000"], "--port"),
            (&["natsprobe", "--remote", "nats.svc"], "--remote"),
            (&["natsprobe", "--timeout", "1"], "--timeout"),
            (&["natsprobe", "--timeout", "0s"], "--timeout"),
            (
                &["natsprobe", "--min-connections", "0"],
                "--min-connections",
            ),
            (&["natsprobe", "--pid", "0"], "--pid"),
            (&["natsprobe", "--pid", "1", "--process", "x"], "--pid"),
            (&["natsprobe", "--process", " "], "--process"),
            (&["natsprobe", "--reader", "ebpf"], "--reader"),
        ];
        for (args, flag) in cases {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert!(err.contains(flag), "{args:?}: {err}");
        }
    }
}
