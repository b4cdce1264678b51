//! The NATS edge: one connection with the pod's credentials (async-nats on the network
//! runtime), every consumer asked at once on it, then every stream whose retention matters,
//! all inside the deadline. Each consumer gets its own outcome: one that times out, is not
//! permitted or is absent leaves the others' answers intact. What cannot be learnt becomes
//! `Observed::NotJudged` with its kind.

use super::jetstream::{self, ApiError, ParseError};
use crate::config::{Auth, JsApi, ServerUrl, Setting};
use crate::error::Error;
use crate::facts::{ConsumerName, Observed, StreamFacts, Unknown};
use async_nats::{ConnectErrorKind, ConnectOptions, Event, RequestErrorKind, ServerError};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Notify;

/// One connection with the probe's credentials, where its JetStream API is, the subjects
/// the server refused it, and whether an ask on it went unanswered.
pub struct Session {
    pub client: async_nats::Client,
    api: JsApi,
    denied: Arc<Denied>,
    /// An ask on it had no answer by its deadline (`unanswered`).
    silent: AtomicBool,
}

impl Session {
    /// Connects by `deadline`. The outer error is a configuration error (an unusable
    /// credentials file); the inner one why the server could not be reached. A session to be
    /// `held` for later looks has no request timeout of its own: each ask is bounded by its
    /// look's deadline.
    pub async fn connect(
        servers: &[ServerUrl],
        auth: &Auth,
        api: &JsApi,
        name: &str,
        deadline: Instant,
        held: bool,
    ) -> Result<Result<Session, Unknown>, Error> {
        let denied = Arc::new(Denied::default());
        let mut options = options(servers, auth, name, deadline, Arc::clone(&denied)).await?;
        if held {
            options = options.request_timeout(None);
        }
        // The URLs as given minus their userinfo, which went into the options above.
        let addrs: Vec<String> = servers.iter().map(ServerUrl::to_string).collect();
        Ok(
            match tokio::time::timeout_at(deadline.into(), options.connect(addrs)).await {
                Err(_) => Err(Unknown::Deadline),
                Ok(Err(e)) => Err(connect_error(e.kind(), &e.to_string())),
                Ok(Ok(client)) => Ok(Session {
                    client,
                    api: api.clone(),
                    denied,
                    silent: AtomicBool::new(false),
                }),
            },
        )
    }

    /// Whether the connection is up: a held one that is not (reconnecting) is not used.
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Forgets what earlier looks learnt of it: a held session starts each look afresh, as a
    /// login does (permissions may have changed since).
    pub fn begin_look(&self) {
        self.denied.lock().clear();
        self.silent.store(false, Ordering::Relaxed);
    }

    /// Records that an ask on it had no answer by its deadline: whether the server is silent
    /// or the path to it is gone, the connection has not shown itself up.
    pub fn unanswered(&self) {
        self.silent.store(true, Ordering::Relaxed);
    }

    /// Whether every ask on it (since `begin_look`) had an answer of some kind by its deadline.
    pub fn answered(&self) -> bool {
        !self.silent.load(Ordering::Relaxed)
    }

    /// The subject of a JetStream API call (`"STREAM.LIST"`), in the configured domain or
    /// prefix: every JetStream request is addressed through here.
    pub fn api(&self, call: &str) -> String {
        self.api.subject(call)
    }

    /// The subject of one consumer's info.
    pub fn consumer_info(&self, stream: &str, durable: &str) -> String {
        self.api(&format!("CONSUMER.INFO.{stream}.{durable}"))
    }

    /// The JetStream domain the connected server announced in its INFO (nats-server sends
    /// `domain` when its JetStream has one).
    pub fn server_domain(&self) -> Option<String> {
        self.client.server_info().domain.filter(|d| !d.is_empty())
    }

    /// Where the JetStream API is.
    pub fn js_api(&self) -> &JsApi {
        &self.api
    }

    /// Whether the server refused `subject` (a publish, or a subscription) so far.
    pub fn refused(&self, subject: &str) -> bool {
        self.denied.lock().iter().any(|s| s == subject)
    }

    /// Waits until the server refuses `subject`, or the reply inbox (never, if it does not),
    /// and says why.
    pub async fn refusal(&self, subject: &str) -> Unknown {
        self.denied.refusal(subject).await
    }

    /// Sends every request (subject, body) at once and waits for each answer until
    /// `deadline`; answers come back in the requests' order.
    pub async fn ask_all(
        &self,
        requests: Vec<(String, String)>,
        deadline: Instant,
    ) -> Vec<Result<Vec<u8>, Unknown>> {
        let asks = requests.into_iter().map(|(subject, body)| {
            let (client, denied) = (self.client.clone(), Arc::clone(&self.denied));
            ask(client, subject, body, denied, deadline)
        });
        let answers = super::server::at_once(asks, Err(Unknown::Deadline)).await;
        if answers.iter().any(|a| matches!(a, Err(Unknown::Deadline))) {
            self.unanswered();
        }
        answers
    }

    /// Every consumer's info at once, then the info of every stream where work waits.
    pub async fn consumers(&self, consumers: &[ConsumerName], deadline: Instant) -> Vec<Observed> {
        let requests = consumers
            .iter()
            .map(|n| (self.consumer_info(&n.stream, &n.durable), String::new()))
            .collect();
        let mut observed: Vec<Observed> = self
            .ask_all(requests, deadline)
            .await
            .into_iter()
            .map(observed)
            .collect();

        // What a stream's retention can do to the work matters only where work waits, and
        // there a consumer cannot be judged without it (a moving floor is acks only where
        // retention deletes nothing unacknowledged): a stream that cannot be read leaves its
        // consumers not judged, for the stream's own reason (late, refused, gone).
        let wanted: BTreeSet<String> = observed.iter().filter_map(stream_of).cloned().collect();
        let requests = wanted
            .iter()
            .map(|s| (self.api(&format!("STREAM.INFO.{s}")), String::new()))
            .collect();
        let streams: HashMap<String, Result<StreamFacts, Observed>> = wanted
            .into_iter()
            .zip(self.ask_all(requests, deadline).await)
            .map(|(name, answer)| {
                let facts = match answer {
                    Err(why) => Err(Observed::NotJudged(why)),
                    Ok(body) => jetstream::parse_stream_info(&body).map_err(classify),
                };
                (name, facts)
            })
            .collect();
        for o in &mut observed {
            let read = stream_of(o).and_then(|s| streams.get(s));
            match (read, &mut *o) {
                (Some(Ok(read)), Observed::Found { stream, .. }) => *stream = Some(read.clone()),
                (Some(Err(why)), _) => *o = why.clone(),
                _ => {}
            }
        }
        observed
    }
}

/// The stream whose facts an observed consumer needs: one found where it could work, since
/// what a stream's retention can do matters only there.
pub(super) fn stream_of(o: &Observed) -> Option<&String> {
    match o {
        Observed::Found { facts, .. } if facts.workable() > 0 => Some(&facts.stream),
        _ => None,
    }
}

async fn ask(
    client: async_nats::Client,
    subject: String,
    body: String,
    denied: Arc<Denied>,
    deadline: Instant,
) -> Result<Vec<u8>, Unknown> {
    let request = client.request(subject.clone(), body.into());
    tokio::select! {
        answer = tokio::time::timeout_at(deadline.into(), request) => match answer {
            Err(_) => Err(Unknown::Deadline),
            Ok(Ok(message)) => Ok(message.payload.to_vec()),
            Ok(Err(e)) => Err(match e.kind() {
                RequestErrorKind::NoResponders => Unknown::NoResponders,
                RequestErrorKind::TimedOut => Unknown::JetStreamTimeout,
                _ => Unknown::Failed(format!("request failed: {e}")),
            }),
        },
        // The server answers a request the user may not send with an error on the
        // connection, never on the request: without this it would wait for the deadline.
        why = denied.refusal(&subject) => Err(why),
    }
}

/// A subscription's next message; None once it has ended.
pub async fn next(subscriber: &mut async_nats::Subscriber) -> Option<async_nats::Message> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *subscriber).poll_next(cx)).await
}

/// The subjects the server refused with a permissions violation, as they arrive.
#[derive(Default)]
struct Denied {
    subjects: Mutex<Vec<String>>,
    changed: Notify,
}

impl Denied {
    /// The subjects refused so far (a panic while they were held leaves them as they were).
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.subjects.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, subject: String) {
        self.lock().push(subject);
        self.changed.notify_waiters();
    }

    /// Waits until a request on `subject` is refused (never, if it is not), and says why.
    async fn refusal(&self, subject: &str) -> Unknown {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(why) = self.why(subject) {
                return why;
            }
            changed.await;
        }
    }

    /// Why a request on `subject` is refused so far: its reply inbox (a refused subscription
    /// there refuses every request), or the subject itself; None while neither is.
    fn why(&self, subject: &str) -> Option<Unknown> {
        let refused = self.lock();
        match refused.iter().find(|s| s.starts_with("_INBOX.")) {
            Some(inbox) => Some(Unknown::InboxDenied(inbox.clone())),
            None => refused
                .iter()
                .any(|s| s == subject)
                .then(|| Unknown::NotPermitted(subject.to_string())),
        }
    }
}

/// The subject of `Permissions Violation for Publish to "X"` (or `Subscription to "X"`), as
/// nats-server words it (client.go).
fn violation_subject(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if !lower.contains("permissions violation for") {
        return None;
    }
    let start = text.find(" to \"")? + 5;
    let end = start + text[start..].find('"')?;
    Some(text[start..end].to_string())
}

/// The logins to NATS this process made: each connection a server accepted, a reconnect of a
/// held one included.
static LOGINS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many logins to NATS this process made so far.
pub fn logins() -> u64 {
    LOGINS.load(Ordering::Relaxed)
}

async fn options(
    servers: &[ServerUrl],
    auth: &Auth,
    name: &str,
    deadline: Instant,
    denied: Arc<Denied>,
) -> Result<ConnectOptions, Error> {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut o = ConnectOptions::new()
        .name(name)
        .connection_timeout(left)
        .request_timeout(Some(left))
        .ignore_discovered_servers()
        .event_callback(move |event| {
            let denied = Arc::clone(&denied);
            async move {
                if let Event::Connected = event {
                    LOGINS.fetch_add(1, Ordering::Relaxed);
                }
                if let Event::ServerError(ServerError::Other(text)) = event {
                    if let Some(subject) = violation_subject(&text) {
                        denied.add(subject);
                    }
                }
            }
        });
    // The first connect without the library's default first "delay": a zero sleep, which the
    // runtime's millisecond timer rounds up to about 1 ms of a 4 ms run (seen with strace).
    // Only the first attempt: later ones (a reconnect within a session) keep the library's
    // back-off. With one URL only: a selected server is the only one tried.
    if servers.len() == 1 {
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        o = o.reconnect_to_server_callback(move |pool, _info| {
            let first = first.swap(false, std::sync::atomic::Ordering::Relaxed);
            async move {
                let server = pool.into_iter().next().filter(|_| first)?;
                Some(async_nats::ReconnectToServer {
                    addr: server.addr,
                    delay: Some(std::time::Duration::ZERO),
                })
            }
        });
    }
    if let Some(path) = &auth.creds {
        o = o
            .credentials_file(path)
            .await
            .map_err(|e| file_error(Setting::Creds, path, e.kind().to_string()))?;
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

/// A credentials file given in the configuration is unusable: a configuration error, naming
/// its setting (exit 2).
fn file_error(setting: Setting, path: &Path, problem: String) -> Error {
    Error::Setting {
        setting,
        path: Some(path.to_path_buf()),
        problem,
    }
}

/// An nkey seed file: the seed on its own line (`SU...`, 58 characters). Its content never
/// appears in a message.
fn read_seed(path: &Path) -> Result<String, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| file_error(Setting::Nkey, path, e.kind().to_string()))?;
    text.lines()
        .map(str::trim)
        .find(|l| {
            l.len() == 58 && l.starts_with('S') && l.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .map(str::to_string)
        .ok_or_else(|| file_error(Setting::Nkey, path, "the file holds no nkey seed".into()))
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

/// A consumer's info answer (or why there is none), as observed.
pub(super) fn observed(answer: Result<Vec<u8>, Unknown>) -> Observed {
    match answer.map(|body| jetstream::parse_consumer_info(&body)) {
        Ok(Ok(facts)) => Observed::Found {
            facts,
            stream: None,
        },
        Ok(Err(e)) => classify(e),
        Err(why) => Observed::NotJudged(why),
    }
}

fn classify(e: ParseError) -> Observed {
    match e.api_code() {
        Some(ApiError::STREAM_NOT_FOUND) => Observed::StreamMissing,
        Some(ApiError::CONSUMER_NOT_FOUND) => Observed::ConsumerMissing,
        Some(ApiError::NOT_ENABLED_FOR_ACCOUNT) => {
            Observed::NotJudged(Unknown::JetStreamNotEnabled)
        }
        _ => Observed::NotJudged(e.unknown()),
    }
}

fn connect_error(kind: ConnectErrorKind, text: &str) -> Unknown {
    match kind {
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
            Unknown::Credentials
        }
        // The consumers are asked only while the pod holds a live connection to NATS: a
        // connect that timed out is NATS slow to let the probe in (an auth callout timing
        // out under load answers only after its own timeout), a late answer, not a server
        // gone. A refused or unresolvable one is.
        ConnectErrorKind::TimedOut => Unknown::Deadline,
        _ => Unknown::Unreachable(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_userinfo_is_percent_decoded() {
        assert_eq!(percent_decode("p%40ss%3Aw0rd"), "p@ss:w0rd");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[test]
    fn api_errors_become_observations() {
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
            Observed::NotJudged(Unknown::TemporarilyUnavailable)
        );
        assert_eq!(
            classify(api(10039)),
            Observed::NotJudged(Unknown::JetStreamNotEnabled)
        );
        assert!(matches!(
            classify(api(10003)),
            Observed::NotJudged(Unknown::Failed(_))
        ));
    }

    #[test]
    fn permission_violations_name_their_subject() {
        assert_eq!(
            violation_subject(
                r#"Permissions Violation for Publish to "$JS.API.CONSUMER.INFO.B.y""#
            )
            .as_deref(),
            Some("$JS.API.CONSUMER.INFO.B.y")
        );
        assert_eq!(
            violation_subject(r#"permissions violation for subscription to "_INBOX.abc.*""#)
                .as_deref(),
            Some("_INBOX.abc.*")
        );
        assert_eq!(violation_subject("maximum payload exceeded"), None);
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
        let Err(Error::Setting { problem, .. }) = read_seed(&bad) else {
            panic!("a bad seed file is an error");
        };
        assert!(
            problem.contains("holds no nkey seed") && !problem.contains("s3cret"),
            "{problem}"
        );
    }
}
