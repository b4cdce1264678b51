//! `diagnose`: the check, explained. The same observations and rules as `check` (so the same
//! verdict and exit code), plus what a person needs and the probe does not: who holds each
//! socket, and every server's answer even while the client is connected; then what to do.

use super::check;
use crate::config::CheckConfig;
use crate::error::Error;
use crate::observe::{self, server};
use crate::report::diagnose::DiagnoseReport;
use crate::rules::advice;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Kept back from the deadline for the report.
const RESERVE: Duration = natsprobe_core::timing::AFTER_THE_NETWORK.at_least;

/// `config` is the check's, with every socket listed (the caller sets `verbose`).
pub fn run(config: &CheckConfig, deadline: Instant) -> Result<DiagnoseReport, Error> {
    // Every socket is listed: the table is walked.
    let mut checked = check::judge(config, deadline, true)?;
    // The check asks the servers only without a connection; a person wants to know anyway.
    let asked_for_diagnose =
        checked.ended.observations.servers.is_empty() && !config.servers.is_empty();
    if asked_for_diagnose {
        let network_deadline = server::network_deadline(deadline, RESERVE);
        checked.ended.observations.servers = observe::servers(&config.servers, network_deadline)?;
    }
    let c = &checked.ended.connections;
    let inodes: HashSet<u64> = c
        .established
        .iter()
        .chain(&c.others)
        .map(|s| s.inode)
        .filter(|&i| i != 0)
        .collect();
    let holders = observe::sockets::owner::owners(&inodes);
    let advice = advice::advise(
        &checked.ended.verdict,
        c,
        &config.core.connection,
        &checked.ended.consumers,
        &checked.ended.subscriptions,
    );
    Ok(crate::report::diagnose::diagnose(
        &checked.input(config),
        &holders,
        asked_for_diagnose,
        &advice,
        crate::cli::VERSION,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::check::tests::parse;
    use std::net::TcpListener;

    /// `diagnose` asks every server even while the client holds its connection (the check
    /// does not), and names each socket's holder: here a shell's connection to a listener
    /// that never answers as NATS.
    #[test]
    fn diagnose_asks_the_servers_while_connected_and_names_holders() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let mut client = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("exec 3<>/dev/tcp/{}/{}; sleep 10", at.ip(), at.port()),
            ])
            .spawn()
            .unwrap();
        let _accepted = listener.accept().unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut config = parse(&[
            "natsprobe",
            "--port",
            &at.port().to_string(),
            "--server",
            &format!("nats://{at}"),
            "--state-dir",
            &state.path().to_string_lossy(),
            "--timeout",
            "300ms",
        ])
        .unwrap();
        config.verbose = true;
        let deadline = Instant::now() + Duration::from_secs(2);
        let report = run(&config, deadline).unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["verdict"], "healthy");
        assert_eq!(json["server"]["asked"], true, "{json}");
        assert_eq!(json["server"]["answers"][0]["answer"], "silent", "{json}");
        let sockets = json["connection"]["sockets"].as_array().unwrap();
        assert!(
            sockets.iter().any(|s| s["holder"]["pid"] == client.id()),
            "{json}"
        );
        let text = report.render(false);
        assert!(text.contains("asked for this report"), "{text}");
        let _ = client.kill();
        let _ = client.wait();
    }
}
