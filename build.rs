//! Stamps the git revision into `--version`. A build outside a checkout (a source tarball,
//! a Docker context without .git) can pass NATSPROBE_GIT_REV instead.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=NATSPROBE_GIT_REV");
    let rev = std::env::var("NATSPROBE_GIT_REV")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        });
    println!(
        "cargo:rustc-env=NATSPROBE_GIT_REV={}",
        rev.as_deref().unwrap_or("unknown")
    );
    // Rebuild when HEAD moves: HEAD itself for a branch switch, the branch ref for a commit.
    let head = Path::new(".git/HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Ok(text) = std::fs::read_to_string(head) {
            if let Some(reference) = text.trim().strip_prefix("ref: ") {
                let path = Path::new(".git").join(reference);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
    }
}
