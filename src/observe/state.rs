//! The state dir: small files, each naming its own key (`Of::key`: the servers as shown,
//! and the consumer, subscription or look it is for): each consumer's previous sample, each
//! persisting cause (`cause-*`), and what `observe::remembered` keeps (the last look, each
//! subscription's connection). Written to a temporary file and renamed into place; no symlink
//! is followed; at most 64 KiB read. A missing, corrupt, foreign or symlinked file is a first
//! sample, never a fault, and a state dir that cannot be used makes every run a first sample
//! (and says so): the probe still answers.

use crate::config::{JsApi, Owner, ServerUrl, StateDirChoice};
use crate::facts::{ConsumerName, Gap, Loaded, Persisting, Sample, Wanted};
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// 3: the gap as what it does to the clocks (files of other versions are foreign: a first
/// sample).
const VERSION: u32 = 3;
const MAX_FILE: u64 = 64 * 1024;
/// Free space below which a place is full: four pages, a few state files.
const ROOM: u64 = 16 * 1024;

/// Which consumer a file is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// The server URLs as shown (never with userinfo).
    pub server: String,
    pub stream: String,
    pub durable: String,
}

/// What a state file is for: a consumer's sample and cause, a subscription's cause and
/// remembered connection, the last look at a check's consumers, or the connections a healthy
/// socket check counted (by the sockets it reads: the ports, whose, and which namespace).
#[derive(Debug, Clone, Copy)]
pub enum Of<'a> {
    Consumer(&'a ConsumerName),
    Subscription(&'a Wanted),
    Look(&'a [ConsumerName]),
    Sockets {
        ports: &'a [u16],
        owner: &'a Owner,
        netns_of: Option<u32>,
    },
}

impl Of<'_> {
    /// The key its files name: the one place a key is built. A subscription or a look has no
    /// stream, and a durable name no consumer can have (NATS names hold no spaces).
    pub fn key(self, server: &str) -> Key {
        let server = server.to_string();
        match self {
            Of::Look(consumers) => Key {
                server,
                stream: String::new(),
                durable: format!(
                    "look {}",
                    consumers
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            },
            Of::Consumer(name) => Key {
                server,
                stream: name.stream.clone(),
                durable: name.durable.clone(),
            },
            Of::Subscription(w) => Key {
                server,
                stream: String::new(),
                durable: format!(
                    "subscription {} {}",
                    w.subject,
                    w.queue.as_deref().unwrap_or("")
                ),
            },
            Of::Sockets {
                ports,
                owner,
                netns_of,
            } => Key {
                server,
                stream: String::new(),
                durable: format!(
                    "sockets {} {} netns {}",
                    ports
                        .iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    match owner {
                        Owner::Anyone => "anyone".to_string(),
                        Owner::Pid(pid) => format!("pid {pid}"),
                        Owner::Name(name) => format!("process {name}"),
                    },
                    netns_of.map_or("own".to_string(), |pid| format!("of {pid}")),
                ),
            },
        }
    }
}

/// A cause kept between runs (`rules::cause`), in its own file beside the consumer's sample.
#[derive(Serialize, Deserialize)]
struct CauseFile {
    version: u32,
    key: Key,
    cause: String,
    since_ms: i64,
    last_ms: i64,
}

/// The servers part of a key: the URLs as shown, so a sample never holds a credential.
pub fn server_key(urls: &[ServerUrl], api: &JsApi) -> String {
    let urls = urls
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // Another domain's stream may share a name with the local one: not the same consumer.
    match api {
        JsApi::Local => urls,
        other => format!("{urls} {}", other.base()),
    }
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    key: Key,
    sample: Stored,
}

/// The file's form of a sample: the rules' `Sample` knows nothing of serialization.
#[derive(Serialize, Deserialize)]
struct Stored {
    created: String,
    floor_consumer_seq: u64,
    floor_stream_seq: u64,
    delivered_stream_seq: u64,
    /// Nanoseconds since the epoch on the server's clock, as a string (JSON numbers past 2^53
    /// lose digits in some readers).
    ack_last_active: Option<String>,
    delivered_last_active: Option<String>,
    waiting: u64,
    stalled_ms: i64,
    pinned_ms: Option<i64>,
    seen_at_ms: i64,
    seen_ts: Option<String>,
    /// `none` or `resets`.
    gap: String,
}

impl From<&Sample> for Stored {
    fn from(s: &Sample) -> Stored {
        Stored {
            created: s.created.clone(),
            floor_consumer_seq: s.floor_consumer_seq,
            floor_stream_seq: s.floor_stream_seq,
            delivered_stream_seq: s.delivered_stream_seq,
            ack_last_active: s.ack_last_active.map(|t| t.to_string()),
            delivered_last_active: s.delivered_last_active.map(|t| t.to_string()),
            waiting: s.waiting,
            stalled_ms: s.stalled_ms,
            pinned_ms: s.pinned_ms,
            seen_at_ms: s.seen_at_ms,
            seen_ts: s.seen_ts.map(|t| t.to_string()),
            gap: match s.gap {
                Gap::None => "none",
                Gap::Resets => "resets",
            }
            .to_string(),
        }
    }
}

impl Stored {
    fn sample(self) -> Option<Sample> {
        let time = |t: Option<String>| match t {
            Some(t) => t.parse().ok().map(Some),
            None => Some(None),
        };
        let ack_last_active = time(self.ack_last_active)?;
        let delivered_last_active = time(self.delivered_last_active)?;
        let seen_ts = time(self.seen_ts)?;
        Some(Sample {
            created: self.created,
            floor_consumer_seq: self.floor_consumer_seq,
            floor_stream_seq: self.floor_stream_seq,
            delivered_stream_seq: self.delivered_stream_seq,
            ack_last_active,
            delivered_last_active,
            waiting: self.waiting,
            stalled_ms: self.stalled_ms,
            pinned_ms: self.pinned_ms,
            seen_at_ms: self.seen_at_ms,
            seen_ts,
            gap: match self.gap.as_str() {
                "none" => Gap::None,
                "resets" => Gap::Resets,
                _ => return None,
            },
        })
    }
}

/// A cause file's contents, for `key`: the cause kept, or none (unreadable, foreign).
pub fn decode_cause(text: &[u8], key: &Key) -> Option<Persisting> {
    match serde_json::from_slice::<CauseFile>(text).ok()? {
        f if f.version == VERSION && f.key == *key => Some(Persisting {
            cause: f.cause,
            since_ms: f.since_ms,
            last_ms: f.last_ms,
        }),
        _ => None,
    }
}

/// A state file's contents, for `key`: its sample, or why not.
pub fn decode(text: &[u8], key: &Key) -> Loaded {
    match serde_json::from_slice::<File>(text) {
        Ok(f) if f.version == VERSION && f.key == *key => match f.sample.sample() {
            Some(sample) => Loaded::Sample(sample),
            None => Loaded::Corrupt("not a sample".into()),
        },
        Ok(_) => Loaded::Foreign,
        Err(_) => Loaded::Corrupt("not a sample".into()),
    }
}

enum Kind {
    /// This user's, and nobody else may write to it.
    Private,
    Shared,
}

/// Creates `path` (0700) if missing, and says whose it is. A symlink (never followed) or a
/// non-directory is an error.
fn kind(path: &Path) -> Result<Kind, String> {
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {}", path.display(), text(&e))),
    }
    let meta =
        fs::symlink_metadata(path).map_err(|e| format!("{}: {}", path.display(), text(&e)))?;
    if meta.file_type().is_symlink() {
        return Err(format!("{} is a symlink; not followed", path.display()));
    }
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    let uid = nix::unistd::geteuid().as_raw();
    Ok(
        match meta.uid() == uid && meta.permissions().mode() & 0o022 == 0 {
            true => Kind::Private,
            false => Kind::Shared,
        },
    )
}

#[derive(Debug)]
pub struct StateDir {
    pub path: PathBuf,
}

/// `--state-dir`, else `$TMPDIR/natsprobe-<uid>` (/tmp without TMPDIR).
pub fn default_dir(tmpdir: Option<&str>) -> PathBuf {
    let base = tmpdir.filter(|t| !t.is_empty()).unwrap_or("/tmp");
    let uid = nix::unistd::geteuid();
    Path::new(base).join(format!("natsprobe-{uid}"))
}

/// Where samples go without `--state-dir` when the default cannot be used: `/dev/shm`, the
/// tmpfs container runtimes mount writable even under `readOnlyRootFilesystem: true`.
pub fn fallback_dirs() -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid();
    vec![Path::new("/dev/shm").join(format!("natsprobe-{uid}"))]
}

/// The state dir a run uses, and the places it passed over, each with why.
#[derive(Debug)]
pub struct Opened {
    pub dir: StateDir,
    pub skipped: Vec<(PathBuf, String)>,
}

/// Opens the first usable place of `choice` with room left: `--state-dir` alone, else the
/// default and then the fallbacks. A place that is full (an emptyDir or tmpfs at its size
/// limit) is passed over like one that cannot be written; when every usable place is full,
/// the one that kept a file last is used all the same (its samples are the newest), and its
/// stores fail: the samples' cause, an error only once it has lasted longer than the window
/// since the last sample kept. Err: every place tried, each with why it cannot be used.
pub fn open(choice: &StateDirChoice) -> Result<Opened, Vec<(PathBuf, String)>> {
    let mut skipped = Vec::new();
    let mut full: Vec<StateDir> = Vec::new();
    for path in std::iter::once(&choice.path).chain(&choice.fallbacks) {
        match StateDir::open(path.clone(), choice.explicit) {
            Ok(dir) => match room(&dir.path) {
                Ok(()) => return Ok(Opened { dir, skipped }),
                Err(why) => {
                    skipped.push((path.clone(), why));
                    full.push(dir);
                }
            },
            Err(why) => skipped.push((path.clone(), why)),
        }
    }
    // A store changes its dir only when it succeeds (`replace` writes nothing without room).
    let kept_last = |d: &StateDir| fs::metadata(&d.path).and_then(|m| m.modified()).ok();
    match full.into_iter().max_by_key(kept_last) {
        Some(dir) => Ok(Opened { dir, skipped }),
        None => Err(skipped),
    }
}

/// Room for a few more state files (each under a few KiB; a page each on tmpfs), as the file
/// system counts it.
fn room(path: &Path) -> Result<(), String> {
    let Ok(fs) = nix::sys::statvfs::statvfs(path) else {
        // Nothing said: the store will tell.
        return Ok(());
    };
    let bytes = fs.blocks_available().saturating_mul(fs.fragment_size());
    // A file system that counts no inodes (files() is 0) has no limit on them.
    let inodes = fs.files() == 0 || fs.files_available() >= 16;
    match bytes >= ROOM && inodes {
        true => Ok(()),
        false => Err(format!("no room left on {}", path.display())),
    }
}

impl StateDir {
    /// Creates the dir (0700) if needed. A symlink or non-directory is refused; so is a
    /// default dir (in a shared /tmp) that another user owns or others may write to. An
    /// explicit `--state-dir` that is not this user's private directory (an emptyDir is 0777,
    /// root's) holds the samples in a private `natsprobe-<uid>` inside it, as /tmp does: a
    /// sample another user could write could make a healthy consumer look stalled.
    pub fn open(path: PathBuf, explicit: bool) -> Result<StateDir, String> {
        let not_private =
            |p: &Path| format!("{} is not this user's private directory", p.display());
        match kind(&path)? {
            Kind::Private => Ok(StateDir { path }),
            Kind::Shared if explicit => {
                let uid = nix::unistd::geteuid();
                let inner = path.join(format!("natsprobe-{uid}"));
                match kind(&inner)? {
                    Kind::Private => Ok(StateDir { path: inner }),
                    Kind::Shared => Err(not_private(&inner)),
                }
            }
            Kind::Shared => Err(not_private(&path)),
        }
        .and_then(StateDir::writable)
    }

    /// A directory this user may not write in (a read-only mount, a dir made read-only) keeps
    /// no sample: found now, not at the first store.
    fn writable(self) -> Result<StateDir, String> {
        use nix::unistd::{access, AccessFlags};
        match access(&self.path, AccessFlags::W_OK | AccessFlags::X_OK) {
            Ok(()) => Ok(self),
            Err(e) => Err(format!(
                "cannot write in {}: {}",
                self.path.display(),
                e.desc()
            )),
        }
    }

    fn cause_file(&self, key: &Key) -> PathBuf {
        self.named("cause", key)
    }

    /// The file of one kind (`consumer`, `cause`, `look`, `subscription`, `sockets`) for a key: the one
    /// place a state file is named. The key inside the file settles a hash collision.
    pub fn named(&self, kind: &str, key: &Key) -> PathBuf {
        self.path
            .join(format!("{kind}-{:016x}.json", key_hash(key)))
    }

    /// The cause the last run kept for a consumer or subscription, if any (an unreadable or
    /// foreign file: none).
    pub fn load_cause(&self, server: &str, of: Of) -> Option<Persisting> {
        self.load_cause_of(&of.key(server))
    }

    /// Keeps the cause of a consumer or subscription, or clears what was kept (None).
    pub fn store_cause(
        &self,
        server: &str,
        of: Of,
        cause: Option<&Persisting>,
    ) -> Result<(), String> {
        self.store_cause_of(&of.key(server), cause)
    }

    /// A consumer's previous sample, or why there is none.
    pub fn load_sample(&self, server: &str, name: &ConsumerName) -> Loaded {
        self.load(&Of::Consumer(name).key(server))
    }

    /// Keeps a consumer's sample for the next run.
    pub fn store_sample(
        &self,
        server: &str,
        name: &ConsumerName,
        sample: &Sample,
    ) -> Result<(), String> {
        self.store(&Of::Consumer(name).key(server), sample)
    }

    fn load_cause_of(&self, key: &Key) -> Option<Persisting> {
        decode_cause(&self.read_small(&self.cause_file(key))?, key)
    }

    /// A small file's bytes, read without following a symlink; None when missing, a symlink,
    /// unreadable or larger than any state file (64 KiB).
    pub fn read_small(&self, path: &Path) -> Option<Vec<u8>> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ok()?;
        // Most state files are a few hundred bytes: one read, not a doubling series of them.
        let mut text = Vec::with_capacity(1024);
        file.take(MAX_FILE + 1).read_to_end(&mut text).ok()?;
        (text.len() as u64 <= MAX_FILE).then_some(text)
    }

    /// `read_small`, and when the file was last written or marked (ms since the epoch); the
    /// file is then marked with this run's time (its mtime, one `futimens`), so the next run
    /// that reads it learns how far apart the runs come. Writing nothing, it costs no room.
    pub(crate) fn read_small_marking(&self, path: &Path) -> Option<(Vec<u8>, Option<i64>)> {
        use std::os::fd::AsFd;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .ok()?;
        let marked = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        let mut text = Vec::new();
        (&file).take(MAX_FILE + 1).read_to_end(&mut text).ok()?;
        let now = nix::sys::time::TimeSpec::UTIME_NOW;
        let _ = nix::sys::stat::futimens(file.as_fd(), &nix::sys::time::TimeSpec::UTIME_OMIT, &now);
        (text.len() as u64 <= MAX_FILE).then_some((text, marked))
    }

    /// `replace`, unless the file already holds something newer (`at_of` reads when the
    /// contents were seen): several probes share a state dir (liveness, readiness, startup,
    /// `diagnose`), and the one that asked first but writes last must not put its older
    /// view over a newer one. Under an exclusive lock on the dir's `.lock`, held for the
    /// read and the rename.
    pub(crate) fn replace_unless_newer(
        &self,
        target: &Path,
        body: &[u8],
        at_ms: i64,
        at_of: impl Fn(&[u8]) -> Option<i64>,
    ) -> Result<(), String> {
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path.join(".lock"))
            .ok()
            .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
        // Without a lock (a dir without room for the lock file), the check still stands.
        let newer = self
            .read_small(target)
            .and_then(|text| at_of(&text))
            .is_some_and(|there| there > at_ms);
        let result = match newer {
            true => Ok(()),
            false => self.replace(target, body),
        };
        drop(lock);
        result
    }

    fn store_cause_of(&self, key: &Key, cause: Option<&Persisting>) -> Result<(), String> {
        let target = self.cause_file(key);
        let Some(c) = cause else {
            return match fs::remove_file(&target) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {}: {}", target.display(), text(&e)))
                }
                _ => Ok(()),
            };
        };
        let body = serde_json::to_vec(&CauseFile {
            version: VERSION,
            key: key.clone(),
            cause: c.cause.clone(),
            since_ms: c.since_ms,
            last_ms: c.last_ms,
        })
        .map_err(|e| e.to_string())?;
        self.replace(&target, &body)
    }

    fn file(&self, key: &Key) -> PathBuf {
        self.named("consumer", key)
    }

    fn load(&self, key: &Key) -> Loaded {
        let path = self.file(key);
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Loaded::Missing,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Loaded::Corrupt("a symlink".into())
            }
            Err(e) => return Loaded::Corrupt(e.to_string()),
        };
        let mut text = Vec::new();
        if let Err(e) = Read::by_ref(&mut file)
            .take(MAX_FILE)
            .read_to_end(&mut text)
        {
            return Loaded::Corrupt(e.to_string());
        }
        decode(&text, key)
    }

    /// Removes temporary files a run left when it was killed between writing and renaming
    /// (the deadline, SIGKILL): older than a minute, no run is still writing them.
    fn sweep(&self) {
        let Ok(entries) = fs::read_dir(&self.path) else {
            return;
        };
        let stale = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with('.') && name.ends_with(".tmp")) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < stale);
            if old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Replaces the file atomically: a reader sees the old sample or the new, never half;
    /// and never an older sample over a newer one another probe kept meanwhile.
    fn store(&self, key: &Key, sample: &Sample) -> Result<(), String> {
        let body = serde_json::to_vec(&File {
            version: VERSION,
            key: key.clone(),
            sample: sample.into(),
        })
        .map_err(|e| e.to_string())?;
        let seen_at = |text: &[u8]| match decode(text, key) {
            Loaded::Sample(s) => Some(s.seen_at_ms),
            _ => None,
        };
        self.replace_unless_newer(&self.file(key), &body, sample.seen_at_ms, seen_at)
    }

    /// Writes `body` to a temporary file and renames it over `target` (a file in this dir):
    /// a reader sees the old contents or the new, never half. Every state file goes this way.
    pub fn replace(&self, target: &Path, body: &[u8]) -> Result<(), String> {
        // Without room, not even the temporary file: the dir is left as the last store left it.
        if let Err(why) = room(&self.path) {
            return Err(format!("cannot write {}: {why}", target.display()));
        }
        self.sweep();
        let tmp = self.path.join(format!(
            ".{}.{}.tmp",
            target.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        // A killed run of a process with this PID may have left one.
        let _ = fs::remove_file(&tmp);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| f.write_all(body));
        // rename(2) replaces a symlink at the target, it does not write through it.
        let result = written.and_then(|()| fs::rename(&tmp, target));
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(format!("cannot write {}: {}", target.display(), text(&e)));
        }
        Ok(())
    }
}

/// An I/O error's words without std's "(os error N)": these land in a one-line reason.
fn text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}

/// A stable file name per key (FNV-1a, 64 bit); the key inside the file settles collisions.
fn key_hash(key: &Key) -> u64 {
    let parts = [&key.server, &key.stream, &key.durable];
    fnv1a(parts.iter().flat_map(|p| p.bytes().chain([0u8])))
}

/// FNV-1a, 64 bit: the state files' names.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(durable: &str) -> Key {
        Key {
            server: "nats://nats:4222".into(),
            stream: "ORDERS".into(),
            durable: durable.into(),
        }
    }

    fn sample(floor: u64) -> Sample {
        Sample {
            created: "2026-12-01T00:00:00Z".into(),
            floor_consumer_seq: floor,
            floor_stream_seq: floor,
            delivered_stream_seq: floor + 1,
            ack_last_active: Some(1_796_112_042_536_597_137),
            delivered_last_active: None,
            waiting: 3,
            stalled_ms: 1200,
            pinned_ms: None,
            seen_at_ms: 2,
            seen_ts: Some(1_796_112_043_000_000_000),
            gap: Gap::None,
        }
    }

    #[test]
    fn round_trip_and_replace() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        assert_eq!(dir.load(&key("a")), Loaded::Missing);
        dir.store(&key("a"), &sample(1)).unwrap();
        dir.store(&key("a"), &sample(2)).unwrap();
        assert_eq!(dir.load(&key("a")), Loaded::Sample(sample(2)));
        assert_eq!(dir.load(&key("b")), Loaded::Missing);
        let mode = fs::metadata(dir.file(&key("a")))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers: Vec<_> = fs::read_dir(&dir.path)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name() != ".lock")
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        // Another probe's newer sample stays: an older one written last is not kept.
        dir.store(
            &key("a"),
            &Sample {
                seen_at_ms: 1,
                ..sample(9)
            },
        )
        .unwrap();
        assert_eq!(dir.load(&key("a")), Loaded::Sample(sample(2)));
    }

    #[test]
    fn corrupt_foreign_and_symlinked_files_are_first_samples() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().to_path_buf(), true).unwrap();
        fs::write(dir.file(&key("a")), b"{\"version\":1,\"key\":").unwrap();
        assert!(matches!(dir.load(&key("a")), Loaded::Corrupt(_)));
        // A file holding another key (as after a hash collision, or a copied dir).
        dir.store(&key("b"), &sample(5)).unwrap();
        fs::rename(dir.file(&key("b")), dir.file(&key("c"))).unwrap();
        assert_eq!(dir.load(&key("c")), Loaded::Foreign);
        // A symlink where the file should be is neither read nor written through.
        let outside = tmp.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        std::os::unix::fs::symlink(&outside, dir.file(&key("d"))).unwrap();
        assert_eq!(dir.load(&key("d")), Loaded::Corrupt("a symlink".into()));
        dir.store(&key("d"), &sample(7)).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
        assert_eq!(dir.load(&key("d")), Loaded::Sample(sample(7)));
    }

    #[test]
    fn unusable_dirs_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(StateDir::open(link, true).unwrap_err().contains("symlink"));
        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(StateDir::open(file, true)
            .unwrap_err()
            .contains("not a directory"));
        let open = tmp.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(StateDir::open(open.clone(), false)
            .unwrap_err()
            .contains("private"));
        // An explicit --state-dir that others may write to (an emptyDir): the samples go in
        // a private directory inside it.
        let uid = nix::unistd::geteuid();
        let dir = StateDir::open(open.clone(), true).unwrap();
        assert_eq!(dir.path, open.join(format!("natsprobe-{uid}")));
        let mode = fs::metadata(&dir.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // ... unless that is taken by something else.
        fs::remove_dir(&dir.path).unwrap();
        std::os::unix::fs::symlink(&real, &dir.path).unwrap();
        assert!(StateDir::open(open, true).unwrap_err().contains("symlink"));
    }

    /// A state file larger than any sample (64 KiB read at most) is a first sample.
    #[test]
    fn an_oversized_file_is_a_first_sample() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        let mut body = serde_json::to_vec(&File {
            version: VERSION,
            key: key("a"),
            sample: (&sample(1)).into(),
        })
        .unwrap();
        body.truncate(body.len() - 1);
        body.extend(std::iter::repeat_n(b' ', 1 << 20));
        body.push(b'}');
        fs::write(dir.file(&key("a")), &body).unwrap();
        assert!(matches!(dir.load(&key("a")), Loaded::Corrupt(_)));
    }

    /// A temporary file a killed run left is removed once it is a minute old; a fresh one
    /// (another run writing now) is not.
    #[test]
    fn stale_temporary_files_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        let stale = dir.path.join(".consumer-00000000000000aa.json.4242.tmp");
        let fresh = dir.path.join(".consumer-00000000000000bb.json.4343.tmp");
        fs::write(&stale, b"half").unwrap();
        fs::write(&fresh, b"half").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        dir.store(&key("a"), &sample(1)).unwrap();
        assert!(!stale.exists(), "the stale file stays");
        assert!(fresh.exists(), "a fresh file was removed");
    }

    #[test]
    fn the_default_dir_is_per_user_under_tmpdir() {
        let uid = nix::unistd::geteuid();
        assert_eq!(
            default_dir(Some("/run/x")),
            PathBuf::from(format!("/run/x/natsprobe-{uid}"))
        );
        assert_eq!(
            default_dir(None),
            PathBuf::from(format!("/tmp/natsprobe-{uid}"))
        );
    }
}
