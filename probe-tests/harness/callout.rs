//! An auth callout service, as nats-server 2.10 delegates logins to one
//! (`authorization { auth_callout { ... } }`): a NATS client in the `AUTH` account that answers
//! each `$SYS.REQ.USER.AUTH` request with a user JWT for the `APP` account (the user `app`,
//! password `app-pw`) or a refusal, signed by the issuer key the server trusts. Run in the
//! NATS pod's namespace; stopping it is the auth service going down while the clients it let
//! in stay connected.

use super::operator::jwt_for;
use super::NetNs;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The server's configuration for a callout whose issuer is `issuer` (an account key). A
/// login the service does not answer is refused after half a second (the authorization
/// timeout, 2 s by default).
pub fn server_config(issuer: &nkeys::KeyPair) -> String {
    format!(
        r#"accounts {{
  AUTH: {{ users: [ {{ user: auth, password: auth-pw }} ] }}
  APP: {{ jetstream: enabled }}
  SYS: {{}}
}}
system_account: SYS
authorization {{
  timeout: 0.5
  auth_callout {{
    issuer: {}
    auth_users: [ auth ]
    account: AUTH
  }}
}}
"#,
        issuer.public_key()
    )
}

pub struct Callout {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Logins answered so far (granted or refused).
    pub answered: Arc<std::sync::atomic::AtomicUsize>,
    /// Each login answered: when, the connection's name, and the client's address.
    pub logins: Arc<Mutex<Vec<Login>>>,
    flaky: Arc<Mutex<Option<Turns>>>,
}

#[derive(Debug, Clone)]
pub struct Login {
    pub at: Instant,
    pub name: String,
    pub host: String,
    /// How the service chose to answer it (`Callout::flaky`).
    pub answer: Answer,
}

/// A service under load, as seen by one kind of login: each client (by address) whose
/// logins are named with `prefix` (and not `except`) gets the answers of `pattern` in turn,
/// its first login the first; every other login is answered as usual.
#[derive(Debug, Clone)]
pub struct Flaky {
    pub prefix: &'static str,
    pub except: &'static str,
    pub pattern: Vec<Answer>,
}

/// How the service answers one login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// As usual: granted when the credentials are good.
    AsUsual,
    /// Refused, the credentials good (a callout that timed out under load).
    Refused,
    /// As usual, this much later (a callout slow under load).
    Late(Duration),
}

/// A `Flaky` at work: how many logins each client had.
struct Turns {
    flaky: Flaky,
    had: std::collections::HashMap<String, usize>,
}

impl Turns {
    fn answer(&mut self, name: &str, host: &str) -> Answer {
        let f = &self.flaky;
        if !name.starts_with(f.prefix) || name == f.except || f.pattern.is_empty() {
            return Answer::AsUsual;
        }
        let n = self.had.entry(host.to_string()).or_default();
        let answer = f.pattern[*n % f.pattern.len()];
        *n += 1;
        answer
    }
}

impl Callout {
    /// Starts the service in `ns`, connected to `url` as the callout user; returns once it is
    /// subscribed.
    pub fn start(ns: &NetNs, url: &str, issuer_seed: &str) -> Callout {
        Callout::serving(ns, url, issuer_seed, false)
    }

    /// As `start`, for a cluster: `urls` is a comma-separated list, tried in its order (the
    /// service stays on the first while it answers), and after every server went down the
    /// service is back within a tenth of a second of one answering, so that logins wait on
    /// the cluster, not on the service's own back-off.
    pub fn start_in_cluster(ns: &NetNs, urls: &str, issuer_seed: &str) -> Callout {
        Callout::serving(ns, urls, issuer_seed, true)
    }

    fn serving(ns: &NetNs, url: &str, issuer_seed: &str, quick: bool) -> Callout {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let logins: Arc<Mutex<Vec<Login>>> = Arc::default();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (url, seed) = (url.to_string(), issuer_seed.to_string());
        let (stop2, answered2) = (Arc::clone(&stop), Arc::clone(&answered));
        let logins2 = Arc::clone(&logins);
        let flaky: Arc<Mutex<Option<Turns>>> = Arc::default();
        let flaky2 = Arc::clone(&flaky);
        let thread = ns.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let counted = Counted {
                answered: answered2,
                logins: logins2,
                flaky: flaky2,
            };
            rt.block_on(serve(url, seed, quick, stop2, counted, ready_tx));
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the callout service subscribed");
        Callout {
            stop,
            thread: Some(thread),
            answered,
            logins,
            flaky,
        }
    }

    /// From now on answers the logins `flaky` names by its pattern, each client's turns
    /// counted from here (None: every login as usual again).
    pub fn flaky(&self, flaky: Option<Flaky>) {
        *self.flaky.lock().unwrap() = flaky.map(|flaky| Turns {
            flaky,
            had: Default::default(),
        });
    }

    /// The auth service goes down: its connection closes, and logins wait for it in vain.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Callout {
    fn drop(&mut self) {
        self.halt();
    }
}

/// What the service counts.
struct Counted {
    answered: Arc<std::sync::atomic::AtomicUsize>,
    logins: Arc<Mutex<Vec<Login>>>,
    flaky: Arc<Mutex<Option<Turns>>>,
}

async fn serve(
    url: String,
    seed: String,
    quick: bool,
    stop: Arc<AtomicBool>,
    counted: Counted,
    ready: std::sync::mpsc::Sender<()>,
) {
    let issuer = nkeys::KeyPair::from_seed(&seed).unwrap();
    let mut options = async_nats::ConnectOptions::new()
        .user_and_password("auth".into(), "auth-pw".into())
        .name("auth-callout");
    if quick {
        options = options
            .retain_servers_order()
            .reconnect_delay_callback(|_| Duration::from_millis(50));
    }
    let addrs: Vec<async_nats::ServerAddr> = url.split(',').map(|u| u.parse().unwrap()).collect();
    let client = options
        .connect(addrs)
        .await
        .expect("the callout service connects");
    let mut requests = client.subscribe("$SYS.REQ.USER.AUTH").await.unwrap();
    client.flush().await.unwrap();
    let _ = ready.send(());
    while !stop.load(Ordering::SeqCst) {
        let next =
            std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut requests), cx));
        let Ok(Some(request)) = tokio::time::timeout(Duration::from_millis(50), next).await else {
            continue;
        };
        let Some(reply) = request.reply.clone() else {
            continue;
        };
        let claims = claims(&request.payload);
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let name = text(&claims["nats"]["connect_opts"]["name"]);
        let host = text(&claims["nats"]["client_info"]["host"]);
        let chosen = match counted.flaky.lock().unwrap().as_mut() {
            Some(turns) => turns.answer(&name, &host),
            None => Answer::AsUsual,
        };
        let response = answer(&issuer, &claims, chosen == Answer::Refused);
        // A flush waits for a connection: never longer than a stop may wait. A late answer
        // is sent from a task of its own: the logins after it are answered meanwhile.
        let publisher = client.clone();
        let sent = async move {
            let _ = publisher.publish(reply, response.into()).await;
            let _ = publisher.flush().await;
        };
        match chosen {
            Answer::Late(by) => {
                tokio::spawn(async move {
                    tokio::time::sleep(by).await;
                    let _ = tokio::time::timeout(Duration::from_secs(1), sent).await;
                });
            }
            _ => {
                let _ = tokio::time::timeout(Duration::from_secs(1), sent).await;
            }
        }
        counted.answered.fetch_add(1, Ordering::SeqCst);
        counted.logins.lock().unwrap().push(Login {
            at: Instant::now(),
            name,
            host,
            answer: chosen,
        });
    }
    drop(requests);
    // Every server may be gone already: a drain would wait for one.
    let _ = tokio::time::timeout(Duration::from_secs(1), client.drain()).await;
}

/// The claims of an authorization request JWT.
fn claims(request: &[u8]) -> serde_json::Value {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let text = String::from_utf8_lossy(request);
    let claims = text.split('.').nth(1).unwrap_or_default();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap_or_default()).unwrap_or_default()
}

/// The authorization response to one request's claims: the user JWT for `APP` when the
/// login is `app`/`app-pw` and not `refused` (by the service's choice), else a refusal.
fn answer(issuer: &nkeys::KeyPair, claims: &serde_json::Value, refused: bool) -> String {
    let nats = &claims["nats"];
    let user_nkey = nats["user_nkey"].as_str().unwrap_or_default();
    let server_id = nats["server_id"]["id"].as_str().unwrap_or_default();
    let login = &nats["connect_opts"];
    let granted = !refused && login["user"] == "app" && login["pass"] == "app-pw";
    let mut response = serde_json::json!({"type": "authorization_response", "version": 2});
    if granted {
        response["jwt"] = jwt_for(
            issuer,
            user_nkey,
            "app",
            Some("APP"),
            serde_json::json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}),
        )
        .into();
    } else {
        response["error"] = "not a user of this service".into();
    }
    jwt_for(issuer, user_nkey, "response", Some(server_id), response)
}
