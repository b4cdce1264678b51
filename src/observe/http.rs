//! `serve`'s side of HTTP: the connections answered on one thread (bounded in number, size and
//! time), each request decoded. Only what a kubelet's httpGet (and a person's curl) sends is understood:
//! `GET` or `HEAD`, a path, an optional `format=json` query, the `Accept` header (JSON, or
//! OpenMetrics for `/metrics`).

use crate::facts::{ProbePath, Refusal, Request};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The most of a request `serve` reads: the kubelet's probe is about 150 bytes.
pub const MOST_REQUEST: usize = 8 << 10;

/// How `serve` bounds its connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections held at once; a new one past it closes the oldest, so a client that
    /// opens connections and sends nothing never keeps a probe out.
    pub most_connections: usize,
    /// The whole exchange, request and answer, within this; then the connection is closed.
    pub within: Duration,
}

/// One connection: its request as read so far, then its answer as written so far.
struct Conn {
    stream: TcpStream,
    since: Instant,
    got: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
}

/// Answers every connection to `listener`, on this thread, until an error of the listener's
/// own: each request read (bounded in size and time), decoded, handed to `answer`, and its
/// bytes written without waiting on a slow reader. One thread, a fixed number of
/// connections, nothing that grows.
pub fn serve(
    listener: &TcpListener,
    limits: Limits,
    answer: &mut dyn FnMut(Request) -> Vec<u8>,
) -> std::io::Error {
    if let Err(e) = listener.set_nonblocking(true) {
        return e;
    }
    let mut conns: Vec<Conn> = Vec::with_capacity(limits.most_connections);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(limits.most_connections + 1);
    let mut buf = [0u8; 4096];
    loop {
        fds.clear();
        fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        for c in &conns {
            let events = if c.out.is_empty() {
                libc::POLLIN
            } else {
                libc::POLLOUT
            };
            fds.push(pollfd(c.stream.as_raw_fd(), events));
        }
        let now = Instant::now();
        let wait = conns
            .iter()
            .map(|c| (c.since + limits.within).saturating_duration_since(now))
            .min()
            .map_or(-1, |d| d.as_millis().clamp(1, 60_000) as libc::c_int);
        match poll(&mut fds, wait) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => return e,
        }
        let now = Instant::now();
        // Each connection's `pollfd` follows the listener's, in order.
        let mut polled = fds[1..].iter();
        conns.retain_mut(|c| {
            let revents = polled.next().expect("one pollfd a connection").revents;
            if now >= c.since + limits.within {
                return false;
            }
            if revents == 0 {
                return true;
            }
            if c.out.is_empty() {
                match c.stream.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(read) => {
                        let room = (MOST_REQUEST + 1).saturating_sub(c.got.len());
                        c.got.extend_from_slice(&buf[..read.min(room)]);
                        let request = parse(&c.got).or((c.got.len() > MOST_REQUEST)
                            .then_some(Request::Refused(Refusal::TooLarge)));
                        if let Some(request) = request {
                            c.out = answer(request);
                            c.got = Vec::new();
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return false,
                }
            }
            if !c.out.is_empty() {
                match c.stream.write(&c.out[c.sent..]) {
                    Ok(wrote) => {
                        c.sent += wrote;
                        if c.sent == c.out.len() {
                            let _ = c.stream.shutdown(std::net::Shutdown::Write);
                            return false;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return false,
                }
            }
            true
        });
        if fds[0].revents != 0 {
            // Until none is left, a connection reset before it was accepted, or out of
            // descriptors for now: the next poll tries again.
            while let Ok((stream, _)) = listener.accept() {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if conns.len() >= limits.most_connections {
                    let oldest = conns
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, c)| c.since)
                        .map(|(i, _)| i)
                        .expect("full");
                    conns.swap_remove(oldest);
                }
                conns.push(Conn {
                    stream,
                    since: Instant::now(),
                    got: Vec::new(),
                    out: Vec::new(),
                    sent: 0,
                });
            }
        }
    }
}

/// A `pollfd` asking for `events` on `fd`.
pub(crate) fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Waits up to `timeout_ms` (-1: without a limit) for `fds`, their `revents` then set.
/// Ok(false): a signal interrupted the wait first; the caller decides whether to wait again.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> std::io::Result<bool> {
    // SAFETY: `fds` is a live, initialized array of `fds.len()` pollfd structs for the
    // duration of the call; poll writes only their `revents`.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n >= 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::Interrupted => Ok(false),
        _ => Err(e),
    }
}

/// Decodes a request's line and headers; `None` while they are not all there (no blank line
/// yet). Lines end in CRLF or, leniently, LF.
pub fn parse(bytes: &[u8]) -> Option<Request> {
    let end = find(bytes, b"\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| find(bytes, b"\n\n").map(|i| i + 2))?;
    let Ok(head) = std::str::from_utf8(&bytes[..end]) else {
        return Some(Request::Refused(Refusal::BadRequest));
    };
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Some(Request::Refused(Refusal::BadRequest));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") || !target.starts_with('/') {
        return Some(Request::Refused(Refusal::BadRequest));
    }
    let (mut accept_json, mut open_metrics) = (false, false);
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Some(Request::Refused(Refusal::BadRequest));
        };
        if name.trim().eq_ignore_ascii_case("accept") {
            let types = || {
                value
                    .split(',')
                    .map(|v| v.split(';').next().unwrap_or_default().trim())
            };
            accept_json |= types().any(|t| t == "application/json");
            open_metrics |= types().any(|t| t == "application/openmetrics-text");
        }
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Some(Request::Refused(Refusal::Method)),
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let path = match path {
        "/livez" => ProbePath::Live,
        "/startupz" => ProbePath::Startup,
        "/selfz" => ProbePath::Own,
        "/metrics" => {
            return Some(Request::Metrics {
                open_metrics,
                head: head_only,
            })
        }
        _ => return Some(Request::Refused(Refusal::NotFound)),
    };
    let json = match query.split('&').find_map(|kv| kv.strip_prefix("format=")) {
        Some("json") => true,
        Some(_) => false,
        None => accept_json,
    };
    Some(Request::Probe {
        path,
        json,
        head: head_only,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(path: ProbePath, json: bool, head: bool) -> Option<Request> {
        Some(Request::Probe { path, json, head })
    }

    /// What the kubelet's prober sends (Go's net/http, `User-Agent: kube-probe/1.31`).
    #[test]
    fn the_kubelets_request_is_understood() {
        let kubelet = b"GET /livez HTTP/1.1\r\nHost: 10.244.1.17:8281\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n";
        assert_eq!(parse(kubelet), probe(ProbePath::Live, false, false));
        assert_eq!(parse(&kubelet[..40]), None);
        assert_eq!(
            parse(b"GET /startupz?format=json HTTP/1.1\r\n\r\n"),
            probe(ProbePath::Startup, true, false)
        );
        assert_eq!(
            parse(b"HEAD /selfz HTTP/1.0\n\n"),
            probe(ProbePath::Own, false, true)
        );
        assert_eq!(
            parse(b"GET /livez HTTP/1.1\r\naccept: text/plain, application/json;q=0.9\r\n\r\n"),
            probe(ProbePath::Live, true, false)
        );
        assert_eq!(
            parse(b"GET /livez?format=text HTTP/1.1\r\nAccept: application/json\r\n\r\n"),
            probe(ProbePath::Live, false, false)
        );
    }

    /// What Prometheus sends for `/metrics`: OpenMetrics first, its own text format after.
    #[test]
    fn a_scrape_gets_the_format_it_asks_for() {
        let prometheus = b"GET /metrics HTTP/1.1\r\nHost: 10.244.1.17:8281\r\nUser-Agent: Prometheus/2.42.0\r\nAccept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n";
        let metrics = |open_metrics, head| Some(Request::Metrics { open_metrics, head });
        assert_eq!(parse(prometheus), metrics(true, false));
        assert_eq!(
            parse(b"GET /metrics HTTP/1.1\r\n\r\n"),
            metrics(false, false)
        );
        assert_eq!(
            parse(b"HEAD /metrics?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n"),
            metrics(false, true)
        );
    }

    #[test]
    fn anything_else_is_refused_by_its_kind() {
        let refused = |r| Some(Request::Refused(r));
        assert_eq!(
            parse(b"POST /livez HTTP/1.1\r\n\r\n"),
            refused(Refusal::Method)
        );
        assert_eq!(
            parse(b"GET /metricz HTTP/1.1\r\n\r\n"),
            refused(Refusal::NotFound)
        );
        assert_eq!(
            parse(b"GET /livez/ HTTP/1.1\r\n\r\n"),
            refused(Refusal::NotFound)
        );
        assert_eq!(
            parse(b"GET /livez HTTP/2\r\n\r\n"),
            refused(Refusal::BadRequest)
        );
        assert_eq!(
            parse(b"GET livez HTTP/1.1\r\n\r\n"),
            refused(Refusal::BadRequest)
        );
        assert_eq!(
            parse(b"GET  /livez HTTP/1.1\r\n\r\n"),
            refused(Refusal::BadRequest)
        );
        assert_eq!(
            parse(b"GET /livez HTTP/1.1\r\nno colon\r\n\r\n"),
            refused(Refusal::BadRequest)
        );
        assert_eq!(
            parse(b"\xff /livez HTTP/1.1\r\n\r\n"),
            refused(Refusal::BadRequest)
        );
        assert_eq!(parse(b"\r\n\r\n"), refused(Refusal::BadRequest));
    }
}
