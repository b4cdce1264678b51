//! `examples/kubernetes/`: every manifest validates as Kubernetes objects (kubernetes-validate,
//! strict: an unknown field is an error), its probe timing follows the README's sizing rules,
//! and every natsprobe command in it (each exec probe, initContainer and CronJob command) runs
//! against a live scenario shaped like the manifest's pod, so the examples cannot drift from
//! the CLI.
//!
//! What is replaced, and nothing else: the probe's path (`/natsprobe`) by the built binary, the
//! Service's host (`nats.nats.svc`) by the test server's address, a creds file's path by the
//! test account's, and an emptyDir's mount path by a directory standing in for it.
//!
//! The test server's JetStream has the domain `hub`, so the leaf node example's
//! `--js-domain hub` addresses the stream as from a leaf node (the leaf node itself is
//! `probe-tests/topologies.rs`'s); `$JS.API`, which the other examples use, is the same
//! JetStream.

use crate::harness::pods::push_consumer;
use crate::harness::probe::Run;
use crate::harness::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);
const SERVICE_HOST: &str = "nats.nats.svc";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kubernetes")
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the examples: {files:?}");
    files
}

/// Python with kubernetes-validate and PyYAML (probe-tests/setup installs them).
fn python() -> Command {
    let lib = deps_dir().join("kubernetes-validate");
    assert!(
        lib.join("kubernetes_validate").is_dir(),
        "kubernetes-validate is missing: run probe-tests/setup"
    );
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", lib);
    cmd
}

/// A manifest's documents, read by PyYAML (a YAML parser the Kubernetes ecosystem uses).
pub(crate) fn documents(file: &Path) -> Vec<Value> {
    let out = python()
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The pod spec inside a Pod, a Deployment or a CronJob.
fn pod_spec(doc: &Value) -> &Value {
    match doc["kind"].as_str().unwrap() {
        "Pod" => &doc["spec"],
        "Deployment" | "StatefulSet" | "DaemonSet" | "Job" => &doc["spec"]["template"]["spec"],
        "CronJob" => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        other => panic!("an example of kind {other}: teach this test about it"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// A container's environment as the manifest gives it (`value`s only).
fn env_of(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|v| Some((v["name"].as_str()?.into(), v["value"].as_str()?.into())))
                .collect()
        })
        .unwrap_or_default()
}

fn is_probe(argv: &[String]) -> bool {
    argv.first()
        .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "natsprobe"))
}

/// Where a natsprobe command sits in a pod.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    Liveness,
    Readiness,
    Startup,
    Init,
    /// A native sidecar: an initContainer with `restartPolicy: Always` (`natsprobe serve`).
    Sidecar,
    Main,
}

#[derive(Debug, Clone)]
struct Invocation {
    file: String,
    container: String,
    role: Role,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    uid: Option<u32>,
    /// The probe's timing, for probes: periodSeconds, timeoutSeconds, failureThreshold.
    timing: Option<(u64, u64, u64)>,
    /// An httpGet probe's port and path; its argv, environment and user are the sidecar's
    /// that answers it.
    http: Option<(u16, String)>,
}

impl Invocation {
    fn arg(&self, flag: &str) -> Option<&str> {
        let i = self.argv.iter().position(|a| a == flag)?;
        self.argv.get(i + 1).map(String::as_str)
    }

    fn env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn has_server(&self) -> bool {
        self.arg("--server").is_some()
            || self.env("NATS_URL").is_some()
            || self.env("NATSPROBE_SERVER").is_some()
    }
}

/// One container of a pod, as the scenario needs it.
#[derive(Debug, Clone)]
struct Container {
    name: String,
    /// The process name the application runs as: `--process` of its probe, else its
    /// command's base name, else the container's name.
    process: String,
    uid: Option<u32>,
    /// emptyDir mounts: mount path → volume name.
    mounts: Vec<(String, String)>,
}

struct Pod {
    init: Vec<Container>,
    containers: Vec<Container>,
    invocations: Vec<Invocation>,
    empty_dirs: Vec<String>,
}

fn pods() -> Vec<Pod> {
    let mut pods = Vec::new();
    for file in manifests() {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for doc in documents(&file) {
            let spec = pod_spec(&doc);
            let pod_uid = spec["securityContext"]["runAsUser"].as_u64();
            let empty_dirs: Vec<String> = spec["volumes"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter(|v| v.get("emptyDir").is_some())
                        .map(|v| v["name"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let mut pod = Pod {
                init: vec![],
                containers: vec![],
                invocations: vec![],
                empty_dirs: empty_dirs.clone(),
            };
            for (list, init) in [("initContainers", true), ("containers", false)] {
                for c in spec[list].as_array().cloned().unwrap_or_default() {
                    let env = env_of(&c);
                    let uid = c["securityContext"]["runAsUser"]
                        .as_u64()
                        .or(pod_uid)
                        .map(|u| u as u32);
                    let command = strings(&c["command"]);
                    let mut process = command
                        .first()
                        .map(|c| {
                            Path::new(c)
                                .file_name()
                                .unwrap()
                                .to_string_lossy()
                                .to_string()
                        })
                        .unwrap_or_else(|| c["name"].as_str().unwrap().to_string());
                    let mounts = c["volumeMounts"]
                        .as_array()
                        .map(|m| {
                            m.iter()
                                .filter(|m| empty_dirs.iter().any(|d| m["name"] == d.as_str()))
                                .map(|m| {
                                    (
                                        m["mountPath"].as_str().unwrap().to_string(),
                                        m["name"].as_str().unwrap().to_string(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let invocation = |role: Role, argv: Vec<String>, timing| Invocation {
                        file: name.clone(),
                        container: c["name"].as_str().unwrap().to_string(),
                        role,
                        argv,
                        env: env.clone(),
                        uid,
                        timing,
                        http: None,
                    };
                    // The sidecar's command runs before the probes that ask it.
                    if init && c["restartPolicy"] == "Always" && is_probe(&command) {
                        let mut argv = command.clone();
                        argv.extend(strings(&c["args"]));
                        pod.invocations.push(invocation(Role::Sidecar, argv, None));
                    }
                    for (key, role) in [
                        ("livenessProbe", Role::Liveness),
                        ("readinessProbe", Role::Readiness),
                        ("startupProbe", Role::Startup),
                    ] {
                        let p = &c[key];
                        let timing = (
                            p["periodSeconds"].as_u64().unwrap_or(10),
                            p["timeoutSeconds"].as_u64().unwrap_or(1),
                            p["failureThreshold"].as_u64().unwrap_or(3),
                        );
                        let sidecar = pod.invocations.iter().find(|i| i.role == Role::Sidecar);
                        if let (Some(_), Some(sidecar)) = (p.get("httpGet"), sidecar) {
                            let sidecar = sidecar.clone();
                            // A named port is the probed container's own.
                            let port = match &p["httpGet"]["port"] {
                                Value::Number(n) => n.as_u64().unwrap() as u16,
                                Value::String(name) => c["ports"]
                                    .as_array()
                                    .and_then(|ports| {
                                        ports.iter().find(|q| q["name"] == name.as_str())
                                    })
                                    .and_then(|q| q["containerPort"].as_u64())
                                    .unwrap_or_else(|| {
                                        panic!("{name}: no such port in {}", c["name"])
                                    })
                                    as u16,
                                other => panic!("httpGet port {other}"),
                            };
                            let path = p["httpGet"]["path"].as_str().unwrap().to_string();
                            // Another server's probe (the app's own HTTP port): not natsprobe's.
                            let serves_on = sidecar
                                .arg("--listen")
                                .and_then(|l| l.rsplit(':').next())
                                .map_or(8281, |p| p.parse().unwrap());
                            if port != serves_on {
                                continue;
                            }
                            if let Some(p) = sidecar.arg("--process") {
                                process = p.to_string();
                            }
                            pod.invocations.push(Invocation {
                                container: c["name"].as_str().unwrap().to_string(),
                                role,
                                timing: Some(timing),
                                http: Some((port, path)),
                                ..sidecar
                            });
                            continue;
                        }
                        let argv = strings(&p["exec"]["command"]);
                        if !is_probe(&argv) {
                            continue;
                        }
                        let inv = invocation(role, argv, Some(timing));
                        if let Some(p) = inv.arg("--process") {
                            process = p.to_string();
                        }
                        pod.invocations.push(inv);
                    }
                    if is_probe(&command) && c["restartPolicy"] != "Always" {
                        let mut argv = command.clone();
                        argv.extend(strings(&c["args"]));
                        let role = if init { Role::Init } else { Role::Main };
                        pod.invocations.push(invocation(role, argv, None));
                    }
                    let container = Container {
                        name: c["name"].as_str().unwrap().to_string(),
                        process,
                        uid,
                        mounts,
                    };
                    match init {
                        true => pod.init.push(container),
                        false => pod.containers.push(container),
                    }
                }
            }
            pods.push(pod);
        }
    }
    pods
}

/// The flags that say what a check judges (not how it reaches NATS, nor its timing).
const CHECK_FLAGS: [&str; 6] = [
    "--consumer",
    "--own-subscription",
    "--subscription",
    "--stall-after",
    "--process",
    "--kv-watch",
];

/// What a liveness invocation checks: each of `CHECK_FLAGS` it gives, with its value.
fn checks(inv: &Invocation) -> Vec<(String, String)> {
    let mut checks: Vec<(String, String)> = inv
        .argv
        .iter()
        .enumerate()
        .filter(|(_, a)| CHECK_FLAGS.contains(&a.as_str()))
        .map(|(i, a)| {
            let value = match a.as_str() {
                "--own-subscription" => String::new(),
                _ => inv.argv.get(i + 1).cloned().unwrap_or_default(),
            };
            (a.clone(), value)
        })
        .collect();
    checks.sort();
    checks
}

/// Every example that guards a workload has the startupProbe its documents promise (an exec
/// probe whose binary is missing is an error the kubelet discards: only a startupProbe, which
/// then never passes, makes that seen), and two examples of one workload (the same
/// application image) check the same things, or say why not in a comment that names the
/// other file.
#[test]
fn every_guarded_workload_starts_by_its_probe_and_is_checked_alike() {
    let pods = pods();
    let mut workloads: BTreeMap<String, Vec<(String, Vec<(String, String)>)>> = BTreeMap::new();
    for pod in &pods {
        // natsprobe's own /selfz guards natsprobe, not the workload.
        let guards = |i: &&Invocation| {
            i.role == Role::Liveness && i.http.as_ref().is_none_or(|(_, p)| p != "/selfz")
        };
        for live in pod.invocations.iter().filter(guards) {
            let startup = pod.invocations.iter().find(|i| {
                i.role == Role::Startup
                    && i.container == live.container
                    && match &i.http {
                        Some((_, path)) => path == "/startupz",
                        None => i.argv.iter().any(|a| a == "--startup"),
                    }
            });
            assert!(
                startup.is_some(),
                "{}: the container {} is guarded by natsprobe without a startupProbe running it with --startup",
                live.file,
                live.container
            );
            let doc = documents(&examples_dir().join(&live.file));
            let image = doc
                .iter()
                .flat_map(|d| {
                    let spec = pod_spec(d);
                    spec["containers"].as_array().cloned().unwrap_or_default()
                })
                .find(|c| c["name"] == live.container.as_str())
                .and_then(|c| {
                    c["image"]
                        .as_str()
                        .map(|i| i.split(':').next().unwrap().to_string())
                })
                .unwrap();
            workloads
                .entry(image)
                .or_default()
                .push((live.file.clone(), checks(live)));
        }
    }
    for (image, examples) in &workloads {
        for (a, checks_a) in examples {
            for (b, checks_b) in examples {
                if a == b || checks_a == checks_b {
                    continue;
                }
                let says_why = std::fs::read_to_string(examples_dir().join(a))
                    .unwrap()
                    .lines()
                    .any(|l| l.trim_start().starts_with('#') && l.contains(b.as_str()));
                assert!(
                    says_why,
                    "{a} and {b} guard {image} with other checks ({checks_a:?} and {checks_b:?}), and {a} says nothing of {b} to say why"
                );
            }
        }
    }
}

/// Every manifest is a valid Kubernetes object for the oldest release still commonly run
/// (1.36 for a restart in place, the first where it is on by default; 1.33's schema refuses
/// it) and for the newest (strict: a misspelt field fails), and every probe's timing follows
/// the README's rules.
#[test]
fn the_examples_validate_and_size_their_probes_by_the_rules() {
    let in_place = |f: &PathBuf| {
        std::fs::read_to_string(f)
            .unwrap()
            .contains("restartPolicyRules:")
    };
    let (newer, older): (Vec<PathBuf>, Vec<PathBuf>) = manifests().into_iter().partition(in_place);
    assert!(!newer.is_empty(), "no example restarts in place");
    for (version, files) in [
        ("1.29.0", &older),
        ("1.36.0", &newer),
        ("1.37.0", &manifests()),
    ] {
        let out = python()
            .args(["-m", "kubernetes_validate", "--strict", "-k", version])
            .args(files)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubernetes-validate {version}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // On 1.33 and older `restartPolicyRules` is a field the API server does not know, and
    // kubectl's strict field validation refuses it (docs/serve.md, "Restart in place"). The
    // other refusal there, 1.35's with its default gates (a rule on a sidecar needs
    // RestartAllContainersOnContainerExits), is the API server's validation: the schemas carry
    // no gate (1.34's and 1.35's take the field), and no API server runs here to ask.
    let out = python()
        .args(["-m", "kubernetes_validate", "--strict", "-k", "1.33.0"])
        .args(&newer)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("'restartPolicyRules' was unexpected"),
        "kubernetes-validate 1.33.0 took a manifest that restarts in place:\n{said}"
    );
    let all = pods();
    let invocations: Vec<&Invocation> = all.iter().flat_map(|p| &p.invocations).collect();
    let liveness = invocations
        .iter()
        .filter(|i| i.role == Role::Liveness)
        .count();
    assert!(liveness >= 4, "the examples' livenessProbes: {liveness}");
    for inv in &invocations {
        let Some((period, timeout, threshold)) = inv.timing else {
            continue;
        };
        if let Some((_, path)) = &inv.http {
            // natsprobe's own livenessProbe restarts natsprobe alone: short, by design.
            if path == "/selfz" {
                assert!(
                    period * threshold < 10,
                    "{}: natsprobe's own probe must restart it well inside the app's",
                    inv.file
                );
                continue;
            }
            // Restart in place: serve's own count acts before the fallback probe's.
            if inv.arg("--exit-unhealthy").is_some() && inv.role == Role::Liveness {
                let every = inv.arg("--every").map_or(Duration::from_secs(10), |e| {
                    natsprobe::config::duration::parse(e).unwrap()
                });
                let looks: u32 = inv
                    .arg("--failure-threshold")
                    .map_or(3, |n| n.parse().unwrap());
                assert!(
                    every * looks < Duration::from_secs(period * threshold),
                    "{}: the fallback probe must be slower than serve's own count",
                    inv.file
                );
            }
        }
        let probe_timeout = inv
            .arg("--timeout")
            .map(|t| natsprobe::config::duration::parse(t).unwrap())
            .unwrap_or(Duration::from_millis(800));
        assert!(
            probe_timeout < Duration::from_secs(timeout),
            "{} {}: --timeout {probe_timeout:?} must end inside timeoutSeconds {timeout}",
            inv.file,
            inv.container
        );
        if inv.role == Role::Liveness {
            // README "Sizing": with --server the probe fails only while NATS answers, so a
            // threshold longer than one reconnect attempt is enough; without it the probe
            // fails for a whole outage and must outlast nats.go's 60 × 2 s budget.
            let floor = if inv.has_server() { 30 } else { 121 };
            assert!(
                period * threshold >= floor,
                "{} {}: failureThreshold × periodSeconds = {} s, below {floor} s",
                inv.file,
                inv.container,
                period * threshold
            );
        }
    }
    // Every exec probe keeps its state in memory: on the node's disk a state write can wait
    // in the kernel past timeoutSeconds (README, the Bento recipe's "State").
    for file in manifests() {
        for doc in documents(&file) {
            let spec = pod_spec(&doc);
            for c in spec["containers"].as_array().cloned().unwrap_or_default() {
                for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
                    let argv = strings(&c[key]["exec"]["command"]);
                    if !is_probe(&argv) {
                        continue;
                    }
                    let env = env_of(&c);
                    let env = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v);
                    let flag = argv.iter().position(|a| a == "--state-dir");
                    let dir = flag
                        .and_then(|i| argv.get(i + 1))
                        .or(env("NATSPROBE_STATE_DIR"))
                        .or(env("TMPDIR"))
                        .map_or("/tmp", String::as_str);
                    let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
                    let Some(mount) = mounts.iter().find(|m| m["mountPath"] == dir) else {
                        // Nothing mounted there: a read-only root sends it to /dev/shm.
                        continue;
                    };
                    let volume = spec["volumes"]
                        .as_array()
                        .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
                        .expect("a mounted volume is declared");
                    assert_eq!(
                        volume["emptyDir"]["medium"],
                        "Memory",
                        "{}: {} keeps the probe's state in {dir}, on volume {}: not in memory",
                        file.display(),
                        c["name"],
                        volume["name"]
                    );
                }
            }
        }
    }
    // The guard CronJob's Job outlives the guard's own deadline.
    for file in manifests() {
        for doc in documents(&file) {
            if doc["kind"] != "CronJob" {
                continue;
            }
            let active = doc["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
                .as_u64()
                .expect("a guard CronJob sets activeDeadlineSeconds");
            let guard = invocations
                .iter()
                .find(|i| i.argv.get(1).is_some_and(|a| a == "guard"))
                .expect("the CronJob runs natsprobe guard");
            let d = |flag: &str, default: u64| {
                guard
                    .arg(flag)
                    .map(|t| natsprobe::config::duration::parse(t).unwrap().as_secs())
                    .unwrap_or(default)
            };
            let deadline = d("--interval", 60) + 2 * d("--timeout", 10) + 1;
            assert!(
                active > deadline,
                "activeDeadlineSeconds {active} must outlast the guard's {deadline} s"
            );
        }
    }
}

/// The live side: one NATS server in operator mode (creds, as the manifests use) with the
/// streams and durables the manifests name, reachable from each pod's own namespace.
struct Cluster {
    nats: Arc<NetNs>,
    server: NatsServer,
    op: OperatorMode,
    _conf: tempfile::TempDir,
}

fn cluster() -> Cluster {
    let op = OperatorMode::new();
    let nats = Arc::new(NetNs::new());
    // The operator's configuration, and the JetStream domain the leaf node example names.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.conf");
    let operator = std::fs::read_to_string(&op.config).unwrap();
    std::fs::write(&path, format!("{operator}\njetstream {{ domain: hub }}\n")).unwrap();
    let conf = path.to_string_lossy().to_string();
    let server = NatsServer::start_with(
        Some(&nats),
        Version::Pinned,
        "0.0.0.0",
        4222,
        &["-c", &conf],
    );
    let creds = op.creds.to_string_lossy().to_string();
    let url = "nats://127.0.0.1:4222";
    let setup = |rest: &[&str]| {
        let mut args = vec!["-url", url, "-creds", &creds];
        args.extend_from_slice(rest);
        Peer::setup(Some(&nats), &args);
    };
    for (stream, subjects) in [
        ("TF_RAW", "tf_raw.>"),
        ("ORDERS", "orders.>"),
        ("ALARMS", "alarms.>"),
    ] {
        setup(&["-stream", stream, "-subjects", subjects]);
    }
    for (stream, durable) in [("TF_RAW", "latest-kv"), ("ORDERS", "worker")] {
        let push = push_consumer(stream, durable);
        setup(&push.iter().map(String::as_str).collect::<Vec<_>>());
    }
    for (stream, durable) in [
        ("TF_RAW", "alarms"),
        ("TF_RAW", "entity-greptimedb"),
        ("TF_RAW", "questdb"),
        ("ALARMS", "alarm-materializer"),
    ] {
        setup(&["-stream", stream, "-durable", durable]);
    }
    Cluster {
        nats,
        server,
        op,
        _conf: dir,
    }
}

/// One manifest's pod: its namespace linked to NATS, its emptyDirs, its applications.
struct LivePod<'a> {
    pod: &'a Pod,
    ns: Arc<NetNs>,
    server_ip: String,
    dirs: BTreeMap<String, tempfile::TempDir>,
    apps: Vec<(String, Peer)>,
    /// Each native sidecar (`natsprobe serve`), running.
    sidecars: Vec<Peer>,
}

impl LivePod<'_> {
    /// A value from a manifest, with the Service host, a creds path and emptyDir mounts
    /// replaced.
    fn substitute(&self, c: &Cluster, mounts: &[(String, String)], value: &str) -> String {
        if value.starts_with("/etc/nats/") && value.ends_with(".creds") {
            return c.op.creds.to_string_lossy().to_string();
        }
        for (path, volume) in mounts {
            if let Some(rest) = value.strip_prefix(path.as_str()) {
                let dir = self.dirs[volume].path().to_string_lossy().to_string();
                return format!("{dir}{rest}");
            }
        }
        value.replace(SERVICE_HOST, &self.server_ip)
    }

    fn container(&self, name: &str) -> &Container {
        self.pod
            .init
            .iter()
            .chain(&self.pod.containers)
            .find(|c| c.name == name)
            .unwrap()
    }

    /// Runs a manifest's natsprobe command as the manifest says: its container's environment
    /// and user, the probe's binary (or the copy an initContainer installed).
    fn run(&self, c: &Cluster, inv: &Invocation) -> Run {
        let container = self.container(&inv.container);
        let binary = match inv.argv[0].as_str() {
            "/natsprobe" => static_binary(),
            other => PathBuf::from(self.substitute(c, &container.mounts, other)),
        };
        let args: Vec<String> = inv.argv[1..]
            .iter()
            .map(|a| self.substitute(c, &container.mounts, a))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = probe(&args).binary_at(&binary).ns(&self.ns);
        for (k, v) in &inv.env {
            p = p.env(k, &self.substitute(c, &container.mounts, v));
        }
        if let Some(uid) = inv.uid {
            p = p.uid(uid);
        }
        p.run()
    }
}

fn start_pod<'a>(c: &Cluster, pod: &'a Pod, subnet: u8) -> LivePod<'a> {
    let ns = Arc::new(NetNs::new());
    let (server_ip, _) = link_subnet(&c.nats, &ns, subnet);
    let dirs = pod
        .empty_dirs
        .iter()
        .map(|name| {
            let dir = tempfile::tempdir().unwrap();
            // An emptyDir is world-writable.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
            (name.clone(), dir)
        })
        .collect();
    let mut live = LivePod {
        pod,
        ns,
        server_ip,
        dirs,
        apps: vec![],
        sidecars: vec![],
    };
    // The applications: a nats.go client per container, named as the container's process,
    // as its user; the one a livenessProbe watches gives up after 2 failed reconnects (the
    // incident), the others never do (a sidecar that keeps its connection).
    let watched: Vec<&Invocation> = pod
        .invocations
        .iter()
        .filter(|i| i.role == Role::Liveness)
        .collect();
    let url = format!("nats://{}:4222", live.server_ip);
    let creds = c.op.creds.to_string_lossy().to_string();
    for container in &pod.containers {
        let runs_natsprobe = pod
            .invocations
            .iter()
            .any(|i| i.role == Role::Main && i.container == container.name);
        if runs_natsprobe {
            continue;
        }
        let probe = watched.iter().find(|i| i.container == container.name);
        let reconnects = if probe.is_some() { "2" } else { "-1" };
        let mut args = vec![
            "-url",
            url.as_str(),
            "-creds",
            creds.as_str(),
            "-max-reconnects",
            reconnects,
            "-reconnect-wait",
            "100ms",
        ];
        let push = probe
            .and_then(|p| p.arg("--consumer"))
            .map(|c| c.split_once('/').unwrap())
            .map(|(stream, durable)| push_consumer(stream, durable));
        let sub = match &push {
            Some(flags) => {
                args.extend(flags.iter().map(String::as_str));
                "consume"
            }
            None => "conn",
        };
        let mut full = vec![sub];
        full.extend(args);
        // natspeer under the application's process name (`--process` looks for it).
        let exe = crate::harness::peer::natspeer_named(&container.process);
        let mut peer = Peer::spawn_user(Some(&live.ns), &exe, &full, container.uid);
        peer.wait_for("ready", S10);
        live.apps.push((container.name.clone(), peer));
    }
    for inv in pod.invocations.iter().filter(|i| i.role == Role::Sidecar) {
        let container = live.container(&inv.container);
        let args: Vec<String> = inv.argv[1..]
            .iter()
            .map(|a| live.substitute(c, &container.mounts, a))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(String, String)> = inv
            .env
            .iter()
            .map(|(k, v)| (k.clone(), live.substitute(c, &container.mounts, v)))
            .collect();
        let mut peer = Peer::spawn_env(Some(&live.ns), &static_binary(), &args, inv.uid, &env);
        peer.wait_for("natsprobe serve: answering on", S10);
        live.sidecars.push(peer);
    }
    live
}

impl LivePod<'_> {
    /// An httpGet probe as the kubelet makes it, in the pod's namespace: the status and the
    /// body's first line, once the answer is `want` (the looks take up to `--every` to see a
    /// change), or the last answer after 25 s.
    fn get_until(&self, inv: &Invocation, want: u16) -> (u16, String) {
        let (port, path) = inv.http.clone().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(25);
        loop {
            let (port, path) = (port, path.clone());
            let got = self.ns.run(move || {
                use std::io::{Read, Write};
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                let request = format!("GET {path} HTTP/1.1\r\nHost: pod\r\nUser-Agent: kube-probe/1.31\r\nConnection: close\r\n\r\n");
                s.write_all(request.as_bytes()).unwrap();
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
                let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
                (status, body.lines().next().unwrap_or_default().to_string())
            });
            if got.0 == want || std::time::Instant::now() >= deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Every natsprobe command of every example pod, run as its manifest says: healthy while the
/// applications hold their connections (initContainers first: the installed copy is the one
/// the probe then runs), and, for each livenessProbe, unhealthy once its application gave up
/// reconnecting while NATS answers, though a sidecar in the same pod is connected.
#[test]
fn every_natsprobe_command_in_the_examples_runs() {
    let mut c = cluster();
    let all = pods();
    let runnable: Vec<&Pod> = all
        .iter()
        .filter(|p| {
            // The guard's CronJob has a test of its own (its interval is a minute).
            !p.invocations
                .iter()
                .any(|i| i.argv.get(1).is_some_and(|a| a == "guard"))
        })
        .collect();
    let live: Vec<LivePod> = runnable
        .iter()
        .enumerate()
        .map(|(i, pod)| start_pod(&c, pod, 150 + i as u8))
        .collect();
    let mut ran = 0;
    for pod in &live {
        for inv in pod.pod.invocations.iter().filter(|i| i.role == Role::Init) {
            let run = pod.run(&c, inv);
            println!("example | {} {} | {}", inv.file, inv.container, run.line());
            run.expect(0);
            ran += 1;
        }
        for inv in pod.pod.invocations.iter().filter(|i| i.http.is_some()) {
            let (status, line) = pod.get_until(inv, 200);
            println!(
                "example | {} {} httpGet {} healthy | {status} {line}",
                inv.file,
                inv.container,
                inv.http.as_ref().unwrap().1
            );
            assert_eq!(status, 200, "{line}");
            assert!(line.starts_with("healthy: "), "{line}");
            ran += 1;
        }
        for inv in pod
            .pod
            .invocations
            .iter()
            .filter(|i| !matches!(i.role, Role::Init | Role::Sidecar) && i.http.is_none())
        {
            let run = pod.run(&c, inv);
            println!(
                "example | {} {} healthy | {}",
                inv.file,
                inv.container,
                run.line()
            );
            run.expect(0).says(&["healthy: "]);
            ran += 1;
        }
    }
    // The incident: NATS away for longer than the watched clients' budget, then back.
    c.server.stop();
    let mut live = live;
    for pod in &mut live {
        let watched: Vec<String> = pod
            .pod
            .invocations
            .iter()
            .filter(|i| i.role == Role::Liveness)
            .map(|i| i.container.clone())
            .collect();
        for (container, peer) in &mut pod.apps {
            if watched.contains(container) {
                peer.wait_for("closed", S10);
            }
        }
    }
    c.server.resume();
    for pod in &mut live {
        // The others (sidecars) reconnect by themselves.
        for (container, peer) in &mut pod.apps {
            let watched = pod
                .pod
                .invocations
                .iter()
                .any(|i| i.role == Role::Liveness && &i.container == container);
            if !watched {
                peer.wait_for("reconnected", S10);
            }
        }
        for inv in pod
            .pod
            .invocations
            .iter()
            .filter(|i| i.role == Role::Liveness)
        {
            if let Some((_, path)) = &inv.http {
                if let Some(code) = inv.arg("--exit-unhealthy") {
                    // Restart in place: serve exits with the code its rules name once its
                    // looks in a row judged the app unhealthy (its /selfz meanwhile is
                    // serve.rs's to test).
                    if path != "/selfz" {
                        let exited = pod
                            .sidecars
                            .pop()
                            .unwrap()
                            .wait_exit(Duration::from_secs(60));
                        println!(
                            "example | {} {} gave up | serve exited {exited}",
                            inv.file, inv.container
                        );
                        assert_eq!(exited.code(), Some(code.parse().unwrap()));
                        ran += 1;
                    }
                    continue;
                }
                let self_probe = path == "/selfz";
                let (status, line) = pod.get_until(inv, if self_probe { 200 } else { 503 });
                println!(
                    "example | {} {} httpGet {path} gave up | {status} {line}",
                    inv.file, inv.container
                );
                if self_probe {
                    assert_eq!(status, 200, "{line}");
                } else {
                    assert_eq!(status, 503, "{line}");
                    assert!(
                        line.starts_with("unhealthy: client holds no connection while nats://")
                            && line.contains("answers (nats-server 2.10.26)"),
                        "{line}"
                    );
                }
                ran += 1;
                continue;
            }
            let run = pod.run(&c, inv);
            println!(
                "example | {} {} gave up | {}",
                inv.file,
                inv.container,
                run.line()
            );
            run.expect(1).says(&[
                "unhealthy: client holds no connection while nats://",
                "answers (nats-server 2.10.26)",
            ]);
            ran += 1;
            // Why --process: a sidecar's live connection in the same pod masks the dead
            // client from a socket-only probe.
            if pod.apps.len() > 1 && inv.arg("--process").is_some() {
                let mut without = inv.clone();
                let i = without.argv.iter().position(|a| a == "--process").unwrap();
                without.argv.drain(i..i + 2);
                let masked = pod.run(&c, &without);
                println!(
                    "example | {} without --process | {}",
                    inv.file,
                    masked.line()
                );
                masked.expect(0).says(&["healthy: 1 ESTABLISHED"]);
            }
        }
    }
    assert!(ran >= 11, "{ran} commands run");
}

/// The guard CronJob's command, as written (a minute between its looks), against the same
/// durables with their applications running (the push consumers' subscribers): all healthy,
/// the ignored one listed as ignored; run as the CronJob's user.
#[test]
fn the_guard_cronjob_runs_as_written() {
    let c = cluster();
    let all = pods();
    let pod = all
        .iter()
        .find(|p| {
            p.invocations
                .iter()
                .any(|i| i.argv.get(1).is_some_and(|a| a == "guard"))
        })
        .expect("an example runs natsprobe guard");
    let live = start_pod(&c, pod, 170);
    let creds = c.op.creds.to_string_lossy().to_string();
    let _apps: Vec<Peer> = [("TF_RAW", "latest-kv"), ("ORDERS", "worker")]
        .into_iter()
        .map(|(stream, durable)| {
            let push = push_consumer(stream, durable);
            let mut args = vec!["consume", "-url", "nats://127.0.0.1:4222", "-creds", &creds];
            args.extend(push.iter().map(String::as_str));
            let mut p = Peer::spawn(Some(&c.nats), &args);
            p.wait_for("ready", S10);
            p
        })
        .collect();
    let inv = &pod.invocations[0];
    assert_eq!(inv.uid, Some(65532), "the CronJob runs as non-root");
    let run = live.run(&c, inv);
    println!("example | {} | {}", inv.file, run.stdout);
    run.expect(0);
    // The table's rows: STREAM DURABLE ... VERDICT REASON.
    let verdict = |stream: &str, durable: &str| -> String {
        run.stdout
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.len() > 8 && w[0] == stream && w[1] == durable)
            .map(|w| w[8].to_string())
            .unwrap_or_else(|| panic!("{stream}/{durable} not listed\n{run}"))
    };
    for (stream, durable) in [
        ("TF_RAW", "latest-kv"),
        ("TF_RAW", "alarms"),
        ("TF_RAW", "entity-greptimedb"),
        ("ALARMS", "alarm-materializer"),
        ("ORDERS", "worker"),
    ] {
        assert_eq!(
            verdict(stream, durable),
            "healthy",
            "{stream}/{durable}\n{run}"
        );
    }
    assert_eq!(verdict("TF_RAW", "questdb"), "ignored", "{run}");
}
