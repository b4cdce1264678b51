//! The connection reports as the servers send them, decoded: the account's report (its
//! envelope), the monitoring port's `/connz` and `/leafz`, the account's STATZ. No I/O:
//! every decoder here is fuzzed (`src/fuzz.rs`).

use super::super::jetstream::{api_error, json, ApiError, ParseError};
use crate::facts::{LookedUp, ServerConnection, ServerIdent};
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};

/// `/connz`'s page size (nats-server's `DefaultConnListSize`).
pub const PAGE: u64 = 1024;
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

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConn {
    kind: String,
    cid: u64,
    ip: String,
    port: u16,
    name: Option<String>,
    in_msgs: u64,
    subscriptions_list_detail: Option<Vec<RawSub>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConnz {
    total: u64,
    server_id: String,
    connections: Option<Vec<RawConn>>,
}

#[derive(Deserialize)]
pub(super) struct RawServer {
    name: Option<String>,
    id: Option<String>,
}

/// The system account's envelope: `{"server":{...},"data":{...},"error":{...}}`.
#[derive(Deserialize)]
struct RawEnvelope {
    server: Option<RawServer>,
    data: Option<RawConnz>,
    error: Option<ApiError>,
}

/// One server's page: its clients (each marked with `ident`, the server's name and id, when
/// known), and the names of its leaf node connections; `server` is the name its answer gave.
fn page(raw: RawConnz, details: bool, server: Option<String>, ident: Option<ServerIdent>) -> Page {
    let (leafs, clients): (Vec<RawConn>, Vec<RawConn>) = raw
        .connections
        .unwrap_or_default()
        .into_iter()
        .partition(|c| c.kind == "Leafnode");
    let connections = clients
        .into_iter()
        .filter_map(|c| {
            let ip: IpAddr = c.ip.parse().ok()?;
            Some(ServerConnection {
                addr: SocketAddr::new(crate::facts::unmap(ip), c.port),
                cid: c.cid,
                server: ident.clone(),
                account_connections: raw.total,
                in_msgs: c.in_msgs,
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
    Page {
        server,
        total: raw.total,
        connections,
        leaf_nodes: leafs.into_iter().filter_map(|c| c.name).collect(),
        ident,
    }
}

/// One answer to `$SYS.REQ.ACCOUNT.PING.CONNZ`.
pub fn parse_envelope(body: &[u8], details: bool) -> Result<Page, ParseError> {
    let raw: RawEnvelope = json(body)?;
    api_error(raw.error)?;
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
    Ok(page(data, details, name, ident))
}

/// One page of `/connz?subs=detail` from the monitoring port at `url` (the server's name
/// there is the URL: the page names only the server's id).
pub fn parse_connz(body: &[u8], url: &str) -> Result<Page, ParseError> {
    let raw: RawConnz = json(body)?;
    let ident = (!raw.server_id.is_empty()).then(|| ServerIdent {
        name: url.to_string(),
        id: raw.server_id.clone(),
    });
    Ok(page(raw, true, None, ident))
}

/// The monitoring port's `/leafz`: the leaf nodes that connected to this server (not its own
/// remotes: `is_spoke` is true on the side that solicited the connection).
pub fn parse_leafz(body: &[u8]) -> Result<Vec<String>, ParseError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Leaf {
        name: String,
        is_spoke: bool,
    }
    #[derive(Deserialize)]
    struct Leafz {
        leafs: Option<Vec<Leaf>>,
    }
    let raw: Leafz = json(body)?;
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

/// The name of the server of one `$SYS.REQ.ACCOUNT.PING.STATZ` answer, when it holds client
/// connections of the account.
pub fn parse_statz(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Stat {
        #[serde(default)]
        conns: u64,
    }
    #[derive(Deserialize)]
    struct Data {
        account_statz: Option<Vec<Stat>>,
    }
    #[derive(Deserialize)]
    struct Envelope {
        server: Option<RawServer>,
        data: Option<Data>,
    }
    let e: Envelope = serde_json::from_slice(body).ok()?;
    let holds = e.data?.account_statz?.iter().any(|s| s.conns > 0);
    holds.then_some(e.server?.name?)
}

/// A lookup's page: the server that answered, and the connection (a cid no longer open
/// comes back as an empty list).
pub fn looked_up(page: Page) -> Option<LookedUp> {
    let server = page.ident?;
    let connection = page
        .connections
        .into_iter()
        .find(|c| c.server.as_ref() == Some(&server));
    Some(LookedUp { server, connection })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Wanted;
    use crate::rules::subscription::holds;

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
        assert_eq!(
            parse_envelope(err.as_bytes(), true)
                .unwrap_err()
                .to_string(),
            "JetStream answered 500: filter by subject only valid with account filtering (0)"
        );
    }

    /// Recorded from nats-server 2.10.26: `$SYS.REQ.ACCOUNT.PING.STATZ` with `{}`.
    #[test]
    fn a_statz_answer_names_a_server_holding_connections() {
        let body = r#"{"server":{"name":"n1","host":"127.0.0.1","id":"NDQ","ver":"2.10.26","jetstream":false,"flags":0,"seq":8,"time":"2026-12-02T04:12:43.335031061Z"},"data":{"server_id":"NDQ","now":"2026-12-02T04:12:43.335002748Z","account_statz":[{"acc":"$G","conns":1,"leafnodes":0,"total_conns":1,"num_subscriptions":5,"sent":{"msgs":0,"bytes":0},"received":{"msgs":1,"bytes":2},"slow_consumers":0}]}}"#;
        assert_eq!(parse_statz(body.as_bytes()), Some("n1".into()));
        let leaf_only = body.replace(r#""conns":1,"leafnodes":0"#, r#""conns":0,"leafnodes":1"#);
        assert_eq!(parse_statz(leaf_only.as_bytes()), None);
        assert_eq!(parse_statz(b"{}"), None);
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
