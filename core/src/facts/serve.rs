//! What `serve` knows of its looks: how each ended. A look is one `check`, run as a child
//! process of `serve` with the same flags; its answer is the check's JSON document and exit
//! code, exactly as the exec probe would have given them.

use crate::prelude::*;
use serde::{Deserialize, Serialize};

/// How one look ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The check ran to its end and answered: its exit code, its one line, its JSON document.
    Judged(Judged),
    /// natsprobe's own trouble: the look could not start, was killed (by a signal, by the
    /// kernel's OOM killer, by `serve` when it overstayed its `--timeout`), or answered
    /// something that is not a check's answer. What happened, in words.
    Trouble(String),
}

/// A look the check itself answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    /// The exit code the exec probe would have returned (0 healthy, 1 unhealthy, 2
    /// configuration error, 3 could not evaluate).
    pub code: u8,
    /// The check's verdict word (`healthy`, `unhealthy`, `configuration_error`, `error`) and
    /// its evidence, from which the one line is made as the exec probe makes it.
    pub verdict: String,
    pub summary: String,
    /// The check's JSON document, as the check printed it.
    pub json: String,
    /// The JSON's `not_judged`: why a verdict that passes could not judge (NATS could not
    /// say); None when it judged.
    #[serde(default)]
    pub not_judged: Option<String>,
    /// Each consumer's and subscription's state, as the JSON gives them.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// The consumers were not asked this time (the JSON's `consumers_looked: skipped`, between
    /// the looks `--sample-every` spaces): their verdict is the last asked look's.
    #[serde(default)]
    pub consumers_skipped: bool,
    /// Whether the look carried `--startup`'s meaning.
    pub startup: bool,
}

/// One consumer or subscription the check judged, as its JSON names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub name: PartName,
    /// Its JSON `state`: among `rules::consumer::STATES` or `rules::subscription::STATES`.
    pub state: String,
    /// A consumer's time without progress while work waits (its JSON `no_progress_ms`).
    #[serde(default)]
    pub no_progress_ms: Option<u64>,
}

/// What the configuration names a part by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PartName {
    /// `--consumer STREAM/DURABLE`.
    Consumer { stream: String, durable: String },
    /// `--own-subscription`: the deliver subscription of `--consumer STREAM/DURABLE`.
    Own { stream: String, durable: String },
    /// `--subscription SUBJECT[@QUEUE]`.
    Subscription {
        subject: String,
        queue: Option<String>,
    },
}

/// Which of `serve`'s paths a probe asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbePath {
    /// `/livez`: the app container's livenessProbe.
    Live,
    /// `/startupz`: the app container's startupProbe (`serve --startup`).
    Startup,
    /// `/selfz`: natsprobe's own livenessProbe (are its looks moving?).
    Own,
}

/// One HTTP request, as `serve` read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// A probe path, asked for by GET (or HEAD: the same answer without its body), in JSON
    /// (`?format=json` or `Accept: application/json`) or as the line.
    Probe {
        path: ProbePath,
        json: bool,
        head: bool,
    },
    /// `/metrics`, by GET or HEAD: in OpenMetrics' text format where the request's `Accept`
    /// asks for it, else in Prometheus's.
    Metrics { open_metrics: bool, head: bool },
    /// Anything else, refused.
    Refused(Refusal),
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not HTTP/1.x as a probe sends it.
    BadRequest,
    /// A method other than GET or HEAD.
    Method,
    /// A path `serve` does not answer.
    NotFound,
    /// `/startupz` without `serve --startup`.
    StartupNotAsked,
    /// The request line and headers longer than `serve` reads.
    TooLarge,
}

/// Which meaning a look carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    Live,
    Startup,
}
