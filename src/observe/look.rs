//! One of `serve`'s looks: a `check` run as a child process with the same flags, its JSON
//! read back. A look that cannot end as a check ends (not started, killed, overstaying its
//! deadline, answering too much or something that is not a check's answer) is natsprobe's own
//! trouble, in words; nothing here judges.

use crate::facts::{Ended, Judged};
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The most a look may print: a check's JSON with `-v` and many sockets is a few KiB.
pub const MOST_OUTPUT: usize = 256 << 10;

/// Runs `exe args…` and waits for it at most `within`; past that it is killed.
pub fn run(exe: &Path, args: &[OsString], within: Duration, startup: bool) -> Ended {
    let deadline = Instant::now() + within;
    let mut command = Command::new(exe);
    let mut child = match command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return Ended::Trouble(format!("could not start a look: {e}")),
    };
    let (out, err) = match read_both(&mut child, deadline) {
        Ok(read) => read,
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            return Ended::Trouble(why);
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Ended::Trouble(overstayed(within));
            }
            Err(e) => return Ended::Trouble(format!("could not wait for a look: {e}")),
        }
    };
    if let Some(signal) = status.signal() {
        return Ended::Trouble(format!(
            "the look was killed by {}{}",
            signal_name(signal),
            said(&err)
        ));
    }
    let code = status.code().unwrap_or(-1);
    match parse(&out) {
        Some((verdict, summary)) if (0..=3).contains(&code) => Ended::Judged(Judged {
            code: code as u8,
            verdict,
            summary,
            json: String::from_utf8_lossy(&out).trim().to_string(),
            startup,
        }),
        _ => Ended::Trouble(format!(
            "the look exited {code} without a check's answer{}",
            said(&err)
        )),
    }
}

fn overstayed(within: Duration) -> String {
    format!(
        "the look overstayed its deadline ({} ms) and was killed",
        within.as_millis()
    )
}

/// The executable a look runs: this one, by its path (so the look's process name is
/// natsprobe's); by /proc/self/exe when that path is gone (the file replaced since).
pub fn own_executable() -> std::path::PathBuf {
    match std::env::current_exe() {
        Ok(path) if path.exists() => path,
        _ => std::path::PathBuf::from("/proc/self/exe"),
    }
}

/// This process's memory cgroup's limit and usage (bytes), where it has a limit: cgroup v2's
/// `memory.max` and `memory.current`, else v1's `memory.limit_in_bytes` and
/// `memory.usage_in_bytes`, at the path `/proc/self/cgroup` names or, in a container's own
/// cgroup namespace, at the root of `/sys/fs/cgroup`.
pub fn memory_limit() -> Option<(u64, u64)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_end_matches('/');
        let (dirs, limit, usage) = match controllers {
            "" => (
                [
                    format!("/sys/fs/cgroup{path}"),
                    "/sys/fs/cgroup".to_string(),
                ],
                "memory.max",
                "memory.current",
            ),
            c if c.split(',').any(|c| c == "memory") => (
                [
                    format!("/sys/fs/cgroup/memory{path}"),
                    "/sys/fs/cgroup/memory".to_string(),
                ],
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ),
            _ => continue,
        };
        for dir in dirs {
            if let (Some(limit), Some(usage)) = (
                read(&format!("{dir}/{limit}")),
                read(&format!("{dir}/{usage}")),
            ) {
                // v1's "no limit" is a page-rounded i64::MAX; v2's is "max" (not a number).
                return (limit < 1 << 60).then_some((limit, usage));
            }
        }
    }
    None
}

/// Called first thing in a look's own process: it is the first the kernel's OOM killer takes
/// (`oom_score_adj` 1000, which a process may always raise), before `serve` or the app. A
/// look killed is natsprobe's trouble and fails nothing; `serve` killed would stop answering.
/// Where it cannot be written the look runs at the score it inherited.
pub fn first_for_the_oom_killer() {
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
}

/// A check's answer: one JSON object with its verdict word and summary.
pub fn parse(out: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Answer {
        verdict: String,
        summary: String,
    }
    let text = std::str::from_utf8(out).ok()?.trim();
    if !text.starts_with('{') {
        return None;
    }
    let answer: Answer = serde_json::from_str(text).ok()?;
    Some((answer.verdict, answer.summary))
}

/// What the look said on stderr, its first line, clipped, for the words of its trouble.
fn said(err: &[u8]) -> String {
    let text = String::from_utf8_lossy(err);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => format!(": {}", line.chars().take(200).collect::<String>()),
        None => String::new(),
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "SIGKILL (the kernel's OOM killer, or someone's kill -9)".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGBUS => "SIGBUS".into(),
        other => format!("signal {other}"),
    }
}

/// Reads the child's stdout and stderr to their ends, by `deadline`, at most `MOST_OUTPUT`.
fn read_both(child: &mut Child, deadline: Instant) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut pipes: [Pipe; 2] = [
        (
            child.stdout.take().map(|p| Box::new(p) as Box<dyn ReadFd>),
            Vec::new(),
        ),
        (
            child.stderr.take().map(|p| Box::new(p) as Box<dyn ReadFd>),
            Vec::new(),
        ),
    ];
    let within = deadline.saturating_duration_since(Instant::now());
    let mut buf = [0u8; 16 << 10];
    while pipes.iter().any(|(p, _)| p.is_some()) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(overstayed(within));
        }
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .filter_map(|(p, _)| p.as_ref())
            .map(|p| libc::pollfd {
                fd: p.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a live, initialized array of `fds.len()` pollfd structs for the
        // duration of the call; poll writes only their `revents`.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("could not read a look's answer: {e}"));
        }
        for fd in fds.iter().filter(|f| f.revents != 0) {
            let (pipe, got) = pipes
                .iter_mut()
                .find(|(p, _)| p.as_ref().is_some_and(|p| p.fd() == fd.fd))
                .expect("a polled pipe is open");
            match pipe.as_mut().expect("open").read(&mut buf) {
                Ok(0) => *pipe = None,
                Ok(read) => {
                    got.extend_from_slice(&buf[..read]);
                    if got.len() > MOST_OUTPUT {
                        return Err(format!(
                            "the look printed more than {} KiB",
                            MOST_OUTPUT >> 10
                        ));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("could not read a look's answer: {e}")),
            }
        }
    }
    let [(_, out), (_, err)] = pipes;
    Ok((out, err))
}

/// A pipe from the child while open, and what it gave.
type Pipe = (Option<Box<dyn ReadFd>>, Vec<u8>);

/// A pipe from the child, read and polled.
trait ReadFd: Read {
    fn fd(&self) -> i32;
}

impl<T: Read + AsRawFd> ReadFd for T {
    fn fd(&self) -> i32 {
        self.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checks_answer_is_its_verdict_and_summary() {
        let json = br#"{"schema_version":1,"command":"check","verdict":"unhealthy","summary":"no connection"}"#;
        assert_eq!(
            parse(json),
            Some(("unhealthy".into(), "no connection".into()))
        );
        assert_eq!(parse(b"healthy: 1 connection"), None);
        assert_eq!(parse(b"{\"verdict\":1}"), None);
        assert_eq!(parse(b"[]"), None);
        assert_eq!(parse(&[0xff, b'{']), None);
    }

    #[test]
    fn a_look_that_cannot_answer_is_trouble_in_words() {
        let sh = Path::new("/bin/sh");
        let run_sh = |script: &str, within_ms: u64| {
            run(
                sh,
                &["-c".into(), script.into()],
                Duration::from_millis(within_ms),
                false,
            )
        };
        let ok = run_sh(
            r#"echo '{"verdict":"healthy","summary":"fine"}'; exit 0"#,
            5000,
        );
        assert!(
            matches!(ok, Ended::Judged(ref j) if j.code == 0 && j.summary == "fine"),
            "{ok:?}"
        );
        let bad = run_sh(
            r#"echo '{"verdict":"unhealthy","summary":"gone"}'; exit 1"#,
            5000,
        );
        assert!(
            matches!(bad, Ended::Judged(ref j) if j.code == 1),
            "{bad:?}"
        );
        let killed = run_sh("echo oops >&2; kill -9 $$", 5000);
        assert!(
            matches!(killed, Ended::Trouble(ref w) if w.contains("SIGKILL") && w.contains("oops")),
            "{killed:?}"
        );
        let slow = run_sh("sleep 5", 200);
        assert!(
            matches!(slow, Ended::Trouble(ref w) if w.contains("overstayed")),
            "{slow:?}"
        );
        let garbage = run_sh("echo hello; exit 1", 5000);
        assert!(
            matches!(garbage, Ended::Trouble(ref w) if w.contains("exited 1")),
            "{garbage:?}"
        );
        let flood = run_sh("yes", 5000);
        assert!(
            matches!(flood, Ended::Trouble(ref w) if w.contains("more than")),
            "{flood:?}"
        );
        let missing = run(
            Path::new("/nonexistent/natsprobe"),
            &[],
            Duration::from_secs(1),
            false,
        );
        assert!(
            matches!(missing, Ended::Trouble(ref w) if w.contains("could not start")),
            "{missing:?}"
        );
    }
}
