//! The shipped image and the arm64 build: `Dockerfile.probe` built with buildah from the static
//! binaries (no registry here), its configuration checked, its root filesystem run with only
//! /proc; the arm64 binary's socket scenarios run under qemu-user.

use crate::harness::image::Buildah;
use crate::harness::rootfs::run_in_root;
use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

const S10: Duration = Duration::from_secs(10);

/// A pod with a dual-stack server and a live nats.go client over IPv4.
fn pod() -> (Arc<NetNs>, NatsServer, Peer) {
    let ns = Arc::new(NetNs::new());
    let server = NatsServer::start(Some(&ns), Version::Pinned, "::", 4222);
    let client = Peer::conn(Some(&ns), URL4, 60, "2s");
    (ns, server, client)
}

const URL4: &str = "nats://127.0.0.1:4222";

/// The files in a root, with their modes (directories end in `/`).
fn files(root: &std::path::Path) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let mut name = entry.file_name().to_string_lossy().to_string();
        if meta.is_dir() {
            name.push('/');
        }
        found.push((name, meta.permissions().mode() & 0o7777));
    }
    found.sort();
    found
}

/// The ELF machine of a binary: 62 is x86-64, 183 is AArch64.
fn elf_machine(path: &std::path::Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", path.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// The image as the issue asks: FROM scratch holding only /natsprobe, a non-root USER, OCI
/// labels, the ENTRYPOINT; and its root filesystem, with only /proc added, runs the probe as
/// that user against a live client.
#[test]
fn the_image_holds_only_the_probe_and_runs_from_its_own_root() {
    let _serial = timing_lock();
    let buildah = Buildah::new();
    let rev = "0123456789ab";
    let source = "https://example.invalid/natsprobe";
    buildah.build(
        "linux/amd64",
        &static_binary(),
        "natsprobe-test:amd64",
        &[
            ("NATSPROBE_GIT_REV", rev),
            ("NATSPROBE_VERSION", env!("CARGO_PKG_VERSION")),
            ("NATSPROBE_SOURCE", source),
        ],
    );
    let config = buildah.config("natsprobe-test:amd64");
    assert_eq!(config["architecture"], "amd64", "{config}");
    assert_eq!(config["os"], "linux");
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532", "{config}");
    assert_eq!(
        c["Entrypoint"],
        serde_json::json!(["/natsprobe"]),
        "{config}"
    );
    let labels = &c["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.revision"], rev);
    assert_eq!(labels["org.opencontainers.image.source"], source);
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(labels["org.opencontainers.image.title"], "natsprobe");
    assert_eq!(
        config["rootfs"]["diff_ids"].as_array().unwrap().len(),
        1,
        "one layer: the binary"
    );

    let mounted = buildah.mount("natsprobe-test:amd64");
    assert_eq!(
        files(&mounted.root),
        [("natsprobe".to_string(), 0o755)],
        "the image holds the probe and nothing else"
    );
    assert_eq!(
        std::fs::read(mounted.root.join("natsprobe")).unwrap(),
        std::fs::read(static_binary()).unwrap()
    );
    // What the kubelet's runtime gives a scratch container: /proc. As the image's user.
    std::fs::create_dir(mounted.root.join("proc")).unwrap();
    let (ns, _server, _client) = pod();
    let out = run_in_root(
        &mounted.root,
        &ns,
        "/natsprobe",
        &["check", "--port", "4222"],
        Some(65532),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("healthy: 1 ESTABLISHED TCP connection to remote port 4222"),
        "{stdout}"
    );
    // install, from the image, into a shared directory (the initContainer pattern).
    let shared = mounted.root.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_in_root(
        &mounted.root,
        &ns,
        "/natsprobe",
        &["install", "/shared"],
        Some(65532),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        std::fs::metadata(shared.join("natsprobe"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
}

/// The arm64 image: the same Dockerfile for linux/arm64 from the aarch64 build, with an arm64
/// configuration, the aarch64 binary (run under qemu-user), and both in one manifest list.
#[test]
fn the_image_builds_for_arm64_too() {
    let _serial = timing_lock();
    let buildah = Buildah::new();
    let arm64 = static_binary_arm64();
    assert_eq!(elf_machine(&arm64), 183, "not an AArch64 binary");
    assert_eq!(elf_machine(&static_binary()), 62, "not an x86-64 binary");
    buildah.build("linux/arm64", &arm64, "natsprobe-test:arm64", &[]);
    buildah.build("linux/amd64", &static_binary(), "natsprobe-test:amd64", &[]);
    let config = buildah.config("natsprobe-test:arm64");
    assert_eq!(config["architecture"], "arm64", "{config}");
    assert_eq!(config["config"]["User"], "65532:65532");
    let mounted = buildah.mount("natsprobe-test:arm64");
    assert_eq!(files(&mounted.root), [("natsprobe".to_string(), 0o755)]);
    let inside = mounted.root.join("natsprobe");
    assert_eq!(elf_machine(&inside), 183);
    let out = std::process::Command::new("qemu-aarch64")
        .arg(&inside)
        .arg("--version")
        .output()
        .expect("qemu-aarch64 (probe-tests/setup installs qemu-user)");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("natsprobe "),
        "{out:?}"
    );
    buildah.run(&["manifest", "create", "natsprobe-test:multi"]);
    for arch in ["amd64", "arm64"] {
        buildah.run(&[
            "manifest",
            "add",
            "natsprobe-test:multi",
            &format!("containers-storage:localhost/natsprobe-test:{arch}"),
        ]);
    }
    let list: serde_json::Value =
        serde_json::from_str(&buildah.run(&["manifest", "inspect", "natsprobe-test:multi"]))
            .unwrap();
    let mut platforms: Vec<String> = list["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["platform"]["architecture"].as_str().unwrap().to_string())
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["amd64", "arm64"], "{list}");
}

/// The arm64 build's socket scenarios, under qemu-user. qemu-user refuses netlink sock_diag
/// (it forwards only NETLINK_ROUTE, KOBJECT_UEVENT and AUDIT sockets), so the probe falls back
/// to /proc, and says so: the arm64 netlink path cannot be run here.
#[test]
fn the_arm64_build_judges_sockets_under_qemu() {
    let (ns, mut server, _client) = pod();
    let url = URL4;
    let run = probe(&["-v"]).arm64().ns(&ns).run();
    run.expect(0)
        .says(&["healthy: 1 ESTABLISHED TCP connection to remote port 4222 (127.0.0.1:4222)"]);
    assert!(
        run.stdout
            .contains("reader: proc, because netlink refused: socket: Protocol not supported"),
        "{run}"
    );
    // IPv6, and --process.
    let _six = Peer::conn(Some(&ns), "nats://[::1]:4222", 60, "2s");
    let run = probe(&["--json", "--process", "natspeer", "--min-connections", "2"])
        .arm64()
        .ns(&ns)
        .run();
    run.expect(0);
    assert_eq!(run.json()["connection"]["established"], 2, "{run}");
    // A client that gave up while the server answers; then the server down.
    let mut quitter = Peer::conn(Some(&ns), url, 2, "100ms");
    drop(_client);
    drop(_six);
    server.stop();
    quitter.wait_for("closed", S10);
    server.resume();
    probe(&["--server", url]).arm64().ns(&ns).run().expect(1).says(&[
        "unhealthy: client holds no connection while nats://127.0.0.1:4222 answers (nats-server 2.10.26)",
    ]);
    server.stop();
    probe(&["--server", url]).arm64().ns(&ns).run().expect(0).says(&[
        "healthy: no connection, but nats://127.0.0.1:4222 is not answering (restart would not help): connection refused",
    ]);
    // The deadline holds under emulation: a server address that drops SYNs.
    ns.exec(
        "iptables",
        &["-A", "INPUT", "-p", "tcp", "--dport", "4299", "-j", "DROP"],
    );
    let run = probe(&["--server", "nats://127.0.0.1:4299", "--timeout", "1s"])
        .arm64()
        .ns(&ns)
        .run();
    run.expect(0)
        .says(&["is not answering (restart would not help): no answer"]);
    assert!(run.elapsed < Duration::from_millis(1500), "{run}");
}
