//! The server's HTTP monitoring port (`--monitor`): `/connz?subs=detail`, every page, 1024 a
//! page (it has no subject filter), `/leafz` when this pod's connection is not listed, and a
//! connection by its cid (`/connz?cid=N`, found directly: no account filter).

use super::parse::{looked_up, parse_connz, parse_leafz, Page, PAGE};
use crate::config::MonitorUrl;
use crate::facts::{Connz, LookedUp, Unknown, Wanted};
use crate::rules::subscription::holds;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most a monitoring answer may weigh: far above 2,000 connections with subscriptions.
const MAX_BODY: usize = 64 << 20;

/// One connection by its cid from the monitoring port (`/connz?cid=N&subs=detail`): with no
/// account filter the server finds it directly (`s.clients[cid]`, monitor.go `Connz`).
pub async fn lookup_monitor(
    url: &MonitorUrl,
    cid: u64,
    deadline: Instant,
) -> Result<Vec<LookedUp>, Unknown> {
    let page = connz_page(url, format!("/connz?cid={cid}&subs=detail"), deadline).await?;
    Ok(looked_up(page).into_iter().collect())
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
        connz_page(url, path, deadline)
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
        let leafz = http_get(url, "/leafz", deadline).await?;
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
        incomplete: None,
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

/// One page of `/connz` from the monitoring port.
async fn connz_page(url: &MonitorUrl, path: String, deadline: Instant) -> Result<Page, Unknown> {
    let body = http_get(url, &path, deadline).await?;
    parse_connz(&body, &url.to_string()).map_err(|e| Unknown::Failed(format!("{url}: {e}")))
}

/// A plain HTTP/1.0 GET (one request per connection, no chunking) answered by `deadline`,
/// body returned on 200.
async fn http_get(url: &MonitorUrl, path: &str, deadline: Instant) -> Result<Vec<u8>, Unknown> {
    tokio::time::timeout_at(deadline.into(), exchange(url, path))
        .await
        .map_err(|_| Unknown::Deadline)?
}

async fn exchange(url: &MonitorUrl, path: &str) -> Result<Vec<u8>, Unknown> {
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
