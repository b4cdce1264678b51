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
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
}

impl Callout {
    /// Starts the service in `ns`, connected to `url` as the callout user; returns once it is
    /// subscribed.
    pub fn start(ns: &NetNs, url: &str, issuer_seed: &str) -> Callout {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (url, seed) = (url.to_string(), issuer_seed.to_string());
        let (stop2, answered2) = (Arc::clone(&stop), Arc::clone(&answered));
        let thread = ns.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve(url, seed, stop2, answered2, ready_tx));
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the callout service subscribed");
        Callout {
            stop,
            thread: Some(thread),
            answered,
        }
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

async fn serve(
    url: String,
    seed: String,
    stop: Arc<AtomicBool>,
    answered: Arc<std::sync::atomic::AtomicUsize>,
    ready: std::sync::mpsc::Sender<()>,
) {
    let issuer = nkeys::KeyPair::from_seed(&seed).unwrap();
    let client = async_nats::ConnectOptions::new()
        .user_and_password("auth".into(), "auth-pw".into())
        .name("auth-callout")
        .connect(url)
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
        let response = answer(&issuer, &request.payload);
        let _ = client.publish(reply, response.into()).await;
        let _ = client.flush().await;
        answered.fetch_add(1, Ordering::SeqCst);
    }
    drop(requests);
    let _ = client.drain().await;
}

/// The authorization response to one request JWT: the user JWT for `APP` when the login is
/// `app`/`app-pw`, else a refusal.
fn answer(issuer: &nkeys::KeyPair, request: &[u8]) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let text = String::from_utf8_lossy(request);
    let claims = text.split('.').nth(1).unwrap_or_default();
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap_or_default())
            .unwrap_or_default();
    let nats = &claims["nats"];
    let user_nkey = nats["user_nkey"].as_str().unwrap_or_default();
    let server_id = nats["server_id"]["id"].as_str().unwrap_or_default();
    let login = &nats["connect_opts"];
    let granted = login["user"] == "app" && login["pass"] == "app-pw";
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
