//! The server's list of client connections, for the own-subscription check: which connection
//! holds which subscription, and from which address the server sees it.
//!
//! First from the account's own connection report, `$SYS.REQ.ACCOUNT.PING.CONNZ`, which every
//! account imports (the pod's ordinary credentials suffice): every server of a cluster answers
//! for its own connections, so answers are collected until as many servers as the INFO's
//! `connect_urls` name have answered, 100 ms pass without another, or the deadline. The servers filter by subject
//! (`filter_subject`), so a server with thousands of connections sends little. Only when that
//! does not show this pod's connection is the account's whole list asked for (without
//! subscriptions), to tell "connected without the subscription" from "no connection from this
//! address", and to find the probe's own connection by its name: the address the server sees
//! for it says whether addresses match at all (NAT, a proxy, a service-mesh sidecar).
//!
//! Or from the server's HTTP monitoring port (`--monitor`, `/connz?subs=detail`, every page,
//! 1024 a page), which has no subject filter.
//!
//! Leaf nodes and gateways (measured on 2.10.26): the account's report crosses both, so a
//! leaf node and its hub each answer for their own clients, and so does every cluster of a
//! supercluster; a server lists a leaf node's connection (`kind` `Leafnode`, named after the
//! leaf's server) among the account's, never the clients behind it. Answers are collected
//! until a quiet moment after the last, not until a count: the cluster's `connect_urls` do not
//! count leaf nodes or other clusters. A leaf node that a server names but that did not answer,
//! or a monitoring port whose server has leaf nodes (`/leafz`), may hold this pod's connection:
//! then a connection not listed is no evidence (`Connz::out_of_sight`).
//!
//! Once this pod's connection is known, later runs ask for it alone by its `cid`
//! (`lookup_account`, `lookup_monitor`; `rules::remembered` decides when, and whether the
//! answer is still this pod's).

use super::jetstream::{ApiError, ParseError};
use super::nats::Session;
use crate::config::MonitorUrl;
use crate::facts::{Connz, LookedUp, ServerConnection, ServerIdent, Unknown, Wanted};
use futures_core::Stream;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PING_CONNZ: &str = "$SYS.REQ.ACCOUNT.PING.CONNZ";
/// `/connz`'s page size (nats-server's `DefaultConnListSize`).
const PAGE: u64 = 1024;
/// How long to wait for one more server's answer after the last.
const QUIET: std::time::Duration = std::time::Duration::from_millis(100);
/// The most a monitoring answer may weigh: far above 2,000 connections with subscriptions.
const MAX_BODY: usize = 64 << 20;

/// One page of one server's connection list.
#[derive(Debug, Clone)]
pub struct Page {
    pub server: Option<String>,
    pub total: u64,
    /// Its clients (leaf node connections are not clients).
    pub connections: Vec<ServerConnection>,
    /// The servers of the leaf node connections it lists (their names).
    pub leaf_nodes: Vec<String>,
    /// The answering server's name and id, when the answer gave both.
    pub ident: Option<ServerIdent>,
}

#[derive(Deserialize)]
struct RawSub {
    #[serde(default)]
    subject: String,
    qgroup: Option<String>,
}

#[derive(Deserialize)]
struct RawConn {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    cid: u64,
    #[serde(default)]
    ip: String,
    #[serde(default)]
    port: u16,
    name: Option<String>,
    subscriptions_list_detail: Option<Vec<RawSub>>,
}

#[derive(Deserialize)]
struct RawConnz {
    #[serde(default)]
    total: u64,
    #[serde(default)]
    server_id: String,
    connections: Option<Vec<RawConn>>,
}

#[derive(Deserialize)]
struct RawServer {
    name: Option<String>,
    id: Option<String>,
}

#[derive(Deserialize)]
struct RawError {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    description: String,
}

/// The system account's envelope: `{"server":{...},"data":{...},"error":{...}}`.
#[derive(Deserialize)]
struct RawEnvelope {
    server: Option<RawServer>,
    data: Option<RawConnz>,
    error: Option<RawError>,
}

/// The clients (of the server `server`, when known), and the names of the leaf node
/// connections.
fn connections(
    raw: RawConnz,
    details: bool,
    server: Option<&ServerIdent>,
) -> (Vec<ServerConnection>, Vec<String>) {
    let (leafs, clients): (Vec<RawConn>, Vec<RawConn>) = raw
        .connections
        .unwrap_or_default()
        .into_iter()
        .partition(|c| c.kind == "Leafnode");
    let leafs = leafs.into_iter().filter_map(|c| c.name).collect();
    let total = raw.total;
    let clients = clients
        .into_iter()
        .filter_map(|c| {
            let ip: IpAddr = c.ip.parse().ok()?;
            Some(ServerConnection {
                addr: SocketAddr::new(crate::facts::unmap(ip), c.port),
                cid: c.cid,
                server: server.cloned(),
                account_connections: total,
                name: c.name.filter(|n| !n.is_empty()),
                subscriptions: details.then(|| {
                    c.subscriptions_list_detail
                        .unwrap_or_default()
                        .into_iter()
                        .map(|s| (s.subject, s.qgroup.filter(|q| !q.is_empty())))
                        .collect()
                }),
            })
        })
        .collect();
    (clients, leafs)
}

/// One answer to `$SYS.REQ.ACCOUNT.PING.CONNZ`.
pub fn parse_envelope(body: &[u8], details: bool) -> Result<Page, ParseError> {
    let raw: RawEnvelope =
        serde_json::from_slice(body).map_err(|e| ParseError::Malformed(e.to_string()))?;
    if let Some(e) = raw.error {
        return Err(ParseError::Api(ApiError {
            code: e.code,
            err_code: 0,
            description: e.description,
        }));
    }
    let data = raw
        .data
        .ok_or_else(|| ParseError::Malformed("no data".into()))?;
    let (name, id) = raw.server.map_or((None, None), |s| (s.name, s.id));
    let ident = match (&name, id) {
        (Some(name), Some(id)) => Some(ServerIdent {
            name: name.clone(),
            id,
        }),
        _ => None,
    };
    let total = data.total;
    let (connections, leaf_nodes) = connections(data, details, ident.as_ref());
    Ok(Page {
        server: name,
        total,
        connections,
        leaf_nodes,
        ident,
    })
}

/// One page of `/connz?subs=detail` from the monitoring port at `url` (the server's name
/// there is the URL: the page names only the server's id).
pub fn parse_connz(body: &[u8], url: &str) -> Result<Page, ParseError> {
    let raw: RawConnz =
        serde_json::from_slice(body).map_err(|e| ParseError::Malformed(e.to_string()))?;
    let ident = (!raw.server_id.is_empty()).then(|| ServerIdent {
        name: url.to_string(),
        id: raw.server_id.clone(),
    });
    let total = raw.total;
    let (connections, leaf_nodes) = connections(raw, true, ident.as_ref());
    Ok(Page {
        server: None,
        total,
        connections,
        leaf_nodes,
        ident,
    })
}

/// The monitoring port's `/leafz`: the leaf nodes that connected to this server (not its own
/// remotes: `is_spoke` is true on the side that solicited the connection).
pub fn parse_leafz(body: &[u8]) -> Result<Vec<String>, ParseError> {
    #[derive(Deserialize)]
    struct Leaf {
        #[serde(default)]
        name: String,
        #[serde(default)]
        is_spoke: bool,
    }
    #[derive(Deserialize)]
    struct Leafz {
        leafs: Option<Vec<Leaf>>,
    }
    let raw: Leafz =
        serde_json::from_slice(body).map_err(|e| ParseError::Malformed(e.to_string()))?;
    Ok(raw
        .leafs
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !l.is_spoke)
        .map(|l| match l.name.is_empty() {
            true => "(unnamed)".into(),
            false => l.name,
        })
        .collect())
}

/// The account's connections holding a subscription on each wanted subject; then, if this
/// pod's (`ours`, as the server would see them) are not among them, the whole list.
pub async fn from_account(
    session: &Session,
    wanted: &[Wanted],
    ours: &[SocketAddr],
    probe_name: &str,
    deadline: Instant,
) -> Result<Connz, Unknown> {
    let (holding, mut answered) = holding(session, wanted, ours, deadline).await?;
    let shown = wanted.iter().all(|w| {
        holding
            .iter()
            .any(|c| ours.contains(&c.addr) && holds(c, w))
    });
    let mut connz = Connz {
        source: PING_CONNZ.into(),
        holding,
        all: None,
        probe_seen_as: None,
        servers: answered.len().max(1),
        out_of_sight: None,
    };
    if shown {
        return Ok(connz);
    }
    let (all, leaf_nodes) = every_connection(session, deadline, &mut answered).await?;
    connz.probe_seen_as = all
        .iter()
        .find(|c| c.name.as_deref() == Some(probe_name))
        .map(|c| c.addr);
    connz.all = Some(all);
    connz.servers = answered.len().max(1);
    let silent: Vec<String> = leaf_nodes
        .into_iter()
        .filter(|l| !answered.contains(l))
        .collect();
    if !silent.is_empty() {
        connz.out_of_sight = Some(format!(
            "leaf node {} is connected and did not answer {PING_CONNZ} (the pod's connection may be on it)",
            silent.join(", ")
        ));
    }
    Ok(connz)
}

/// The connections holding a subscription on each wanted subject, one filtered report per
/// subject, and the servers that answered.
async fn holding(
    session: &Session,
    wanted: &[Wanted],
    ours: &[SocketAddr],
    deadline: Instant,
) -> Result<(Vec<ServerConnection>, BTreeSet<String>), Unknown> {
    let subjects: BTreeSet<&str> = wanted.iter().map(|w| w.subject.as_str()).collect();
    let mut holding = Vec::new();
    let mut answered: BTreeSet<String> = BTreeSet::new();
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
        let pages = ping(session, &body, true, deadline, found).await?;
        answered.extend(pages.iter().filter_map(|p| p.server.clone()));
        holding.extend(pages.into_iter().flat_map(|p| p.connections));
    }
    Ok((holding, answered))
}

/// Every connection, without subscriptions, every page of every server (each that answers
/// is added to `answered`), and the leaf nodes' servers they list.
async fn every_connection(
    session: &Session,
    deadline: Instant,
    answered: &mut BTreeSet<String>,
) -> Result<(Vec<ServerConnection>, BTreeSet<String>), Unknown> {
    let first = serde_json::json!({ "limit": PAGE });
    let pages = ping(session, &first, false, deadline, |_| false).await?;
    answered.extend(pages.iter().filter_map(|p| p.server.clone()));
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
            for more in ping(session, &body, false, deadline, enough).await? {
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
    let pages = ping(session, &body, true, deadline, exact).await?;
    Ok(pages.into_iter().filter_map(looked_up).collect())
}

/// One connection by its cid from the monitoring port (`/connz?cid=N&subs=detail`): with no
/// account filter the server finds it directly (`s.clients[cid]`, monitor.go `Connz`).
pub async fn lookup_monitor(
    url: &MonitorUrl,
    cid: u64,
    deadline: Instant,
) -> Result<Vec<LookedUp>, Unknown> {
    let path = format!("/connz?cid={cid}&subs=detail");
    let body = tokio::time::timeout_at(deadline.into(), http_get(url, &path))
        .await
        .map_err(|_| Unknown::Deadline)??;
    let page =
        parse_connz(&body, &url.to_string()).map_err(|e| Unknown::Failed(format!("{url}: {e}")))?;
    Ok(looked_up(page).into_iter().collect())
}

/// A lookup's page: the server that answered, and the connection (a cid no longer open
/// comes back as an empty list).
fn looked_up(page: Page) -> Option<LookedUp> {
    let server = page.ident?;
    let connection = page
        .connections
        .into_iter()
        .find(|c| c.server.as_ref() == Some(&server));
    Some(LookedUp { server, connection })
}

/// Whether a listed connection holds `w`: the same subject, in the same queue group.
pub fn holds(c: &ServerConnection, w: &Wanted) -> bool {
    c.subscriptions
        .as_ref()
        .is_some_and(|subs| subs.iter().any(|(s, q)| *s == w.subject && *q == w.queue))
}

/// Publishes one account connz request and collects the servers' answers until a quiet
/// moment after the last, `enough` says so, or the deadline passes.
async fn ping(
    session: &Session,
    body: &serde_json::Value,
    details: bool,
    deadline: Instant,
    enough: impl Fn(&[Page]) -> bool,
) -> Result<Vec<Page>, Unknown> {
    let client = &session.client;
    let inbox = client.new_inbox();
    let mut replies = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| Unknown::Failed(format!("cannot subscribe for the answers: {e}")))?;
    client
        .publish_with_reply(PING_CONNZ, inbox, body.to_string().into())
        .await
        .map_err(|e| Unknown::Failed(format!("cannot ask {PING_CONNZ}: {e}")))?;
    let _ = client.flush().await;
    let mut pages = Vec::new();
    while !enough(&pages) {
        // The servers answer at once; after the first, a quiet moment means the rest are not
        // coming. Not a count: a cluster's `connect_urls` name neither its leaf nodes nor the
        // other clusters of a supercluster, which answer too.
        let until = match pages.is_empty() {
            true => deadline,
            false => deadline.min(Instant::now() + QUIET),
        };
        let next = std::future::poll_fn(|cx| Pin::new(&mut replies).poll_next(cx));
        match tokio::time::timeout_at(until.into(), next).await {
            Ok(Some(message)) => match parse_envelope(&message.payload, details) {
                Ok(page) => pages.push(page),
                Err(e) => return Err(Unknown::Failed(format!("{PING_CONNZ}: {e}"))),
            },
            Ok(None) | Err(_) => break,
        }
    }
    if session.refused(PING_CONNZ) {
        return Err(Unknown::NotPermitted(PING_CONNZ.into()));
    }
    match pages.is_empty() {
        true => Err(Unknown::Unreachable(format!(
            "no server answered {PING_CONNZ} (no system account?)"
        ))),
        false => Ok(pages),
    }
}

/// The monitoring port's `/connz?subs=detail`, every page.
pub async fn from_monitor(
    url: &MonitorUrl,
    wanted: &[Wanted],
    ours: &[SocketAddr],
    probe_name: &str,
    deadline: Instant,
) -> Result<Connz, Unknown> {
    let get = |offset: u64| {
        let path = format!("/connz?subs=detail&offset={offset}&limit={PAGE}");
        async move {
            let body = tokio::time::timeout_at(deadline.into(), http_get(url, &path))
                .await
                .map_err(|_| Unknown::Deadline)??;
            parse_connz(&body, &url.to_string()).map_err(|e| Unknown::Failed(format!("{url}: {e}")))
        }
    };
    let first = get(0).await?;
    let mut all = first.connections;
    let mut offset = PAGE;
    while offset < first.total {
        all.extend(get(offset).await?.connections);
        offset += PAGE;
    }
    let holding = all
        .iter()
        .filter(|c| wanted.iter().any(|w| holds(c, w)))
        .cloned()
        .collect();
    // This pod's connection not here: it may be on a leaf node of this server, whose clients
    // its /connz does not list. Asked only then (one more request).
    let mut out_of_sight = None;
    if !all.iter().any(|c| ours.contains(&c.addr)) {
        let leafz = tokio::time::timeout_at(deadline.into(), http_get(url, "/leafz"))
            .await
            .map_err(|_| Unknown::Deadline)??;
        let leafs = parse_leafz(&leafz).map_err(|e| Unknown::Failed(format!("{url}: {e}")))?;
        if !leafs.is_empty() {
            out_of_sight = Some(format!(
                "{url} has leaf nodes ({}) whose clients its /connz does not list (the pod's connection may be on one)",
                leafs.join(", ")
            ));
        }
    }
    Ok(Connz {
        out_of_sight,
        source: url.to_string(),
        holding,
        probe_seen_as: all
            .iter()
            .find(|c| c.name.as_deref() == Some(probe_name))
            .map(|c| c.addr),
        all: Some(all),
        servers: 1,
    })
}

/// A plain HTTP/1.0 GET (one request per connection, no chunking), body returned on 200.
async fn http_get(url: &MonitorUrl, path: &str) -> Result<Vec<u8>, Unknown> {
    let fail = |why: String| Unknown::Unreachable(format!("{url}: {why}"));
    let mut stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {}\r\nUser-Agent: natsprobe\r\nAccept: application/json\r\n\r\n",
        url.host
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
        if answer.len() > MAX_BODY {
            return Err(fail(format!("answer over {} MiB", MAX_BODY >> 20)));
        }
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| fail("not an HTTP answer".into()))?;
    let status = String::from_utf8_lossy(&answer[..split]);
    let first = status.lines().next().unwrap_or_default();
    if first.split_whitespace().nth(1) != Some("200") {
        let shown: String = first.chars().take(60).collect();
        return Err(fail(format!("answered '{shown}'")));
    }
    Ok(answer[split + 4..].to_vec())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from nats-server 2.10.26: `$SYS.REQ.ACCOUNT.PING.CONNZ` with
    /// `{"subscriptions_detail":true,"filter_subject":"deliver.D"}`.
    const ENVELOPE: &str = r#"{"server":{"name":"n1","host":"0.0.0.0","id":"NABC","ver":"2.10.26","jetstream":true,"flags":3,"seq":12,"time":"2026-12-01T08:00:00Z"},"data":{"server_id":"NABC","now":"2026-12-01T08:00:00Z","num_connections":1,"total":1,"offset":0,"limit":1024,"connections":[{"cid":7,"kind":"Client","type":"nats","ip":"10.200.0.2","port":51828,"start":"2026-12-01T07:59:00Z","last_activity":"2026-12-01T08:00:00Z","rtt":"1ms","uptime":"1m","idle":"0s","pending_bytes":0,"in_msgs":10,"out_msgs":10,"in_bytes":100,"out_bytes":100,"subscriptions":2,"name":"natspeer","lang":"go","version":"1.22.1","subscriptions_list_detail":[{"subject":"deliver.D","qgroup":"D","sid":"1","msgs":10,"cid":7},{"subject":"_INBOX.x.*","sid":"2","msgs":0,"cid":7}]}]}}"#;

    #[test]
    fn an_account_answer() {
        let page = parse_envelope(ENVELOPE.as_bytes(), true).unwrap();
        assert_eq!(page.server.as_deref(), Some("n1"));
        assert_eq!(page.total, 1);
        let c = &page.connections[0];
        assert_eq!(c.addr, "10.200.0.2:51828".parse().unwrap());
        assert_eq!(c.name.as_deref(), Some("natspeer"));
        assert_eq!(
            c.account_connections, 1,
            "the answer's total, for the trust time"
        );
        let group = Wanted {
            subject: "deliver.D".into(),
            queue: Some("D".into()),
        };
        assert!(holds(c, &group));
        let alone = Wanted {
            subject: "deliver.D".into(),
            queue: None,
        };
        assert!(
            !holds(c, &alone),
            "another queue group is another subscription"
        );
        let err = r#"{"server":{"name":"n1"},"error":{"code":500,"description":"filter by subject only valid with account filtering"}}"#;
        assert!(parse_envelope(err.as_bytes(), true).is_err());
    }

    #[test]
    fn a_monitoring_page_and_mapped_addresses() {
        let body = r#"{"server_id":"N","now":"2026-12-01T08:00:00Z","num_connections":2,"total":2000,"offset":1024,"limit":1024,"connections":[{"cid":1,"ip":"::ffff:10.0.0.7","port":4000,"subscriptions_list_detail":[{"subject":"journal.>","sid":"1"}]},{"cid":2,"ip":"not an ip","port":1}]}"#;
        let page = parse_connz(body.as_bytes(), "http://m:8222").unwrap();
        assert_eq!(page.ident.as_ref().map(|i| i.id.as_str()), Some("N"));
        assert_eq!(page.connections[0].cid, 1);
        assert_eq!(page.total, 2000);
        assert_eq!(page.connections[0].account_connections, 2000);
        assert_eq!(
            page.connections.len(),
            1,
            "an unparsable address is skipped"
        );
        assert_eq!(page.connections[0].addr, "10.0.0.7:4000".parse().unwrap());
        assert!(holds(
            &page.connections[0],
            &Wanted {
                subject: "journal.>".into(),
                queue: None
            }
        ));
    }

    /// Recorded from nats-server 2.10.26: the hub's answer to a leaf node client's
    /// `$SYS.REQ.ACCOUNT.PING.CONNZ` lists the leaf node's connection (named after the leaf's
    /// server, holding what its clients subscribe to), not the clients behind it.
    #[test]
    fn a_leaf_node_connection_is_not_a_client() {
        let body = r#"{"server":{"name":"hub"},"data":{"total":2,"connections":[{"cid":5,"kind":"Leafnode","ip":"127.0.0.1","port":32978,"name":"leaf","subscriptions_list_detail":[{"subject":"deliver.kv","sid":"1"}]},{"cid":9,"kind":"Client","ip":"127.0.0.1","port":40000,"name":"natsprobe-1-2"}]}}"#;
        let page = parse_envelope(body.as_bytes(), true).unwrap();
        assert_eq!(page.leaf_nodes, ["leaf"]);
        assert_eq!(page.connections.len(), 1);
        assert_eq!(page.connections[0].addr, "127.0.0.1:40000".parse().unwrap());
        // /leafz: the hub's accepted leaf node counts, the leaf's own remote (is_spoke) not.
        let leafz = r#"{"server_id":"N","leafnodes":2,"leafs":[{"name":"leaf","is_spoke":false,"account":"$G","ip":"127.0.0.1","port":32978},{"name":"hub","is_spoke":true}]}"#;
        assert_eq!(parse_leafz(leafz.as_bytes()).unwrap(), ["leaf"]);
        assert!(parse_leafz(br#"{"leafnodes":0,"leafs":[]}"#)
            .unwrap()
            .is_empty());
    }
}
