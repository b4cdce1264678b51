//! The NATS edge of the consumer check: one connection with the pod's credentials (async-nats
//! on a current-thread runtime made for the purpose), one consumer info request per
//! `--consumer`, a stream info request where retention may drop unacknowledged messages, all
//! inside the deadline. What cannot be learnt becomes `NotJudged` with the reason.

use crate::consumer::Observed;
use crate::jetstream::{self, ApiError, ParseError};
use crate::server::{self, ServerUrl};
use async_nats::{ConnectErrorKind, ConnectOptions, RequestErrorKind};
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A secret from a flag or the environment. It prints as `***` however it is formatted.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How the probe authenticates, as the nats CLI would.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auth {
    pub creds: Option<PathBuf>,
    pub nkey: Option<PathBuf>,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

/// `STREAM/DURABLE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerName {
    pub stream: String,
    pub durable: String,
}

impl fmt::Display for ConsumerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.stream, self.durable)
    }
}

/// Why the edge could not even start: bad credentials files are configuration errors.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Runtime(String),
}

/// Observes every consumer. One entry per name, in order.
pub fn observe(
    servers: &[ServerUrl],
    auth: &Auth,
    consumers: &[ConsumerName],
    deadline: Instant,
) -> Result<Vec<Observed>, SetupError> {
    let left = deadline.saturating_duration_since(Instant::now());
    server::on_network_runtime(async {
        let options = options(servers, auth, left).await?;
        let work = observe_all(options, servers, consumers);
        match tokio::time::timeout(left, work).await {
            Ok(observed) => Ok(observed),
            Err(_) => Ok(not_judged(consumers, "no answer before the deadline")),
        }
    })
    .map_err(SetupError::Runtime)?
}

fn not_judged(consumers: &[ConsumerName], why: &str) -> Vec<Observed> {
    consumers
        .iter()
        .map(|_| Observed::NotJudged(why.to_string()))
        .collect()
}

async fn options(
    servers: &[ServerUrl],
    auth: &Auth,
    left: Duration,
) -> Result<ConnectOptions, SetupError> {
    let mut o = ConnectOptions::new()
        .name("natsprobe")
        .connection_timeout(left)
        .request_timeout(Some(left))
        .ignore_discovered_servers();
    if let Some(path) = &auth.creds {
        o = o
            .credentials_file(path)
            .await
            .map_err(|e| SetupError::Config(format!("--creds {}: {}", path.display(), e.kind())))?;
    } else if let Some(path) = &auth.nkey {
        o = o.nkey(read_seed(path)?);
    } else if let (Some(user), Some(password)) = (&auth.user, &auth.password) {
        o = o.user_and_password(user.clone(), password.0.clone());
    } else if let Some(token) = &auth.token {
        o = o.token(token.0.clone());
    } else if let Some(userinfo) = servers.iter().find_map(|s| s.userinfo.as_deref()) {
        // Credentials in the URL, as the nats CLI takes them.
        o = match userinfo.split_once(':') {
            Some((user, password)) => {
                o.user_and_password(percent_decode(user), percent_decode(password))
            }
            None => o.token(percent_decode(userinfo)),
        };
    }
    if let Some(ca) = &auth.tls_ca {
        o = o.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&auth.tls_cert, &auth.tls_key) {
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    if auth.tls_ca.is_some() || auth.tls_cert.is_some() {
        o = o.require_tls(true);
    }
    Ok(o)
}

/// An nkey seed file: the seed on its own line (`SU...`, 58 characters). Its content never
/// appears in a message.
fn read_seed(path: &PathBuf) -> Result<String, SetupError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SetupError::Config(format!("--nkey {}: {}", path.display(), e.kind())))?;
    text.lines()
        .map(str::trim)
        .find(|l| {
            l.len() == 58 && l.starts_with('S') && l.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .map(str::to_string)
        .ok_or_else(|| {
            SetupError::Config(format!(
                "--nkey {}: the file holds no nkey seed",
                path.display()
            ))
        })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn observe_all(
    options: ConnectOptions,
    servers: &[ServerUrl],
    consumers: &[ConsumerName],
) -> Vec<Observed> {
    // The URLs as given minus their userinfo, which went into the options above.
    let addrs: Vec<String> = servers.iter().map(ServerUrl::to_string).collect();
    let client = match options.connect(addrs).await {
        Ok(c) => c,
        Err(e) => return not_judged(consumers, &connect_error(e.kind(), &e.to_string())),
    };
    let mut streams: HashMap<String, Option<jetstream::StreamFacts>> = HashMap::new();
    let mut observed = Vec::with_capacity(consumers.len());
    for name in consumers {
        let subject = format!("$JS.API.CONSUMER.INFO.{}.{}", name.stream, name.durable);
        let info = match request(&client, subject).await {
            Ok(body) => jetstream::parse_consumer_info(&body),
            Err(why) => {
                observed.push(Observed::NotJudged(why));
                continue;
            }
        };
        let facts = match info {
            Ok(f) => f,
            Err(e) => {
                observed.push(classify(e));
                continue;
            }
        };
        // Stream info only matters when work waits on a stream that could drop it.
        let unbound = facts.push && !facts.push_bound;
        let needs_stream = facts.waiting() > 0 && !facts.paused && !unbound;
        let stream = match needs_stream {
            false => None,
            true => match streams.get(&name.stream) {
                Some(known) => known.clone(),
                None => {
                    let subject = format!("$JS.API.STREAM.INFO.{}", name.stream);
                    let facts = request(&client, subject)
                        .await
                        .ok()
                        .and_then(|body| jetstream::parse_stream_info(&body).ok());
                    streams.insert(name.stream.clone(), facts.clone());
                    facts
                }
            },
        };
        observed.push(Observed::Found { facts, stream });
    }
    observed
}

async fn request(client: &async_nats::Client, subject: String) -> Result<Vec<u8>, String> {
    match client.request(subject, "".into()).await {
        Ok(message) => Ok(message.payload.to_vec()),
        Err(e) => Err(match e.kind() {
            RequestErrorKind::NoResponders => {
                "JetStream is not answering (no responders: disabled, or not ready)".into()
            }
            RequestErrorKind::TimedOut => "JetStream did not answer before the deadline".into(),
            _ => format!("request failed: {e}"),
        }),
    }
}

fn classify(e: ParseError) -> Observed {
    match e {
        ParseError::Api(ApiError {
            err_code: ApiError::STREAM_NOT_FOUND,
            ..
        }) => Observed::StreamMissing,
        ParseError::Api(ApiError {
            err_code: ApiError::CONSUMER_NOT_FOUND,
            ..
        }) => Observed::ConsumerMissing,
        ParseError::Api(ApiError {
            err_code: ApiError::TEMPORARILY_UNAVAILABLE,
            ..
        }) => Observed::NotJudged("JetStream temporarily unavailable (10008)".into()),
        other => Observed::NotJudged(other.to_string()),
    }
}

fn connect_error(kind: ConnectErrorKind, text: &str) -> String {
    match kind {
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
            "authorization error: the server refused the probe's credentials".into()
        }
        ConnectErrorKind::TimedOut => "server unreachable: connect timed out".into(),
        _ => format!("server unreachable: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_format() {
        let auth = Auth {
            password: Some(Secret("s3cret".into())),
            token: Some(Secret("t0ken".into())),
            ..Auth::default()
        };
        let shown = format!("{auth:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
    }

    #[test]
    fn url_userinfo_is_percent_decoded() {
        assert_eq!(percent_decode("p%40ss%3Aw0rd"), "p@ss:w0rd");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[test]
    fn api_errors_become_verdict_inputs() {
        let api = |code| {
            ParseError::Api(ApiError {
                code: 404,
                err_code: code,
                description: "x".into(),
            })
        };
        assert_eq!(classify(api(10059)), Observed::StreamMissing);
        assert_eq!(classify(api(10014)), Observed::ConsumerMissing);
        assert_eq!(
            classify(api(10008)),
            Observed::NotJudged("JetStream temporarily unavailable (10008)".into())
        );
        assert!(matches!(classify(api(10039)), Observed::NotJudged(_)));
    }

    #[test]
    fn a_seed_file_is_checked_without_showing_it() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.nk");
        let seed = format!("S{}", "A".repeat(57));
        std::fs::write(&good, format!("{seed}\n")).unwrap();
        assert_eq!(read_seed(&good).unwrap(), seed);
        let bad = dir.path().join("bad.nk");
        std::fs::write(&bad, "not-a-seed-but-a-s3cret\n").unwrap();
        let err = read_seed(&bad).unwrap_err().to_string();
        assert!(
            err.contains("holds no nkey seed") && !err.contains("s3cret"),
            "{err}"
        );
    }
}
