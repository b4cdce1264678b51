//! The command line: clap definitions (doc comments are the help), `check` as the default
//! subcommand, and validation into plain configuration (`crate::config`) before anything is
//! read. The only place that knows flag names and environment variables.

use crate::config::{
    self, duration, Auth, CheckConfig, GuardConfig, JsApi, Owner, ReaderChoice, Secret, Setting,
    StateDirChoice,
};
use crate::error::Error;
use crate::facts::{ConsumerName, Wanted};
use crate::observe::state;
use crate::rules::cidr::Cidr;
use crate::rules::connection::{Policy, WhenServerDown};
use crate::rules::consumer;
use crate::rules::remembered::TrustSetting;
use clap::builder::FalseyValueParser;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("NATSPROBE_GIT_REV"),
    ")"
);

/// Liveness probe for NATS clients: exits 1 when this pod's client has given up its
/// connection, so the kubelet restarts it.
///
/// Exit codes: 0 healthy, 1 unhealthy, 2 usage or configuration error, 3 could not evaluate.
/// `check` is the default: `natsprobe --port 4222` is `natsprobe check --port 4222`.
#[derive(Debug, Parser)]
#[command(name = "natsprobe", version = VERSION, disable_help_subcommand = true)]
#[command(max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check for an ESTABLISHED connection to the NATS client port (the default)
    Check(CheckArgs),
    /// Judge every durable in the account from two looks an interval apart; exit 1 on a fault
    /// seen in both (run it from a CronJob: the failed Job is the alert)
    Guard(GuardArgs),
    /// Explain what the check sees, for a person at a terminal (kubectl exec): every socket
    /// with its holder and traffic, every server's answer, each consumer's facts, and what to
    /// do. Takes the check's options; exits as the check would
    Diagnose(CheckArgs),
    /// Copy this executable to DEST (a file, or a directory to put `natsprobe` in), atomically,
    /// mode 0755: for an initContainer filling a shared emptyDir
    Install(InstallArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Where to put the probe: a file path, or an existing directory
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
}

/// Every flag also reads a `NATSPROBE_*` environment variable; the command line wins.
#[derive(Debug, Args)]
#[command(next_help_heading = "Guard")]
pub struct GuardArgs {
    /// NATS server URL(s), nats:// or tls://, comma-separated (else NATS_URL)
    #[arg(
        long = "server",
        value_name = "URL",
        env = "NATSPROBE_SERVER",
        hide_env_values = true
    )]
    pub servers: Vec<String>,

    /// A durable that must exist, STREAM/DURABLE, or STREAM/* for a stream that must
    /// (repeatable, or comma-separated)
    #[arg(
        long = "expect",
        value_name = "STREAM/DURABLE",
        env = "NATSPROBE_EXPECT",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub expect: Vec<String>,

    /// A durable, or STREAM/* for a whole stream, listed as ignored and never judged
    /// (repeatable, or comma-separated)
    #[arg(
        long = "ignore",
        value_name = "STREAM/DURABLE",
        env = "NATSPROBE_IGNORE",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub ignore: Vec<String>,

    /// Time between the two looks; a fault must be seen in both
    #[arg(long, value_name = "DUR", env = "NATSPROBE_INTERVAL", hide_env_values = true, default_value = "30s", value_parser = duration::parse)]
    pub interval: Duration,

    /// Work waiting and no progress this long is a stall (never less than 2 × the
    /// consumer's ack_wait) [default: --interval]
    #[arg(long, value_name = "DUR", env = "NATSPROBE_STALL_AFTER", hide_env_values = true, value_parser = duration::parse)]
    pub stall_after: Option<Duration>,

    /// Deadline for each look (the listings and the infos)
    #[arg(long, value_name = "DUR", env = "NATSPROBE_TIMEOUT", hide_env_values = true, default_value = "10s", value_parser = duration::parse, help_heading = "Output and limits")]
    pub timeout: Duration,

    /// Print one JSON document instead of the table
    #[arg(long, env = "NATSPROBE_JSON", hide_env_values = true, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
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
            return Err(Error::Usage(
                "guard needs --server (or NATS_URL): the server to ask about every durable".into(),
            ));
        }
        if self.interval.is_zero() {
            return Err(Error::Usage("--interval must be more than 0s".into()));
        }
        if self.timeout.is_zero() {
            return Err(Error::Usage("--timeout must be more than 0ms".into()));
        }
        let stall_after = self.stall_after.unwrap_or(self.interval);
        if stall_after.is_zero() {
            return Err(Error::Usage("--stall-after must be more than 0s".into()));
        }
        let selectors = |flag: &str, texts: &[String]| -> Result<Vec<ConsumerName>, Error> {
            texts
                .iter()
                .filter(|t| !t.trim().is_empty())
                .map(|t| selector(flag, t))
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
            consumer_policy: consumer::Policy {
                stall_after,
                intervals: consumer::Intervals::Any,
            },
            timeout: self.timeout,
            json: self.json,
        })
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

/// `STREAM/DURABLE`, or `STREAM/*` (durable `*`).
fn selector(flag: &str, text: &str) -> Result<ConsumerName, Error> {
    match text.trim().split_once('/') {
        Some((stream, "*")) => consumer_name(&format!("{stream}/x"))
            .map(|n| ConsumerName {
                stream: n.stream,
                durable: "*".into(),
            })
            .map_err(|_| bad_name(flag, text)),
        _ => consumer_name(text).map_err(|_| bad_name(flag, text)),
    }
}

fn bad_name(flag: &str, text: &str) -> Error {
    Error::Usage(format!(
        "{flag} '{text}': expected STREAM/DURABLE or STREAM/* (JetStream names, without spaces, '.', '*', '>', '/' or '\\')"
    ))
}

/// `--server` (comma-separated or repeated), else the nats CLI's NATS_URL. Messages never
/// quote the input: it may carry a password.
fn servers(
    given: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<config::ServerUrl>, Error> {
    if !given.is_empty() {
        config::parse_url_list(&given.join(","))
            .map_err(|e| Error::Usage(format!("--server (or NATSPROBE_SERVER): {e}")))
    } else if let Some(url) = env("NATS_URL").filter(|u| !u.trim().is_empty()) {
        config::parse_url_list(&url).map_err(|e| Error::Usage(format!("NATS_URL: {e}")))
    } else {
        Ok(Vec::new())
    }
}

/// Every flag also reads a `NATSPROBE_*` environment variable; the command line wins.
/// Environment values are never shown in help: they may hold credentials.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct CheckArgs {
    /// Remote port of the client's connection to NATS (repeatable, or comma-separated)
    /// [default: the --server URLs' ports, else 4222]
    #[arg(
        long = "port",
        value_name = "P",
        env = "NATSPROBE_PORT",
        hide_env_values = true,
        value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub ports: Vec<u16>,

    /// Only count connections to this address or network, e.g. 10.96.0.0/12 (repeatable, or
    /// comma-separated)
    #[arg(
        long = "remote",
        value_name = "ADDR[/LEN]",
        env = "NATSPROBE_REMOTE",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub remotes: Vec<Cidr>,

    /// Fewest live connections (ESTABLISHED, not half-open) that count as healthy
    #[arg(
        long,
        value_name = "N",
        env = "NATSPROBE_MIN_CONNECTIONS", hide_env_values = true,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub min_connections: u32,

    /// Only count sockets held by this process (so a sidecar's connection cannot mask a
    /// dead client)
    #[arg(
        long,
        value_name = "PID",
        env = "NATSPROBE_PID", hide_env_values = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub pid: Option<u32>,

    /// Only count sockets held by processes of this name (comm, or argv[0]'s base name)
    #[arg(
        long,
        value_name = "NAME",
        env = "NATSPROBE_PROCESS",
        hide_env_values = true
    )]
    pub process: Option<String>,

    /// Read the socket table of this process's network namespace instead of our own
    #[arg(
        long,
        value_name = "PID",
        env = "NATSPROBE_NETNS_OF", hide_env_values = true,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub netns_of: Option<u32>,

    /// A connection with sent data unacknowledged this long (the retransmission timer fired)
    /// is half-open and does not count; `off` not to look
    #[arg(
        long,
        value_name = "DUR|off",
        env = "NATSPROBE_HALF_OPEN_AFTER",
        hide_env_values = true,
        default_value = "30s",
        value_parser = half_open_after
    )]
    pub half_open_after: HalfOpenAfter,

    /// Socket reader: netlink sock_diag with /proc fallback, or one of them only
    #[arg(
        long,
        value_enum,
        value_name = "READER",
        env = "NATSPROBE_READER",
        hide_env_values = true,
        default_value_t
    )]
    pub reader: ReaderArg,

    /// NATS server URL(s), nats:// or tls://, comma-separated; asked only when the client
    /// holds no connection, to tell "the client gave up" from "NATS is down" (else NATS_URL)
    #[arg(
        long = "server",
        value_name = "URL",
        env = "NATSPROBE_SERVER",
        hide_env_values = true,
        help_heading = "Server"
    )]
    pub servers: Vec<String>,

    /// With --server: when the client holds no connection and no server answers either,
    /// pass (a restart would not help) or fail [default: pass]
    #[arg(
        long,
        value_enum,
        value_name = "WHAT",
        env = "NATSPROBE_WHEN_SERVER_DOWN",
        hide_env_values = true,
        help_heading = "Server"
    )]
    pub when_server_down: Option<WhenDownArg>,

    /// This pod's JetStream consumer, STREAM/DURABLE (repeatable, or comma-separated): must be
    /// bound, and progressing when work is waiting. Needs --server (or NATS_URL)
    #[arg(
        long = "consumer",
        value_name = "STREAM/DURABLE",
        env = "NATSPROBE_CONSUMER",
        hide_env_values = true,
        value_delimiter = ',',
        help_heading = "Consumer"
    )]
    pub consumers: Vec<String>,

    /// Work waiting and no progress this long is a stall (never less than 2 × the
    /// consumer's ack_wait)
    #[arg(long, value_name = "DUR", env = "NATSPROBE_STALL_AFTER", hide_env_values = true, default_value = "60s", value_parser = duration::parse, help_heading = "Consumer")]
    pub stall_after: Duration,

    /// Ask the server about the consumers at most this often while the last answer was calm
    /// (every one idle or progressing); between looks only the sockets are read. 0: every run
    /// [default: 3/4 of --stall-after, 45s]
    #[arg(long, value_name = "DUR", env = "NATSPROBE_SAMPLE_EVERY", hide_env_values = true, value_parser = duration::parse, help_heading = "Consumer")]
    pub sample_every: Option<Duration>,

    /// Trust this pod's connection, on the same socket since it was seen holding the
    /// subscription, this long before asking the server again. 0: ask every run. auto: 5m,
    /// longer in accounts of over 2,500 connections (120ms per connection, at most 1h),
    /// where each lookup costs the server more
    #[arg(long, value_name = "DUR|auto", env = "NATSPROBE_SUBSCRIPTION_EVERY", hide_env_values = true, default_value = "auto", value_parser = trust_setting, help_heading = "Subscriptions")]
    pub subscription_every: TrustSetting,

    /// With --consumer: one of this pod's connections must hold each push consumer's
    /// deliver subscription, matched by address in the server's connection list
    #[arg(long, env = "NATSPROBE_OWN_SUBSCRIPTION", hide_env_values = true, value_parser = FalseyValueParser::new(), help_heading = "Subscriptions")]
    pub own_subscription: bool,

    /// A core NATS subscription one of this pod's connections must hold, SUBJECT[@QUEUE]
    /// (repeatable, or comma-separated). Needs --server (or NATS_URL)
    #[arg(
        long = "subscription",
        value_name = "SUBJECT[@QUEUE]",
        env = "NATSPROBE_SUBSCRIPTION",
        hide_env_values = true,
        value_delimiter = ',',
        help_heading = "Subscriptions"
    )]
    pub subscriptions: Vec<String>,

    /// The server's HTTP monitoring endpoint (http://host:8222), for the connection list when
    /// the account's own report ($SYS.REQ.ACCOUNT.PING.CONNZ) cannot be had
    #[arg(
        long,
        value_name = "URL",
        env = "NATSPROBE_MONITOR",
        hide_env_values = true,
        help_heading = "Subscriptions"
    )]
    pub monitor: Option<String>,

    /// Where the previous sample of each consumer is kept [default: $TMPDIR/natsprobe-UID]
    #[arg(
        long,
        value_name = "DIR",
        env = "NATSPROBE_STATE_DIR",
        hide_env_values = true,
        help_heading = "Consumer"
    )]
    pub state_dir: Option<PathBuf>,

    #[command(flatten)]
    pub js: JsArgs,

    #[command(flatten)]
    pub auth: AuthArgs,

    /// Deadline for the whole run; keep it below the probe's timeoutSeconds
    #[arg(
        long,
        value_name = "DUR",
        env = "NATSPROBE_TIMEOUT", hide_env_values = true,
        default_value = "800ms",
        value_parser = duration::parse,
        help_heading = "Output and limits"
    )]
    pub timeout: Duration,

    /// Print one JSON object instead of a line
    #[arg(long, env = "NATSPROBE_JSON", hide_env_values = true, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
    pub json: bool,

    /// Also print the reader used and the matching sockets
    #[arg(short, long, env = "NATSPROBE_VERBOSE", hide_env_values = true, value_parser = FalseyValueParser::new(), help_heading = "Output and limits")]
    pub verbose: bool,
}

/// `--half-open-after`: a duration, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalfOpenAfter(pub Option<Duration>);

fn half_open_after(text: &str) -> Result<HalfOpenAfter, String> {
    match text.trim() {
        "off" => Ok(HalfOpenAfter(None)),
        other => match duration::parse(other)? {
            d if d.is_zero() => Err("must be more than 0s (or off)".into()),
            d => Ok(HalfOpenAfter(Some(d))),
        },
    }
}

/// `--reader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ReaderArg {
    /// netlink sock_diag, falling back to /proc when netlink is refused
    #[default]
    Auto,
    /// netlink sock_diag only
    Netlink,
    /// /proc/net/tcp{,6} only
    Proc,
}

impl std::fmt::Display for ReaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            self.to_possible_value()
                .expect("no skipped values")
                .get_name(),
        )
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

/// An error in words: usage errors name their flag (or environment variable).
pub fn describe(e: &Error) -> String {
    match e {
        Error::Usage(m) => format!("natsprobe: {m}"),
        Error::Setting {
            setting,
            path: Some(path),
            problem,
        } => format!(
            "natsprobe: {} {}: {problem}",
            flag(*setting),
            path.display()
        ),
        Error::Setting {
            setting,
            path: None,
            problem,
        } => format!("natsprobe: {}: {problem}", flag(*setting)),
        Error::CannotEvaluate(m) => format!("could not evaluate: {m}"),
    }
}

/// The flag behind a setting whose value turned out wrong when it was used.
pub fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::Pid => "--pid",
        Setting::Process => "--process",
        Setting::NetnsOf => "--netns-of",
        Setting::Creds => "--creds",
        Setting::Nkey => "--nkey",
        Setting::OwnSubscription => "--own-subscription",
        Setting::InstallDest => "install DEST",
        Setting::StateDir => "--state-dir",
    }
}

impl CheckArgs {
    /// Checks what clap cannot (contradictions, also between environment and flags) and
    /// builds the config. No I/O; `env` looks up the nats CLI's variables (NATS_URL).
    pub fn validate(self, env: &dyn Fn(&str) -> Option<String>) -> Result<CheckConfig, Error> {
        let owner = match (self.pid, self.process) {
            (Some(_), Some(_)) => {
                return Err(Error::Usage(
                    "--pid and --process both given (also via NATSPROBE_PID/NATSPROBE_PROCESS); choose one".into(),
                ))
            }
            (Some(pid), None) => Owner::Pid(pid),
            (None, Some(name)) if name.trim().is_empty() => {
                return Err(Error::Usage("--process: empty process name".into()))
            }
            (None, Some(name)) => Owner::Name(name),
            (None, None) => Owner::Anyone,
        };
        if self.timeout.is_zero() {
            return Err(Error::Usage("--timeout must be more than 0ms".into()));
        }
        let servers = servers(&self.servers, env)?;
        if self.when_server_down.is_some() && servers.is_empty() {
            return Err(Error::Usage(
                "--when-server-down needs --server (or NATS_URL): without a server to ask there is no \"down\"".into(),
            ));
        }
        // A client of nats://x:4333 connects to port 4333.
        let mut ports = match (self.ports.is_empty(), servers.is_empty()) {
            (false, _) => self.ports,
            (true, false) => servers.iter().map(|s| s.port).collect(),
            (true, true) => vec![config::DEFAULT_PORT],
        };
        ports.sort_unstable();
        ports.dedup();
        let consumers = self
            .consumers
            .iter()
            .map(|c| consumer_name(c))
            .collect::<Result<Vec<_>, _>>()?;
        if !consumers.is_empty() && servers.is_empty() {
            return Err(Error::Usage(
                "--consumer needs --server (or NATS_URL): the probe asks the server about it"
                    .into(),
            ));
        }
        if self.stall_after.is_zero() {
            return Err(Error::Usage("--stall-after must be more than 0s".into()));
        }
        if self.own_subscription && consumers.is_empty() {
            return Err(Error::Usage(
                "--own-subscription needs --consumer: it checks the consumers' deliver subscriptions".into(),
            ));
        }
        let subscriptions = self
            .subscriptions
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| subscription(s))
            .collect::<Result<Vec<_>, _>>()?;
        if !subscriptions.is_empty() && servers.is_empty() {
            return Err(Error::Usage(
                "--subscription needs --server (or NATS_URL): the server lists who holds it".into(),
            ));
        }
        let monitor = match self.monitor {
            None => None,
            Some(_) if !self.own_subscription && subscriptions.is_empty() => {
                return Err(Error::Usage(
                    "--monitor is for --own-subscription and --subscription: give one of them"
                        .into(),
                ))
            }
            Some(url) => Some(
                config::parse_monitor(&url).map_err(|e| Error::Usage(format!("--monitor: {e}")))?,
            ),
        };
        let js_api = self.js.validate()?;
        let (sample_every, subscription_every) =
            sampling(self.sample_every, self.subscription_every, self.stall_after)?;
        let auth = auth(self.auth, env)?;
        Ok(CheckConfig {
            js_api,
            sample_every,
            subscription_every,
            consumers,
            own_subscription: self.own_subscription,
            subscriptions,
            monitor,
            consumer_policy: consumer::Policy {
                stall_after: self.stall_after,
                intervals: consumer::Intervals::UpToWindow,
            },
            state_dir: match self.state_dir {
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
            },
            auth,
            policy: Policy {
                ports,
                remotes: self.remotes,
                min_connections: self.min_connections as usize,
                half_open_after: self.half_open_after.0,
                server: !servers.is_empty(),
                when_server_down: match self.when_server_down {
                    Some(WhenDownArg::Fail) => WhenServerDown::Fail,
                    Some(WhenDownArg::Pass) | None => WhenServerDown::Pass,
                },
            },
            servers,
            owner,
            netns_of: self.netns_of,
            reader: match self.reader {
                ReaderArg::Auto => ReaderChoice::Auto,
                ReaderArg::Netlink => ReaderChoice::Netlink,
                ReaderArg::Proc => ReaderChoice::Proc,
            },
            timeout: self.timeout,
            json: self.json,
            verbose: self.verbose,
        })
    }
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

/// `--sample-every` and `--subscription-every`, checked against what they bound. Looks
/// further apart than the stall window would never count towards it.
/// Without consumers or subscriptions they bound nothing, as `--stall-after` does then (an
/// environment set for a whole fleet need not be trimmed per pod).
fn sampling(
    sample_every: Option<Duration>,
    subscription_every: TrustSetting,
    stall_after: Duration,
) -> Result<(Duration, TrustSetting), Error> {
    let sample_every = match sample_every {
        Some(every) if every >= stall_after => {
            return Err(Error::Usage(format!(
                "--sample-every {} must be shorter than --stall-after {}: looks further apart than the stall window never count towards it",
                duration::display(every),
                duration::display(stall_after)
            )))
        }
        Some(every) => every,
        None => stall_after * 3 / 4,
    };
    Ok((sample_every, subscription_every))
}

/// `STREAM/DURABLE`, with names JetStream accepts: no whitespace, `.`, `*`, `>`, `/` or `\\`.
fn consumer_name(text: &str) -> Result<ConsumerName, Error> {
    let bad = || {
        Error::Usage(format!(
            "--consumer '{text}': expected STREAM/DURABLE (JetStream names, without spaces, '.', '*', '>', '/' or '\\')"
        ))
    };
    let (stream, durable) = text.trim().split_once('/').ok_or_else(bad)?;
    let valid = |name: &str| {
        !name.is_empty()
            && name.len() <= 255
            && !name.contains(|c: char| c.is_whitespace() || ".*>/\\".contains(c))
    };
    if !valid(stream) || !valid(durable) {
        return Err(bad());
    }
    Ok(ConsumerName {
        stream: stream.to_string(),
        durable: durable.to_string(),
    })
}

/// Where the JetStream API is, shared by every command that asks JetStream (the nats CLI's
/// names).
#[derive(Debug, Args)]
#[command(next_help_heading = "JetStream")]
pub struct JsArgs {
    /// The JetStream domain the streams live in, e.g. the hub's from a pod connected to a
    /// leaf node: requests go to $JS.<NAME>.API
    #[arg(
        long,
        value_name = "NAME",
        env = "NATSPROBE_JS_DOMAIN",
        hide_env_values = true,
        help_heading = "JetStream"
    )]
    pub js_domain: Option<String>,

    /// The JetStream API prefix imported from another account (instead of $JS.API)
    #[arg(
        long,
        value_name = "PREFIX",
        env = "NATSPROBE_JS_API_PREFIX",
        hide_env_values = true,
        help_heading = "JetStream"
    )]
    pub js_api_prefix: Option<String>,
}

impl JsArgs {
    /// One of the two at most; an empty value (an unset variable in a manifest) is none.
    fn validate(&self) -> Result<JsApi, Error> {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        match (given(&self.js_domain), given(&self.js_api_prefix)) {
            (Some(_), Some(_)) => Err(Error::Usage(
                "--js-domain and --js-api-prefix both given (also via NATSPROBE_JS_DOMAIN/NATSPROBE_JS_API_PREFIX): a domain is a prefix ($JS.<domain>.API), choose one".into(),
            )),
            (Some(d), None) => JsApi::domain(&d).map_err(|e| {
                Error::Usage(format!("--js-domain (or NATSPROBE_JS_DOMAIN) '{d}': {e}"))
            }),
            (None, Some(p)) => JsApi::prefix(&p).map_err(|e| {
                Error::Usage(format!(
                    "--js-api-prefix (or NATSPROBE_JS_API_PREFIX) '{p}': {e}"
                ))
            }),
            (None, None) => Ok(JsApi::Local),
        }
    }
}

/// The NATS authentication flags, shared by every command that connects.
#[derive(Debug, Args)]
#[command(next_help_heading = "NATS authentication")]
pub struct AuthArgs {
    /// Credentials file (JWT and nkey seed) (else NATS_CREDS)
    #[arg(
        long,
        value_name = "FILE",
        env = "NATSPROBE_CREDS",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub creds: Option<PathBuf>,

    /// Nkey seed file (else NATS_NKEY)
    #[arg(
        long,
        value_name = "FILE",
        env = "NATSPROBE_NKEY",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub nkey: Option<PathBuf>,

    /// User name (else NATS_USER)
    #[arg(
        long,
        value_name = "NAME",
        env = "NATSPROBE_USER",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub user: Option<String>,

    /// Password, with --user (else NATS_PASSWORD)
    #[arg(
        long,
        value_name = "SECRET",
        env = "NATSPROBE_PASSWORD",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub password: Option<String>,

    /// Token (else NATS_TOKEN)
    #[arg(
        long,
        value_name = "SECRET",
        env = "NATSPROBE_TOKEN",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub token: Option<String>,

    /// CA certificate(s) to verify the server with (PEM) (else NATS_CA)
    #[arg(
        long,
        value_name = "FILE",
        env = "NATSPROBE_TLSCA",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub tlsca: Option<PathBuf>,

    /// Client certificate (PEM), with --tlskey (else NATS_CERT)
    #[arg(
        long,
        value_name = "FILE",
        env = "NATSPROBE_TLSCERT",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub tlscert: Option<PathBuf>,

    /// Client certificate's private key (PEM) (else NATS_KEY)
    #[arg(
        long,
        value_name = "FILE",
        env = "NATSPROBE_TLSKEY",
        hide_env_values = true,
        help_heading = "NATS authentication"
    )]
    pub tlskey: Option<PathBuf>,
}

/// Flags (and their NATSPROBE_* twins) first, then the nats CLI's NATS_* variables. One way
/// to authenticate at most; a password needs a user and a client certificate its key.
fn auth(args: AuthArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Auth, Error> {
    let text =
        |given: Option<String>, name: &str| given.or_else(|| env(name)).filter(|v| !v.is_empty());
    let path = |given: Option<PathBuf>, name: &str| {
        given.or_else(|| env(name).filter(|v| !v.is_empty()).map(PathBuf::from))
    };
    let auth = Auth {
        creds: path(args.creds, "NATS_CREDS"),
        nkey: path(args.nkey, "NATS_NKEY"),
        user: text(args.user, "NATS_USER"),
        password: text(args.password, "NATS_PASSWORD").map(Secret),
        token: text(args.token, "NATS_TOKEN").map(Secret),
        tls_ca: path(args.tlsca, "NATS_CA"),
        tls_cert: path(args.tlscert, "NATS_CERT"),
        tls_key: path(args.tlskey, "NATS_KEY"),
    };
    let ways = [
        auth.creds.is_some(),
        auth.nkey.is_some(),
        auth.user.is_some(),
        auth.token.is_some(),
    ];
    if ways.iter().filter(|&&w| w).count() > 1 {
        return Err(Error::Usage(
            "more than one way to authenticate (--creds, --nkey, --user, --token, or their NATS_* variables): choose one".into(),
        ));
    }
    if auth.password.is_some() != auth.user.is_some() {
        return Err(Error::Usage(
            "--user and --password (or NATS_USER and NATS_PASSWORD) go together".into(),
        ));
    }
    if auth.tls_cert.is_some() != auth.tls_key.is_some() {
        return Err(Error::Usage(
            "--tlscert and --tlskey (or NATS_CERT and NATS_KEY) go together".into(),
        ));
    }
    Ok(auth)
}

/// `check` is the default subcommand: when the first argument is a flag other than
/// help/version (or there is none), `check` is inserted. clap has no "default subcommand",
/// and flattening the check flags into the top level would make them collide with the
/// later subcommands' flags.
pub fn with_default_subcommand(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let insert = match args.get(1).and_then(|a| a.to_str()) {
        None => args.len() <= 1,
        Some("-h" | "--help" | "-V" | "--version") => false,
        Some(first) => first.starts_with('-'),
    };
    if insert {
        args.insert(1.min(args.len()), "check".into());
    }
    args
}

/// Whether a command line clap rejected asked for JSON: `--json` among the arguments, or a
/// true `NATSPROBE_JSON`.
pub fn wants_json(argv: &[OsString], env: &dyn Fn(&str) -> Option<String>) -> bool {
    argv.iter().any(|a| a == "--json")
        || env("NATSPROBE_JSON").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on" | "y"
            )
        })
}

/// clap's message names the flag. When the bad value came from the flag's environment twin
/// (a pod spec's `env:`), that is said too, or the operator looks for a flag that is not there.
pub fn env_source(err: &clap::Error, argv: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = arg.split_whitespace().next()?;
    let given = argv.iter().any(|a| {
        let a = a.to_string_lossy();
        a == long || a.starts_with(&format!("{long}="))
    });
    if given {
        return None;
    }
    let name = long.strip_prefix("--")?;
    let command = Cli::command();
    let env = command
        .get_subcommands()
        .flat_map(|sub| sub.get_arguments())
        .find(|a| a.get_long() == Some(name))?
        .get_env()?
        .to_string_lossy()
        .to_string();
    std::env::var_os(&env).map(|_| format!("the value came from the environment variable {env}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CheckConfig, String> {
        parse_env(args, &[])
    }

    fn parse_env(args: &[&str], env: &[(&str, &str)]) -> Result<CheckConfig, String> {
        let argv = with_default_subcommand(args.iter().map(OsString::from));
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Check(check) = cli.command else {
            return Err("not a check".into());
        };
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        check.validate(&lookup).map_err(|e| match e {
            Error::Usage(m) => m,
            other => describe(&other),
        })
    }

    #[test]
    fn servers_from_the_flag_or_nats_url_and_ports_from_the_servers() {
        let c = parse(&["natsprobe", "--server", "nats://a:4333,tls://b:4334"]).unwrap();
        assert_eq!(c.servers.len(), 2);
        assert!(c.policy.server);
        assert_eq!(c.policy.ports, [4333, 4334]);
        let c = parse(&["natsprobe", "--server", "nats://a:4333", "--port", "4222"]).unwrap();
        assert_eq!(c.policy.ports, [4222], "an explicit --port wins");
        let c = parse_env(&["natsprobe"], &[("NATS_URL", "nats://u:p@nats:4222")]).unwrap();
        assert_eq!(c.servers[0].to_string(), "nats://nats:4222");
        let c = parse_env(&["natsprobe", "--server", "x:1"], &[("NATS_URL", "y:2")]).unwrap();
        assert_eq!(c.servers[0].host, "x", "the flag wins over NATS_URL");
        let c = parse(&["natsprobe"]).unwrap();
        assert!(!c.policy.server);
        assert_eq!(c.policy.when_server_down, WhenServerDown::Pass);
    }

    #[test]
    fn server_errors_never_show_credentials() {
        let err = parse(&["natsprobe", "--server", "nats://u:s3cret@nats:0"]).unwrap_err();
        assert!(
            err.starts_with("--server") && !err.contains("s3cret"),
            "{err}"
        );
        let err = parse_env(&["natsprobe"], &[("NATS_URL", "ws://u:s3cret@nats")]).unwrap_err();
        assert!(
            err.starts_with("NATS_URL") && !err.contains("s3cret"),
            "{err}"
        );
        let err = parse(&["natsprobe", "--when-server-down", "fail"]).unwrap_err();
        assert!(err.contains("--when-server-down needs --server"), "{err}");
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
            c.consumers
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["TF_RAW/latest-kv", "ORDERS/proc"]
        );
        assert_eq!(c.consumer_policy.stall_after, Duration::from_secs(60));
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
    fn auth_from_flags_then_the_nats_cli_variables() {
        let c = parse_env(
            &["natsprobe"],
            &[
                ("NATS_USER", "u"),
                ("NATS_PASSWORD", "p"),
                ("NATS_CA", "/ca.pem"),
            ],
        )
        .unwrap();
        assert_eq!(c.auth.user.as_deref(), Some("u"));
        assert_eq!(c.auth.password, Some(Secret("p".into())));
        assert_eq!(c.auth.tls_ca, Some(PathBuf::from("/ca.pem")));
        let c = parse_env(&["natsprobe", "--token", "t"], &[("NATS_TOKEN", "other")]).unwrap();
        assert_eq!(c.auth.token, Some(Secret("t".into())), "the flag wins");
        let c = parse_env(
            &["natsprobe"],
            &[("NATS_CREDS", "/u.creds"), ("NATS_NKEY", "")],
        )
        .unwrap();
        assert_eq!(c.auth.creds, Some(PathBuf::from("/u.creds")));
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case; 4] = [
            (
                &[
                    "natsprobe",
                    "--token",
                    "t",
                    "--user",
                    "u",
                    "--password",
                    "p",
                ],
                &[],
                "one way",
            ),
            (
                &["natsprobe", "--creds", "/c"],
                &[("NATS_TOKEN", "t")],
                "one way",
            ),
            (&["natsprobe", "--password", "p"], &[], "go together"),
            (
                &["natsprobe", "--tlscert", "/c.pem"],
                &[],
                "--tlscert and --tlskey",
            ),
        ];
        for (args, env, fragment) in cases {
            let err = parse_env(args, env).unwrap_err();
            assert!(err.contains(fragment), "{args:?} {env:?}: {err}");
            assert!(!err.contains("\"t\"") && !err.contains(" p "), "{err}");
        }
    }

    #[test]
    fn no_environment_value_is_ever_shown_in_help() {
        let command = Cli::command();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                if arg.get_env().is_some() {
                    assert!(
                        arg.is_hide_env_values_set(),
                        "--{:?} shows its env value",
                        arg.get_long()
                    );
                }
            }
        }
    }

    fn guard(args: &[&str], env: &[(&str, &str)]) -> Result<GuardConfig, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        let Command::Guard(guard) = cli.command else {
            return Err("not a guard".into());
        };
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        guard.validate(&lookup).map_err(|e| match e {
            Error::Usage(m) => m,
            other => describe(&other),
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
        assert_eq!(g.interval, Duration::from_secs(30));
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

    #[test]
    fn a_jetstream_domain_or_prefix_from_flags_or_their_variables() {
        let c = parse(&[
            "natsprobe",
            "--server",
            "n",
            "--consumer",
            "S/D",
            "--js-domain",
            "hub",
        ])
        .unwrap();
        assert_eq!(c.js_api, JsApi::Domain("hub".into()));
        let c = parse_env(&["natsprobe", "--server", "n", "--consumer", "S/D"], &[]).unwrap();
        assert_eq!(c.js_api, JsApi::Local, "no domain: the server's own");
        let c = parse(&["natsprobe", "--js-api-prefix", "JS.hub.API."]).unwrap();
        assert_eq!(c.js_api, JsApi::Prefix("JS.hub.API".into()));
        let g = guard(
            &["natsprobe", "guard", "--server", "n", "--js-domain", "hub"],
            &[],
        )
        .unwrap();
        assert_eq!(g.js_api.subject("STREAM.LIST"), "$JS.hub.API.STREAM.LIST");
        for (args, fragment) in [
            (
                &[
                    "natsprobe",
                    "--js-domain",
                    "hub",
                    "--js-api-prefix",
                    "X.API",
                ][..],
                "--js-domain and --js-api-prefix both given",
            ),
            (&["natsprobe", "--js-domain", "my hub"], "--js-domain"),
            (&["natsprobe", "--js-domain", "hub.eu"], "--js-domain"),
            (&["natsprobe", "--js-domain", "*"], "--js-domain"),
            (&["natsprobe", "--js-domain", ">"], "--js-domain"),
            (
                &["natsprobe", "--js-api-prefix", "X.*.API"],
                "--js-api-prefix",
            ),
            (
                &["natsprobe", "--js-api-prefix", "X..API"],
                "--js-api-prefix",
            ),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert!(err.contains(fragment), "{args:?}: {err}");
        }
        let err = guard(
            &["natsprobe", "guard", "--server", "n", "--js-domain", "a.b"],
            &[],
        )
        .unwrap_err();
        assert!(err.contains("--js-domain"), "{err}");
    }

    /// clap reads the twins from the process environment (the end-to-end tests set them);
    /// here: they are wired, and an empty one (an unset value in a manifest) is no domain.
    #[test]
    fn the_jetstream_flags_read_their_environment_twins() {
        let command = Cli::command();
        let check = command
            .get_subcommands()
            .find(|s| s.get_name() == "check")
            .unwrap();
        let env_of = |long: &str| {
            check
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().to_string())
        };
        assert_eq!(env_of("js-domain").as_deref(), Some("NATSPROBE_JS_DOMAIN"));
        assert_eq!(
            env_of("js-api-prefix").as_deref(),
            Some("NATSPROBE_JS_API_PREFIX")
        );
        let empty = JsArgs {
            js_domain: Some(String::new()),
            js_api_prefix: Some(" ".into()),
        };
        assert_eq!(
            empty.validate().unwrap(),
            JsApi::Local,
            "an empty variable in a manifest is no domain"
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
        assert_eq!(c.sample_every, Duration::from_secs(45));
        assert_eq!(c.subscription_every, TrustSetting::Auto);
        let c = parse(&[&base[..], &["--stall-after", "2m"]].concat()).unwrap();
        assert_eq!(c.sample_every, Duration::from_secs(90));
        let c = parse(&[&base[..], &["--sample-every", "0s"]].concat()).unwrap();
        assert_eq!(c.sample_every, Duration::ZERO);
        let c = parse(
            &[
                &base[..],
                &["--own-subscription", "--subscription-every", "1m"],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(
            c.subscription_every,
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

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every flag has a `NATSPROBE_*` twin named after it, e.g. `--min-connections` reads
    /// `NATSPROBE_MIN_CONNECTIONS`; a new flag without one fails here.
    #[test]
    fn every_flag_has_its_environment_twin() {
        let command = Cli::command();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if matches!(long, "help" | "version") {
                    continue;
                }
                let expected = format!("NATSPROBE_{}", long.to_uppercase().replace('-', "_"));
                let env = arg.get_env().map(|e| e.to_string_lossy().to_string());
                assert_eq!(env.as_deref(), Some(expected.as_str()), "--{long}");
            }
        }
    }

    #[test]
    fn check_is_the_default_subcommand() {
        let explicit = parse(&["natsprobe", "check", "--port", "7422"]).unwrap();
        let implied = parse(&["natsprobe", "--port", "7422"]).unwrap();
        let bare = parse(&["natsprobe"]).unwrap();
        assert_eq!(explicit.policy, implied.policy);
        assert!(bare.servers.is_empty());
        assert_eq!(bare.policy.ports, [4222]);
        assert_eq!(bare.timeout, Duration::from_millis(800));
    }

    #[test]
    fn repeated_and_comma_separated_ports() {
        let c = parse(&["natsprobe", "--port", "7422", "--port", "4222,7422"]).unwrap();
        assert_eq!(c.policy.ports, [4222, 7422]);
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

    #[test]
    fn default_subcommand_leaves_help_version_and_subcommands_alone() {
        for first in ["-h", "--help", "-V", "--version", "check"] {
            let argv = with_default_subcommand(["natsprobe", first].map(OsString::from));
            assert_eq!(argv.len(), 2, "{first}");
        }
        let argv = with_default_subcommand(["natsprobe", "-v"].map(OsString::from));
        assert_eq!(argv, ["natsprobe", "check", "-v"].map(OsString::from));
    }
}
