//! What the state dir remembers between runs besides the consumers' samples: the last look at
//! the consumers (`look-*.json`: when, whether calm, on which connections, and the deliver
//! subscriptions then), how each wanted subscription's connection is known at the server
//! (`subscription-*.json`: server name and id, cid, socket), and the connections the last
//! healthy socket check counted (`sockets-*.json`: each one's sockid, inode and holder, for the
//! next run's exact lookup). Same rules as the
//! samples (`observe::state`): each file names its own key, is written to a temporary file and
//! renamed, read without following a symlink, at most 64 KiB; anything else is "nothing
//! remembered", which costs one full look, never a verdict.

use super::state::{Key, Of, StateDir};
use crate::facts::{ConsumerName, DiagId, Holder, KnownSocket, Remembered, ServerIdent};
use crate::facts::{SubscriptionMemo, Unanswered, Wanted};
use crate::rules::consumer::{Deletes, Evidence, Fault, RetentionSetting};
use crate::rules::remembered::{LastLook, SeenFault};
use serde::{Deserialize, Serialize};
use std::fs::{self};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// 4: a look keeps the faults it saw (older files are nothing remembered: one full look or
/// match after an upgrade).
const VERSION: u32 = 5;

#[derive(Serialize, Deserialize)]
struct StoredWanted {
    subject: String,
    queue: Option<String>,
    stream: String,
    durable: String,
}

#[derive(Serialize, Deserialize)]
struct LookFile {
    version: u32,
    key: Key,
    at_ms: i64,
    calm: bool,
    inodes: Vec<u64>,
    wanted: Vec<StoredWanted>,
    own_subscription: bool,
    window_ms: i64,
    faults: Vec<StoredSeenFault>,
}

#[derive(Serialize, Deserialize)]
struct StoredSeenFault {
    stream: String,
    durable: String,
    at_ms: i64,
    fault: StoredFault,
}

/// The file's form of a consumer fault: the rules' `Fault` knows nothing of serialization.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum StoredFault {
    StreamMissing,
    ConsumerMissing,
    Unbound {
        waiting: u64,
    },
    Stalled {
        stalled_ms: u64,
        by_server_clock: bool,
        floor: u64,
        waiting: u64,
        no_pulls: bool,
        moved_without_ack: bool,
    },
    Retention {
        stalled_ms: u64,
        first_seq: u64,
        behind: u64,
        front_only: bool,
        settings: Vec<StoredSetting>,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
enum StoredSetting {
    Retention(String),
    MaxMsgs(u64),
    MaxBytes(u64),
    MaxAgeMs(u64),
    MaxMsgsPerSubject(u64),
    Discard(String),
}

impl From<&Fault> for StoredFault {
    fn from(f: &Fault) -> StoredFault {
        let ms = |d: &Duration| d.as_millis() as u64;
        match f {
            Fault::StreamMissing => StoredFault::StreamMissing,
            Fault::ConsumerMissing => StoredFault::ConsumerMissing,
            Fault::Unbound { waiting } => StoredFault::Unbound { waiting: *waiting },
            Fault::Stalled {
                stalled,
                evidence,
                floor,
                waiting,
                no_pulls,
                moved_without_ack,
            } => StoredFault::Stalled {
                stalled_ms: ms(stalled),
                by_server_clock: *evidence == Evidence::LastActive,
                floor: *floor,
                waiting: *waiting,
                no_pulls: *no_pulls,
                moved_without_ack: *moved_without_ack,
            },
            Fault::Retention {
                stalled,
                first_seq,
                behind,
                deletes,
            } => StoredFault::Retention {
                stalled_ms: ms(stalled),
                first_seq: *first_seq,
                behind: *behind,
                front_only: deletes.front_only,
                settings: deletes
                    .settings
                    .iter()
                    .map(|s| match s {
                        RetentionSetting::Retention(r) => StoredSetting::Retention(r.clone()),
                        RetentionSetting::MaxMsgs(n) => StoredSetting::MaxMsgs(*n),
                        RetentionSetting::MaxBytes(n) => StoredSetting::MaxBytes(*n),
                        RetentionSetting::MaxAge(d) => StoredSetting::MaxAgeMs(ms(d)),
                        RetentionSetting::MaxMsgsPerSubject(n) => {
                            StoredSetting::MaxMsgsPerSubject(*n)
                        }
                        RetentionSetting::Discard(d) => StoredSetting::Discard(d.clone()),
                    })
                    .collect(),
            },
        }
    }
}

impl StoredFault {
    fn fault(self) -> Fault {
        let ms = Duration::from_millis;
        match self {
            StoredFault::StreamMissing => Fault::StreamMissing,
            StoredFault::ConsumerMissing => Fault::ConsumerMissing,
            StoredFault::Unbound { waiting } => Fault::Unbound { waiting },
            StoredFault::Stalled {
                stalled_ms,
                by_server_clock,
                floor,
                waiting,
                no_pulls,
                moved_without_ack,
            } => Fault::Stalled {
                stalled: ms(stalled_ms),
                evidence: match by_server_clock {
                    true => Evidence::LastActive,
                    false => Evidence::Samples,
                },
                floor,
                waiting,
                no_pulls,
                moved_without_ack,
            },
            StoredFault::Retention {
                stalled_ms,
                first_seq,
                behind,
                front_only,
                settings,
            } => Fault::Retention {
                stalled: ms(stalled_ms),
                first_seq,
                behind,
                deletes: Deletes {
                    front_only,
                    settings: settings
                        .into_iter()
                        .map(|s| match s {
                            StoredSetting::Retention(r) => RetentionSetting::Retention(r),
                            StoredSetting::MaxMsgs(n) => RetentionSetting::MaxMsgs(n),
                            StoredSetting::MaxBytes(n) => RetentionSetting::MaxBytes(n),
                            StoredSetting::MaxAgeMs(n) => RetentionSetting::MaxAge(ms(n)),
                            StoredSetting::MaxMsgsPerSubject(n) => {
                                RetentionSetting::MaxMsgsPerSubject(n)
                            }
                            StoredSetting::Discard(d) => RetentionSetting::Discard(d),
                        })
                        .collect(),
                },
            },
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SubscriptionFile {
    version: u32,
    key: Key,
    connection: Option<StoredConnection>,
    /// Asks that went unanswered in a row, and when the last was.
    unanswered: Option<(u32, i64)>,
    /// When an answer last showed the connection without the subscription.
    missing_at_ms: Option<i64>,
}

#[derive(Serialize, Deserialize)]
struct StoredConnection {
    server_name: String,
    server_id: String,
    cid: u64,
    local: SocketAddr,
    inode: u64,
    held_at_ms: Option<i64>,
    account_connections: u64,
}

#[derive(Serialize, Deserialize)]
struct SocketsFile {
    version: u32,
    key: Key,
    sockets: Vec<StoredSocket>,
}

/// A remembered connection; the family is its addresses'.
#[derive(Serialize, Deserialize)]
struct StoredSocket {
    local: SocketAddr,
    remote: SocketAddr,
    inode: u64,
    cookie: u64,
    interface: u32,
    pid: Option<u32>,
    fd: Option<u32>,
    /// The server address it was counted for, when a route made it count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stands_for: Option<SocketAddr>,
}

/// The connections the last healthy run counted, for the sockets `of` names (`Of::Sockets`);
/// none when nothing (or nothing readable) is remembered.
pub fn load_sockets(dir: &StateDir, of: Of) -> Vec<KnownSocket> {
    let key = of.key("");
    let Some(text) = dir.read_small(&dir.named("sockets", &key)) else {
        return Vec::new();
    };
    match serde_json::from_slice::<SocketsFile>(&text) {
        Ok(f) if f.version == VERSION && f.key == key => f
            .sockets
            .into_iter()
            .map(|s| KnownSocket {
                local: s.local,
                remote: s.remote,
                inode: s.inode,
                diag: DiagId {
                    cookie: s.cookie,
                    interface: s.interface,
                },
                holder: s.pid.zip(s.fd).map(|(pid, fd)| Holder { pid, fd }),
                stands_for: s.stands_for,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Remembers `sockets` for `of`'s next run; none forgets them (the next run walks).
pub fn store_sockets(dir: &StateDir, of: Of, sockets: &[KnownSocket]) -> Result<(), String> {
    let key = of.key("");
    let path = dir.named("sockets", &key);
    if sockets.is_empty() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(format!("cannot remove {}: {e}", path.display()))
            }
            _ => Ok(()),
        };
    }
    let file = SocketsFile {
        version: VERSION,
        key,
        sockets: sockets
            .iter()
            .map(|s| StoredSocket {
                local: s.local,
                remote: s.remote,
                inode: s.inode,
                cookie: s.diag.cookie,
                interface: s.diag.interface,
                pid: s.holder.map(|h| h.pid),
                fd: s.holder.map(|h| h.fd),
                stands_for: s.stands_for,
            })
            .collect(),
    };
    dir.replace(
        &path,
        &serde_json::to_vec(&file).map_err(|e| e.to_string())?,
    )
}

/// The last look at `consumers` through `server`, if one is remembered. Reading it marks
/// this run in it (the file's mtime): the next run learns the runs' period from it
/// (`LastLook::previous_run_ms`).
pub fn load_look(dir: &StateDir, server: &str, consumers: &[ConsumerName]) -> Option<LastLook> {
    let key = Of::Look(consumers).key(server);
    let (text, previous_run_ms) = dir.read_small_marking(&dir.named("look", &key))?;
    let f: LookFile = serde_json::from_slice(&text).ok()?;
    if f.version != VERSION || f.key != key {
        return None;
    }
    Some(LastLook {
        at_ms: f.at_ms,
        calm: f.calm,
        inodes: f.inodes,
        wanted: f
            .wanted
            .into_iter()
            .map(|w| {
                let name = ConsumerName {
                    stream: w.stream,
                    durable: w.durable,
                };
                let wanted = Wanted {
                    subject: w.subject,
                    queue: w.queue,
                };
                (wanted, name)
            })
            .collect(),
        own_subscription: f.own_subscription,
        window_ms: f.window_ms,
        previous_run_ms,
        faults: f
            .faults
            .into_iter()
            .map(|f| SeenFault {
                consumer: ConsumerName {
                    stream: f.stream,
                    durable: f.durable,
                },
                at_ms: f.at_ms,
                fault: f.fault.fault(),
            })
            .collect(),
    })
}

/// Forgets the look at `consumers` through `server` (nothing of it is worth keeping).
pub fn forget_look(dir: &StateDir, server: &str, consumers: &[ConsumerName]) -> Result<(), String> {
    let path = dir.named("look", &Of::Look(consumers).key(server));
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(format!("cannot remove {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Remembers a look, unless another probe on this state dir remembered a newer one
/// meanwhile.
pub fn store_look(
    dir: &StateDir,
    server: &str,
    consumers: &[ConsumerName],
    look: &LastLook,
) -> Result<(), String> {
    let key = Of::Look(consumers).key(server);
    let path = dir.named("look", &key);
    let file = LookFile {
        version: VERSION,
        key,
        at_ms: look.at_ms,
        calm: look.calm,
        inodes: look.inodes.clone(),
        wanted: look
            .wanted
            .iter()
            .map(|(w, name)| StoredWanted {
                subject: w.subject.clone(),
                queue: w.queue.clone(),
                stream: name.stream.clone(),
                durable: name.durable.clone(),
            })
            .collect(),
        own_subscription: look.own_subscription,
        window_ms: look.window_ms,
        faults: look
            .faults
            .iter()
            .map(|f| StoredSeenFault {
                stream: f.consumer.stream.clone(),
                durable: f.consumer.durable.clone(),
                at_ms: f.at_ms,
                fault: StoredFault::from(&f.fault),
            })
            .collect(),
    };
    let at = |text: &[u8]| {
        serde_json::from_slice::<LookFile>(text)
            .ok()
            .map(|f| f.at_ms)
    };
    dir.replace_unless_newer(
        &path,
        &serde_json::to_vec(&file).map_err(|e| e.to_string())?,
        look.at_ms,
        at,
    )
}

/// What is kept for `wanted`: how its connection was known at the server, and the asks
/// that went unanswered since (nothing kept: the default).
pub fn load_subscription(dir: &StateDir, server: &str, wanted: &Wanted) -> SubscriptionMemo {
    let key = Of::Subscription(wanted).key(server);
    let path = dir.named("subscription", &key);
    let Some(f) = dir
        .read_small(&path)
        .and_then(|text| serde_json::from_slice::<SubscriptionFile>(&text).ok())
        .filter(|f| f.version == VERSION && f.key == key)
    else {
        return SubscriptionMemo::default();
    };
    SubscriptionMemo {
        connection: f.connection.map(|c| Remembered {
            server: ServerIdent {
                name: c.server_name,
                id: c.server_id,
            },
            cid: c.cid,
            local: c.local,
            inode: c.inode,
            held_at_ms: c.held_at_ms,
            account_connections: c.account_connections,
        }),
        unanswered: f
            .unanswered
            .map(|(count, last_ms)| Unanswered { count, last_ms }),
        missing_at_ms: f.missing_at_ms,
    }
}

/// Keeps `memo` for `wanted`; an empty one removes the file (the next run matches by
/// address).
pub fn store_subscription(
    dir: &StateDir,
    server: &str,
    wanted: &Wanted,
    memo: &SubscriptionMemo,
) -> Result<(), String> {
    let key = Of::Subscription(wanted).key(server);
    let path = dir.named("subscription", &key);
    if *memo == SubscriptionMemo::default() {
        return match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(format!("cannot remove {}: {e}", path.display()))
            }
            _ => Ok(()),
        };
    }
    let file = SubscriptionFile {
        version: VERSION,
        key,
        connection: memo.connection.as_ref().map(|m| StoredConnection {
            server_name: m.server.name.clone(),
            server_id: m.server.id.clone(),
            cid: m.cid,
            local: m.local,
            inode: m.inode,
            held_at_ms: m.held_at_ms,
            account_connections: m.account_connections,
        }),
        unanswered: memo.unanswered.map(|u| (u.count, u.last_ms)),
        missing_at_ms: memo.missing_at_ms,
    };
    dir.replace(
        &path,
        &serde_json::to_vec(&file).map_err(|e| e.to_string())?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, StateDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(tmp.path().join("s"), true).unwrap();
        (tmp, dir)
    }

    fn wanted(subject: &str) -> Wanted {
        Wanted {
            subject: subject.into(),
            queue: Some("G".into()),
        }
    }

    #[test]
    fn a_subscription_is_remembered_per_server_and_subscription() {
        let (_tmp, dir) = dir();
        let memo = Remembered {
            server: ServerIdent {
                name: "n1".into(),
                id: "NID".into(),
            },
            cid: 12,
            local: "10.200.0.2:51828".parse().unwrap(),
            inode: 77,
            held_at_ms: Some(5),
            account_connections: 10_000,
        };
        let none = SubscriptionMemo::default();
        let memo = SubscriptionMemo {
            connection: Some(memo),
            unanswered: None,
            missing_at_ms: Some(3),
        };
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("x")), none);
        store_subscription(&dir, "nats://a:4222", &wanted("x"), &memo).unwrap();
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("x")), memo);
        // Unanswered asks are kept, with a connection or without one.
        let waiting = SubscriptionMemo {
            connection: None,
            unanswered: Some(Unanswered {
                count: 2,
                last_ms: 7,
            }),
            missing_at_ms: None,
        };
        store_subscription(&dir, "nats://a:4222", &wanted("w"), &waiting).unwrap();
        assert_eq!(
            load_subscription(&dir, "nats://a:4222", &wanted("w")),
            waiting
        );
        assert_eq!(load_subscription(&dir, "nats://b:4222", &wanted("x")), none);
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("y")), none);
        // A file holding another key is nothing remembered.
        let file =
            |w: &Wanted| dir.named("subscription", &Of::Subscription(w).key("nats://a:4222"));
        let (a, b) = (file(&wanted("x")), file(&wanted("z")));
        fs::copy(&a, &b).unwrap();
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("z")), none);
        // A symlink is not followed; garbage is nothing.
        fs::remove_file(&b).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("z")), none);
        fs::write(&a, b"{\"version\":").unwrap();
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("x")), none);
        // Forgotten.
        store_subscription(&dir, "nats://a:4222", &wanted("x"), &memo).unwrap();
        store_subscription(&dir, "nats://a:4222", &wanted("x"), &none).unwrap();
        assert_eq!(load_subscription(&dir, "nats://a:4222", &wanted("x")), none);
        store_subscription(
            &dir,
            "nats://a:4222",
            &wanted("x"),
            &SubscriptionMemo::default(),
        )
        .unwrap();
    }

    /// A temporary file a killed run left is removed once it is a minute old; a fresh one,
    /// and the samples' own, are left alone.
    #[test]
    fn stale_temporary_files_are_swept() {
        let (_tmp, dir) = dir();
        let stale = dir.path.join(".look-00000000000000aa.json.4242.tmp");
        let fresh = dir
            .path
            .join(".subscription-00000000000000bb.json.4343.tmp");
        let sample = dir.path.join(".consumer-00000000000000cc.json.4444.tmp");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        for f in [&stale, &fresh, &sample] {
            fs::write(f, b"half").unwrap();
        }
        // One sweep for the whole dir (`StateDir::replace`): only what is stale goes.
        {
            let f = &stale;
            fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        store_subscription(
            &dir,
            "nats://a:4222",
            &wanted("x"),
            &SubscriptionMemo::default(),
        )
        .unwrap();
        assert!(stale.exists(), "nothing written, nothing swept");
        let look = LastLook {
            at_ms: 1,
            calm: true,
            inodes: vec![],
            wanted: vec![],
            own_subscription: false,
            window_ms: 60_000,
            previous_run_ms: None,
            faults: vec![],
        };
        store_look(&dir, "nats://a:4222", &[], &look).unwrap();
        assert!(!stale.exists(), "the stale file stays");
        assert!(fresh.exists() && sample.exists());
    }

    /// The connections a healthy check counted, per set of sockets read: kept whole (the
    /// cookie's 64 bits too), forgotten when none, and nothing for another key, a symlink or
    /// garbage.
    #[test]
    fn the_counted_connections_are_remembered_per_sockets_read() {
        use crate::config::Owner;
        let (_tmp, dir) = dir();
        let pid = Owner::Pid(42);
        let of = |owner| Of::Sockets {
            ports: &[4222],
            owner,
            netns_of: None,
        };
        let sockets = vec![
            KnownSocket {
                local: "10.244.1.17:51828".parse().unwrap(),
                remote: "10.96.14.2:4222".parse().unwrap(),
                inode: 77,
                diag: DiagId {
                    cookie: u64::MAX - 5,
                    interface: 0,
                },
                holder: Some(Holder { pid: 42, fd: 9 }),
                stands_for: None,
            },
            KnownSocket {
                local: "[::ffff:10.244.1.17]:51830".parse().unwrap(),
                remote: "[::ffff:10.96.14.3]:4222".parse().unwrap(),
                inode: 78,
                diag: DiagId {
                    cookie: 12,
                    interface: 3,
                },
                holder: Some(Holder { pid: 42, fd: 10 }),
                stands_for: Some("10.96.0.10:4222".parse().unwrap()),
            },
        ];
        assert_eq!(load_sockets(&dir, of(&pid)), vec![]);
        store_sockets(&dir, of(&pid), &sockets).unwrap();
        assert_eq!(load_sockets(&dir, of(&pid)), sockets);
        assert_eq!(load_sockets(&dir, of(&Owner::Anyone)), vec![]);
        let other_ports = Of::Sockets {
            ports: &[4222, 7422],
            owner: &pid,
            netns_of: None,
        };
        assert_eq!(load_sockets(&dir, other_ports), vec![]);
        // Another key's file under this key's name, a symlink, garbage: nothing remembered.
        let file = |of: Of| dir.named("sockets", &of.key(""));
        fs::copy(file(of(&pid)), file(of(&Owner::Anyone))).unwrap();
        assert_eq!(load_sockets(&dir, of(&Owner::Anyone)), vec![]);
        fs::remove_file(file(of(&Owner::Anyone))).unwrap();
        std::os::unix::fs::symlink(file(of(&pid)), file(of(&Owner::Anyone))).unwrap();
        assert_eq!(load_sockets(&dir, of(&Owner::Anyone)), vec![]);
        fs::write(file(of(&pid)), b"{\"version\":").unwrap();
        assert_eq!(load_sockets(&dir, of(&pid)), vec![]);
        // Forgotten.
        store_sockets(&dir, of(&pid), &sockets).unwrap();
        store_sockets(&dir, of(&pid), &[]).unwrap();
        assert!(!file(of(&pid)).exists());
        store_sockets(&dir, of(&pid), &[]).unwrap();
    }

    #[test]
    fn a_look_is_remembered_per_server_and_consumers() {
        let (_tmp, dir) = dir();
        let name = |d: &str| ConsumerName {
            stream: "S".into(),
            durable: d.into(),
        };
        let look = LastLook {
            at_ms: 99,
            calm: true,
            inodes: vec![3, 4],
            wanted: vec![(wanted("deliver.D"), name("D"))],
            own_subscription: true,
            window_ms: 60_000,
            previous_run_ms: None,
            faults: vec![],
        };
        store_look(&dir, "nats://a:4222", &[name("D")], &look).unwrap();
        // Each read marks the run in it: the next one learns when the one before was (the
        // file times tick coarsely: runs are further apart).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let first = load_look(&dir, "nats://a:4222", &[name("D")]).unwrap();
        let written = first.previous_run_ms.expect("the write's time");
        assert_eq!(
            LastLook {
                previous_run_ms: None,
                faults: vec![],
                ..first
            },
            look
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = load_look(&dir, "nats://a:4222", &[name("D")]).unwrap();
        assert!(second.previous_run_ms.unwrap() > written, "{second:?}");
        // An older look written last does not replace a newer one.
        let older = LastLook {
            at_ms: 50,
            calm: false,
            ..look.clone()
        };
        store_look(&dir, "nats://a:4222", &[name("D")], &older).unwrap();
        assert_eq!(
            load_look(&dir, "nats://a:4222", &[name("D")]).map(|l| l.at_ms),
            Some(99)
        );
        assert_eq!(load_look(&dir, "nats://a:4222", &[name("E")]), None);
        assert_eq!(
            load_look(&dir, "nats://a:4222", &[name("D"), name("E")]),
            None
        );
        let leftovers: Vec<_> = fs::read_dir(&dir.path)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n != ".lock")
            .collect();
        assert_eq!(
            leftovers.len(),
            1,
            "no temporary file left behind: {leftovers:?}"
        );
    }
}
