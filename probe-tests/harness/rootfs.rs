//! Running a program in a root of its own (a scratch image's filesystem, or a directory the
//! test built): a private mount namespace with only /proc mounted, then chroot, optionally as
//! another user, inside a test's network namespace. What a scratch image gives the probe.

use super::NetNs;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `program` (a path inside `root`) with `args` in `root`, in `ns`, with an empty
/// environment; as `uid`:`uid` when given. `root` must hold an empty `proc` directory.
pub fn run_in_root(
    root: &Path,
    ns: &NetNs,
    program: &str,
    args: &[&str],
    uid: Option<u32>,
) -> Output {
    run_in_root_with(root, ns, program, args, uid, false)
}

/// As `run_in_root`; with `read_only`, the root is mounted read-only (`readOnlyRootFilesystem`).
pub fn run_in_root_with(
    root: &Path,
    ns: &NetNs,
    program: &str,
    args: &[&str],
    uid: Option<u32>,
    read_only: bool,
) -> Output {
    run_in_root_with_shm(root, ns, program, args, uid, read_only, None)
}

/// As `run_in_root_with`; with `shm`, that host directory is bind-mounted writable at
/// `/dev/shm` (which `root` must hold), as container runtimes mount a tmpfs there even under a
/// read-only root: the pod's, kept from run to run.
pub fn run_in_root_with_shm(
    root: &Path,
    ns: &NetNs,
    program: &str,
    args: &[&str],
    uid: Option<u32>,
    read_only: bool,
    shm: Option<&Path>,
) -> Output {
    assert!(
        root.join("proc").is_dir(),
        "{} needs an empty proc directory",
        root.display()
    );
    let root_c = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let proc_c = CString::new(root.join("proc").as_os_str().as_encoded_bytes()).unwrap();
    let shm_c = shm.map(|s| {
        assert!(
            root.join("dev/shm").is_dir(),
            "{} needs a dev/shm directory",
            root.display()
        );
        (
            CString::new(s.as_os_str().as_encoded_bytes()).unwrap(),
            CString::new(root.join("dev/shm").as_os_str().as_encoded_bytes()).unwrap(),
        )
    });
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    ns.enter_on_exec(&mut cmd);
    // SAFETY: only async-signal-safe syscalls on pre-built C strings.
    unsafe {
        cmd.pre_exec(move || {
            let fail = || Err(std::io::Error::last_os_error());
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            let none = std::ptr::null();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                none.cast(),
            ) != 0
            {
                return fail();
            }
            if read_only
                && (libc::mount(
                    root_c.as_ptr(),
                    root_c.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    none.cast(),
                ) != 0
                    || libc::mount(
                        none,
                        root_c.as_ptr(),
                        none,
                        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                        none.cast(),
                    ) != 0)
            {
                return fail();
            }
            if let Some((from, to)) = &shm_c {
                if libc::mount(from.as_ptr(), to.as_ptr(), none, libc::MS_BIND, none.cast()) != 0 {
                    return fail();
                }
            }
            if libc::mount(
                c"proc".as_ptr(),
                proc_c.as_ptr(),
                c"proc".as_ptr(),
                0,
                none.cast(),
            ) != 0
            {
                return fail();
            }
            if libc::chroot(root_c.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
                return fail();
            }
            if let Some(uid) = uid {
                super::become_user(uid)?;
            }
            Ok(())
        });
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("run {program} in {}: {e}", root.display()))
}

/// Runs `program` in `root` as it is, with no /proc mounted: `root/proc` is whatever the test
/// put there (a garbled or unreadable `net/tcp`). With `no_netlink`, netlink sockets are refused
/// (seccomp), so the probe must read that /proc.
pub fn run_with_fake_proc(
    root: &Path,
    ns: &NetNs,
    program: &str,
    args: &[&str],
    uid: Option<u32>,
    no_netlink: bool,
) -> Output {
    let root_c = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear();
    ns.enter_on_exec(&mut cmd);
    // SAFETY: chroot, chdir, prctl, setgroups, setgid and setuid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chroot(root_c.as_ptr()) != 0 || libc::chdir(c"/".as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if no_netlink {
                super::probe::refuse_netlink()?;
            }
            if let Some(uid) = uid {
                super::become_user(uid)?;
            }
            Ok(())
        });
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("run {program} in {}: {e}", root.display()))
}
