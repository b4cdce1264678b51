//! Stamps the git revision into `--version` (a build outside a checkout, such as a Docker
//! context without .git, can pass NATSPROBE_GIT_REV instead), and gives the static musl
//! build's linker the order of the socket check's functions (.cargo/config.toml says why).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    order_hot_path();
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

/// Only the musl target links with rust-lld (.cargo/config.toml); other linkers do not take
/// the option. Symbols the file names that the build lacks are ignored, so a stale file only
/// loses some of its effect (probe-tests/bench/hot-path.sh regenerates it;
/// probe-tests/hot-path-fresh.sh, which probe-tests/run calls, fails on one). The linker also
/// writes its map, `natsprobe.map` beside the binary or where NATSPROBE_LINK_MAP says: both
/// scripts read the shipped build's symbols from it, since an unstripped build is another
/// build (cargo hashes the strip setting into the crate's metadata, and so into most symbols'
/// names).
fn order_hot_path() {
    println!("cargo:rerun-if-env-changed=NATSPROBE_LINK_MAP");
    let order = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("probe-tests/bench/hot-path.order");
    println!("cargo:rerun-if-changed={}", order.display());
    // Its read-only data too: constants have no symbols to order by, so a linker script moves
    // the hot ones, by section name, before the rest (`INSERT`: the default layout otherwise).
    let data = order.with_extension("ld");
    println!("cargo:rerun-if-changed={}", data.display());
    let musl = std::env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-musl");
    if musl && data.exists() {
        println!("cargo:rustc-link-arg-bins=--script={}", data.display());
    }
    if musl && order.exists() {
        println!(
            "cargo:rustc-link-arg-bins=--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=--no-warn-symbol-ordering");
        // OUT_DIR is <target dir>/<triple>/<profile>/build/<crate>-<hash>/out: the binary is
        // three directories up.
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
        let map = std::env::var_os("NATSPROBE_LINK_MAP")
            .filter(|m| !m.is_empty())
            .map(PathBuf::from)
            .or_else(|| out.ancestors().nth(3).map(|p| p.join("natsprobe.map")));
        if let Some(map) = map {
            println!("cargo:rustc-link-arg-bins=-Map={}", map.display());
            // The ordering file names symbols as the linker matches them: mangled.
            println!("cargo:rustc-link-arg-bins=--no-demangle");
        }
    }
}
