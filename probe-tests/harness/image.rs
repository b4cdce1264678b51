//! The scratch image, built here with buildah from the static binaries already built (no
//! registry is reachable where the tests run): vfs storage in a temporary directory of its
//! own, so parallel runs and the machine's own images are never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Buildah {
    store: tempfile::TempDir,
}

/// A container's root filesystem, mounted; unmounted and removed on drop.
pub struct Mounted<'a> {
    buildah: &'a Buildah,
    container: String,
    pub root: PathBuf,
}

impl Buildah {
    pub fn new() -> Buildah {
        Buildah {
            store: tempfile::Builder::new()
                .prefix("natsprobe-buildah")
                .tempdir()
                .unwrap(),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("buildah");
        cmd.arg("--storage-driver")
            .arg("vfs")
            .arg("--root")
            .arg(self.store.path().join("root"))
            .arg("--runroot")
            .arg(self.store.path().join("run"));
        cmd
    }

    /// Runs buildah with `args`, panicking with its output on failure; returns stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self
            .command()
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap_or_else(|e| panic!("buildah: {e} (probe-tests/setup installs it)"));
        assert!(
            out.status.success(),
            "buildah {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `Dockerfile.probe` built from `binary` (a static build in this checkout's target dir)
    /// for `platform` (`linux/amd64`, `linux/arm64`), tagged `tag`.
    pub fn build(&self, platform: &str, binary: &Path, tag: &str, build_args: &[(&str, &str)]) {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let relative = binary.strip_prefix(manifest).unwrap_or_else(|_| {
            panic!(
                "{} must be inside the build context {}",
                binary.display(),
                manifest.display()
            )
        });
        let mut args = vec![
            "bud".to_string(),
            "--isolation".into(),
            "chroot".into(),
            "-f".into(),
            "Dockerfile.probe".into(),
            "--platform".into(),
            platform.into(),
            "--build-arg".into(),
            "NATSPROBE_FROM=prebuilt".into(),
            "--build-arg".into(),
            format!("NATSPROBE_BINARY={}", relative.display()),
        ];
        for (k, v) in build_args {
            args.push("--build-arg".into());
            args.push(format!("{k}={v}"));
        }
        args.extend(["-t".into(), tag.into(), ".".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args);
    }

    /// The image's OCI configuration (`buildah inspect`'s `OCIv1`).
    pub fn config(&self, image: &str) -> serde_json::Value {
        let text = self.run(&["inspect", "--type", "image", image]);
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        all["OCIv1"].clone()
    }

    pub fn mount(&self, image: &str) -> Mounted<'_> {
        let container = self.run(&["from", image]).trim().to_string();
        let root = PathBuf::from(self.run(&["mount", &container]).trim());
        Mounted {
            buildah: self,
            container,
            root,
        }
    }
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = self
            .buildah
            .command()
            .args(["umount", &self.container])
            .output();
        let _ = self
            .buildah
            .command()
            .args(["rm", &self.container])
            .output();
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        // vfs layers are plain directories, some read-only: make them removable.
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(self.store.path())
            .output();
    }
}
