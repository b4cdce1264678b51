//! What a check's reports are made from: the verdict, the policy, the observations and the
//! judged consumers and subscriptions. Every report of a check reads it; it imports no report.

use crate::config::JsApi;
use crate::facts::Observations;
use crate::rules::check::Verdict;
use crate::rules::connection::{Connections, Policy};
use crate::rules::judged::{JudgedConsumer, JudgedSubscription};

/// Everything the check's report is made from.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    pub verdict: Verdict,
    pub policy: &'a Policy,
    pub connections: &'a Connections,
    pub observations: &'a Observations,
    /// The servers as shown (never with userinfo), whether or not they were asked.
    pub servers: &'a [String],
    /// How many consumers were configured (they are not asked without a connection).
    pub consumers_configured: usize,
    /// Where the consumers were asked for.
    pub js_api: &'a JsApi,
    pub consumers: &'a [JudgedConsumer],
    /// The subscriptions this pod's connection must hold, judged.
    pub subscriptions: &'a [JudgedSubscription],
    /// With the matching sockets listed (`-v`).
    pub verbose: bool,
}
