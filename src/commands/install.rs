//! `install DEST`: copies this executable to DEST, for an initContainer that puts the probe
//! into a shared `emptyDir` of an application image that does not bake it in. The one command
//! that acts rather than observes: it writes one file, and judges nothing.
//!
//! Atomic: the copy is written beside DEST under a temporary name, made 0755, flushed to disk,
//! and renamed over DEST, so a container starting at the same moment finds the old probe or
//! the whole new one, never half a file.

use crate::config::Setting;
use crate::error::Error;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What was installed, for the one line `main` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub path: PathBuf,
    pub bytes: u64,
}

pub fn run(dest: &Path) -> Result<Installed, Error> {
    let source = std::env::current_exe().map_err(|e| {
        Error::CannotEvaluate(format!("cannot find this executable (/proc/self/exe): {e}"))
    })?;
    let target = match fs::metadata(dest) {
        Ok(m) if m.is_dir() => dest.join("natsprobe"),
        _ => dest.to_path_buf(),
    };
    let bad = |problem: String| Error::Setting {
        setting: Setting::InstallDest,
        path: Some(target.clone()),
        problem,
    };
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(bad(format!("{} is not a directory", dir.display())));
    }
    if fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
        return Err(bad("is a directory".into()));
    }
    let mut input = File::open(&source)
        .map_err(|e| Error::CannotEvaluate(format!("cannot read {}: {e}", source.display())))?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "natsprobe".into());
    let temporary = dir.join(format!(".{name}.install-{}", std::process::id()));
    let mut copy = || -> io::Result<u64> {
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&temporary)?;
        let bytes = io::copy(&mut input, &mut out)?;
        out.flush()?;
        out.sync_all()?;
        // The umask may have taken bits off the create mode.
        fs::set_permissions(
            &temporary,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        fs::rename(&temporary, &target)?;
        // The rename itself, on disk.
        File::open(&dir)?.sync_all()?;
        Ok(bytes)
    };
    match copy() {
        Ok(bytes) => Ok(Installed {
            path: target,
            bytes,
        }),
        Err(e) => {
            let _ = fs::remove_file(&temporary);
            Err(bad(e.to_string()))
        }
    }
}
