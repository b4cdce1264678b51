//! Two pods on one node for the consumer scenarios: NATS with the producers in one network
//! namespace, the app (the pod's client) in another, where the probe runs.

use super::probe::Run;
use super::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// --stall-after 2s with ack_wait 1s: the window is 2 s (never less than 2 × ack_wait).
pub const STALL: &str = "2s";
pub const WINDOW: Duration = Duration::from_secs(2);
pub const S10: Duration = Duration::from_secs(10);
/// How often `check_through` runs the probe: well inside the window.
pub const PERIOD: Duration = Duration::from_millis(400);
/// A window and a bit: long enough for a stall to be declared.
pub const PAST_WINDOW: Duration = Duration::from_millis(2300);

/// Two pods on one node: NATS with the producers, and the app pod holding only its own
/// consumer, where the probe runs.
pub struct Pods {
    pub nats: Arc<NetNs>,
    pub app: Arc<NetNs>,
    pub server: NatsServer,
    pub url: String,
    pub state: tempfile::TempDir,
    /// Extra flags every client (and setup/publish) needs, e.g. credentials.
    pub client_auth: Vec<String>,
    /// The server's configuration file, where it has one: kept for a restart to read.
    config: Option<tempfile::TempDir>,
}

impl Pods {
    pub fn new(version: Version) -> Pods {
        Pods::with(version, &[], &[])
    }

    /// A server (the pinned version) with two users: `admin` (password `admin-pw`), who sets
    /// up and runs every client, and `user`, who may publish only to `publish` and subscribe
    /// only to its inbox: the probe's user in the permission scenarios.
    pub fn with_limited_user(user: &str, password: &str, publish: &[&str]) -> Pods {
        let allow: Vec<String> = publish.iter().map(|s| format!("\"{s}\"")).collect();
        Pods::with_config(
            &format!(
                r#"authorization {{
  users = [
    {{ user: admin, password: admin-pw }}
    {{ user: {user}, password: {password}, permissions: {{
        publish: {{ allow: [{}] }}
        subscribe: {{ allow: ["_INBOX.>"] }} }} }}
  ]
}}
"#,
                allow.join(", ")
            ),
            &["-user", "admin", "-password", "admin-pw"],
        )
    }

    /// A server (the pinned version, JetStream on) with this configuration file; every
    /// client (and setup/publish) authenticates with `client_auth`.
    pub fn with_config(config: &str, client_auth: &[&str]) -> Pods {
        Pods::with_config_and(config, &[], client_auth)
    }

    /// A server with neither JetStream nor a system account (nats-server makes one whenever
    /// JetStream runs): nothing of the server's own answers the JetStream API or the
    /// account's reports, so a service of a test's own can.
    pub fn bare() -> Pods {
        Pods::with_config_and("no_system_account: true\n", &["-js=false"], &[])
    }

    fn with_config_and(config: &str, server_args: &[&str], client_auth: &[&str]) -> Pods {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.conf");
        std::fs::write(&path, config).unwrap();
        let mut args = vec!["-c", path.to_str().unwrap()];
        args.extend_from_slice(server_args);
        let mut pods = Pods::with(Version::Pinned, &args, client_auth);
        pods.config = Some(dir);
        pods
    }

    pub fn with(version: Version, server_args: &[&str], client_auth: &[&str]) -> Pods {
        let nats = Arc::new(NetNs::new());
        let app = Arc::new(NetNs::new());
        let (ip, _) = link(&nats, &app);
        let server = NatsServer::start_with(Some(&nats), version, ip, 4222, server_args);
        let url = server.url();
        Pods {
            nats,
            app,
            server,
            url,
            state: tempfile::tempdir().unwrap(),
            client_auth: client_auth.iter().map(|s| s.to_string()).collect(),
            config: None,
        }
    }

    pub fn args<'a>(&'a self, sub: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec![sub, "-url", self.url.as_str()];
        v.extend(self.client_auth.iter().map(String::as_str));
        v.extend_from_slice(rest);
        v
    }

    /// natspeer setup in the NATS pod; must succeed.
    pub fn setup(&self, rest: &[&str]) {
        // args() leads with the subcommand, which Peer::setup adds itself.
        Peer::setup(Some(&self.nats), &self.args("setup", rest)[1..]);
    }

    /// A stream `S` (subjects `S.>`) and a push consumer `D` in deliver group `D`, max
    /// ack pending 1, ack_wait 1 s; `extra` adds setup flags.
    pub fn push(&self, stream: &str, durable: &str, extra: &[&str]) {
        self.push_with(stream, durable, "1", extra);
    }

    /// `push`, with max ack pending `max_ack_pending`.
    pub fn push_with(&self, stream: &str, durable: &str, max_ack_pending: &str, extra: &[&str]) {
        let subjects = format!("{}.>", stream.to_lowercase());
        let deliver = format!("deliver.{durable}");
        let mut rest = vec![
            "-stream",
            stream,
            "-subjects",
            &subjects,
            "-durable",
            durable,
            "-deliver-subject",
            &deliver,
            "-deliver-group",
            durable,
            "-max-ack-pending",
            max_ack_pending,
            "-ack-wait",
            "1s",
        ];
        rest.extend_from_slice(extra);
        self.setup(&rest);
    }

    /// Publishes `count` messages now and waits until they are all in.
    pub fn publish_n(&self, subject: &str, count: u32) {
        let n = count.to_string();
        let p = Peer::spawn(
            Some(&self.nats),
            &self.args(
                "publish",
                &["-subject", subject, "-count", &n, "-rate", "0", "-js"],
            ),
        );
        assert!(p.wait_exit(Duration::from_secs(30)).success());
    }

    /// A producer that keeps publishing `rate` messages a second.
    pub fn producer(&self, subject: &str, rate: u32) -> Peer {
        let r = rate.to_string();
        let mut p = Peer::spawn(
            Some(&self.nats),
            &self.args("publish", &["-subject", subject, "-rate", &r]),
        );
        p.wait_for("ready", S10);
        p
    }

    /// The pod's client (natspeer in the app namespace), once it says `ready`.
    pub fn client(&self, sub: &str, rest: &[&str]) -> Peer {
        let mut p = Peer::spawn(Some(&self.app), &self.args(sub, rest));
        p.wait_for("ready", S10);
        p
    }

    /// A push consumer process bound to `stream`/`durable` as `push` set it up.
    pub fn consume(&self, stream: &str, durable: &str, extra: &[&str]) -> Peer {
        let push = push_consumer(stream, durable);
        let mut rest: Vec<&str> = push.iter().map(String::as_str).collect();
        rest.extend_from_slice(extra);
        self.client("consume", &rest)
    }

    /// `natsprobe check --server URL --stall-after 2s --state-dir DIR --consumer ...` in the
    /// app pod, plus `extra`.
    pub fn check(&self, consumers: &[&str], extra: &[&str]) -> Run {
        self.run("check", consumers, extra)
    }

    /// The same as `check`, as `natsprobe diagnose`.
    pub fn diagnose(&self, consumers: &[&str], extra: &[&str]) -> Run {
        self.run("diagnose", consumers, extra)
    }

    fn run(&self, command: &str, consumers: &[&str], extra: &[&str]) -> Run {
        let state = self.state.path().to_string_lossy().to_string();
        let mut args = vec![
            command,
            "--server",
            self.url.as_str(),
            "--stall-after",
            STALL,
            "--state-dir",
            state.as_str(),
        ];
        for c in consumers {
            args.extend(["--consumer", c]);
        }
        args.extend_from_slice(extra);
        probe(&args).ns(&self.app).run()
    }

    /// Runs `check` every 400 ms for `span`, as a kubelet with a short period would (the stall
    /// clock counts only intervals it saw, each no longer than the window), and returns every
    /// run, the last one after `span`.
    pub fn check_through(&self, consumers: &[&str], extra: &[&str], span: Duration) -> Vec<Run> {
        let started = Instant::now();
        let mut runs = Vec::new();
        loop {
            runs.push(self.check(consumers, extra));
            if started.elapsed() >= span {
                return runs;
            }
            std::thread::sleep(PERIOD.min(span.saturating_sub(started.elapsed())));
        }
    }

    /// `check --consumer S/D --json -v` with the credential in `var` (a nats CLI variable)
    /// instead of a flag.
    pub fn check_by_env(&self, var: &str, value: &str) -> Run {
        probe(&[
            "check",
            "--server",
            &self.url,
            "--consumer",
            "S/D",
            "--json",
            "-v",
        ])
        .ns(&self.app)
        .env(var, value)
        .run()
    }

    /// The state files, without the dir's `.lock` (which orders the probes' writes).
    pub fn state_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.state.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with(".lock"))
            .collect()
    }
}

/// natspeer's flags for a push consumer as these tests make them: `stream`/`durable`,
/// delivering to `deliver.<durable>` in deliver group `<durable>` (for `setup` and `consume`).
pub fn push_consumer(stream: &str, durable: &str) -> Vec<String> {
    [
        "-stream",
        stream,
        "-durable",
        durable,
        "-deliver-subject",
        &format!("deliver.{durable}"),
        "-deliver-group",
        durable,
    ]
    .map(String::from)
    .to_vec()
}

/// Prints a scenario's verdict line (shown with `cargo test -- --nocapture`): the README's
/// table of the ADR's rows is these lines.
pub fn show(row: &str, run: &Run) {
    println!("ADR table | {row} | exit {:?} | {}", run.code, run.line());
}

/// Each run authenticated (exit 0, its consumer judged) and shows none of `secrets`.
pub fn judged_without_showing<const N: usize>(runs: [Run; N], secrets: &[&str]) {
    for run in &runs {
        run.expect(0);
        assert!(!run.stdout.contains("not judged"), "{run}");
        for secret in secrets {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "`{secret}` shown\n{run}"
            );
        }
    }
}

/// The consumer object of a `--json` run.
pub fn consumer_json(run: &Run, i: usize) -> serde_json::Value {
    run.json()["consumers"][i].clone()
}

/// Runs a scenario on the ADR's pinned server, Debian's 2.9.x (no `ts`) and the newest.
macro_rules! on_every_server {
    ($name:ident) => {
        mod $name {
            use crate::harness::Version;
            #[test]
            fn on_2_10_26() {
                super::$name(Version::Pinned)
            }
            #[test]
            fn on_debian_2_9() {
                super::$name(Version::Debian)
            }
            #[test]
            fn on_newest() {
                super::$name(Version::Newest)
            }
        }
    };
}

pub(crate) use on_every_server;
