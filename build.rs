//! Stamps the git revision into `--version` (a build outside a checkout, such as a Docker
//! context without .git, can pass NATSPROBE_GIT_REV instead).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=NATSPROBE_GIT_REV");
    let rev = std::env::var("NATSPROBE_GIT_REV")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    println!(
        "cargo:rustc-env=NATSPROBE_GIT_REV={}",
        rev.as_deref().unwrap_or("unknown")
    );
    // Rebuild when HEAD moves: HEAD for a checkout, the refs for a commit on the branch, and
    // the refs directory itself because the branch's ref does not exist before its first
    // commit (or lives in packed-refs after a gc).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) {
        for watched in ["HEAD", "refs/heads", "packed-refs"] {
            let path = dir.join(watched);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
