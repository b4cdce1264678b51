//! Runs the probe as the kubelet would: the built binary (or the shipped static one when
//! NATSPROBE_BIN is set), fresh environment, exact exit code, everything shown on failure.

use super::NetNs;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// NATSPROBE_BIN when set; else cargo's build of the binary (tests, benches); else, for
/// examples, which cargo gives no binary path, the static build.
pub fn binary() -> PathBuf {
    match std::env::var_os("NATSPROBE_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => match option_env!("CARGO_BIN_EXE_natsprobe") {
            Some(path) => PathBuf::from(path),
            None => super::static_binary(),
        },
    }
}

pub struct Probe<'a> {
    args: Vec<OsString>,
    ns: Option<&'a NetNs>,
    env: Vec<(String, String)>,
    uid: Option<u32>,
    binary: PathBuf,
    /// An emulator that runs the binary (qemu-aarch64 for the arm64 build).
    runner: Option<&'static str>,
}

pub fn probe<'a>(args: &[&str]) -> Probe<'a> {
    Probe {
        args: args.iter().map(OsString::from).collect(),
        ns: None,
        env: Vec::new(),
        uid: None,
        binary: binary(),
        runner: None,
    }
}

impl<'a> Probe<'a> {
    pub fn ns(mut self, ns: &'a NetNs) -> Self {
        self.ns = Some(ns);
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Another copy of the probe (one `natsprobe install` wrote).
    pub fn binary_at(mut self, path: &std::path::Path) -> Self {
        self.binary = path.to_path_buf();
        self
    }

    /// The arm64 static binary, run under qemu-user.
    pub fn arm64(mut self) -> Self {
        self.binary = super::static_binary_arm64();
        self.runner = Some("qemu-aarch64");
        self
    }

    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = Some(uid);
        self
    }

    pub fn command(&self) -> Command {
        let mut cmd = match self.runner {
            Some(runner) => {
                let mut cmd = Command::new(runner);
                cmd.arg(&self.binary);
                cmd
            }
            None => Command::new(&self.binary),
        };
        if let Some(ns) = self.ns {
            ns.enter_on_exec(&mut cmd);
        }
        // Nothing from the test's own environment may change the probe's behaviour.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().to_string();
            if key.starts_with("NATSPROBE_") || key.starts_with("NATS_") {
                cmd.env_remove(&key);
            }
        }
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null());
        // std applies Command::uid before pre_exec closures, and setns needs root: so the
        // privileges are dropped in a closure registered after the namespace's.
        if let Some(uid) = self.uid {
            // SAFETY: setgroups/setgid/setuid are async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(uid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd
    }

    pub fn run(self) -> Run {
        let started = Instant::now();
        let out = self
            .command()
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        Run {
            args: self
                .args
                .iter()
                .map(|a| a.to_string_lossy().to_string())
                .collect(),
            env: self.env,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
            elapsed: started.elapsed(),
        }
    }
}

/// One finished run of the probe.
pub struct Run {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// Asserts the exit code, showing the whole run when it differs.
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Run {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{self}");
        self
    }

    /// Asserts the first output line (stdout, else stderr) contains every fragment.
    #[track_caller]
    pub fn says(&self, fragments: &[&str]) -> &Run {
        let line = self.line();
        for f in fragments {
            assert!(line.contains(f), "first line lacks `{f}`\n{self}");
        }
        self
    }

    pub fn line(&self) -> &str {
        let text = if self.stdout.trim().is_empty() {
            &self.stderr
        } else {
            &self.stdout
        };
        text.lines().next().unwrap_or_default()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e})\n{self}"))
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  args:   {:?}", self.args)?;
        if !self.env.is_empty() {
            writeln!(f, "  env:    {:?}", self.env)?;
        }
        writeln!(f, "  exit:   {:?} after {:?}", self.code, self.elapsed)?;
        writeln!(f, "  stdout: {}", self.stdout.trim_end())?;
        write!(f, "  stderr: {}", self.stderr.trim_end())
    }
}
