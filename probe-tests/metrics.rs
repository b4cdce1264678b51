//! `serve`'s `/metrics` and the alert rules, against the real things: a real Prometheus (the
//! Debian package's) scraping the sidecar in the app pod's namespace every second, through a
//! NATS outage and a client that gave up; `promtool check metrics` on the page; the rules'
//! own tests (`promtool test rules`), which hold every query of the dashboard; each alert's
//! runbook in the docs; the Alertmanager inhibitions against alerts that fire together; the
//! Prometheus Operator's manifests against its resource schemas.

use crate::examples::documents;
use crate::harness::pods::*;
use crate::harness::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// serve's port, and the app pod's address as the NATS pod's namespace reaches it.
const PORT: u16 = 8281;
const APP: &str = "10.200.0.2";
/// Prometheus's own address, in the NATS pod's namespace.
const PROMETHEUS: (&str, u16) = ("127.0.0.1", 9090);

fn prometheus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus")
}

/// One GET to `addr` from `ns`, with `accept`: (status, head, body).
fn get(ns: &NetNs, addr: (&str, u16), target: &str, accept: &str) -> (u16, String, String) {
    let (host, port) = (addr.0.to_string(), addr.1);
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    ns.run(move || {
        let Ok(mut s) = std::net::TcpStream::connect((host.as_str(), port)) else {
            return (0, String::new(), String::new());
        };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(request.as_bytes());
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), body.to_string())
    })
}

fn encode(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query to the Prometheus in `ns`: each series' labels (as JSON) and value.
fn query(ns: &NetNs, promql: &str) -> Vec<(Value, f64)> {
    let target = format!("/api/v1/query?query={}", encode(promql));
    let (status, _, body) = get(ns, PROMETHEUS, &target, "application/json");
    if status != 200 {
        return vec![];
    }
    let v: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    v["data"]["result"]
        .as_array()
        .map(|series| {
            series
                .iter()
                .map(|s| {
                    let value = s["value"][1].as_str().unwrap_or("NaN").parse().unwrap();
                    (s["metric"].clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The one value of `promql`, if it has exactly one series.
fn value(ns: &NetNs, promql: &str) -> Option<f64> {
    match query(ns, promql).as_slice() {
        [(_, v)] => Some(*v),
        _ => None,
    }
}

/// A real Prometheus scraping serve every second sees the verdict serve's `/livez` answers:
/// healthy while the client holds its connection, not judged while NATS is down, unhealthy
/// within seconds of NATS answering again to a client that gave up; its alert rules load and
/// evaluate. The page passes `promtool check metrics`, in both formats Prometheus reads.
#[test]
fn prometheus_sees_the_verdict_flip_when_the_client_gives_up() {
    let mut pods = Pods::new(Version::Pinned);
    pods.setup(&["-stream", "S", "-subjects", "s.>", "-durable", "P"]);
    let mut client = Peer::conn(Some(&pods.app), &pods.url, 3, "200ms");
    let state = tempfile::tempdir().unwrap();
    let mut all = vec!["serve"];
    let url = pods.url.clone();
    all.extend_from_slice(&[
        "--server",
        &url,
        "--consumer",
        "S/P",
        "--every",
        "1s",
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    let mut sidecar = Peer::spawn_as(Some(&pods.app), &probe::binary(), &all);
    sidecar.wait_for("natsprobe serve: answering on", Duration::from_secs(5));

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}}\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n  - job_name: natsprobe\n    static_configs:\n      \
             - targets: ['{APP}:{PORT}']\n        labels: {{namespace: orders, pod: app}}\n",
            rules = prometheus_dir().join("natsprobe-rules.yaml").display()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let args = [
        format!("--config.file={}", config.display()),
        format!("--storage.tsdb.path={}", data.display()),
        format!("--web.listen-address={}:{}", PROMETHEUS.0, PROMETHEUS.1),
        "--log.level=warn".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let prometheus = Peer::spawn_as(Some(&pods.nats), Path::new("/usr/bin/prometheus"), &args);
    wait_until("Prometheus is ready", Duration::from_secs(30), || {
        get(&pods.nats, PROMETHEUS, "/-/ready", "*/*").0 == 200
    });

    // Healthy while the client holds its connection; the scrape (OpenMetrics, which
    // Prometheus asks for first) parses, and the series carry only the configuration's labels.
    wait_until("Prometheus sees healthy", Duration::from_secs(20), || {
        value(&pods.nats, r#"natsprobe_verdict{verdict="healthy"}"#) == Some(1.0)
    });
    assert_eq!(value(&pods.nats, r#"up{job="natsprobe"}"#), Some(1.0));
    assert_eq!(
        value(&pods.nats, r#"sum(natsprobe_verdict)"#),
        Some(1.0),
        "one verdict at a time"
    );
    let state = || {
        let (_, _, json) = get(&pods.app, ("127.0.0.1", PORT), "/livez?format=json", "*/*");
        let now = query(&pods.nats, "natsprobe_consumer_state == 1");
        format!("{now:?} {json}")
    };
    let idle = r#"natsprobe_consumer_state{stream="S",durable="P",state="idle"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    while value(&pods.nats, idle) != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "the consumer is not idle: {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let build = query(&pods.nats, "natsprobe_build_info");
    assert_eq!(build.len(), 1, "{build:?}");
    assert_eq!(
        build[0].0["version"],
        env!("CARGO_PKG_VERSION"),
        "{build:?}"
    );
    assert!(
        build[0].0["revision"]
            .as_str()
            .is_some_and(|r| !r.is_empty() && !r.contains(' ')),
        "{build:?}"
    );
    let judged = query(&pods.nats, r#"natsprobe_looks_total{verdict="healthy"}"#);
    assert!(judged.first().is_some_and(|(_, v)| *v >= 1.0), "{judged:?}");
    let (status, head, page) = get(&pods.app, ("127.0.0.1", PORT), "/metrics", "text/plain");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    promtool_check_metrics(&page);
    let (_, head, open) = get(
        &pods.app,
        ("127.0.0.1", PORT),
        "/metrics",
        "application/openmetrics-text;version=1.0.0",
    );
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(open.ends_with("# EOF\n"), "{open}");

    // NATS down, the client gives up: not judged (a restart would not help), by its cause.
    pods.server.stop();
    client.wait_for("closed", Duration::from_secs(10));
    wait_until(
        "Prometheus sees not judged",
        Duration::from_secs(15),
        || value(&pods.nats, r#"natsprobe_verdict{verdict="not_judged"}"#) == Some(1.0),
    );
    let down = value(
        &pods.nats,
        r#"natsprobe_looks_not_judged_total{cause="server_down"}"#,
    );
    assert!(down.is_some_and(|d| d >= 1.0), "{down:?}");

    // NATS answers again; the client gave up for good: unhealthy within seconds.
    pods.server.resume();
    let back = Instant::now();
    wait_until("Prometheus sees unhealthy", Duration::from_secs(20), || {
        value(&pods.nats, r#"natsprobe_verdict{verdict="unhealthy"}"#) == Some(1.0)
    });
    let seen = back.elapsed();
    println!("metrics | Prometheus saw unhealthy {seen:?} after NATS answered again");
    assert!(seen < Duration::from_secs(10), "{seen:?}");
    assert_eq!(
        value(
            &pods.nats,
            r#"natsprobe_consumer_state{stream="S",durable="P",state="not_judged"}"#
        ),
        Some(1.0),
        "without a connection the consumer is not asked"
    );
    // The rule for a pod that stays unhealthy evaluates on the real series: pending once
    // unhealthy is most of what Prometheus has seen of it.
    wait_until(
        "the alert for a pod that stays unhealthy is pending",
        Duration::from_secs(60),
        || {
            value(
                &pods.nats,
                r#"ALERTS{alertname="NatsprobeAppStaysUnhealthy",alertstate="pending",pod="app"}"#,
            ) == Some(1.0)
        },
    );
    drop(prometheus);
    drop(sidecar);
}

/// `command` run with `input` on its stdin, to its end (probe-tests/setup installs what the
/// tests run so).
fn fed(command: &mut Command, input: &str) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} (probe-tests/setup installs it): {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` on a page: clean (nothing said, exit 0).
fn promtool_check_metrics(page: &str) {
    let out = fed(Command::new("promtool").args(["check", "metrics"]), page);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics:\n{}{}\n{page}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rules load (`promtool check rules`) and pass their tests (`promtool test rules`): each
/// alert fires when it should and stays quiet when it should.
#[test]
fn the_alert_rules_pass_their_tests() {
    let dir = prometheus_dir();
    for args in [
        ["check", "rules", "natsprobe-rules.yaml"],
        ["test", "rules", "natsprobe-rules.test.yaml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("promtool (probe-tests/setup installs it)");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every alert the rules name is tested.
    let rules = std::fs::read_to_string(dir.join("natsprobe-rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("natsprobe-rules.test.yaml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 5, "{alerts:?}");
    for alert in alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "{alert} has no test"
        );
    }
}

/// Where the rules send an operator: `runbook_url`s stand for the repository's files at
/// `natsprobe.example` (natsprobe-rules.yaml's header says so).
const RUNBOOKS: &str = "https://natsprobe.example/";

/// The rule file's alerts, each rule as written.
fn alert_rules() -> Vec<Value> {
    let rules = documents(&prometheus_dir().join("natsprobe-rules.yaml"));
    let all: Vec<Value> = rules[0]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .filter(|r| r.get("alert").is_some())
        .collect();
    assert!(all.len() >= 10, "{all:?}");
    all
}

/// A heading's anchor, as GitHub makes it (src/docs.rs's rule).
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alert has a `runbook_url` naming a section of a document of this repository, its own:
/// a heading whose section says what to do before the next heading.
#[test]
fn every_alert_has_a_runbook_in_the_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = Vec::new();
    for rule in alert_rules() {
        let alert = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let (file, anchor) = url
            .strip_prefix(RUNBOOKS)
            .and_then(|rest| rest.split_once('#'))
            .unwrap_or_else(|| panic!("{alert}: {url} is not {RUNBOOKS}FILE#SECTION"));
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{alert}: {url} names no file of the repository: {e}"));
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with('#') && slug(l.trim_start_matches('#')) == anchor)
            .unwrap_or_else(|| panic!("{alert}: {url} names no heading of {file}"));
        let section: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|l| !l.starts_with('#'))
            .filter(|l| !l.trim().is_empty())
            .copied()
            .collect();
        assert!(
            section.len() >= 2 && lines[at].contains(alert),
            "{alert}: {file}'s section {} says too little",
            lines[at]
        );
        assert!(!seen.contains(&url.to_string()), "{url} twice");
        seen.push(url.to_string());
    }
}

/// The rules' tests, as written.
fn rule_tests() -> Value {
    documents(&prometheus_dir().join("natsprobe-rules.test.yaml")).remove(0)
}

/// Each query of the dashboard (its namespace variable as "All": `.*`) is a `promql_expr_test`
/// of the rules' tests, which run it on the series the alerts are tested on: a renamed metric
/// or label fails there. So is the join of docs/serve.md. The panels ask the dashboard's
/// Prometheus, chosen on import.
#[test]
fn the_dashboards_queries_are_tested() {
    let dir = prometheus_dir();
    let text = std::fs::read_to_string(dir.join("natsprobe-dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let flat = |q: &str| q.split_whitespace().collect::<Vec<_>>().join(" ");
    let tested: Vec<String> = rule_tests()["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["promql_expr_test"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|e| flat(e["expr"].as_str().unwrap()))
        .collect();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    let nested: Vec<&Value> = panels
        .iter()
        .flat_map(|p| p["panels"].as_array().into_iter().flatten())
        .collect();
    panels.extend(nested);
    let mut queries = 0;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title} has no query");
        for target in targets {
            for source in [&panel["datasource"], &target["datasource"]] {
                assert_eq!(source["uid"], "${datasource}", "{title}");
            }
            let expr = target["expr"].as_str().unwrap();
            let all = flat(&expr.replace("$namespace", ".*"));
            assert!(
                !all.contains('$'),
                "{title}: a variable the tests do not set: {expr}"
            );
            assert!(
                tested.contains(&all),
                "{title}: no promql_expr_test in natsprobe-rules.test.yaml holds {all}"
            );
            queries += 1;
        }
    }
    assert!(queries >= 9, "{queries} queries");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let namespace = variables.iter().find(|v| v["name"] == "namespace").unwrap();
    assert_eq!(namespace["allValue"], ".*");

    // docs/serve.md's join of the consumers' and the subscriptions' series.
    let serve = include_str!("../docs/serve.md");
    let join = serve
        .split("```")
        .find(|block| block.contains("natsprobe_subscription_state{") && block.contains(" on ("))
        .expect("docs/serve.md's join");
    assert!(tested.contains(&flat(join)), "not tested: {join}");
}

/// Each of alertmanager-inhibit.yaml's inhibitions names alerts of the rules, and a case of the
/// rules' tests where both fire at once with the labels it compares equal (a label neither
/// has is equal, as Alertmanager compares it): the inhibition would silence the target.
#[test]
fn the_inhibitions_silence_alerts_that_fire_together() {
    let config = documents(&prometheus_dir().join("alertmanager-inhibit.yaml")).remove(0);
    let alerts: Vec<String> = alert_rules()
        .iter()
        .map(|r| r["alert"].as_str().unwrap().to_string())
        .collect();
    let grouped = strings_of(&config["route"]["group_by"]);
    assert!(grouped.iter().any(|l| l == "namespace"), "{grouped:?}");
    let named = |matchers: &Value| -> String {
        let all = strings_of(matchers);
        assert_eq!(all.len(), 1, "{all:?}");
        let name = all[0]
            .strip_prefix("alertname=\"")
            .and_then(|n| n.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{all:?}"));
        assert!(alerts.iter().any(|a| a == name), "no alert {name}");
        name.to_string()
    };
    // Every (test, eval_time, alertname) the tests expect firing, with the alerts' labels.
    let mut fired: Vec<(usize, String, String, Vec<Value>)> = Vec::new();
    for (i, test) in rule_tests()["tests"].as_array().unwrap().iter().enumerate() {
        for case in test["alert_rule_test"].as_array().into_iter().flatten() {
            let labels: Vec<Value> = case["exp_alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| a["exp_labels"].clone())
                .collect();
            fired.push((
                i,
                case["eval_time"].as_str().unwrap().to_string(),
                case["alertname"].as_str().unwrap().to_string(),
                labels,
            ));
        }
    }
    let rules = config["inhibit_rules"].as_array().unwrap();
    assert!(rules.len() >= 2, "{rules:?}");
    for rule in rules {
        let (source, target) = (
            named(&rule["source_matchers"]),
            named(&rule["target_matchers"]),
        );
        let equal = strings_of(&rule["equal"]);
        assert!(equal.iter().any(|l| l == "namespace"), "{equal:?}");
        let same = |a: &Value, b: &Value| equal.iter().all(|l| a[l] == b[l]);
        let together = fired.iter().any(|(i, at, name, sources)| {
            *name == source
                && fired.iter().any(|(j, then, other, targets)| {
                    i == j
                        && at == then
                        && *other == target
                        && sources.iter().any(|s| targets.iter().any(|t| same(s, t)))
                })
        });
        assert!(
            together,
            "no case of natsprobe-rules.test.yaml has {source} and {target} firing with {equal:?} equal"
        );
    }
}

fn strings_of(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The PodMonitor and the PrometheusRule validate against the Prometheus Operator's schemas;
/// the PrometheusRule holds exactly the rule file's groups; the PodMonitor's selector and
/// port are those of every example pod that runs `serve`.
#[test]
fn the_prometheus_operator_manifests_validate() {
    let dir = prometheus_dir();
    let models = deps_dir().join("kubernetes-models/node_modules");
    assert!(
        models
            .join("@kubernetes-models/prometheus-operator")
            .is_dir(),
        "@kubernetes-models/prometheus-operator is missing: run probe-tests/setup"
    );
    let script = r#"
import { readFileSync } from 'node:fs';
import { PodMonitor, PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
const kinds = { PodMonitor, PrometheusRule };
for (const doc of JSON.parse(readFileSync(0, 'utf8'))) {
  new kinds[doc.kind](doc).validate();
  console.log(`valid: ${doc.kind}/${doc.metadata.name}`);
}
"#;
    let mut docs = documents(&dir.join("pod-monitor.yaml"));
    docs.extend(documents(&dir.join("prometheus-rule.yaml")));
    let script_path = models.join("validate-examples.mjs");
    std::fs::write(&script_path, script).unwrap();
    let validate = |docs: &[Value]| {
        fed(
            Command::new("node").arg(&script_path),
            &serde_json::to_string(docs).unwrap(),
        )
    };
    let out = validate(&docs);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.matches("valid: ").count() == 2,
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The schemas check what a wrong field would break: a rule without its expression fails.
    let mut broken = docs[1].clone();
    broken["spec"]["groups"][0]["rules"][0]
        .as_object_mut()
        .unwrap()
        .remove("expr");
    assert!(
        !validate(&[broken]).status.success(),
        "a rule without expr passed"
    );

    let rules = documents(&dir.join("natsprobe-rules.yaml"));
    assert_eq!(
        docs[1]["spec"]["groups"], rules[0]["groups"],
        "prometheus-rule.yaml's groups are natsprobe-rules.yaml's"
    );
    // The PodMonitor names its series' job as the rules read it (the Operator's own would be
    // its namespace/name).
    let job = docs[0]["spec"]["podMetricsEndpoints"][0]["relabelings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["targetLabel"] == "job")
        .and_then(|r| r["replacement"].as_str())
        .expect("the PodMonitor names no job");
    let read = std::fs::read_to_string(dir.join("natsprobe-rules.yaml")).unwrap();
    assert!(
        read.contains(&format!("up{{job=\"{job}\"}}")),
        "the rules read no up{{job={job}}}"
    );
    let selector = docs[0]["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
        .clone();
    let port = docs[0]["spec"]["podMetricsEndpoints"][0]["port"].clone();
    let mut serving = 0;
    for entry in
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kubernetes"))
            .unwrap()
    {
        let file = entry.unwrap().path();
        for doc in documents(&file) {
            let template = &doc["spec"]["template"];
            let containers = template["spec"]["initContainers"]
                .as_array()
                .into_iter()
                .chain(template["spec"]["containers"].as_array())
                .flatten();
            for c in containers {
                let argv: Vec<&str> = c["command"]
                    .as_array()
                    .into_iter()
                    .chain(c["args"].as_array())
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if argv.get(1) != Some(&"serve") {
                    continue;
                }
                serving += 1;
                for (k, v) in &selector {
                    assert_eq!(
                        &template["metadata"]["labels"][k],
                        v,
                        "{}: the pod running serve lacks the PodMonitor's label {k}",
                        file.display()
                    );
                }
                let ports = c["ports"].as_array().cloned().unwrap_or_default();
                assert!(
                    ports.iter().any(|p| p["name"] == port),
                    "{}: serve's container names no port {port}",
                    file.display()
                );
            }
        }
    }
    assert!(serving >= 2, "the examples running serve: {serving}");
}
