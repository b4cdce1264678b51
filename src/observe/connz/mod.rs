//! The server's list of client connections, for the own-subscription check: which connection
//! holds which subscription, and from which address the server sees it.
//!
//! First from the account's own connection report, `$SYS.REQ.ACCOUNT.PING.CONNZ`, which every
//! account imports (the pod's ordinary credentials suffice): every server of a cluster answers
//! for its own connections. The servers filter by subject (`filter_subject`), so a server with
//! thousands of connections sends little. Only when that does not show this pod's connection
//! is the account's whole list asked for (without subscriptions), to tell "connected without
//! the subscription" from "no connection from this address", and to find the probe's own
//! connection by its name: the address the server sees for it says whether addresses match at
//! all (NAT, a proxy, a service-mesh sidecar).
//!
//! Which servers must answer: a report is only as good as the servers in it, and a server with
//! many connections answers last (it walks them all), sometimes long after the others. So
//! first the account's `$SYS.REQ.ACCOUNT.PING.STATZ` (also imported by every account) names
//! the servers that hold the account's client connections: each answers it at once, walking
//! nothing. The reports are then collected until each of those servers has answered (or the
//! pod's connection was found holding what is wanted), however long after the others, up to
//! the deadline; a report that misses one of them is incomplete (`Connz::incomplete`), and
//! absence in it is no evidence. Without that answer (not permitted), until a quiet moment
//! (100 ms) after the last answer.
//!
//! Or from the server's HTTP monitoring port (`--monitor`, `/connz?subs=detail`, every page,
//! 1024 a page), which has no subject filter.
//!
//! Leaf nodes and gateways (measured on 2.10.26): the account's report crosses both, so a
//! leaf node and its hub each answer for their own clients, and so does every cluster of a
//! supercluster; a server lists a leaf node's connection (`kind` `Leafnode`, named after the
//! leaf's server) among the account's, never the clients behind it. Answers are collected
//! until a quiet moment after the last, not until a count: the cluster's `connect_urls` do not
//! count leaf nodes or other clusters. A leaf node that a server names but that did not answer
//! may hold this pod's connection: then a connection not listed is no evidence
//! (`Connz::incomplete`: late or never, it is not told apart). A monitoring port whose server
//! has leaf nodes (`/leafz`) can never list their clients (`Connz::out_of_sight`).
//!
//! Once this pod's connection is known, later runs ask for it alone by its `cid`
//! (`lookup_account`, `lookup_monitor`; `rules::remembered` decides when, and whether the
//! answer is still this pod's).

pub mod monitor;
pub mod parse;

use super::nats::{next, Session};
use crate::facts::{Connz, LookedUp, ServerConnection, ServerIdent, Unknown, Wanted};
use crate::rules::subscription::holds;
use parse::{looked_up, parse_envelope, parse_statz, Page, PAGE};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;

const PING_CONNZ: &str = "$SYS.REQ.ACCOUNT.PING.CONNZ";
const PING_STATZ: &str = "$SYS.REQ.ACCOUNT.PING.STATZ";
use natsprobe_core::timing::{QUIET, STATZ_SHARE};

/// The account's connections holding a subscription on each wanted subject; then, if this
/// pod's (`ours`, as the server would see them) are not among them, or `every` (what this
/// pod's connections published, for a pull consumer's part), the whole list.
pub async fn from_account(
    session: &Session,
    wanted: &[Wanted],
    ours: &[SocketAddr],
    every: bool,
    probe_name: &str,
    deadline: Instant,
) -> Result<Connz, Unknown> {
    let mut heard = Heard {
        expected: holders(session, deadline).await,
        answered: BTreeSet::new(),
        silent: BTreeSet::new(),
        said_subscriptions: None,
    };
    let (holding, shown) = holding(session, wanted, ours, &mut heard, deadline).await?;
    let mut connz = Connz {
        source: PING_CONNZ.into(),
        holding,
        all: None,
        probe_seen_as: None,
        servers: heard.answered.len().max(1),
        out_of_sight: None,
        incomplete: None,
    };
    if !shown || every {
        let (all, leaf_nodes) = every_connection(session, &mut heard, deadline).await?;
        connz.probe_seen_as = all
            .iter()
            .find(|c| c.name.as_deref() == Some(probe_name))
            .map(|c| c.addr);
        // This pod's connection listed by a server whose filtered answer was not heard: which
        // subscriptions it holds is unknown. (Asked for none, none was missed.)
        if let Some(said) = &heard.said_subscriptions {
            heard.silent.extend(
                all.iter()
                    .filter(|c| ours.contains(&c.addr))
                    .filter_map(|c| c.server.as_ref().map(|s| s.name.clone()))
                    .filter(|name| !said.contains(name)),
            );
        }
        let listed = all.iter().any(|c| ours.contains(&c.addr));
        connz.all = Some(all);
        connz.servers = heard.answered.len().max(1);
        let silent: Vec<String> = leaf_nodes
            .into_iter()
            .filter(|l| !heard.answered.contains(l))
            .collect();
        // A leaf node that did not answer may hold the pod's connection, unless another
        // server lists it. Whether it is late or never answers, absence is no evidence.
        if !silent.is_empty() && !listed {
            connz.incomplete = Some(format!(
                "leaf node {} is connected and did not answer {PING_CONNZ} in time (the pod's connection may be on it)",
                silent.join(", ")
            ));
        }
    }
    if !heard.silent.is_empty() {
        connz.incomplete = Some(format!(
            "server {} holds connections of this account and did not answer {PING_CONNZ} in time",
            heard.silent.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(connz)
}

/// Which servers answered, and which had to.
struct Heard {
    /// The servers holding the account's client connections (`holders`); None when unknown.
    expected: Option<BTreeSet<String>>,
    answered: BTreeSet<String>,
    /// Expected servers missing from a report that needed them.
    silent: BTreeSet<String>,
    /// The servers that answered every subject's filtered report: only their lists say
    /// which subscriptions a connection does not hold.
    said_subscriptions: Option<BTreeSet<String>>,
}

impl Heard {
    /// Whether every expected server is among `pages`' (never, when none is known).
    fn all_in(&self, pages: &[Page]) -> bool {
        self.expected.as_ref().is_some_and(|e| {
            e.iter().all(|n| {
                pages
                    .iter()
                    .any(|p| p.server.as_deref() == Some(n.as_str()))
            })
        })
    }

    /// Notes who answered a report that needed every server, and who did not.
    fn note(&mut self, pages: &[Page], needed: bool) {
        let names: BTreeSet<String> = pages.iter().filter_map(|p| p.server.clone()).collect();
        if needed {
            if let Some(e) = &self.expected {
                self.silent.extend(e.difference(&names).cloned());
            }
        }
        self.answered.extend(names);
    }
}

/// The servers holding client connections of the account: each answers
/// `$SYS.REQ.ACCOUNT.PING.STATZ` at once (a server without the account's connections stays
/// silent). None when it cannot be asked or nobody answers: then reports are collected until
/// a quiet moment.
async fn holders(session: &Session, deadline: Instant) -> Option<BTreeSet<String>> {
    let until = Instant::now() + STATZ_SHARE.of(deadline.saturating_duration_since(Instant::now()));
    let parse = |body: &[u8]| Ok(parse_statz(body));
    let name = |n: &Option<String>| n.clone();
    let answers = collect(
        session,
        PING_STATZ,
        "{}",
        until,
        (parse, name),
        |_| false,
        None,
    )
    .await
    .ok()?;
    let names: BTreeSet<String> = answers.into_iter().flatten().collect();
    (!names.is_empty()).then_some(names)
}

/// Each wanted subject's holders, every server's, and whether this pod's connections showed
/// every wanted subscription among them.
async fn holding(
    session: &Session,
    wanted: &[Wanted],
    ours: &[SocketAddr],
    heard: &mut Heard,
    deadline: Instant,
) -> Result<(Vec<ServerConnection>, bool), Unknown> {
    let subjects: BTreeSet<&str> = wanted.iter().map(|w| w.subject.as_str()).collect();
    let mut holding = Vec::new();
    for subject in subjects {
        let body = serde_json::json!({
            "subscriptions_detail": true,
            "filter_subject": subject,
            "limit": PAGE,
        });
        // Every server answers for its own connections; once one shows this pod's holding the
        // subscription, the others need not be waited for.
        let found = |pages: &[Page]| {
            pages.iter().flat_map(|p| &p.connections).any(|c| {
                ours.contains(&c.addr) && wanted.iter().any(|w| w.subject == subject && holds(c, w))
            })
        };
        let pages = ping(
            session,
            &body,
            true,
            deadline,
            |p| found(p) || heard.all_in(p),
            heard.expected.as_ref(),
        )
        .await?;
        heard.note(&pages, !found(&pages));
        let names: BTreeSet<String> = pages.iter().filter_map(|p| p.server.clone()).collect();
        heard.said_subscriptions = Some(match heard.said_subscriptions.take() {
            Some(before) => before.intersection(&names).cloned().collect(),
            None => names,
        });
        holding.extend(pages.into_iter().flat_map(|p| p.connections));
    }
    let shown = wanted.iter().all(|w| {
        holding
            .iter()
            .any(|c| ours.contains(&c.addr) && holds(c, w))
    });
    Ok((holding, shown))
}

/// Every connection of the account, without subscriptions, every page of every server; and
/// the leaf nodes the servers name.
async fn every_connection(
    session: &Session,
    heard: &mut Heard,
    deadline: Instant,
) -> Result<(Vec<ServerConnection>, BTreeSet<String>), Unknown> {
    let first = serde_json::json!({ "limit": PAGE });
    // Every expected server, and then a quiet moment for the others: a leaf node the servers
    // name may answer for clients the account's STATZ did not reach.
    let expected = heard.expected.as_ref();
    let pages = ping(session, &first, false, deadline, |_| false, expected).await?;
    heard.note(&pages, true);
    let mut leaf_nodes: BTreeSet<String> = BTreeSet::new();
    let mut all = Vec::new();
    for page in pages {
        leaf_nodes.extend(page.leaf_nodes.iter().cloned());
        let mut offset = PAGE;
        let (total, server) = (page.total, page.server.clone());
        all.extend(page.connections);
        while offset < total {
            let Some(name) = &server else { break };
            let body = serde_json::json!({ "offset": offset, "limit": PAGE, "server_name": name });
            let enough = |pages: &[Page]| !pages.is_empty();
            for more in ping(session, &body, false, deadline, enough, None).await? {
                leaf_nodes.extend(more.leaf_nodes);
                all.extend(more.connections);
            }
            offset += PAGE;
        }
    }
    Ok((all, leaf_nodes))
}

/// One connection by its cid, from the account's connection report of the server named
/// `at`. Cheaper than a subject filter, which walks every connection's subscriptions, but
/// not direct: for an account's report the server first copies the account's list of
/// connections (monitor.go `Connz`), so the cost grows with the account's connections
/// (docs/server-facts.md); `rules::remembered::trust_time` asks less often for that. The name filter of a system request matches by
/// substring (events.go `filterRequest`), so every answer is kept with its server's name and
/// id, and the caller compares both.
pub async fn lookup_account(
    session: &Session,
    at: &ServerIdent,
    cid: u64,
    deadline: Instant,
) -> Result<Vec<LookedUp>, Unknown> {
    let body = serde_json::json!({
        "cid": cid,
        "subscriptions_detail": true,
        "server_name": at.name,
    });
    let exact = |pages: &[Page]| pages.iter().any(|p| p.server.as_deref() == Some(&at.name));
    let pages = ping(session, &body, true, deadline, exact, None).await?;
    Ok(pages.into_iter().filter_map(looked_up).collect())
}

/// Publishes one account connz request and collects the servers' answers (see `collect`).
async fn ping(
    session: &Session,
    body: &serde_json::Value,
    details: bool,
    deadline: Instant,
    enough: impl Fn(&[Page]) -> bool,
    expected: Option<&BTreeSet<String>>,
) -> Result<Vec<Page>, Unknown> {
    let parse = |body: &[u8]| {
        parse_envelope(body, details).map_err(|e| Unknown::Failed(format!("{PING_CONNZ}: {e}")))
    };
    let name = |p: &Page| p.server.clone();
    let body = body.to_string();
    collect(
        session,
        PING_CONNZ,
        &body,
        deadline,
        (parse, name),
        enough,
        expected,
    )
    .await
}

/// Publishes one request to every server and collects the answers until `enough` says so,
/// the deadline passes, or, once every server in `expected` has answered (or when none is
/// expected), a quiet moment after the last answer. Not a count of servers: a cluster's
/// `connect_urls` name neither its leaf nodes nor the other clusters of a supercluster, which
/// answer too.
async fn collect<T>(
    session: &Session,
    subject: &str,
    body: &str,
    deadline: Instant,
    (parse, name): (
        impl Fn(&[u8]) -> Result<T, Unknown>,
        impl Fn(&T) -> Option<String>,
    ),
    enough: impl Fn(&[T]) -> bool,
    expected: Option<&BTreeSet<String>>,
) -> Result<Vec<T>, Unknown> {
    let client = &session.client;
    let inbox = client.new_inbox();
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| Unknown::Failed(format!("cannot subscribe for the answers: {e}")))?;
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .map_err(|e| Unknown::Failed(format!("cannot ask {subject}: {e}")))?;
    let _ = client.flush().await;
    let mut answers: Vec<T> = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    // A request the user may not send, or answers it may not receive (the reply inbox), is
    // refused on the connection, never answered: said at once instead of at the deadline.
    let refused = session.refusal(subject);
    tokio::pin!(refused);
    while !enough(&answers) {
        let waiting = expected.is_some_and(|e| !e.is_subset(&names));
        let until = match answers.is_empty() || waiting {
            true => deadline,
            false => deadline.min(Instant::now() + QUIET),
        };
        tokio::select! {
            why = &mut refused => return Err(why),
            message = tokio::time::timeout_at(until.into(), next(&mut replies)) => match message {
                // Nobody subscribes to the system's requests: the server has no system
                // account (its status 503, "no responders", arrives at once).
                Ok(Some(m)) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => {
                    return Err(Unknown::NoSystemAccount)
                }
                Ok(Some(m)) => {
                    let answer = parse(&m.payload)?;
                    names.extend(name(&answer));
                    answers.push(answer);
                }
                Ok(None) | Err(_) => break,
            },
        }
    }
    if session.refused(subject) {
        return Err(Unknown::NotPermitted(subject.into()));
    }
    match answers.is_empty() {
        true => {
            session.unanswered();
            Err(Unknown::Deadline)
        }
        false => Ok(answers),
    }
}

/// A unique connection name for this run, so the probe can find its own connection in the
/// server's list.
pub fn probe_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("natsprobe-{}-{nanos}", std::process::id())
}
