//! Which sockets a process holds: socket inodes behind `/proc/PID/fd`, and processes by name.
//! This is what stops a sidecar's live connection in the same pod from masking a dead client.

use crate::facts::{Holder, Process};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    #[error("no process with PID {0}")]
    NoSuchPid(u32),
    #[error("no running process is named '{0}'")]
    NoSuchName(String),
    #[error("{path} is unreadable: {source}")]
    Unreadable { path: String, source: io::Error },
}

/// The socket inodes held open by `pids`, each with the PID holding it (of several, the one
/// that started first: `first_holder`) and its descriptor there. A process that exited
/// since it was listed holds no sockets and is skipped: a forking app's short-lived workers
/// come and go between the listing and this read. One reaped while its path is walked answers
/// "No such process" (ESRCH: the kernel's permission check on /proc/PID finds no task), not
/// "not found"; a CI run saw it once in 300 checks of an app forking every 5 ms.
pub fn socket_inodes(pids: &[u32]) -> Result<BTreeMap<u64, Holder>, OwnerError> {
    let mut inodes: BTreeMap<u64, Holder> = BTreeMap::new();
    for &pid in pids {
        let dir = format!("/proc/{pid}/fd");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if exited(&e, || running(pid)) => continue,
            Err(source) => return Err(OwnerError::Unreadable { path: dir, source }),
        };
        for entry in entries {
            // A descriptor closed while we read the directory is simply gone.
            let Ok(entry) = entry else { continue };
            let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(inode) = fs::read_link(entry.path())
                .ok()
                .and_then(|t| socket_inode(&t))
            {
                let here = Holder { pid, fd };
                let holder = inodes.entry(inode).or_insert(here);
                if first_holder(holder.pid, pid) != holder.pid {
                    *holder = here;
                }
            }
        }
    }
    Ok(inodes)
}

/// Whether `holder`'s descriptor is still the socket `inode`: one readlink of
/// /proc/PID/fd/N, not a walk of the process's descriptors.
pub fn still_holds(holder: Holder, inode: u64) -> bool {
    fs::read_link(format!("/proc/{}/fd/{}", holder.pid, holder.fd))
        .ok()
        .and_then(|t| socket_inode(&t))
        == Some(inode)
}

/// Whether an error reading a process's descriptors means it has exited: the kernel says
/// so (not found, or no such process), or it is no longer running when asked again. Any
/// other error from a running process (permission denied) is the probe's to report.
fn exited(error: &io::Error, still_running: impl FnOnce() -> bool) -> bool {
    error.kind() == io::ErrorKind::NotFound
        || error.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32)
        || !still_running()
}

/// Whether a process exists and has not exited (a zombie, state Z, or a dead one, X, holds
/// no descriptors).
fn running(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat_fields(&stat)
        .and_then(|mut fields| fields.next())
        .is_some_and(|state| !matches!(state, "Z" | "X" | "x"))
}

/// Of two processes holding one socket, the one that started first: the process that made
/// the connection, not a worker it forked (which holds the socket between fork and exec). By
/// PID alone a worker wins once PIDs wrap around.
fn first_holder(a: u32, b: u32) -> u32 {
    if a == b {
        return a;
    }
    match (start_ticks(a), start_ticks(b)) {
        (Some(ta), Some(tb)) if tb < ta => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

/// A process's start time, clock ticks after boot (/proc/PID/stat, field 22).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_start_ticks(&stat)
}

fn stat_start_ticks(stat: &str) -> Option<u64> {
    stat_fields(stat)?.nth(19)?.parse().ok()
}

/// The fields of /proc/PID/stat after the name, from field 3 (the state) on. The name (field
/// 2) is in parentheses and may hold spaces and parentheses itself.
fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

/// `socket:[12345]` → 12345.
fn socket_inode(target: &Path) -> Option<u64> {
    let text = target.to_str()?;
    text.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Confirms a PID exists (before any socket is read, so a typo is a usage error).
pub fn process(pid: u32) -> Result<Process, OwnerError> {
    let comm = format!("/proc/{pid}/comm");
    match fs::read_to_string(&comm) {
        Ok(name) => Ok(Process {
            pid,
            name: name.trim_end().to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(OwnerError::NoSuchPid(pid)),
        Err(source) => Err(OwnerError::Unreadable { path: comm, source }),
    }
}

/// Every process (other than this one) whose name is `name`: the kernel's `comm` (cut to 15
/// bytes, as `pgrep` matches it) or the base name of `argv[0]`, so long names work too.
pub fn processes_named(name: &str) -> Result<Vec<Process>, OwnerError> {
    let me = std::process::id();
    let proc = fs::read_dir("/proc").map_err(|source| OwnerError::Unreadable {
        path: "/proc".into(),
        source,
    })?;
    let mut found: Vec<Process> = proc
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| named(pid, name))
        .map(|pid| Process {
            pid,
            name: name.to_string(),
        })
        .collect();
    if found.is_empty() {
        return Err(OwnerError::NoSuchName(name.to_string()));
    }
    found.sort_by_key(|p| p.pid);
    Ok(found)
}

/// The processes (other than this one) holding any of `inodes`. Walks every /proc/PID/fd
/// it may read, so it is only done when needed (a stall about to be declared).
pub fn holders(inodes: &HashSet<u64>) -> Vec<u32> {
    holding(inodes).map(|(pid, _)| pid).collect()
}

/// Every process (other than this one) holding any of `inodes`, with the ones it holds: one
/// walk of /proc, reading each /proc/PID/fd this process may read.
fn holding(inodes: &HashSet<u64>) -> impl Iterator<Item = (u32, Vec<u64>)> + '_ {
    let me = std::process::id();
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(move |&pid| pid != me)
        .filter_map(move |pid| {
            let held = socket_inodes(&[pid]).ok()?;
            let mine: Vec<u64> = held.into_keys().filter(|i| inodes.contains(i)).collect();
            (!mine.is_empty()).then_some((pid, mine))
        })
}

/// Who holds each of `inodes`: a walk of every /proc/PID/fd this process may read (others are
/// left out: their sockets show without a holder). For a person reading `diagnose`.
pub fn owners(inodes: &HashSet<u64>) -> HashMap<u64, Process> {
    let mut first: HashMap<u64, u32> = HashMap::new();
    for (pid, held) in holding(inodes) {
        for inode in held {
            let holder = first.entry(inode).or_insert(pid);
            *holder = first_holder(*holder, pid);
        }
    }
    first
        .into_iter()
        .filter_map(|(inode, pid)| Some((inode, process(pid).ok()?)))
        .collect()
}

/// How long ago a process started: its start time in clock ticks after boot
/// (/proc/PID/stat, field 22) against the time since boot (/proc/uptime). Both count from
/// boot, so a wall-clock change does not matter.
pub fn age(pid: u32) -> Option<std::time::Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let uptime = fs::read_to_string("/proc/uptime").ok()?;
    let ticks_per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    process_age(&stat, &uptime, u64::try_from(ticks_per_second).ok()?)
}

fn process_age(stat: &str, uptime: &str, ticks_per_second: u64) -> Option<std::time::Duration> {
    let start_ticks = stat_start_ticks(stat)?;
    let up: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let started = start_ticks as f64 / ticks_per_second.max(1) as f64;
    Some(std::time::Duration::from_secs_f64((up - started).max(0.0)))
}

const COMM_LEN: usize = 15;

/// Whether process `pid` is named `name` as `--process` means it: its `comm`, or the base
/// name of its `argv[0]`.
pub fn named(pid: u32, name: &str) -> bool {
    let Ok(comm) = fs::read_to_string(format!("/proc/{pid}/comm")) else {
        return false;
    };
    let comm = comm.trim_end_matches('\n');
    if name.len() <= COMM_LEN {
        return comm == name || argv0_is(pid, name);
    }
    // The kernel cut the name; only then is argv[0] (which can block briefly on a busy
    // process's memory map) worth reading.
    name.as_bytes().starts_with(comm.as_bytes()) && comm.len() == COMM_LEN && argv0_is(pid, name)
}

fn argv0_is(pid: u32, name: &str) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or_default();
    base == name.as_bytes()
}

#[cfg(test)]
mod tests {

    /// A worker forked after its parent, holding the parent's socket, never takes its place,
    /// whichever PID is lower (PIDs wrap around).
    #[test]
    fn the_first_started_process_holds_a_shared_socket() {
        let me = std::process::id();
        // Start times count in clock ticks (10 ms): the worker starts a few ticks later.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let worker = child.id();
        assert_eq!(first_holder(me, worker), me);
        assert_eq!(first_holder(worker, me), me);
        // A holder that exited meanwhile gives way to one that can still be read.
        assert_eq!(first_holder(u32::MAX, me), me);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn finds_the_inodes_of_our_own_sockets() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let inodes = socket_inodes(&[std::process::id()]).unwrap();
        assert!(inodes.len() >= 2, "{inodes:?}");
    }

    #[test]
    fn a_missing_pid_is_named_and_a_vanished_one_holds_nothing() {
        assert!(matches!(
            process(u32::MAX),
            Err(OwnerError::NoSuchPid(u32::MAX))
        ));
        let me = std::process::id();
        let held = socket_inodes(&[u32::MAX, me]).unwrap();
        assert!(held.values().all(|h| h.pid == me), "{held:?}");
    }

    /// A process caught exiting answers ESRCH or ENOENT, or is gone when asked again; a
    /// running one that refuses is an error to report.
    #[test]
    fn an_exiting_process_is_skipped_and_a_refusal_is_reported() {
        let esrch = io::Error::from_raw_os_error(nix::errno::Errno::ESRCH as i32);
        let enoent = io::Error::from_raw_os_error(nix::errno::Errno::ENOENT as i32);
        let eacces = io::Error::from_raw_os_error(nix::errno::Errno::EACCES as i32);
        assert!(exited(&esrch, || true));
        assert!(exited(&enoent, || true));
        assert!(exited(&eacces, || false));
        assert!(!exited(&eacces, || true));

        assert!(running(std::process::id()));
        assert!(!running(u32::MAX));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Unreaped, it stays a zombie: listed in /proc, running no more.
        while running(pid) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        child.wait().unwrap();
    }

    #[test]
    fn process_age_from_stat_and_uptime() {
        // Field 22 is 4321 ticks; the name holds a space and a parenthesis.
        let stat =
            "77 (nats (peer) x) S 1 77 77 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 4321 1000 10";
        let age = process_age(stat, "143.21 280.00\n", 100).unwrap();
        assert_eq!(age.as_millis(), 100_000);
        assert_eq!(process_age("garbage", "1.0 1.0", 100), None);
    }

    #[test]
    fn the_holder_of_a_socket_is_found_and_its_age_read() {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let me = std::process::id();
        assert!(age(me).unwrap() < std::time::Duration::from_secs(3600));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server_side, _) = listener.accept().unwrap();
        let fd = client.as_raw_fd();
        let inode = socket_inodes(&[me])
            .unwrap()
            .into_iter()
            .find(|&(inode, _)| {
                fs::read_link(format!("/proc/self/fd/{fd}")).ok().as_deref()
                    == Some(Path::new(&format!("socket:[{inode}]")))
            })
            .map(|(inode, _)| inode)
            .expect("our client socket's inode");
        // A child that inherits the socket (dup2 clears close-on-exec) holds it too; holders()
        // finds the child and never this process.
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("10");
        // SAFETY: dup2 is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || match libc::dup2(fd, 3) {
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            });
        }
        let mut child = cmd.spawn().unwrap();
        let wanted = HashSet::from([inode]);
        let mut found = Vec::new();
        for _ in 0..100 {
            found = holders(&wanted);
            if found.contains(&child.id()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
        assert!(!found.contains(&me), "{found:?}");
    }

    /// The holder's descriptor is found by the walk and rechecked by one readlink: it holds the
    /// socket while it is open, and nothing else.
    #[test]
    fn a_socket_is_rechecked_through_its_descriptor() {
        use std::os::fd::AsRawFd;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let fd = client.as_raw_fd() as u32;
        let (&inode, &holder) = socket_inodes(&[std::process::id()])
            .unwrap()
            .iter()
            .find(|(_, h)| h.fd == fd)
            .expect("our client's descriptor");
        assert_eq!(holder.pid, std::process::id());
        assert!(still_holds(holder, inode));
        assert!(!still_holds(holder, inode + 1));
        assert!(!still_holds(Holder { pid: u32::MAX, fd }, inode));
        drop(client);
        assert!(!still_holds(holder, inode));
    }

    #[test]
    fn socket_links_parse() {
        assert_eq!(socket_inode(Path::new("socket:[3316620]")), Some(3316620));
        assert_eq!(socket_inode(Path::new("pipe:[3316620]")), None);
        assert_eq!(socket_inode(Path::new("/dev/null")), None);
    }

    #[test]
    fn an_unknown_name_is_an_error() {
        assert!(matches!(
            processes_named("no-such-process-here"),
            Err(OwnerError::NoSuchName(_))
        ));
    }
}
