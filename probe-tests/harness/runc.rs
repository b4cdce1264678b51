//! A running container made from `Dockerfile.probe`'s image, by the container runtime itself
//! (runc, Debian's package, which probe-tests/setup installs): the image built with buildah,
//! its root filesystem copied into an OCI bundle, run as the kubelet's runtime runs a pod's
//! container (the image's user 65532, a read-only root, an `emptyDir`-like tmpfs at `/state`,
//! the pod's network namespace), and `runc exec` into it as the kubelet's exec probe is. The
//! container's own process is `natsprobe serve` (a native sidecar's), answering on the pod's
//! 127.0.0.1:8281.

use super::image::Buildah;
use super::NetNs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Container {
    state: tempfile::TempDir,
    bundle: tempfile::TempDir,
    pub id: String,
    /// The container's init process (serve), by the host's PID.
    pub pid: u32,
}

/// One `runc exec`: its exit code, stdout, and CPU time (runc's own and the process it ran
/// in the container, which it waits for).
pub struct Exec {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub cpu: Duration,
    pub wall: Duration,
}

/// The image, built once per test process from the static binary, its root filesystem copied
/// out (the image holds `/natsprobe` and nothing else).
fn image_rootfs() -> &'static Path {
    static ROOTFS: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    ROOTFS
        .get_or_init(|| {
            let buildah = Buildah::new();
            buildah.build(
                "linux/amd64",
                &super::static_binary(),
                "natsprobe-runc:amd64",
                &[],
            );
            let mounted = buildah.mount("natsprobe-runc:amd64");
            let dir = tempfile::Builder::new()
                .prefix("natsprobe-rootfs")
                .tempdir()
                .unwrap();
            let out = Command::new("cp")
                .arg("-a")
                .arg(mounted.root.join("."))
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            dir
        })
        .path()
}

fn runc(state: &Path) -> Command {
    let mut cmd = Command::new("runc");
    cmd.arg("--root").arg(state);
    cmd
}

/// An OCI bundle of the image's container as the runtime makes a pod's: `args` as the
/// image's user (65532) with no capabilities, a read-only root, in the pod's network namespace
/// `ns`; `edit` changes its spec further. Its runc state dir, the bundle, and the container's id.
fn bundle(
    ns: &NetNs,
    args: &[String],
    edit: impl FnOnce(&mut serde_json::Value),
) -> (tempfile::TempDir, tempfile::TempDir, String) {
    let state = tempfile::Builder::new()
        .prefix("natsprobe-runc")
        .tempdir()
        .unwrap();
    let bundle = tempfile::Builder::new()
        .prefix("natsprobe-bundle")
        .tempdir()
        .unwrap();
    let id = format!(
        "natsprobe-{}-{}",
        std::process::id(),
        bundle.path().file_name().unwrap().to_string_lossy()
    );
    let out = Command::new("runc")
        .arg("spec")
        .current_dir(bundle.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "runc spec: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = bundle.path().join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    spec["process"]["terminal"] = false.into();
    spec["process"]["user"] = serde_json::json!({"uid": 65532, "gid": 65532});
    spec["process"]["args"] = serde_json::json!(args);
    spec["process"]["env"] = serde_json::json!(["PATH=/"]);
    for set in ["bounding", "effective", "permitted", "ambient"] {
        spec["process"]["capabilities"][set] = serde_json::json!([]);
    }
    spec["root"] = serde_json::json!({"path": image_rootfs(), "readonly": true});
    spec["hostname"] = "pod".into();
    spec["linux"]["cgroupsPath"] = format!("/{id}").into();
    for n in spec["linux"]["namespaces"].as_array_mut().unwrap() {
        if n["type"] == "network" {
            n["path"] = ns.path().into();
        }
    }
    edit(&mut spec);
    std::fs::write(&path, serde_json::to_string_pretty(&spec).unwrap()).unwrap();
    (state, bundle, id)
}

impl Container {
    /// Starts the container in `ns` running `natsprobe serve ARGS…` (with `--state-dir
    /// /state`), and waits until serve answers.
    pub fn start(ns: &NetNs, serve_args: &[&str]) -> Container {
        let mut args = vec![
            "/natsprobe".to_string(),
            "serve".into(),
            "--state-dir".into(),
            "/state".into(),
        ];
        args.extend(serve_args.iter().map(|s| s.to_string()));
        let (state, bundle, id) = bundle(ns, &args, |spec| {
            spec["mounts"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({
                    "destination": "/state", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "nodev", "mode=1777", "size=1m"]
                }));
        });
        let pid_file = bundle.path().join("pid");
        let log = std::fs::File::create(bundle.path().join("serve.log")).unwrap();
        let out = runc(state.path())
            .args(["run", "--detach", "--bundle"])
            .arg(bundle.path())
            .arg("--pid-file")
            .arg(&pid_file)
            .arg(&id)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "runc run: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let container = Container {
            state,
            bundle,
            id,
            pid,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !container.log().contains("natsprobe serve: answering on") {
            assert!(
                Instant::now() < deadline,
                "serve did not start: {}",
                container.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        container
    }

    /// serve's log (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.bundle.path().join("serve.log")).unwrap_or_default()
    }

    /// The command line of `runc exec` of `argv` in the container, as the image's user.
    pub fn exec_command(&self, argv: &[&str]) -> Command {
        let mut cmd = runc(self.state.path());
        cmd.args(["exec", "--user", "65532:65532", &self.id])
            .args(argv);
        cmd
    }

    /// `runc exec` of `argv` in the container, as the image's user, killed past `timeout`
    /// as the kubelet's runtime kills an exec probe that overstays.
    pub fn exec(&self, argv: &[&str], timeout: Duration) -> Exec {
        let started = Instant::now();
        let mut child = self
            .exec_command(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let (mut o, mut e) = (String::new(), String::new());
            let _ = out.read_to_string(&mut o);
            let _ = err.read_to_string(&mut e);
            (o, e)
        });
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let mut killed = false;
        loop {
            // SAFETY: wait4 on our own child, with valid pointers to locals.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                break;
            }
            if !killed && started.elapsed() > timeout {
                // The runtime's exec timeout: the exec'd process is killed with its runc.
                let _ = runc(self.state.path())
                    .args(["kill", "--all", &self.id, "KILL"])
                    .output();
                let _ = child.kill();
                killed = true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let wall = started.elapsed();
        std::mem::forget(child);
        let (stdout, stderr) = reader.join().unwrap();
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        let exit = std::process::ExitStatus::from_raw(status);
        Exec {
            code: if killed { None } else { exit.code() },
            stdout,
            stderr,
            cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
            wall,
        }
    }

    /// The container's processes' CPU so far as the host counts it for serve: its own
    /// threads, and its looks (reaped children).
    pub fn serve_cpu(&self) -> (Duration, Duration) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let ticks = |t: u64| Duration::from_micros(t * 1_000_000 / hz);
        // utime, stime, cutime, cstime are fields 14-17 of stat; `rest` starts at field 3.
        (ticks(f[11] + f[12]), ticks(f[13] + f[14]))
    }
}

/// `kubectl debug --image=natsprobe --target=APP -- ARGV` as the runtime makes it: a new
/// container from the image (its own root and mount namespace, a fresh `/proc`, `/dev/shm`,
/// the image's user, no capabilities) that joins the pod's network namespace `ns` and the
/// target container's PID namespace (that of host PID `target`), run to its end. Its exit
/// code, stdout and stderr.
pub fn ephemeral(ns: &NetNs, target: u32, argv: &[&str]) -> (Option<i32>, String, String) {
    let args: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let (state, bundle, id) = bundle(ns, &args, |spec| {
        for n in spec["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "pid" {
                n["path"] = format!("/proc/{target}/ns/pid").into();
            }
        }
    });
    let out = runc(state.path())
        .args(["run", "--bundle"])
        .arg(bundle.path())
        .arg(&id)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = runc(state.path()).args(["delete", "--force", &id]).output();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = runc(self.state.path())
            .args(["kill", "--all", &self.id, "KILL"])
            .output();
        std::thread::sleep(Duration::from_millis(50));
        let _ = runc(self.state.path())
            .args(["delete", "--force", &self.id])
            .output();
    }
}
