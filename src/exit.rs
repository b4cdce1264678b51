//! The exit codes natsprobe promises; the README's table is tested against this enum.

use crate::rules::check::Health;
use std::process::ExitCode;

/// Every way a run can end. The kubelet treats any non-zero code as a failed probe;
/// the codes exist for humans and scripts (`diagnose`, CronJobs) that branch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The check passed.
    Healthy = 0,
    /// The check found a fault a restart is expected to fix.
    Unhealthy = 1,
    /// The flags or environment are wrong; nothing was inspected.
    Usage = 2,
    /// The check could not be carried out (unreadable /proc, deadline hit, internal error).
    CannotEvaluate = 3,
}

impl Exit {
    /// The rows of the README's exit code table, in order.
    pub const ALL: [Exit; 4] = [
        Exit::Healthy,
        Exit::Unhealthy,
        Exit::Usage,
        Exit::CannotEvaluate,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The meaning column of the README's table.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Healthy => "healthy",
            Exit::Unhealthy => "unhealthy",
            Exit::Usage => "usage or configuration error",
            Exit::CannotEvaluate => "could not evaluate",
        }
    }
}

impl From<Health> for Exit {
    /// A judged run: healthy 0, unhealthy 1.
    fn from(health: Health) -> Exit {
        match health {
            Health::Healthy => Exit::Healthy,
            Health::Unhealthy => Exit::Unhealthy,
            // Exit 2, as for any setting that turned out wrong when it was used.
            Health::Misconfigured => Exit::Usage,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_table() {
        let table: Vec<(u8, &str)> = Exit::ALL.iter().map(|e| (e.code(), e.meaning())).collect();
        assert_eq!(
            table,
            [
                (0, "healthy"),
                (1, "unhealthy"),
                (2, "usage or configuration error"),
                (3, "could not evaluate"),
            ]
        );
    }

    /// ARCHITECTURE.md maps the tree: every source file has its row.
    #[test]
    fn architecture_names_every_module() {
        fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path.to_string_lossy().to_string());
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        walk(&root.join("src"), &mut files);
        let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        for file in files {
            let relative = file.strip_prefix(&format!("{}/", root.display())).unwrap();
            assert!(
                map.contains(&format!("| `{relative}` |")),
                "ARCHITECTURE.md has no row for {relative}"
            );
        }
    }

    #[test]
    fn readme_documents_every_code() {
        let readme = include_str!("../README.md");
        for exit in Exit::ALL {
            let row = format!("| {} | {} |", exit.code(), exit.meaning());
            assert!(
                readme.contains(&row),
                "README lacks the exit code row `{row}`"
            );
        }
    }
}
