//! `serve`'s looks: a process of their own (`serve --look` with the same flags), asked for one
//! look at a time on its stdin (`live` or `startup`), each answered with a check's JSON and a
//! closing line with its exit code and the logins to NATS it made so far (`natsprobe-look-end N L`). The process holds its NATS
//! connection from one look to the next (`observe::held`). A look that cannot end as a check
//! ends (the process not started, killed, overstaying the deadline, answering too much or
//! something that is not a check's answer) is natsprobe's own trouble, in words, and the
//! process is replaced at the next look; nothing here judges.

use super::http::{poll, pollfd};
use crate::facts::Meaning;
use crate::facts::{Ended, Judged, Part, PartName};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The most a look may print: a check's JSON with `-v` and many sockets is a few KiB.
pub const MOST_OUTPUT: usize = 256 << 10;

/// What begins the line that closes each answer of the looks' process; its exit code follows.
const END: &str = "natsprobe-look-end ";

/// The line that closes a look's answer: `code` its exit code, `logins` the logins to NATS
/// the looks' process made so far.
pub fn end_line(code: u8, logins: u64) -> String {
    format!("{END}{code} {logins}")
}

/// The looks' process's side: waits for `serve`'s next request (the held NATS connection's
/// runtime turning meanwhile), and reads it. None: `serve` is gone (stdin closed), or asked
/// for something that is not a look.
pub fn next_request() -> Option<Meaning> {
    let stdin = std::io::stdin();
    super::held::idle_until_readable(stdin.as_fd());
    let mut line = String::new();
    stdin.lock().take(64).read_line(&mut line).ok()?;
    match line.trim() {
        "live" => Some(Meaning::Live),
        "startup" => Some(Meaning::Startup),
        _ => None,
    }
}

/// `serve`'s side: the looks' process, started when first needed and again after one that
/// could not answer.
pub struct Looks {
    exe: PathBuf,
    args: Vec<OsString>,
    running: Option<Running>,
    /// Logins the looks' processes reported and `logins` has not yet given.
    logins: u64,
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    pipes: [Pipe; 2],
    /// The logins this process reported so far.
    logins: u64,
}

impl Looks {
    /// The looks' process is `exe args…`.
    pub fn new(exe: PathBuf, args: Vec<OsString>) -> Looks {
        Looks {
            exe,
            args,
            running: None,
            logins: 0,
        }
    }

    /// The logins to NATS the looks made since this was last asked.
    pub fn logins(&mut self) -> u64 {
        std::mem::take(&mut self.logins)
    }

    /// One look with `meaning`, answered within `within`; past that the process is killed.
    pub fn look(&mut self, meaning: Meaning, within: Duration) -> Ended {
        let deadline = Instant::now() + within;
        let request = match meaning {
            Meaning::Live => "live\n",
            Meaning::Startup => "startup\n",
        };
        let startup = meaning == Meaning::Startup;
        // A process that ended since the last look (killed while it waited) is replaced once.
        for attempt in 0..2 {
            if self.running.is_none() {
                match self.start() {
                    Ok(running) => self.running = Some(running),
                    Err(e) => return Ended::Trouble(format!("could not start a look: {e}")),
                }
            }
            let running = self.running.as_mut().expect("started above");
            let sent = running
                .stdin
                .write_all(request.as_bytes())
                .and_then(|()| running.stdin.flush());
            if sent.is_ok() {
                break;
            }
            let gone = self.stop();
            if attempt == 1 {
                return Ended::Trouble(format!(
                    "could not ask for a look: the looks' process {gone}"
                ));
            }
        }
        let running = self.running.as_mut().expect("asked above");
        for (_, got) in &mut running.pipes {
            got.clear();
        }
        match read_answer(&mut running.pipes, deadline) {
            Err(why) => {
                self.stop();
                Ended::Trouble(why)
            }
            Ok(Answer::Framed { code, logins, end }) => {
                self.logins += logins.saturating_sub(running.logins);
                running.logins = running.logins.max(logins);
                let [(_, out), (_, err)] = &running.pipes;
                let body = &out[..out.len() - end];
                let ended = answered(body, code.into(), "ended", err, startup);
                if let Ended::Trouble(_) = ended {
                    self.stop();
                }
                ended
            }
            Ok(Answer::Ended) => {
                let mut running = self.running.take().expect("read above");
                let status = loop {
                    match running.child.try_wait() {
                        Ok(Some(status)) => break status,
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(1))
                        }
                        Ok(None) => {
                            let _ = running.child.kill();
                            let _ = running.child.wait();
                            return Ended::Trouble(overstayed(within));
                        }
                        Err(e) => return Ended::Trouble(format!("could not wait for a look: {e}")),
                    }
                };
                let [(_, out), (_, err)] = &running.pipes;
                ended(status, out, err, startup)
            }
        }
    }

    fn start(&self) -> std::io::Result<Running> {
        let mut child = Command::new(&self.exe)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let out = child.stdout.take().map(OwnedFd::from);
        let err = child.stderr.take().map(OwnedFd::from);
        let pipes = [out, err].map(|p| (p.map(File::from), Vec::new()));
        Ok(Running {
            child,
            stdin,
            pipes,
            logins: 0,
        })
    }

    /// Kills the looks' process (if it has not ended) and says how it ended.
    fn stop(&mut self) -> String {
        let Some(mut running) = self.running.take() else {
            return "was not running".into();
        };
        let ended = running.child.try_wait().ok().flatten();
        let _ = running.child.kill();
        match ended.or_else(|| running.child.wait().ok()) {
            Some(status) if status.signal().is_some() && ended.is_some() => format!(
                "was killed by {}",
                signal_name(status.signal().unwrap_or_default())
            ),
            Some(status) if ended.is_some() => format!("exited {}", status.code().unwrap_or(-1)),
            _ => "was killed".into(),
        }
    }
}

/// How a look whose process ended answered: the check's exit code and JSON (a look cut short
/// by its own deadline ends the process with the deadline's answer), or its trouble.
fn ended(status: ExitStatus, out: &[u8], err: &[u8], startup: bool) -> Ended {
    if let Some(signal) = status.signal() {
        return Ended::Trouble(format!(
            "the look was killed by {}{}",
            signal_name(signal),
            said(err)
        ));
    }
    answered(out, status.code().unwrap_or(-1), "exited", err, startup)
}

/// The check's answer a look printed (`out`) with its exit code, else its trouble: it `how`
/// (ended, exited) with that code without one.
fn answered(out: &[u8], code: i32, how: &str, err: &[u8], startup: bool) -> Ended {
    match u8::try_from(code).ok().and_then(|c| parse(out, c, startup)) {
        Some(judged) => Ended::Judged(judged),
        None => Ended::Trouble(format!(
            "the look {how} {code} without a check's answer{}",
            said(err)
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
        let (root, limit, usage) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max", "memory.current"),
            c if c.split(',').any(|c| c == "memory") => (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ),
            _ => continue,
        };
        for dir in [format!("{root}{path}"), root.to_string()] {
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

/// A check's answer, read from its JSON: the verdict word and summary, why it could not
/// judge, and each consumer's and subscription's state; None when it is not a check's JSON.
pub fn parse(out: &[u8], code: u8, startup: bool) -> Option<Judged> {
    #[derive(serde::Deserialize)]
    struct Answer {
        verdict: String,
        summary: String,
        not_judged: Option<String>,
        #[serde(default)]
        consumers: Vec<Consumer>,
        #[serde(default)]
        subscriptions: Vec<Subscription>,
        consumers_looked: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Consumer {
        stream: String,
        durable: String,
        state: String,
        no_progress_ms: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Subscription {
        subject: String,
        queue: Option<String>,
        consumer: Option<String>,
        state: String,
    }
    let text = std::str::from_utf8(out).ok()?.trim();
    if !text.starts_with('{') || code > 3 {
        return None;
    }
    let answer: Answer = serde_json::from_str(text).ok()?;
    let consumers = answer.consumers.into_iter().map(|c| Part {
        name: PartName::Consumer {
            stream: c.stream,
            durable: c.durable,
        },
        state: c.state,
        no_progress_ms: c.no_progress_ms,
    });
    let subscriptions = answer.subscriptions.into_iter().map(|s| Part {
        name: match s.consumer.as_deref().and_then(|c| c.split_once('/')) {
            Some((stream, durable)) => PartName::Own {
                stream: stream.into(),
                durable: durable.into(),
            },
            None => PartName::Subscription {
                subject: s.subject,
                queue: s.queue,
            },
        },
        state: s.state,
        no_progress_ms: None,
    });
    Some(Judged {
        code,
        verdict: answer.verdict,
        summary: answer.summary,
        json: text.to_string(),
        startup,
        not_judged: answer.not_judged,
        parts: consumers.chain(subscriptions).collect(),
        consumers_skipped: answer.consumers_looked.as_deref() == Some("skipped"),
    })
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

/// How an answer on stdout ended.
enum Answer {
    /// Closed by its end line (`end` bytes), with its exit code and the process's logins so
    /// far: the process waits for the next request.
    Framed { code: u8, logins: u64, end: usize },
    /// The process closed its stdout (it ended).
    Ended,
}

/// The end line that closes `out`, if it does.
fn framed(out: &[u8]) -> Option<Answer> {
    let body = out.strip_suffix(b"\n")?;
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let last = std::str::from_utf8(&body[start..]).ok()?;
    let (code, logins) = last.strip_prefix(END)?.split_once(' ')?;
    Some(Answer::Framed {
        code: code.parse().ok()?,
        logins: logins.parse().ok()?,
        end: out.len() - start,
    })
}

/// Reads the looks' process's stdout and stderr until its answer is closed by its end line or
/// the process closes stdout, by `deadline`, at most `MOST_OUTPUT`.
fn read_answer(pipes: &mut [Pipe; 2], deadline: Instant) -> Result<Answer, String> {
    let within = deadline.saturating_duration_since(Instant::now());
    let mut buf = [0u8; 16 << 10];
    loop {
        if let Some(answer) = framed(&pipes[0].1) {
            return Ok(answer);
        }
        // Ended: stdout and stderr closed (what it said last, on stderr, is read to its end).
        if pipes.iter().all(|(p, _)| p.is_none()) {
            return Ok(Answer::Ended);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(overstayed(within));
        }
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .filter_map(|(p, _)| p.as_ref())
            .map(|p| pollfd(p.as_raw_fd(), libc::POLLIN))
            .collect();
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        if !poll(&mut fds, ms).map_err(|e| format!("could not read a look's answer: {e}"))? {
            continue;
        }
        for fd in fds.iter().filter(|f| f.revents != 0) {
            let (pipe, got) = pipes
                .iter_mut()
                .find(|(p, _)| p.as_ref().is_some_and(|p| p.as_raw_fd() == fd.fd))
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
}

/// A pipe from the child while open, and what it gave.
type Pipe = (Option<File>, Vec<u8>);

#[cfg(test)]
mod tests {
    use super::*;

    impl Looks {
        /// The process id of the looks' process now running, if any.
        fn pid(&self) -> Option<u32> {
            self.running.as_ref().map(|r| r.child.id())
        }
    }

    #[test]
    fn a_checks_answer_is_read_from_its_json() {
        let json = br#"{"schema_version":1,"command":"check","verdict":"unhealthy","summary":"no connection"}"#;
        let judged = parse(json, 1, false).unwrap();
        assert_eq!((judged.code, &*judged.verdict), (1, "unhealthy"));
        assert_eq!(judged.summary, "no connection");
        assert_eq!((judged.not_judged, judged.parts), (None, vec![]));
        let json = br#"{"verdict":"healthy","summary":"s","not_judged":"timeout",
            "consumers":[{"stream":"S","durable":"D","state":"waiting","no_progress_ms":1500}],
            "subscriptions":[{"subject":"_INBOX.x","queue":"q","consumer":"S/D","state":"held"},
                {"subject":"orders.>","queue":null,"consumer":null,"state":"carried"}]}"#;
        let judged = parse(json, 0, true).unwrap();
        assert!(judged.startup);
        assert_eq!(judged.not_judged.as_deref(), Some("timeout"));
        let names: Vec<_> = judged.parts.iter().map(|p| (&p.name, &*p.state)).collect();
        let (s, d) = ("S".to_string(), "D".to_string());
        assert_eq!(
            names,
            [
                (
                    &PartName::Consumer {
                        stream: s.clone(),
                        durable: d.clone()
                    },
                    "waiting"
                ),
                (
                    &PartName::Own {
                        stream: s,
                        durable: d
                    },
                    "held"
                ),
                (
                    &PartName::Subscription {
                        subject: "orders.>".into(),
                        queue: None
                    },
                    "carried"
                ),
            ]
        );
        assert_eq!(judged.parts[0].no_progress_ms, Some(1500));
        assert_eq!(parse(json, 4, false), None);
        assert_eq!(parse(b"healthy: 1 connection", 0, false), None);
        assert_eq!(parse(b"{\"verdict\":1}", 0, false), None);
        assert_eq!(parse(b"[]", 0, false), None);
        assert_eq!(parse(&[0xff, b'{'], 0, false), None);
    }

    fn sh(script: &str) -> Looks {
        Looks::new("/bin/sh".into(), vec!["-c".into(), script.into()])
    }

    #[test]
    fn the_looks_process_answers_look_after_look() {
        // Each answer closed by its end line; the process stays for the next request.
        let mut looks = sh(r#"while read meaning; do
                echo "{\"verdict\":\"healthy\",\"summary\":\"$meaning $$\"}"
                logins=$((logins + 2))
                echo natsprobe-look-end 0 $logins
            done"#);
        let first = looks.look(Meaning::Startup, Duration::from_secs(5));
        let pid = looks.pid().expect("running");
        let second = looks.look(Meaning::Live, Duration::from_secs(5));
        let (Ended::Judged(first), Ended::Judged(second)) = (first, second) else {
            panic!("both judged");
        };
        assert_eq!(first.summary, format!("startup {pid}"));
        assert!(first.startup && !second.startup);
        assert_eq!(second.summary, format!("live {pid}"), "the same process");
        assert_eq!(second.code, 0);
        assert!(second.json.starts_with('{') && !second.json.contains("natsprobe-look-end"));
        // The process reports its logins so far; each is given once.
        assert_eq!(looks.logins(), 4);
        assert_eq!(looks.logins(), 0);
    }

    #[test]
    fn a_looks_process_that_ended_between_looks_is_replaced() {
        let mut looks = sh(r#"read meaning
            echo '{"verdict":"unhealthy","summary":"gone"}'
            echo natsprobe-look-end 1 1
            read meaning; kill -9 $$"#);
        let first = looks.look(Meaning::Live, Duration::from_secs(5));
        let pid = looks.pid();
        assert!(
            matches!(first, Ended::Judged(ref j) if j.code == 1),
            "{first:?}"
        );
        // The process dies at the next request: natsprobe's trouble, and a new one next time.
        let second = looks.look(Meaning::Live, Duration::from_secs(5));
        assert!(
            matches!(second, Ended::Trouble(ref w) if w.contains("SIGKILL")),
            "{second:?}"
        );
        assert_eq!(looks.pid(), None);
        let third = looks.look(Meaning::Live, Duration::from_secs(5));
        assert!(
            matches!(third, Ended::Judged(ref j) if j.code == 1),
            "{third:?}"
        );
        assert_ne!(looks.pid(), pid);
        // A new process counts its logins from none.
        assert_eq!(looks.logins(), 2);
        // One killed while it waited is replaced before it is asked.
        let _ = std::process::Command::new("kill")
            .args(["-9", &looks.pid().unwrap().to_string()])
            .status();
        std::thread::sleep(Duration::from_millis(100));
        let fourth = looks.look(Meaning::Live, Duration::from_secs(5));
        assert!(
            matches!(fourth, Ended::Judged(ref j) if j.code == 1),
            "{fourth:?}"
        );
    }

    #[test]
    fn a_look_that_cannot_answer_is_trouble_in_words() {
        let look = |script: &str, within_ms: u64| {
            sh(script).look(Meaning::Live, Duration::from_millis(within_ms))
        };
        // A look cut short by its deadline ends its process with the deadline's answer.
        let ok = look(
            r#"read m; echo '{"verdict":"not_judged","summary":"late"}'; exit 3"#,
            5000,
        );
        assert!(
            matches!(ok, Ended::Judged(ref j) if j.code == 3 && j.summary == "late"),
            "{ok:?}"
        );
        let killed = look("read m; echo oops >&2; kill -9 $$", 5000);
        assert!(
            matches!(killed, Ended::Trouble(ref w) if w.contains("SIGKILL") && w.contains("oops")),
            "{killed:?}"
        );
        let slow = look("read m; sleep 5", 200);
        assert!(
            matches!(slow, Ended::Trouble(ref w) if w.contains("overstayed")),
            "{slow:?}"
        );
        let garbage = look("read m; echo hello; exit 1", 5000);
        assert!(
            matches!(garbage, Ended::Trouble(ref w) if w.contains("exited 1")),
            "{garbage:?}"
        );
        let framed_garbage = look(
            "read m; echo hello; echo natsprobe-look-end 0 0; sleep 5",
            5000,
        );
        assert!(
            matches!(framed_garbage, Ended::Trouble(ref w) if w.contains("without a check's answer")),
            "{framed_garbage:?}"
        );
        let flood = look("read m; yes", 5000);
        assert!(
            matches!(flood, Ended::Trouble(ref w) if w.contains("more than")),
            "{flood:?}"
        );
        let missing = Looks::new("/nonexistent/natsprobe".into(), vec![])
            .look(Meaning::Live, Duration::from_secs(1));
        assert!(
            matches!(missing, Ended::Trouble(ref w) if w.contains("could not start")),
            "{missing:?}"
        );
    }

    #[test]
    fn an_answer_is_closed_by_its_end_line() {
        let end = |out: &[u8]| match framed(out) {
            Some(Answer::Framed { code, logins, end }) => Some((code, logins, end)),
            _ => None,
        };
        assert_eq!(end(b"{}\nnatsprobe-look-end 1 3\n"), Some((1, 3, 23)));
        assert_eq!(end(b"natsprobe-look-end 0 0\n"), Some((0, 0, 23)));
        assert_eq!(end(b"{}\nnatsprobe-look-end 1 0"), None);
        assert_eq!(end(b"{}\nnatsprobe-look-end 1\n"), None);
        assert_eq!(end(b"{\"a\":\"natsprobe-look-end 1 0\"}\n"), None);
        assert_eq!(end(b""), None);
    }
}
