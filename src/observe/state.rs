//! The state dir: one file per check (`check-*.json`), holding what the check remembers from
//! one run to the next (`natsprobe_core::state::State`: the connections counted, the last look,
//! the samples, the subscriptions' connections, the faults and causes), and `serve`'s last
//! verdict (`observe::kept`). Each file names its own key (`Key`: the servers as shown and
//! what the check looks at) and its version, is written to a temporary file and renamed
//! (never an older state over a newer one, under the dir's `.lock`), is read without following
//! a symlink, at most 256 KiB. A missing, corrupt, foreign or symlinked file is nothing
//! remembered, never a fault, and a state dir that cannot be used makes every run a first
//! (and says so): the probe still answers. Files of another version, and the older layout's
//! files (one per consumer, look, subscription, cause and set of sockets), are never read:
//! one first sample after an upgrade.

use crate::config::{CheckConfig, JsApi, Owner, ServerUrl, StateDirChoice};
use natsprobe_core::state::{Kept, State};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The one version of every state file: bumped when what a file holds changes.
pub const VERSION: u32 = 6;
const MAX_FILE: u64 = 256 * 1024;
/// Free space below which a place is full: four pages, a few state files.
const ROOM: u64 = 16 * 1024;

/// Whose a state file is: the servers as shown (never with userinfo) and what is looked at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub server: String,
    pub of: String,
}

/// A state file: its version, its key, when it was written (local clock, ms since the
/// epoch), and what it holds.
#[derive(Serialize, Deserialize)]
pub struct Envelope<T> {
    pub version: u32,
    pub key: Key,
    pub at_ms: i64,
    pub body: T,
}

/// The check's key: the servers (and where the JetStream API is: another domain's stream may
/// share a name with the local one), the sockets it reads (the ports, whose, which
/// namespace), its consumers and subscriptions. Not `--startup`: the startup probe and the
/// liveness probe of the same check share what they learn.
pub fn key(config: &CheckConfig) -> Key {
    let list = |items: Vec<String>| items.join(" ");
    let owner = match &config.owner {
        Owner::Anyone => "anyone".to_string(),
        Owner::Pid(pid) => format!("pid {pid}"),
        Owner::Name(name) => format!("process {name}"),
    };
    let core = &config.core;
    let of = format!(
        "ports {} {owner} netns {} consumers {} subscriptions {}{}",
        list(core.connection.ports.iter().map(u16::to_string).collect()),
        config
            .netns_of
            .map_or("own".to_string(), |pid| format!("of {pid}")),
        list(core.consumers.iter().map(ToString::to_string).collect()),
        list(
            core.subscriptions
                .iter()
                .map(|w| format!("{}@{}", w.subject, w.queue.as_deref().unwrap_or("")))
                .collect()
        ),
        if core.own_subscription { " own" } else { "" },
    );
    Key {
        server: server_key(&config.servers, &config.js_api),
        of,
    }
}

/// The servers part of a key: the URLs as shown, so a state file never holds a credential.
pub fn server_key(urls: &[ServerUrl], api: &JsApi) -> String {
    let urls = urls
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    match api {
        JsApi::Local => urls,
        other => format!("{urls} {}", other.base()),
    }
}

/// A check's state file's contents, for `key`: its state, or why there is none.
pub fn decode(text: &[u8], key: &Key) -> Kept {
    match serde_json::from_slice::<Envelope<State>>(text) {
        Ok(f) if f.version == VERSION && f.key == *key => Kept::State(f.body),
        Ok(_) => Kept::Foreign,
        // Another version's body may not parse: foreign, as long as the envelope does.
        Err(_) => match serde_json::from_slice::<Envelope<serde_json::Value>>(text) {
            Ok(_) => Kept::Foreign,
            Err(_) => Kept::Corrupt("not a state file".into()),
        },
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
    private_in(Path::new(base))
}

/// This user's dir inside a shared one: `natsprobe-<uid>`.
fn private_in(dir: &Path) -> PathBuf {
    dir.join(format!("natsprobe-{}", nix::unistd::geteuid()))
}

/// Where samples go without `--state-dir` when the default cannot be used: `/dev/shm`, the
/// tmpfs container runtimes mount writable even under `readOnlyRootFilesystem: true`.
pub fn fallback_dirs() -> Vec<PathBuf> {
    vec![private_in(Path::new("/dev/shm"))]
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
                let inner = private_in(&path);
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

    /// The file of one kind (`check`, `serve`) for a key: the one place a state file is
    /// named. The key inside the file settles a hash collision.
    pub fn named(&self, kind: &str, key: &Key) -> PathBuf {
        self.path
            .join(format!("{kind}-{:016x}.json", key_hash(key)))
    }

    /// The check's state, and when any run of the check last wrote or read it (ms since
    /// the epoch); reading marks the file with this run's time, so the next run learns how
    /// far apart the runs come.
    pub fn load(&self, key: &Key) -> (Kept, Option<i64>) {
        let path = self.named("check", key);
        match self.read_small_marking(&path) {
            Ok((text, marked)) => (decode(&text, key), marked),
            Err(None) => (Kept::Missing, None),
            Err(Some(why)) => (Kept::Corrupt(why), None),
        }
    }

    /// Keeps the check's state for the next run, unless a run of the same check kept a newer
    /// one meanwhile: several probes share a state dir (liveness, readiness, startup,
    /// `diagnose`), and the one that asked first but writes last must not put its older view
    /// over a newer one. Under an exclusive lock on the dir's `.lock`, held for the read and the
    /// rename.
    pub fn store(&self, key: &Key, state: &State, at_ms: i64) -> Result<(), String> {
        let body = serde_json::to_vec(&Envelope {
            version: VERSION,
            key: key.clone(),
            at_ms,
            body: state,
        })
        .map_err(|e| e.to_string())?;
        let target = self.named("check", key);
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
            .read_small(&target)
            .and_then(|text| serde_json::from_slice::<Envelope<IgnoredAny>>(&text).ok())
            .is_some_and(|there| there.key == *key && there.at_ms > at_ms);
        let result = match newer {
            true => Ok(()),
            false => self.replace(&target, &body),
        };
        drop(lock);
        result
    }

    /// A small file's bytes, read without following a symlink; None when missing, a symlink,
    /// unreadable or larger than any state file (256 KiB).
    pub fn read_small(&self, path: &Path) -> Option<Vec<u8>> {
        let (_, text) = open_and_read(path).ok()?;
        (text.len() as u64 <= MAX_FILE).then_some(text)
    }

    /// `read_small`, and when the file was last written or marked (ms since the epoch); the
    /// file is then marked with this run's time (its mtime, one `futimens`). Writing nothing,
    /// it costs no room. Err: no file (None), or why it cannot be read.
    fn read_small_marking(&self, path: &Path) -> Result<(Vec<u8>, Option<i64>), Option<String>> {
        use std::os::fd::AsFd;
        let (file, body) = match open_and_read(path) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Some("a symlink".into()))
            }
            Err(e) => return Err(Some(text(&e))),
        };
        let marked = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        let now = nix::sys::time::TimeSpec::UTIME_NOW;
        let _ = nix::sys::stat::futimens(file.as_fd(), &nix::sys::time::TimeSpec::UTIME_OMIT, &now);
        match body.len() as u64 <= MAX_FILE {
            true => Ok((body, marked)),
            false => Err(Some("larger than any state file".into())),
        }
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

/// Opens `path` without following a symlink (ELOOP) and reads at most one byte more than any
/// state file holds, so that a larger one shows.
fn open_and_read(path: &Path) -> io::Result<(fs::File, Vec<u8>)> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    // Most state files are a few hundred bytes: one read, not a doubling series of them.
    let mut text = Vec::with_capacity(2048);
    (&file).take(MAX_FILE + 1).read_to_end(&mut text)?;
    Ok((file, text))
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
    let bytes = [&key.server, &key.of]
        .into_iter()
        .flat_map(|p| p.bytes().chain([0u8]));
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
    use natsprobe_core::facts::{ConsumerName, Gap, Sample};

    fn key(of: &str) -> Key {
        Key {
            server: "nats://nats:4222".into(),
            of: of.into(),
        }
    }

    fn state(floor: u64) -> State {
        let mut s = State::default();
        s.set_sample(
            &ConsumerName {
                stream: "ORDERS".into(),
                durable: "d".into(),
            },
            Some(Sample {
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
                window_ms: 60_000,
            }),
        );
        s
    }

    #[test]
    fn round_trip_and_replace() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        assert_eq!(dir.load(&key("a")).0, Kept::Missing);
        dir.store(&key("a"), &state(1), 10).unwrap();
        dir.store(&key("a"), &state(2), 20).unwrap();
        let (kept, marked) = dir.load(&key("a"));
        assert_eq!(kept, Kept::State(state(2)));
        assert!(marked.is_some(), "the file's last write or read");
        assert_eq!(dir.load(&key("b")).0, Kept::Missing);
        let mode = fs::metadata(dir.named("check", &key("a")))
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
        // Another probe's newer state stays: an older one written last is not kept.
        dir.store(&key("a"), &state(9), 15).unwrap();
        assert_eq!(dir.load(&key("a")).0, Kept::State(state(2)));
    }

    /// Reading marks the file: the next run learns when this one ran.
    #[test]
    fn reading_marks_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().to_path_buf(), true).unwrap();
        dir.store(&key("a"), &state(1), 10).unwrap();
        let file = dir.named("check", &key("a"));
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(30);
        fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let (_, marked) = dir.load(&key("a"));
        let ago = now_ms() - marked.unwrap();
        assert!((29_000..31_000).contains(&ago), "{ago}");
        let (_, marked) = dir.load(&key("a"));
        assert!(now_ms() - marked.unwrap() < 1_000);
    }

    fn now_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    }

    #[test]
    fn corrupt_foreign_and_symlinked_files_are_nothing_remembered() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().to_path_buf(), true).unwrap();
        fs::write(dir.named("check", &key("a")), b"{\"version\":6,\"key\":").unwrap();
        assert!(matches!(dir.load(&key("a")).0, Kept::Corrupt(_)));
        // A file holding another key (as after a hash collision, or a copied dir).
        dir.store(&key("b"), &state(5), 1).unwrap();
        fs::rename(dir.named("check", &key("b")), dir.named("check", &key("c"))).unwrap();
        assert_eq!(dir.load(&key("c")).0, Kept::Foreign);
        // Another version's, whatever its body.
        let other = format!(
            "{{\"version\":{},\"key\":{{\"server\":\"nats://nats:4222\",\"of\":\"d\"}},\"at_ms\":1,\"body\":{{\"samples\":7}}}}",
            VERSION - 1
        );
        fs::write(dir.named("check", &key("d")), other).unwrap();
        assert_eq!(dir.load(&key("d")).0, Kept::Foreign);
        // A symlink where the file should be is neither read nor written through.
        let outside = tmp.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        std::os::unix::fs::symlink(&outside, dir.named("check", &key("e"))).unwrap();
        assert_eq!(dir.load(&key("e")).0, Kept::Corrupt("a symlink".into()));
        dir.store(&key("e"), &state(7), 1).unwrap();
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
        assert_eq!(dir.load(&key("e")).0, Kept::State(state(7)));
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
        // An explicit --state-dir that others may write to (an emptyDir): the state goes in
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

    /// A state file larger than any (256 KiB read at most) is nothing remembered.
    #[test]
    fn an_oversized_file_is_nothing_remembered() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        dir.store(&key("a"), &state(1), 1).unwrap();
        let path = dir.named("check", &key("a"));
        let mut body = fs::read(&path).unwrap();
        body.truncate(body.len() - 1);
        body.extend(std::iter::repeat_n(b' ', 1 << 20));
        body.push(b'}');
        fs::write(&path, &body).unwrap();
        assert!(matches!(dir.load(&key("a")).0, Kept::Corrupt(_)));
    }

    /// A temporary file a killed run left is removed once it is a minute old; a fresh one
    /// (another run writing now) is not.
    #[test]
    fn stale_temporary_files_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        let stale = dir.path.join(".check-00000000000000aa.json.4242.tmp");
        let fresh = dir.path.join(".check-00000000000000bb.json.4343.tmp");
        fs::write(&stale, b"half").unwrap();
        fs::write(&fresh, b"half").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        dir.store(&key("a"), &state(1), 1).unwrap();
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

    /// The key holds what the check looks at and where, never a credential, and not
    /// `--startup`.
    #[test]
    fn a_checks_key_is_what_it_looks_at() {
        use crate::cli::check::tests::parse;
        let of = |args: &[&str]| key_of(&parse(args).unwrap());
        let base = [
            "natsprobe",
            "--server",
            "nats://u:secret@n:4222",
            "--consumer",
            "S/D",
        ];
        let k = of(&base);
        assert_eq!(k.server, "nats://n:4222");
        assert!(!format!("{k:?}").contains("secret"));
        assert_eq!(
            k.of,
            "ports 4222 anyone netns own consumers S/D subscriptions "
        );
        assert_eq!(of(&[&base[..], &["--startup"]].concat()), k);
        for other in [
            &["--own-subscription"][..],
            &["--subscription", "j.>@q"],
            &["--process", "bento"],
            &["--pid", "1"],
            &["--netns-of", "1"],
            &["--port", "7422"],
            &["--js-domain", "hub"],
        ] {
            assert_ne!(of(&[&base[..], other].concat()), k, "{other:?}");
        }
        let domain = of(&[&base[..], &["--js-domain", "hub"]].concat());
        assert_eq!(domain.server, "nats://n:4222 $JS.hub.API");
    }

    fn key_of(config: &CheckConfig) -> Key {
        super::key(config)
    }
}
