//! The plain configuration the command line produces: validated values, nothing left to parse,
//! no flag names. The observation layer reads its parts (URLs, credentials, which sockets);
//! the rules read their policies.

mod auth;
pub mod duration;
mod jsapi;
pub(crate) mod url;

pub use auth::{Auth, Secret};
pub use jsapi::JsApi;
pub use url::{
    parse as parse_url, parse_list as parse_url_list, parse_monitor, MonitorUrl, Scheme, ServerUrl,
    DEFAULT_PORT,
};

use crate::facts::ConsumerName;
use crate::rules;
use std::path::PathBuf;
use std::time::Duration;

/// Whose sockets count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Every socket in the network namespace.
    Anyone,
    Pid(u32),
    Name(String),
}

/// Which socket reader to use. Parsed by clap as it stands: its variants' docs are the help's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReaderChoice {
    /// netlink sock_diag, falling back to /proc when netlink is refused
    #[default]
    Auto,
    /// netlink sock_diag only
    Netlink,
    /// /proc/net/tcp{,6} only
    Proc,
}

/// Where the consumers' previous samples are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDirChoice {
    pub path: PathBuf,
    /// Chosen by the user (`--state-dir`), rather than the per-user default under $TMPDIR.
    pub explicit: bool,
    /// Where to go instead when the default cannot be used (never for `--state-dir`).
    pub fallbacks: Vec<PathBuf>,
}

/// A validated `check`.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// What the core's run decides with (`diagnose` is set by the command).
    pub core: natsprobe_core::run::Check,
    pub servers: Vec<ServerUrl>,
    /// Where the connection list comes from when the account's report cannot be had.
    pub monitor: Option<MonitorUrl>,
    pub state_dir: StateDirChoice,
    pub auth: Auth,
    /// Where every JetStream request goes.
    pub js_api: JsApi,
    pub owner: Owner,
    pub netns_of: Option<u32>,
    pub reader: ReaderChoice,
    pub timeout: Duration,
    pub json: bool,
    pub verbose: bool,
}

impl CheckConfig {
    /// The consumers and subscriptions it names, as a check's JSON names them.
    pub fn parts(&self) -> Vec<crate::facts::PartName> {
        use crate::facts::PartName;
        let core = &self.core;
        let consumers = core.consumers.iter().map(|c| PartName::Consumer {
            stream: c.stream.clone(),
            durable: c.durable.clone(),
        });
        let own = core
            .consumers
            .iter()
            .filter(|_| core.own_subscription)
            .map(|c| PartName::Own {
                stream: c.stream.clone(),
                durable: c.durable.clone(),
            });
        let subscriptions = core.subscriptions.iter().map(|w| PartName::Subscription {
            subject: w.subject.clone(),
            queue: w.queue.clone(),
        });
        consumers.chain(own).chain(subscriptions).collect()
    }
}

/// A validated `guard`.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    pub servers: Vec<ServerUrl>,
    pub auth: Auth,
    /// Where every JetStream request goes.
    pub js_api: JsApi,
    /// Durables that must exist; durable `*`: a stream that must.
    pub expect: Vec<ConsumerName>,
    /// Durables listed as ignored; durable `*`: a whole stream.
    pub ignore: Vec<ConsumerName>,
    pub interval: Duration,
    pub consumer_policy: rules::consumer::Policy,
    /// The deadline of each look.
    pub timeout: Duration,
    pub json: bool,
}

/// A setting whose value can turn out wrong only when it is used; the command line knows its
/// flag's name (`cli::flag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Pid,
    Process,
    NetnsOf,
    Creds,
    Nkey,
    OwnSubscription,
    InstallDest,
    /// `--state-dir`, or the default places for samples when none was given.
    StateDir,
}

/// A validated `serve`.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// What each look checks (as `check` would with the same flags).
    pub check: CheckConfig,
    pub listen: std::net::SocketAddr,
    /// How often a look starts.
    pub every: Duration,
    /// Set in the looks' own process: look when `serve` asks (each a check, its JSON),
    /// holding the NATS connection from one look to the next.
    pub look: bool,
    /// `--exit-unhealthy CODE --failure-threshold N`.
    pub exit_unhealthy: Option<natsprobe_core::rules::serve::ExitUnhealthy>,
}
