//! `serve`'s last verdict, kept in the state dir beside the check's own files, so that a
//! `serve` started again (its container restarted) answers with the verdict its last look
//! reached while that verdict is fresh, rather than "not judged" until its first look ends.
//! The file is keyed by a hash of `serve`'s arguments (never the arguments: they may hold a
//! password), so a `serve` with other flags never reads it.

use crate::config::StateDirChoice;
use crate::observe::state::{self, Envelope, Key, StateDir, VERSION};
use crate::rules::serve::Left;
use std::hash::{Hash, Hasher};

/// Where `serve` keeps its verdict, and under which key.
pub struct Kept {
    dir: StateDir,
    key: Key,
}

impl Kept {
    /// The state dir `choice` names, for `serve` started with `args`; `None` where none can
    /// be used (then nothing is kept, as for the check's samples).
    pub fn open(choice: &StateDirChoice, args: &[std::ffi::OsString]) -> Option<Kept> {
        let dir = state::open(choice).ok()?.dir;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        args.hash(&mut hasher);
        let key = Key {
            server: String::new(),
            of: format!("serve {:016x}", hasher.finish()),
        };
        Some(Kept { dir, key })
    }

    /// The verdict a look reached, and when; a failure to keep it is left unsaid (the next
    /// look tries again, and only a restart of `serve` would miss it).
    pub fn keep(&self, left: &Left) {
        let file = Envelope {
            version: VERSION,
            key: self.key.clone(),
            at_ms: left.at_ms,
            body: left,
        };
        if let Ok(body) = serde_json::to_vec(&file) {
            let _ = self.dir.replace(&self.dir.named("serve", &self.key), &body);
        }
    }

    /// What the last `serve` with these arguments kept, if anything readable.
    pub fn left(&self) -> Option<Left> {
        let text = self.dir.read_small(&self.dir.named("serve", &self.key))?;
        let file: Envelope<Left> = serde_json::from_slice(&text).ok()?;
        (file.version == VERSION && file.key == self.key).then_some(file.body)
    }
}
