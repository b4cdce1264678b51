//! The NATS permissions each command needs (docs/permissions.md lists the same blocks): a user
//! given exactly a block runs the command and it judges; with any one line of the block
//! taken away, the command says which permission it lacks (never a verdict on the pod).

use crate::harness::pods::*;
use crate::harness::*;

/// What the probe's user may publish and subscribe to, as a server configuration's
/// `permissions` (the lines of docs/permissions.md, one subject each).
struct Block {
    publish: &'static [&'static str],
    subscribe: &'static [&'static str],
}

/// `check --consumer S/D` (and `diagnose`).
const CONSUMER: Block = Block {
    publish: &["$JS.API.CONSUMER.INFO.S.D", "$JS.API.STREAM.INFO.S"],
    subscribe: &["_INBOX.>"],
};

/// `check --consumer S/D --own-subscription` (and `--subscription`).
const OWN_SUBSCRIPTION: Block = Block {
    publish: &[
        "$JS.API.CONSUMER.INFO.S.D",
        "$JS.API.STREAM.INFO.S",
        "$SYS.REQ.ACCOUNT.PING.CONNZ",
        "$SYS.REQ.ACCOUNT.PING.STATZ",
    ],
    subscribe: &["_INBOX.>"],
};

/// `guard`.
const GUARD: Block = Block {
    publish: &[
        "$JS.API.STREAM.NAMES",
        "$JS.API.CONSUMER.LIST.*",
        "$JS.API.CONSUMER.INFO.*.*",
        "$JS.API.STREAM.INFO.*",
    ],
    subscribe: &[
        "_INBOX.>",
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>",
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>",
    ],
};

/// Lines a command works without, and what it then does not judge: the stream's info (asked
/// only where work waits: without it, retention's deletions are not told apart), the servers
/// holding the account's connections (without it, the reports are waited for until a quiet
/// moment, and a slow server's silence leaves the pod not judged more often), and the guard's
/// consumer info (asked only for an `--expect`ed durable the listings do not name).
const OPTIONAL: [&str; 4] = [
    "$JS.API.STREAM.INFO.S",
    "$JS.API.STREAM.INFO.*",
    "$SYS.REQ.ACCOUNT.PING.STATZ",
    "$JS.API.CONSUMER.INFO.*.*",
];

/// A server where `admin` may do anything and `probe` exactly `block`, less `without`.
fn server(block: &Block, without: Option<&str>) -> Pods {
    // An empty allow list allows everything: nothing is a deny of everything.
    let list = |subjects: &[&str]| {
        let kept: Vec<String> = subjects
            .iter()
            .filter(|s| Some(**s) != without)
            .map(|s| format!("\"{s}\""))
            .collect();
        match kept.is_empty() {
            true => "deny: [\">\"]".to_string(),
            false => format!("allow: [{}]", kept.join(", ")),
        }
    };
    Pods::with_config(
        &format!(
            r#"authorization {{
  users = [
    {{ user: admin, password: admin-pw }}
    {{ user: probe, password: probe-pw, permissions: {{
        publish: {{ {} }}
        subscribe: {{ {} }} }} }}
  ]
}}
"#,
            list(block.publish),
            list(block.subscribe)
        ),
        &["-user", "admin", "-password", "admin-pw"],
    )
}

const PROBE: [&str; 4] = ["--user", "probe", "--password", "probe-pw"];

fn check_block(block: &Block, extra: &[&str]) {
    let lines = block.publish.iter().chain(block.subscribe);
    for without in std::iter::once(None).chain(lines.map(|l| Some(*l))) {
        if without.is_some_and(|w| OPTIONAL.contains(&w)) {
            continue;
        }
        let pods = server(block, without);
        pods.push("S", "D", &[]);
        let _consumer = pods.consume("S", "D", &[]);
        let run = pods.check(&["S/D"], &[&PROBE[..], extra, &["--json"]].concat());
        run.expect(0);
        let json = run.json();
        let standings: Vec<&serde_json::Value> = json["consumers"]
            .as_array()
            .into_iter()
            .chain(json["subscriptions"].as_array())
            .flatten()
            .collect();
        match without {
            None => {
                for s in &standings {
                    assert!(
                        s["cannot_judge"].is_null(),
                        "judged with the whole block: {run}"
                    );
                }
                println!("permissions | {extra:?}: the whole block judges");
            }
            Some(line) => {
                let cause = standings
                    .iter()
                    .find_map(|s| s["cannot_judge"]["cause"].as_str())
                    .unwrap_or_else(|| panic!("judged without {line}: {run}"));
                assert!(
                    ["not_permitted", "inbox_denied"].contains(&cause),
                    "without {line}: {cause}\n{run}"
                );
                let said = run.stdout.contains(line.trim_end_matches(".>"))
                    || line == "_INBOX.>" && run.stdout.contains("_INBOX.");
                assert!(said, "without {line}, not named:\n{run}");
                println!("permissions | {extra:?} without {line}: {cause}");
            }
        }
    }
}

#[test]
fn check_consumer_needs_its_block_and_says_which_line_is_missing() {
    check_block(&CONSUMER, &[]);
}

#[test]
fn check_own_subscription_needs_its_block_and_says_which_line_is_missing() {
    check_block(&OWN_SUBSCRIPTION, &["--own-subscription"]);
}

#[test]
fn guard_needs_its_block_and_says_which_line_is_missing() {
    let lines = GUARD.publish.iter().chain(GUARD.subscribe);
    for without in std::iter::once(None).chain(lines.map(|l| Some(*l))) {
        if without.is_some_and(|w| OPTIONAL.contains(&w)) {
            continue;
        }
        let pods = server(&GUARD, without);
        pods.push("S", "D", &[]);
        let _consumer = pods.consume("S", "D", &[]);
        let run = probe(
            &[
                &["guard", "--server", &pods.url, "--interval", "1s"][..],
                &PROBE[..],
            ]
            .concat(),
        )
        .ns(&pods.app)
        .run();
        match without {
            None => {
                run.expect(0);
                println!(
                    "permissions | guard: the whole block judges: {}",
                    run.line()
                );
            }
            Some(line) => {
                let all = format!("{}{}", run.stdout, run.stderr);
                assert!(
                    all.contains(line.trim_end_matches(".>").trim_end_matches(".*")),
                    "guard without {line}, not named:\n{run}"
                );
                assert!(run.code != Some(1), "a fault called without {line}:\n{run}");
                println!("permissions | guard without {line}: exit {:?}", run.code);
            }
        }
    }
}
