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
    assert!(
        root.join("proc").is_dir(),
        "{} needs an empty proc directory",
        root.display()
    );
    let root_c = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let proc_c = CString::new(root.join("proc").as_os_str().as_encoded_bytes()).unwrap();
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
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(uid) != 0
                    || libc::setuid(uid) != 0
                {
                    return fail();
                }
            }
            Ok(())
        });
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("run {program} in {}: {e}", root.display()))
}
