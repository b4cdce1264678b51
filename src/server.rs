//! `--server`: NATS server URLs (their userinfo is kept for authenticating, never shown) and
//! the INFO probe that tells "NATS is down" from "the client gave up". A NATS server sends
//! `INFO {...}` the moment a connection is accepted, before any authentication, so one
//! connect and one line prove it answers, with no credentials and no load.

use std::fmt;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

pub const DEFAULT_PORT: u16 = 4222;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Nats,
    Tls,
}

/// One server URL. `Display` never shows the userinfo.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    pub scheme: Scheme,
    /// Host name or IP address, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// `user:password` or a token, percent-encoded as given.
    pub userinfo: Option<String>,
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Nats => "nats",
            Scheme::Tls => "tls",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug output ends up in panics and logs too: same rule as Display.
        write!(f, "ServerUrl({self})")
    }
}

/// A comma-separated list, as `NATS_URL` and the nats CLI take it. Messages never quote
/// the input: it may carry a password.
pub fn parse_list(text: &str) -> Result<Vec<ServerUrl>, String> {
    let urls: Vec<ServerUrl> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| parse(s).map_err(|e| format!("URL {}: {e}", i + 1)))
        .collect::<Result<_, _>>()?;
    if urls.is_empty() {
        return Err("no URL given".into());
    }
    Ok(urls)
}

/// `nats://[user[:pass]@]host[:port]`, `tls://...`, or a bare `host[:port]`.
pub fn parse(text: &str) -> Result<ServerUrl, String> {
    let (scheme, rest) = match text.split_once("://") {
        Some(("nats", rest)) => (Scheme::Nats, rest),
        Some(("tls", rest)) => (Scheme::Tls, rest),
        Some((other, _)) if other.chars().all(|c| c.is_ascii_alphanumeric()) => {
            return Err(format!(
                "scheme '{other}' is not supported (use nats:// or tls://)"
            ))
        }
        Some(_) => return Err("malformed scheme".into()),
        None => (Scheme::Nats, text),
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains(['/', '?', '#']) {
        return Err("a server URL has no path, query or fragment".into());
    }
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((user, hostport)) if !user.is_empty() => (Some(user.to_string()), hostport),
        Some(_) => return Err("empty userinfo before '@'".into()),
        None => (None, rest),
    };
    let (host, port) = split_host_port(hostport)?;
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok(ServerUrl {
        scheme,
        host,
        port,
        userinfo,
    })
}

fn split_host_port(text: &str) -> Result<(String, u16), String> {
    let port = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| "the port must be a number from 1 to 65535".to_string())
    };
    if let Some(bracketed) = text.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("unclosed '[' in the host")?;
        host.parse::<std::net::Ipv6Addr>()
            .map_err(|_| "not an IPv6 address in [...]")?;
        return match after {
            "" => Ok((host.to_string(), DEFAULT_PORT)),
            _ => Ok((
                host.to_string(),
                port(after.strip_prefix(':').ok_or("junk after ']'")?)?,
            )),
        };
    }
    match text.rsplit_once(':') {
        // A bare IPv6 address has colons but no port.
        Some(_) if text.parse::<std::net::Ipv6Addr>().is_ok() => {
            Ok((text.to_string(), DEFAULT_PORT))
        }
        Some((host, p)) => Ok((host.to_string(), port(p)?)),
        None => Ok((text.to_string(), DEFAULT_PORT)),
    }
}

/// What one server said to a connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It sent its INFO line: NATS is up.
    Nats {
        version: Option<String>,
    },
    Refused,
    /// Connected or not, nothing arrived before the deadline.
    Silent,
    /// Something answered, but not NATS (an HTTP server, SSH...): its first bytes.
    NotNats(String),
    Unresolved(String),
    Failed(String),
}

impl Answer {
    pub fn is_nats(&self) -> bool {
        matches!(self, Answer::Nats { .. })
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Nats { version: Some(v) } => write!(f, "nats-server {v}"),
            Answer::Nats { version: None } => f.write_str("nats-server"),
            Answer::Refused => f.write_str("connection refused"),
            Answer::Silent => f.write_str("no answer"),
            Answer::NotNats(first) => write!(f, "answered '{first}', not NATS"),
            Answer::Unresolved(e) => write!(f, "name not resolved: {e}"),
            Answer::Failed(e) => f.write_str(e),
        }
    }
}

/// The first line a connection got, judged: NATS sends `INFO {json}\r\n`.
pub fn judge_first_bytes(bytes: &[u8]) -> Answer {
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
            Ok(0) => return judge_first_bytes(&buf),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Answer::Failed(e.to_string()),
        }
        if buf.contains(&b'\n')
            || buf.len() >= 5 && !buf.starts_with(b"INFO")
            || buf.len() > 64 * 1024
        {
            return judge_first_bytes(&buf);
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

/// Runs the asks on the network runtime.
pub fn ask_blocking(urls: &[ServerUrl], deadline: Instant) -> Result<Vec<Answer>, String> {
    on_network_runtime(ask_all(urls, deadline))
}

/// Runs `work` on a current-thread runtime made for it: the one way the probe does network
/// I/O (the socket check never starts one). It does not wait for what `work` leaves behind,
/// a connection's background task or a resolver thread stuck at the deadline.
pub fn on_network_runtime<T>(work: impl std::future::Future<Output = T>) -> Result<T, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))?;
    let result = runtime.block_on(work);
    runtime.shutdown_background();
    Ok(result)
}

/// The budget left for the network once this much is kept back for the answer.
pub fn network_deadline(deadline: Instant, reserve: Duration) -> Instant {
    deadline.checked_sub(reserve).unwrap_or(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_nats_cli_takes() {
        let cases = [
            ("nats://10.96.14.2:4222", "nats://10.96.14.2:4222"),
            ("nats://nats.nats.svc", "nats://nats.nats.svc:4222"),
            ("tls://nats:4443", "tls://nats:4443"),
            ("nats:4333", "nats://nats:4333"),
            ("nats", "nats://nats:4222"),
            ("nats://[::1]:4222", "nats://[::1]:4222"),
            ("nats://[fd00::a]", "nats://[fd00::a]:4222"),
            ("::1", "nats://[::1]:4222"),
            ("nats://alice:s3cret@nats:4222/", "nats://nats:4222"),
            ("nats://t0ken@nats", "nats://nats:4222"),
        ];
        for (text, shown) in cases {
            assert_eq!(parse(text).unwrap().to_string(), shown, "{text}");
        }
        let url = parse("nats://alice:s3cret@nats:4222").unwrap();
        assert_eq!(url.userinfo.as_deref(), Some("alice:s3cret"));
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn lists_are_comma_separated() {
        let urls = parse_list("nats://a:4222, nats://b:4223,").unwrap();
        assert_eq!(
            urls.iter().map(|u| u.port).collect::<Vec<_>>(),
            [4222, 4223]
        );
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn errors_never_quote_the_url() {
        for bad in [
            "nats://alice:s3cret@nats:99999",
            "nats://alice:s3cret@nats:0",
            "ws://alice:s3cret@nats",
            "nats://alice:s3cret@",
            "nats://alice:s3cret@nats/path",
            "nats://alice:s3cret@[::1",
            "nats://alice:s3cret@[nats]:4222",
            "nats://:s3cret@nats:x",
        ] {
            let err = parse_list(bad).unwrap_err();
            assert!(
                !err.contains("s3cret") && !err.contains("alice"),
                "{bad}: {err}"
            );
        }
        assert!(parse("ws://nats").unwrap_err().contains("'ws'"));
    }

    #[test]
    fn first_bytes() {
        let info = br#"INFO {"server_id":"NABC","version":"2.10.26","proto":1}"#;
        assert_eq!(
            judge_first_bytes(&[&info[..], b"\r\n"].concat()),
            Answer::Nats {
                version: Some("2.10.26".into())
            }
        );
        assert_eq!(
            judge_first_bytes(b"INFO {broken\r\n"),
            Answer::Nats { version: None }
        );
        assert_eq!(
            judge_first_bytes(b"HTTP/1.0 400 Bad Request\r\n\r\n"),
            Answer::NotNats("HTTP/1.0 400 Bad Request".into())
        );
        assert_eq!(
            judge_first_bytes(b"SSH-2.0-x\x01\r\n"),
            Answer::NotNats("SSH-2.0-x.".into())
        );
    }
}
