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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The copy is this executable, whole, 0755: into a directory as `natsprobe`, or at the
    /// path given (a relative one in the current directory); nothing left beside it. A
    /// directory where the file should be, or a missing one, is the setting's error.
    #[test]
    fn install_copies_this_executable_atomically() {
        let tmp = tempfile::tempdir().unwrap();
        let me = fs::metadata(std::env::current_exe().unwrap())
            .unwrap()
            .len();
        let into_dir = run(tmp.path()).unwrap();
        assert_eq!(into_dir.path, tmp.path().join("natsprobe"));
        assert_eq!(into_dir.bytes, me);
        let meta = fs::metadata(&into_dir.path).unwrap();
        assert_eq!((meta.len(), meta.permissions().mode() & 0o777), (me, 0o755));
        let named = tmp.path().join("probe");
        assert_eq!(run(&named).unwrap().path, named);
        let mut left: Vec<String> = fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        left.sort();
        assert_eq!(left, ["natsprobe", "probe"]);
        // Again over the first: replaced.
        assert_eq!(run(tmp.path()).unwrap().bytes, me);
        let missing = tmp.path().join("no/such/dir/probe");
        let err = format!("{:?}", run(&missing).unwrap_err());
        assert!(err.contains("is not a directory"), "{err}");
        // A directory named where the file goes (DEST/natsprobe is one).
        fs::remove_file(tmp.path().join("natsprobe")).unwrap();
        fs::create_dir(tmp.path().join("natsprobe")).unwrap();
        let err = format!("{:?}", run(tmp.path()).unwrap_err());
        assert!(err.contains("is a directory"), "{err}");
    }
}
