//! The INFO probe that tells "NATS is down" from "the client gave up". A NATS server sends
//! `INFO {...}` the moment a connection is accepted, before any authentication, so one
//! connect and one line prove it answers, with no credentials and no load. The same connect
//! shows where the kernel holds a connection to the URL: a socket-level load balancer (a
//! `cgroup/connect4` or `connect6` hook: Cilium's kube-proxy replacement and other eBPF
//! dataplanes) rewrites the probe's `connect()` as it rewrites the client's, and the socket
//! table shows the backend it landed on. Also the network runtime every network observation
//! runs on.

use crate::config::ServerUrl;
use crate::error::Error;
use crate::facts::{unmap, Answer, Identity, Reached, ServerAnswer};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The first line a connection got, judged (NATS sends `INFO {json}\r\n`), the other members
/// of its cluster the server announced (`connect_urls`; the addresses only: a name there is
/// not resolved), and which NATS it is.
pub fn decode_info(bytes: &[u8]) -> (Answer, Vec<SocketAddr>, Option<Identity>) {
    if bytes.starts_with(b"INFO ") || bytes.starts_with(b"INFO\t") {
        let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        // Anything but a JSON object reads as an INFO without fields.
        let info: serde_json::Value = std::str::from_utf8(&line[5..])
            .ok()
            .and_then(|json| serde_json::from_str(json.trim()).ok())
            .unwrap_or_default();
        let text = |field: &str| info.get(field)?.as_str().map(str::to_string);
        let version = text("version");
        let peers = info
            .get("connect_urls")
            .and_then(|urls| urls.as_array())
            .into_iter()
            .flatten()
            .filter_map(|url| url.as_str()?.parse::<SocketAddr>().ok())
            .take(MAX_PEERS)
            .collect();
        let identity = text("server_id").map(|server_id| Identity {
            server_id,
            cluster: text("cluster").filter(|c| !c.is_empty()),
        });
        return (Answer::Nats { version }, peers, identity);
    }
    let shown: String = bytes
        .iter()
        .take_while(|&&b| b != b'\r' && b != b'\n')
        .take(40)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    (Answer::NotNats(shown), Vec::new(), None)
}

/// A cluster's members kept from one INFO: more than any cluster has.
const MAX_PEERS: usize = 64;

/// What one connect found, its URL not yet named: the answer alone.
fn only(answer: Answer) -> ServerAnswer {
    ServerAnswer {
        url: String::new(),
        answer,
        reached: None,
        peers: Vec::new(),
        identity: None,
    }
}

/// Runs every future at once, each a task of its own; their outputs come back in their order,
/// `missing` in place of one that panicked. Each bounds itself (its deadline is the caller's).
pub async fn at_once<T: Clone + Send + 'static>(
    work: impl IntoIterator<Item = impl std::future::Future<Output = T> + Send + 'static>,
    missing: T,
) -> Vec<T> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, work) in work.into_iter().enumerate() {
        tasks.spawn(async move { (i, work.await) });
    }
    let mut outputs = vec![missing; tasks.len()];
    while let Some(done) = tasks.join_next().await {
        if let Ok((i, output)) = done {
            outputs[i] = output;
        }
    }
    outputs
}

async fn ask(url: &ServerUrl, deadline: Instant) -> ServerAnswer {
    // Name resolution runs on a blocking thread that cannot be cancelled; the timeout only
    // stops waiting for it, which is all the deadline needs.
    let resolved = tokio::net::lookup_host((url.host.as_str(), url.port));
    let addrs = match tokio::time::timeout_at(deadline.into(), resolved).await {
        Err(_) => return only(Answer::Unresolved("no answer before the deadline".into())),
        Ok(Err(e)) => return only(Answer::Unresolved(e.to_string())),
        Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
    };
    if addrs.is_empty() {
        return only(Answer::Unresolved("no addresses".into()));
    }
    // Every address at once; the best answer wins (NATS over anything else).
    let mut tasks = tokio::task::JoinSet::new();
    for addr in addrs {
        tasks.spawn(async move {
            tokio::time::timeout_at(deadline.into(), hello(addr, Some(deadline)))
                .await
                .unwrap_or(only(Answer::Silent))
        });
    }
    let mut best: Option<ServerAnswer> = None;
    while let Some(done) = tasks.join_next().await {
        let asked = done.unwrap_or(only(Answer::Silent));
        if asked.answer.is_nats() {
            return asked;
        }
        best = Some(match best {
            Some(prev) if rank(&prev.answer) >= rank(&asked.answer) => prev,
            _ => asked,
        });
    }
    best.unwrap_or(only(Answer::Silent))
}

/// Which failure says the most when several addresses fail differently.
fn rank(a: &Answer) -> u8 {
    match a {
        Answer::Nats { .. } => 5,
        Answer::NotNats(_) => 4,
        Answer::Silent => 3,
        Answer::Refused => 2,
        Answer::Failed(_) => 1,
        Answer::Unresolved(_) => 0,
    }
}

/// One connect and its first line. With `learn` (a deadline), where the kernel holds the
/// probe's connection is read before it is closed.
async fn hello(addr: SocketAddr, learn: Option<Instant>) -> ServerAnswer {
    let mut stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return only(Answer::Refused)
        }
        Err(e) => return only(Answer::Failed(connect_error(&e))),
    };
    // INFO is one line; a server behind a load balancer may split it across segments.
    let mut buf = Vec::with_capacity(512);
    loop {
        let mut chunk = [0u8; 512];
        match stream.read(&mut chunk).await {
            Ok(0) if buf.is_empty() => return only(Answer::Failed("closed without a word".into())),
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return only(Answer::Failed(e.to_string())),
        }
        if buf.contains(&b'\n')
            || buf.len() >= 5 && !buf.starts_with(b"INFO")
            || buf.len() > 64 * 1024
        {
            break;
        }
    }
    let (answer, peers, identity) = decode_info(&buf);
    let reached = match (learn, answer.is_nats(), stream.local_addr()) {
        (Some(deadline), true, Ok(local)) => {
            // Read while the connection is open (one sock_diag request, by its local port; a
            // blocking call of a millisecond on this runtime), then closed at once: another
            // probe's walk of the same pod must not find it ESTABLISHED.
            let open = stream.into_std().ok();
            let inode = open
                .as_ref()
                .and_then(|std| nix::sys::stat::fstat(std).ok())
                .map(|st| st.st_ino);
            let held_as = inode.and_then(|inode| {
                let found = super::sockets::held_as(&[(local, inode)], deadline).ok()?;
                found.first().map(|&(_, remote)| remote)
            });
            drop(open);
            Some(Reached {
                dialled: addr,
                local,
                held_as,
            })
        }
        _ => None,
    };
    ServerAnswer {
        peers,
        identity,
        reached,
        ..only(answer)
    }
}

/// A connect error in words an operator reads in a pod event.
fn connect_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        // What connect(2) returns for a blackhole route.
        Some(libc::EINVAL) => "no route to it (blackhole route)".into(),
        Some(libc::ENETUNREACH) => "network unreachable".into(),
        Some(libc::EHOSTUNREACH) => "host unreachable".into(),
        Some(libc::EACCES | libc::EPERM) => {
            "refused by local policy (a prohibit route or firewall)".into()
        }
        Some(libc::ETIMEDOUT) => "connect timed out".into(),
        _ => {
            let text = e.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    }
}

/// Asks every server URL whether NATS answers (its INFO line), at once on the network runtime,
/// by `deadline`; one answer per URL, in order, each with where the kernel held the probe's
/// own connection to it, the cluster members it announced and which NATS it is.
pub fn servers(urls: &[ServerUrl], deadline: Instant) -> Result<Vec<ServerAnswer>, Error> {
    crate::deadline::set_phase(crate::deadline::Phase::AskingServer);
    let asks = urls
        .iter()
        .cloned()
        .map(|url| async move { ask(&url, deadline).await });
    let asked =
        on_network_runtime(at_once(asks, only(Answer::Silent))).map_err(Error::CannotEvaluate)?;
    Ok(urls
        .iter()
        .zip(asked)
        .map(|(url, asked)| ServerAnswer {
            url: url.to_string(),
            ..asked
        })
        .collect())
}

/// Asks each address directly which NATS it is (its INFO): for the addresses a client's
/// sockets are held as, to tell another backend of the same Service. At once, by `deadline`.
pub fn identities(
    addrs: &[SocketAddr],
    deadline: Instant,
) -> Result<Vec<Option<Identity>>, String> {
    let asks = addrs.iter().map(|&addr| async move {
        // An IPv4-mapped address is dialled as IPv4 (a host without IPv6 has no other way).
        let addr = SocketAddr::new(unmap(addr.ip()), addr.port());
        let asked = tokio::time::timeout_at(deadline.into(), hello(addr, None)).await;
        asked.ok().and_then(|a| a.identity)
    });
    on_network_runtime(at_once(asks, None))
}

/// Runs `work` on a current-thread runtime made for it: the one way the probe does network
/// I/O (the socket check never starts one). It does not wait for what `work` leaves behind,
/// a connection's background task or a resolver thread stuck at the deadline.
pub fn on_network_runtime<T>(work: impl std::future::Future<Output = T>) -> Result<T, String> {
    let runtime = network_runtime()?;
    let result = runtime.block_on(work);
    runtime.shutdown_background();
    Ok(result)
}

/// The current-thread runtime network observations run on.
pub fn network_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))
}

/// The budget left for the network once this much is kept back for the answer.
pub fn network_deadline(deadline: Instant, reserve: Duration) -> Instant {
    deadline.checked_sub(reserve).unwrap_or(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes() {
        let info = br#"INFO {"server_id":"NABC","version":"2.10.26","proto":1}"#;
        assert_eq!(
            decode_info(&[&info[..], b"\r\n"].concat()).0,
            Answer::Nats {
                version: Some("2.10.26".into())
            }
        );
        assert_eq!(
            decode_info(b"INFO {broken\r\n").0,
            Answer::Nats { version: None }
        );
        assert_eq!(
            decode_info(b"HTTP/1.0 400 Bad Request\r\n\r\n").0,
            Answer::NotNats("HTTP/1.0 400 Bad Request".into())
        );
        assert_eq!(
            decode_info(b"SSH-2.0-x\x01\r\n").0,
            Answer::NotNats("SSH-2.0-x.".into())
        );
    }

    /// A cluster member's INFO: its identity, and the members it announces that are
    /// addresses (a name is not resolved; a garbled entry is skipped).
    #[test]
    fn the_cluster_an_info_announces() {
        let info = br#"INFO {"server_id":"NABC","version":"2.10.26","cluster":"nats","connect_urls":["10.244.0.7:4222","[fd00::7]:4222","nats-1.nats:4222",7]}"#;
        let (answer, peers, identity) = decode_info(&[&info[..], b"\r\n"].concat());
        assert!(answer.is_nats());
        assert_eq!(
            peers,
            [
                "10.244.0.7:4222".parse().unwrap(),
                "[fd00::7]:4222".parse().unwrap()
            ]
        );
        assert_eq!(
            identity,
            Some(Identity {
                server_id: "NABC".into(),
                cluster: Some("nats".into())
            })
        );
        let alone = br#"INFO {"server_id":"NABD","cluster":""}"#;
        let (_, peers, identity) = decode_info(alone);
        assert_eq!(peers, []);
        assert_eq!(identity.unwrap().cluster, None);
    }
}
