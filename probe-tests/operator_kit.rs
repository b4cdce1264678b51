//! The operator's kit: `diagnose` (what a person reads through `kubectl exec`) and `install`
//! (the initContainer copy), against real NATS and real nats.go clients.

use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

/// Lines of a run's stdout.
fn text(run: &Run) -> &str {
    run.stdout.trim_end()
}

#[track_caller]
fn shows(run: &Run, fragments: &[&str]) {
    for f in fragments {
        assert!(text(run).contains(f), "diagnose lacks `{f}`\n{run}");
    }
}

/// A healthy pod: every socket with its holder and traffic, the server's answer (asked for
/// the report though the check would not), the consumer's facts, "nothing to do", and the
/// check's exit code.
#[test]
fn diagnose_explains_a_healthy_pod() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let consumer = pods.consume("S", "D", &[]);
    pods.publish_n("s.x", 20);
    let check = pods.check(&["S/D"], &[]);
    let run = pods.diagnose(&["S/D"], &[]);
    show("diagnose, healthy pod", &run);
    assert_eq!(run.code, check.code, "diagnose exits as check does\n{run}");
    run.expect(0);
    shows(
        &run,
        &[
            "natsprobe diagnose, version ",
            "Sockets to remote port 4222 (reader: netlink; this network namespace)",
            &format!("natspeer[{}], uid 0", consumer.pid()),
            "unacked ",
            "last ACK ",
            "1 live ESTABLISHED connection (1 required)",
            "answers (nats-server 2.10.26)",
            "(asked for this report: check asks only when the client holds no connection)",
            "Consumers\n  asked in the server's own JetStream ($JS.API; no --js-domain given)\n  S/D\n    push to deliver.D, queue group D, bound",
            "ack policy explicit, ack_wait 1s, max_ack_pending 1",
            "Verdict: healthy (exit 0, as `check` would)",
            "What to do\n  - Nothing: the client holds its connection and every check passed.",
        ],
    );
    // Piped: no colour.
    assert!(!run.stdout.contains('\x1b'), "{run}");
    let json = pods.diagnose(&["S/D"], &["--json"]).json();
    assert_eq!(json["command"], "diagnose");
    assert_eq!(json["advice"][0]["kind"], "nothing");
    let socket = &json["connection"]["sockets"][0];
    assert_eq!(socket["holder"]["pid"], consumer.pid());
    assert!(socket["tcp"]["rto_ms"].as_u64().unwrap() > 0, "{json}");
}

/// Right after a calm probe run on the same state dir (which the next probe runs would go
/// on from, asking nothing for `--sample-every`), diagnose still asks NATS and explains the
/// consumer, and says what a probe's run would do instead.
#[test]
fn diagnose_asks_nats_after_a_calm_probe_run() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let _consumer = pods.consume("S", "D", &[]);
    // Looks a window's 9/10 apart at most: the harness's 2s window and its usual spacing.
    let every = ["--sample-every", "1500ms"];
    pods.check(&["S/D"], &every).expect(0);
    let again = pods.check(&["S/D"], &[&every[..], &["-v"]].concat());
    assert!(again.stdout.contains("not asked this run: calm"), "{again}");
    let run = pods.diagnose(&["S/D"], &every);
    show("diagnose after a calm probe run", &run);
    run.expect(0);
    shows(
        &run,
        &[
            "asked by diagnose; a probe's run now would not ask: calm when asked ",
            "  S/D\n    push to deliver.D, queue group D, bound",
            "idle (nothing waiting)",
        ],
    );
}

/// The incident: the client gave up while NATS answers. diagnose says so, says what to do,
/// and exits 1 as the check does; a stalled consumer and a deaf replica get their advice too.
#[test]
fn diagnose_says_what_to_do() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    pods.publish_n("s.x", 50);
    // Bound, never acking: stalled after the window.
    let _consumer = pods.consume("S", "D", &["-ack", "never"]);
    // Checked as a kubelet would, until the window has passed with nothing acknowledged:
    // diagnose, run with the probe's arguments, goes on from what its runs kept.
    let runs = pods.check_through(&["S/D"], &["--own-subscription"], PAST_WINDOW);
    runs.last().unwrap().expect(1);
    let run = pods.diagnose(&["S/D"], &["--own-subscription"]);
    show("diagnose, stalled consumer", &run);
    run.expect(1);
    shows(
        &run,
        &[
            "no progress for",
            "Verdict: unhealthy (exit 1, as `check` would)",
            "  - S/D has work waiting and nothing is acknowledged: the application's handler is stuck",
            "    previous sample ",
            " ago: ack floor 0, 50 waiting, no progress for ",
            "Subscriptions\n  deliver.D in queue group D (consumer S/D): held (10.200.0.2:",
        ],
    );

    // The client gives up for good while NATS is down, and NATS comes back.
    let mut pods = pods;
    let mut quitter = Peer::spawn(
        Some(&pods.app),
        &pods.args(
            "conn",
            &["-max-reconnects", "2", "-reconnect-wait", "100ms"],
        ),
    );
    quitter.wait_for("ready", S10);
    drop(_consumer);
    pods.server.stop();
    quitter.wait_for("closed", S10);
    pods.server.resume();
    let check = pods.check(&[], &[]);
    let run = pods.diagnose(&[], &[]);
    show("diagnose, client gave up", &run);
    assert_eq!(run.code, check.code);
    run.expect(1);
    shows(
        &run,
        &[
            "0 live ESTABLISHED connections (1 required)",
            "answers (nats-server 2.10.26)",
            "Verdict: unhealthy (exit 1, as `check` would)",
            "  client holds no connection while nats://10.200.0.1:4222 answers",
            "  - The client gave up reconnecting while NATS answers (nats://10.200.0.1:4222): restart the pod",
            "nats.MaxReconnects(-1)",
        ],
    );
    let json = pods.diagnose(&[], &["--json"]).json();
    assert_eq!(json["advice"][0]["kind"], "client_gave_up", "{json}");

    // NATS down: restarting would not help, and diagnose says so (exit 0, as check).
    pods.server.stop();
    let run = pods.diagnose(&[], &[]);
    run.expect(0);
    shows(
        &run,
        &[
            "not answering: connection refused",
            "  - NATS does not answer at nats://10.200.0.1:4222: restarting this pod would not help.",
        ],
    );
}

/// Colour only for a person: on a terminal, never with NO_COLOR, never into a pipe.
#[test]
fn diagnose_colours_only_a_terminal() {
    let ns = NetNs::new();
    let on_tty = |env: Option<(&str, &str)>| -> String {
        let mut master = 0;
        let mut slave = 0;
        // SAFETY: openpty fills two descriptors we own from here on.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors are open and owned only by these Files.
        let (master, slave) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        let mut p = probe(&["diagnose", "--port", "4299"]).ns(&ns);
        if let Some((k, v)) = env {
            p = p.env(k, v);
        }
        let mut cmd = p.command();
        cmd.stdout(slave.try_clone().unwrap());
        let status = cmd.status().unwrap();
        assert_eq!(status.code(), Some(1));
        // The command keeps its copy of the terminal's other side until dropped.
        drop(cmd);
        drop(slave);
        let mut out = Vec::new();
        // Read until the terminal reports the other side closed (EIO).
        let _ = std::io::Read::read_to_end(&mut &master, &mut out);
        String::from_utf8_lossy(&out).to_string()
    };
    let coloured = on_tty(None);
    assert!(
        coloured.contains("\x1b[1;31munhealthy\x1b[0m"),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = on_tty(Some(("NO_COLOR", "1")));
    assert!(plain.contains("Verdict: unhealthy"), "{plain:?}");
    assert!(
        !plain.contains('\x1b'),
        "colour despite NO_COLOR: {plain:?}"
    );
    let piped = probe(&["diagnose", "--port", "4299"]).ns(&ns).run();
    assert!(!piped.stdout.contains('\x1b'), "{piped}");
}

/// `install DEST`: a directory gets `natsprobe` in it, a path is the file; mode 0755 whatever
/// the umask; the copy is this binary and runs; nothing is left behind; a DEST that cannot be
/// used is exit 2 naming it.
#[test]
fn install_copies_the_probe_atomically() {
    let shared = tempfile::tempdir().unwrap();
    let dir = shared.path();
    // Like an emptyDir: others may look in (the read-only case runs as nobody).
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = probe(&["install", dir.to_str().unwrap()]).run();
    run.expect(0).says(&["installed natsprobe ", " to "]);
    let installed = dir.join("natsprobe");
    let meta = std::fs::metadata(&installed).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o755);
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(probe::binary()).unwrap(),
        "the copy is this binary"
    );
    let out = std::process::Command::new(&installed)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("natsprobe "));

    // Again, over the existing file, to a file path, with a restrictive umask: as an
    // initContainer does on every pod start.
    let path = dir.join("bin-probe");
    std::fs::write(&path, b"old").unwrap();
    let mut cmd = probe(&["install", path.to_str().unwrap()]).command();
    // SAFETY: umask is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::umask(0o077);
            Ok(())
        });
    }
    cmd.stdout(std::process::Stdio::null());
    assert!(cmd.status().unwrap().success());
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    assert_eq!(
        std::fs::read(&path).unwrap().len(),
        std::fs::read(probe::binary()).unwrap().len()
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["bin-probe", "natsprobe"],
        "a temporary file was left"
    );

    let missing = dir.join("no/such/dir/natsprobe");
    probe(&["install", missing.to_str().unwrap()])
        .run()
        .expect(2)
        .says(&["natsprobe: install DEST ", "is not a directory"]);
    // A read-only destination: exit 2 with the system's words, nothing left.
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    probe(&["install", ro.to_str().unwrap()])
        .uid(65534)
        .run()
        .expect(2)
        .says(&["natsprobe: install DEST ", "Permission denied"]);
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
}
