//! A hostile environment: a read-only root with no /tmp, no privileges, a socket table that is
//! garbled or unreadable while netlink is refused, state dirs that cannot be trusted, a full
//! disk, secrets in every source against servers that refuse them or are down, and a thousand
//! runs in a row.

use crate::harness::pods::*;
use crate::harness::probe::Run;
use crate::harness::rootfs::{run_in_root_with, run_in_root_with_shm, run_with_fake_proc};
use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

fn pod() -> (Arc<NetNs>, NatsServer, Peer) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "127.0.0.1", 4222);
    let client = Peer::conn(Some(&ns), &server.url(), 60, "2s");
    (ns, server, client)
}

/// The app pod with a bound push consumer S/D (the check's `--consumer S/D`).
fn consumer_pod() -> (Pods, Peer) {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    let consumer = pods.consume("S", "D", &[]);
    (pods, consumer)
}

/// A file standing in for /proc/net/tcp, readable by anyone unless `mode` says otherwise.
fn file(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// Garbled or unreadable `/proc/net/tcp` with netlink refused: the probe cannot see the
/// socket table, says why, and exits 3: never "no connection" (a guess), never a panic.
#[test]
fn a_socket_table_it_cannot_read_is_could_not_evaluate() {
    let (ns, _server, _client) = pod();
    // Netlink refused (a seccomp profile): the /proc fallback answers, and says why.
    let run = probe(&["-v"]).ns(&ns).no_netlink().run();
    run.expect(0).says(&["healthy: 1 ESTABLISHED"]);
    assert!(
        run.stdout
            .contains("reader: proc, because netlink refused: socket: Operation not permitted"),
        "{run}"
    );

    // A root whose /proc/net/tcp is garbled, or unreadable.
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(static_binary(), root.path().join("natsprobe")).unwrap();
    let net = root.path().join("proc/net");
    std::fs::create_dir_all(&net).unwrap();
    let run = |args: &[&str], uid: Option<u32>, no_netlink: bool| {
        let out = run_with_fake_proc(root.path(), &ns, "/natsprobe", args, uid, no_netlink);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "environment | {args:?} | exit {:?} | {text}",
            out.status.code()
        );
        assert!(!text.contains("panicked"), "{text}");
        (out.status.code(), text)
    };
    file(&net, "tcp", "garbage\n\u{1}\u{2}\nnot a table\n", 0o644);
    let (code, text) = run(&["--reader", "proc"], None, false);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.starts_with("could not evaluate: cannot read the socket table: /proc/net/tcp: 3 lines, none in the kernel's format"), "{text}");
    // Garbled, with netlink refused: both reasons.
    let (code, text) = run(&[], None, true);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.starts_with("could not evaluate: cannot read the socket table: netlink sock_diag refused (socket: Operation not permitted"), "{text}");
    assert!(
        text.contains("), and /proc/net/tcp: 3 lines, none in the kernel's format"),
        "{text}"
    );
    // Unreadable by the probe's user, netlink refused; and in JSON.
    file(&net, "tcp", "", 0o000);
    let (code, text) = run(&[], Some(65534), true);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("/proc/net/tcp: Permission denied"), "{text}");
    let (code, text) = run(&["--json"], Some(65534), true);
    assert_eq!(code, Some(3), "{text}");
    let json: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(json["verdict"], "error", "{text}");
    // Missing altogether (no /proc at all).
    std::fs::remove_dir_all(root.path().join("proc")).unwrap();
    let (code, text) = run(&[], None, true);
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.contains("/proc/net/tcp: No such file or directory"),
        "{text}"
    );
}

/// `readOnlyRootFilesystem` with no /tmp and no `emptyDir` (a scratch image), as an
/// unprivileged user, a push consumer wedged (bound, never acking, 499 waiting). The samples
/// land in /dev/shm, the tmpfs container runtimes mount writable, and the wedged consumer is
/// caught; `-v` says where the samples went and why not in the default place.
#[test]
fn a_read_only_root_keeps_samples_in_dev_shm_and_catches_the_wedged_consumer() {
    let pods = Pods::new(Version::Pinned);
    pods.push("S", "D", &[]);
    // The app runs as the probe's user, as in one container: the probe finds which process
    // holds the connection (and how old it is) before it declares a stall.
    let push = push_consumer("S", "D");
    let mut rest: Vec<&str> = push.iter().map(String::as_str).collect();
    rest.extend(["-ack", "never"]);
    let mut wedged = Peer::spawn_user(
        Some(&pods.app),
        crate::harness::peer::natspeer(),
        &pods.args("consume", &rest),
        Some(65532),
    );
    wedged.wait_for("ready", S10);
    pods.publish_n("s.x", 499);
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(static_binary(), root.path().join("natsprobe")).unwrap();
    std::fs::create_dir(root.path().join("proc")).unwrap();
    std::fs::create_dir_all(root.path().join("dev/shm")).unwrap();
    // The pod's /dev/shm, kept from run to run as the container's is.
    let shm = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shm.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let args = [
        "check",
        "--server",
        &pods.url,
        "--consumer",
        "S/D",
        "--stall-after",
        "2s",
        "-v",
    ];
    let mut runs = Vec::new();
    for _ in 0..20 {
        let out = run_in_root_with_shm(
            root.path(),
            &pods.app,
            "/natsprobe",
            &args,
            Some(65532),
            true,
            Some(shm.path()),
        );
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let code = out.status.code();
        runs.push((code, stdout));
        if code == Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let (code, stdout) = runs.last().unwrap();
    println!(
        "environment | read-only root, /dev/shm only | {} runs, last: exit {code:?}: {}",
        runs.len(),
        stdout.lines().next().unwrap_or("")
    );
    assert_eq!(*code, Some(1), "the wedged consumer is caught: {runs:#?}");
    assert!(stdout.contains("consumer S/D: no progress for"), "{stdout}");
    assert!(
        stdout.contains("samples kept in /dev/shm/natsprobe-65532 (passed over: cannot create /tmp/natsprobe-65532: "),
        "{stdout}"
    );
    // Every run before it passed, and the first said it was a first sample a later run compares.
    assert!(
        runs[..runs.len() - 1].iter().all(|(c, _)| *c == Some(0)),
        "{runs:#?}"
    );
    assert!(runs[0].1.contains("first sample"), "{runs:#?}");
    assert!(
        shm.path()
            .join("natsprobe-65532")
            .read_dir()
            .unwrap()
            .count()
            >= 1
    );
}

/// A read-only root with no writable place at all: no run could ever compare, so
/// a consumer check is a configuration error at once (exit 2), naming the fix; a check with
/// no consumer keeps no sample and is unaffected.
#[test]
fn a_read_only_root_with_no_writable_place_is_a_configuration_error() {
    let (pods, _consumer) = consumer_pod();
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(static_binary(), root.path().join("natsprobe")).unwrap();
    std::fs::create_dir(root.path().join("proc")).unwrap();
    for command in ["check", "diagnose"] {
        let out = run_in_root_with(
            root.path(),
            &pods.app,
            "/natsprobe",
            &[command, "--server", &pods.url, "--consumer", "S/D", "-v"],
            Some(65532),
            true,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!("environment | read-only root, nowhere to write, {command} | {stderr}");
        assert_eq!(out.status.code(), Some(2), "{stderr}{:?}", out.stdout);
        for words in [
            "natsprobe: --state-dir: no place to keep samples, so no run could compare: mount a writable volume (an emptyDir) and pass it as --state-dir, or set TMPDIR to one (",
            "cannot create /tmp/natsprobe-65532: No such file or directory; ",
            "cannot create /dev/shm/natsprobe-65532: No such file or directory)",
        ] {
            assert!(stderr.contains(words), "{words:?} in {stderr}");
        }
    }
    let out = run_in_root_with(
        root.path(),
        &pods.app,
        "/natsprobe",
        &["check", "--server", &pods.url],
        Some(65532),
        true,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The root really is read-only.
    let out = run_in_root_with(
        root.path(),
        &pods.app,
        "/natsprobe",
        &["install", "/copy"],
        Some(0),
        true,
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Read-only file system"),
        "{out:?}"
    );
}

/// `--state-dir` a symlink, owned by another user, or on a full disk: no run could
/// ever compare, so it is a configuration error at once (exit 2) that says why and names the
/// fix, never a silent pass; nothing is written through a symlink nor left half-written. A
/// world-writable dir (an emptyDir) gets a private directory inside it and works.
#[test]
fn an_explicit_state_dir_that_cannot_be_used_is_a_configuration_error() {
    let (pods, _consumer) = consumer_pod();
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let check = |dir: &Path, uid: Option<u32>, exit: i32| -> Run {
        let d = dir.to_str().unwrap();
        let mut p = probe(&[
            "--server",
            &pods.url,
            "--consumer",
            "S/D",
            "--state-dir",
            d,
            "-v",
        ])
        .ns(&pods.app);
        if let Some(uid) = uid {
            p = p.uid(uid);
        }
        let run = p.run();
        println!(
            "environment | state dir {d} | exit {:?}: {}",
            run.code,
            run.line()
        );
        run.expect(exit);
        run
    };

    let real = base.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let run = check(&link, None, 2);
    assert!(run.stderr.contains("is a symlink; not followed"), "{run}");
    assert!(
        run.stderr
            .contains("give --state-dir a directory this user can write"),
        "{run}"
    );
    assert_eq!(
        std::fs::read_dir(&real).unwrap().count(),
        0,
        "written through the link"
    );

    // Root's, 0755: another user may not write in it.
    let root_owned = base.path().join("root-owned");
    std::fs::create_dir(&root_owned).unwrap();
    std::fs::set_permissions(&root_owned, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = check(&root_owned, Some(65534), 2);
    assert!(
        run.stderr.contains("cannot create") && run.stderr.contains("Permission denied"),
        "{run}"
    );

    // World-writable, as an emptyDir is: the samples go in a private directory inside.
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = check(&shared, Some(65534), 0);
    assert!(!run.stdout.contains("samples not kept"), "{run}");
    let private = shared.join("natsprobe-65534");
    let meta = std::fs::metadata(&private).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let kept: Vec<String> = walk(&private);
    assert_eq!(
        kept.len(),
        2,
        "the check's state (its sample and the connections counted), and the lock: {kept:?}"
    );
    assert!(kept.contains(&".lock".to_string()), "{kept:?}");

    // A full disk: a 64 KiB tmpfs, filled after a sample was kept. With no other place
    // (--state-dir has none) the runs pass, saying so, until it has lasted longer than the
    // window since the last sample kept: then a configuration error naming the fix.
    let full = base.path().join("full");
    std::fs::create_dir(&full).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(mounted.success());
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&full);
    let state = full.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let with_stall = || -> Run {
        probe(&[
            "--server",
            &pods.url,
            "--consumer",
            "S/D",
            "--stall-after",
            "2s",
            "--state-dir",
            state.to_str().unwrap(),
            "-v",
        ])
        .ns(&pods.app)
        .run()
    };
    with_stall().expect(0);
    let kept: Vec<_> = std::fs::read_dir(&state).unwrap().collect();
    let _ = std::fs::write(full.join("filler"), vec![0u8; 1 << 20]);
    let started = std::time::Instant::now();
    let run = loop {
        let run = with_stall();
        if run.code == Some(2) {
            break run;
        }
        run.expect(0)
            .says(&["samples cannot be kept", "if this still holds in "]);
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "never an error: {run}"
        );
        std::thread::sleep(Duration::from_millis(400));
    };
    assert!(started.elapsed() > Duration::from_millis(1500), "{run}");
    println!(
        "environment | explicit state dir full after {:?}: {}",
        started.elapsed(),
        run.line()
    );
    assert!(run.stdout.contains("no room left on"), "{run}");
    assert!(
        run.line().starts_with(
            "configuration error: consumer S/D: not judged across runs: samples cannot be kept"
        ),
        "{run}"
    );
    assert!(
        run.line()
            .contains("give --state-dir a writable volume with room"),
        "{run}"
    );
    let now: Vec<_> = std::fs::read_dir(&state).unwrap().collect();
    assert_eq!(now.len(), kept.len(), "a partial file was left: {now:?}");
}

/// A full place for samples is passed over like one that cannot be written: with
/// `$TMPDIR` (a 64 KiB tmpfs) full, the samples go to /dev/shm, and no run exits 2 while a
/// place is left; with /dev/shm full too, the runs pass, saying so, until it has lasted longer
/// than the window.
#[test]
fn a_full_state_dir_moves_the_samples_to_the_next_place() {
    let (pods, _consumer) = consumer_pod();
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(static_binary(), root.path().join("natsprobe")).unwrap();
    for dir in ["proc", "dev/shm", "tmp"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    let tmp = root.path().join("tmp");
    // The pod's /dev/shm, kept from run to run as the container's is: a 64 KiB tmpfs too,
    // with room until it is filled below.
    let shm = tempfile::tempdir().unwrap();
    struct Unmount(Vec<std::path::PathBuf>);
    impl Drop for Unmount {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = Command::new("umount").arg(p).status();
            }
        }
    }
    let tmpfs = |at: &Path| {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=1777", "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(mounted.success());
    };
    let fill = |at: &Path| {
        let _ = std::fs::write(at.join("filler"), vec![0u8; 1 << 20]);
    };
    let _mounts = Unmount(vec![tmp.clone(), shm.path().to_path_buf()]);
    tmpfs(&tmp);
    fill(&tmp);
    tmpfs(shm.path());
    // Every run asks, and keeps its sample.
    let args = [
        "check",
        "--server",
        &pods.url,
        "--consumer",
        "S/D",
        "--stall-after",
        "2s",
        "--sample-every",
        "0",
        "-v",
    ];
    let run = |root: &Path| -> (Option<i32>, String) {
        let out = run_in_root_with_shm(
            root,
            &pods.app,
            "/natsprobe",
            &args,
            Some(65532),
            false,
            Some(shm.path()),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    for _ in 0..5 {
        let (code, stdout) = run(root.path());
        assert_eq!(code, Some(0), "{stdout}");
        assert!(
            stdout.contains("no room left on /tmp/natsprobe-65532"),
            "the full place is passed over: {stdout}"
        );
        assert!(!stdout.contains("samples cannot be kept"), "{stdout}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let moved: Vec<_> = std::fs::read_dir(shm.path().join("natsprobe-65532"))
        .unwrap()
        .collect();
    assert!(!moved.is_empty(), "no sample in /dev/shm");
    println!(
        "environment | $TMPDIR full: {} state files in /dev/shm",
        moved.len()
    );
    // Every place full: passes, saying so, then an error once it lasted past the window
    // since the last sample kept.
    fill(shm.path());
    let started = std::time::Instant::now();
    loop {
        let (code, stdout) = run(root.path());
        let line = stdout.lines().next().unwrap_or_default().to_string();
        if code == Some(2) {
            assert!(started.elapsed() > Duration::from_millis(1500), "{line}");
            assert!(line.contains("samples cannot be kept"), "{line}");
            println!("environment | every place full: {line}");
            break;
        }
        assert_eq!(code, Some(0), "{stdout}");
        assert!(line.contains("samples cannot be kept"), "{line}");
        assert!(started.elapsed() < Duration::from_secs(6), "{stdout}");
        std::thread::sleep(Duration::from_millis(400));
    }
}

/// No privileges: every command as nobody, with no capabilities, works as it does as root
/// (netlink sock_diag needs none).
#[test]
fn every_command_runs_as_nobody() {
    let (pods, _consumer) = consumer_pod();
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let s = state.path().to_str().unwrap();
    for args in [
        vec![
            "check",
            "--server",
            &pods.url,
            "--consumer",
            "S/D",
            "--state-dir",
            s,
            "-v",
        ],
        vec![
            "diagnose",
            "--server",
            &pods.url,
            "--consumer",
            "S/D",
            "--state-dir",
            s,
        ],
        vec!["guard", "--server", &pods.url, "--interval", "200ms"],
    ] {
        let run = probe(&args).ns(&pods.app).uid(65534).run();
        println!("environment | as nobody | {:?} | {}", args[0], run.line());
        run.expect(0);
        if args[0] == "check" {
            assert!(run.stdout.contains("reader: netlink"), "{run}");
        }
    }
}

/// Secrets, from every source (flags, NATSPROBE_*, the nats CLI's NATS_*, URL userinfo,
/// files), for every command and output (`-v`, `--json`, `diagnose`, `guard`), against a
/// server that rejects them and against no server at all: none appears in stdout or stderr.
#[test]
fn no_secret_in_any_output_of_any_command() {
    let password = "pa55-W0rd-s3cret";
    let token = "t0ken-s3cret-v4lue";
    let op = OperatorMode::new();
    let seed = op.seed.clone();
    let creds = op.creds.to_string_lossy().to_string();
    let dir = tempfile::tempdir().unwrap();
    let nkey_file = dir.path().join("seed.nk");
    std::fs::write(&nkey_file, format!("{}\n", nkey_seed())).unwrap();
    let nkey = nkey_file.to_string_lossy().to_string();
    let nkey_secret = std::fs::read_to_string(&nkey_file)
        .unwrap()
        .trim()
        .to_string();
    // A server that wants other credentials than any given here.
    let mut pods = Pods::with(
        Version::Pinned,
        &["--user", "someone", "--pass", "else"],
        &["-user", "someone", "-password", "else"],
    );
    let _client = pods.client("conn", &[]);
    let url = pods.url.clone();
    let host = url.trim_start_matches("nats://");
    let secrets = [
        password,
        token,
        seed.as_str(),
        &op.user_jwt[..40],
        nkey_secret.as_str(),
    ];

    type Source<'a> = (&'a str, Vec<String>, Vec<(&'a str, String)>);
    let sources: Vec<Source> = vec![
        (
            "flags",
            vec![
                "--user".into(),
                "u".into(),
                "--password".into(),
                password.into(),
            ],
            vec![],
        ),
        ("token flag", vec!["--token".into(), token.into()], vec![]),
        (
            "NATSPROBE_*",
            vec![],
            vec![
                ("NATSPROBE_USER", "u".into()),
                ("NATSPROBE_PASSWORD", password.into()),
            ],
        ),
        (
            "NATS_*",
            vec![],
            vec![
                ("NATS_USER", "u".into()),
                ("NATS_PASSWORD", password.into()),
                ("NATS_TOKEN", token.into()),
            ],
        ),
        ("creds file", vec!["--creds".into(), creds.clone()], vec![]),
        ("NATS_CREDS", vec![], vec![("NATS_CREDS", creds.clone())]),
        ("nkey file", vec!["--nkey".into(), nkey.clone()], vec![]),
        ("URL userinfo", vec![], vec![]),
    ];
    let mut checked = 0;
    for down in [false, true] {
        let server_url = |source: &str| match source {
            "URL userinfo" => format!("nats://u:{password}@{host}"),
            _ => url.clone(),
        };
        for (source, flags, env) in &sources {
            let server = server_url(source);
            let commands: Vec<Vec<String>> = vec![
                vec![
                    "check".into(),
                    "--server".into(),
                    server.clone(),
                    "--consumer".into(),
                    "S/D".into(),
                    "-v".into(),
                ],
                vec![
                    "check".into(),
                    "--server".into(),
                    server.clone(),
                    "--consumer".into(),
                    "S/D".into(),
                    "--json".into(),
                ],
                vec![
                    "diagnose".into(),
                    "--server".into(),
                    server.clone(),
                    "--consumer".into(),
                    "S/D".into(),
                ],
                vec![
                    "diagnose".into(),
                    "--server".into(),
                    server.clone(),
                    "--json".into(),
                ],
                vec![
                    "guard".into(),
                    "--server".into(),
                    server.clone(),
                    "--interval".into(),
                    "10ms".into(),
                    "--timeout".into(),
                    "1s".into(),
                ],
                vec![
                    "guard".into(),
                    "--server".into(),
                    server.clone(),
                    "--interval".into(),
                    "10ms".into(),
                    "--timeout".into(),
                    "1s".into(),
                    "--json".into(),
                ],
            ];
            for mut args in commands {
                args.extend(flags.iter().cloned());
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut p = probe(&args).ns(&pods.app);
                for (k, v) in env {
                    p = p.env(k, v);
                }
                let run = p.run();
                for secret in secrets {
                    assert!(
                        !run.stdout.contains(secret) && !run.stderr.contains(secret),
                        "{source} ({}): a secret shows\n{run}",
                        if down {
                            "server down"
                        } else {
                            "server rejects"
                        }
                    );
                }
                // Something was said: a verdict, or why there is none.
                assert!(!run.line().is_empty(), "{run}");
                checked += 1;
            }
        }
        if !down {
            // Now no server at all.
            pods.server.stop();
        }
    }
    assert_eq!(checked, 2 * 8 * 6);
}

/// An nkey seed file's content, as `nk -gen user` writes it.
fn nkey_seed() -> String {
    nkeys::KeyPair::new_user().seed().unwrap()
}

/// A thousand runs in a row against a live pod: no temporary or state file left beyond the
/// one sample and the one remembered connection, no connection left open at the server, the
/// state dir bounded.
#[test]
fn a_thousand_runs_leave_nothing_behind() {
    let (pods, _consumer) = consumer_pod();
    let _producer = pods.producer("s.x", 50);
    let state = tempfile::tempdir().unwrap();
    let s = state.path().to_str().unwrap();
    let connections = || -> usize {
        let out = pods
            .nats
            .command("ss")
            .args(["-Htn", "state", "established", "( sport = :4222 )"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let before = connections();
    for i in 0..1000 {
        let args: &[&str] = match i % 4 {
            0 => &[
                "check",
                "--server",
                &pods.url,
                "--consumer",
                "S/D",
                "--state-dir",
                s,
                "--own-subscription",
            ],
            1 => &[
                "diagnose",
                "--server",
                &pods.url,
                "--consumer",
                "S/D",
                "--state-dir",
                s,
            ],
            _ => &[
                "check",
                "--server",
                &pods.url,
                "--consumer",
                "S/D",
                "--state-dir",
                s,
            ],
        };
        let run = probe(args).ns(&pods.app).run();
        assert_eq!(run.code, Some(0), "run {i}\n{run}");
    }
    // One state file per check: the one with --own-subscription (which also keeps the
    // pod's connection at the server), and the one without (check and diagnose alike).
    let mut files: Vec<String> = walk(state.path());
    files.sort();
    assert_eq!(
        files.len(),
        3,
        "one file per check, the lock that orders the probes' writes, nothing else: {files:?}"
    );
    assert!(
        files[0] == ".lock" && files[1].starts_with("check-") && files[2].starts_with("check-"),
        "{files:?}"
    );
    for file in &files {
        let size = std::fs::metadata(state.path().join(file)).unwrap().len();
        assert!(size < 4096, "{file} is {size} bytes");
    }
    // The probe's connections closed with it (give the server a moment to see the last).
    wait_until("the probe's connections to close", S10, || {
        connections() <= before
    });
}

fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            for f in walk(&e.path()) {
                found.push(format!("{}/{f}", e.file_name().to_string_lossy()));
            }
        } else {
            found.push(e.file_name().to_string_lossy().to_string());
        }
    }
    found
}
