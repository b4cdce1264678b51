//! The INFO probe that tells "NATS is down" from "the client gave up". A NATS server sends
//! `INFO {...}` the moment a connection is accepted, before any authentication, so one
//! connect and one line prove it answers, with no credentials and no load. Also the network
//! runtime every network observation runs on.

use crate::config::ServerUrl;
use crate::facts::{Answer, ServerAnswer};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The first line a connection got, judged: NATS sends `INFO {json}\r\n`.
pub fn decode_first_bytes(bytes: &[u8]) -> Answer {
    if bytes.starts_with(b"INFO ") || bytes.starts_with(b"INFO\t") {
        let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        let version = std::str::from_utf8(&line[5..])
            .ok()
            .and_then(|json| serde_json::from_str::<serde_json::Value>(json.trim()).ok())
            .and_then(|info| info.get("version")?.as_str().map(str::to_string));
        return Answer::Nats { version };
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
    Answer::NotNats(shown)
}

/// Asks every URL at once; the answers come back in the URLs' order. Ends by `deadline`.
pub async fn ask_all(urls: &[ServerUrl], deadline: Instant) -> Vec<Answer> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let url = url.clone();
        tasks.spawn(async move { (i, ask(&url, deadline).await) });
    }
    let mut answers = vec![Answer::Silent; urls.len()];
    while let Some(done) = tasks.join_next().await {
        if let Ok((i, answer)) = done {
            answers[i] = answer;
        }
    }
    answers
}

async fn ask(url: &ServerUrl, deadline: Instant) -> Answer {
    let left = deadline.saturating_duration_since(Instant::now());
    // Name resolution runs on a blocking thread that cannot be cancelled; the timeout only
    // stops waiting for it, which is all the deadline needs.
    let addrs =
        match tokio::time::timeout(left, tokio::net::lookup_host((url.host.as_str(), url.port)))
            .await
        {
            Err(_) => return Answer::Unresolved("no answer before the deadline".into()),
            Ok(Err(e)) => return Answer::Unresolved(e.to_string()),
            Ok(Ok(addrs)) => addrs.collect::<Vec<_>>(),
        };
    if addrs.is_empty() {
        return Answer::Unresolved("no addresses".into());
    }
    // Every address at once; the best answer wins (NATS over anything else).
    let mut tasks = tokio::task::JoinSet::new();
    for addr in addrs {
        tasks.spawn(async move {
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::timeout(left, hello(addr))
                .await
                .unwrap_or(Answer::Silent)
        });
    }
    let mut best: Option<Answer> = None;
    while let Some(done) = tasks.join_next().await {
        let answer = done.unwrap_or(Answer::Silent);
        if answer.is_nats() {
            return answer;
        }
        best = Some(match best {
            Some(prev) if rank(&prev) >= rank(&answer) => prev,
            _ => answer,
        });
    }
    best.unwrap_or(Answer::Silent)
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

async fn hello(addr: std::net::SocketAddr) -> Answer {
    let mut stream = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Answer::Refused,
        Err(e) => return Answer::Failed(connect_error(&e)),
    };
    // INFO is one line; a server behind a load balancer may split it across segments.
    let mut buf = Vec::with_capacity(512);
    loop {
        let mut chunk = [0u8; 512];
        match stream.read(&mut chunk).await {
            Ok(0) if buf.is_empty() => return Answer::Failed("closed without a word".into()),
            Ok(0) => return decode_first_bytes(&buf),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Answer::Failed(e.to_string()),
        }
        if buf.contains(&b'\n')
            || buf.len() >= 5 && !buf.starts_with(b"INFO")
            || buf.len() > 64 * 1024
        {
            return decode_first_bytes(&buf);
        }
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

/// Asks every URL on the network runtime; one answer per URL, in order.
pub fn ask_blocking(urls: &[ServerUrl], deadline: Instant) -> Result<Vec<ServerAnswer>, String> {
    let answers = on_network_runtime(ask_all(urls, deadline))?;
    Ok(urls
        .iter()
        .zip(answers)
        .map(|(url, answer)| ServerAnswer {
            url: url.to_string(),
            answer,
        })
        .collect())
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
            decode_first_bytes(&[&info[..], b"\r\n"].concat()),
            Answer::Nats {
                version: Some("2.10.26".into())
            }
        );
        assert_eq!(
            decode_first_bytes(b"INFO {broken\r\n"),
            Answer::Nats { version: None }
        );
        assert_eq!(
            decode_first_bytes(b"HTTP/1.0 400 Bad Request\r\n\r\n"),
            Answer::NotNats("HTTP/1.0 400 Bad Request".into())
        );
        assert_eq!(
            decode_first_bytes(b"SSH-2.0-x\x01\r\n"),
            Answer::NotNats("SSH-2.0-x.".into())
        );
    }
}
