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

    /// The README's table of causes is the rules' table: every cause has its row, with its
    /// class; and every document says what exit 2 is for the same way.
    #[test]
    fn the_documents_say_one_thing_about_exit_2() {
        use crate::rules::cause;
        let readme = include_str!("../README.md");
        for c in cause::ALL {
            let class = cause::class(c).as_str();
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", c.as_str())))
                .unwrap_or_else(|| {
                    panic!("README's table of causes has no row for {}", c.as_str())
                });
            assert!(
                row.contains(&format!("| {class} |")),
                "README says another class for {}: {row}",
                c.as_str()
            );
        }
        // Prose is wrapped: compared with its whitespace made single spaces.
        let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let help = {
            use clap::CommandFactory;
            flat(&crate::cli::Cli::command().render_long_help().to_string())
        };
        let security = flat(include_str!("../SECURITY.md"));
        let said = [
            (
                "README",
                flat(readme),
                "a `check` exits non-zero only where no state of NATS can be the cause",
            ),
            (
                "--help",
                help,
                "a check exits non-zero only where nothing NATS does",
            ),
            (
                "SECURITY.md",
                security.clone(),
                "A refused request is never a fault (exit 1)",
            ),
            (
                "SECURITY.md",
                security,
                "a configuration error (exit 2) only for one never judged",
            ),
        ];
        for (document, text, sentence) in said {
            assert!(
                text.contains(sentence),
                "{document} does not say: {sentence}"
            );
        }
    }

    /// The README's times to restart are the rules': every row, computed by
    /// `rules::restart` with the README's settings (the slowest rounded up to the period).
    #[test]
    fn the_readme_says_the_times_to_restart() {
        use crate::config::duration::display;
        use crate::rules::restart::{time_to_restart, Fault, Settings};
        let readme = include_str!("../README.md");
        let rows = [
            (
                "the client gave up its connection while NATS answers",
                Fault::GaveUp,
            ),
            (
                "the connection is half-open (from the client's first send never acknowledged)",
                Fault::HalfOpen,
            ),
            ("the consumer is unbound while work waits", Fault::Unbound),
            ("the durable or its stream is gone", Fault::Absent),
            (
                "the consumer stalled, or loses messages to retention (from its last ack)",
                Fault::Stalled,
            ),
            (
                "a deaf replica, with `--monitor` or up to 1,000 connections in the account",
                Fault::Deaf {
                    connections: 1_000,
                    direct: false,
                },
            ),
            (
                "a deaf replica, 2,500 connections in the account",
                Fault::Deaf {
                    connections: 2_500,
                    direct: false,
                },
            ),
            (
                "a deaf replica, 10,000 connections in the account",
                Fault::Deaf {
                    connections: 10_000,
                    direct: false,
                },
            ),
            (
                "a deaf replica, 30,000 connections or more in the account",
                Fault::Deaf {
                    connections: 30_000,
                    direct: false,
                },
            ),
        ];
        let settings = Settings::RECOMMENDED;
        let period = settings.cadence.period.as_millis();
        for (label, fault) in rows {
            let s = time_to_restart(fault, &settings);
            let slowest = s.slowest.as_millis().div_ceil(period) * period;
            let span = format!(
                "{}–{}",
                display(s.fastest),
                display(std::time::Duration::from_millis(slowest as u64))
            );
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| {label} |")))
                .unwrap_or_else(|| panic!("README has no time-to-restart row: {label}"));
            assert!(
                row.ends_with(&format!("| {span} |")),
                "README says {row}, the rules {span}"
            );
        }
        // --monitor finds the connection directly: as a small account.
        assert_eq!(
            time_to_restart(
                Fault::Deaf {
                    connections: 10_000,
                    direct: true
                },
                &settings
            ),
            time_to_restart(
                Fault::Deaf {
                    connections: 1_000,
                    direct: false
                },
                &settings
            )
        );
    }

    /// The examples' comments give the times to restart that the rules compute for their
    /// own flags.
    #[test]
    fn the_examples_say_the_times_to_restart_of_their_flags() {
        use crate::config::duration::display;
        use crate::rules::remembered::Cadence;
        use crate::rules::restart::{time_to_restart, Fault, Settings};
        let said = |settings: &Settings, fault: Fault| {
            let s = time_to_restart(fault, settings);
            let period = settings.cadence.period.as_millis();
            let slowest = s.slowest.as_millis().div_ceil(period) * period;
            format!(
                "{}–{}",
                display(s.fastest),
                display(std::time::Duration::from_millis(slowest as u64))
            )
        };
        let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let go = flat(include_str!(
            "../examples/kubernetes/go-consumer-deployment.yaml"
        ));
        let go_settings = Settings {
            cadence: Cadence {
                window: std::time::Duration::from_secs(120),
                sample_every: std::time::Duration::from_secs(90),
                ..Cadence::DEFAULT
            },
            ..Settings::RECOMMENDED
        };
        let deaf = Fault::Deaf {
            connections: 100,
            direct: false,
        };
        for sentence in [
            format!(
                "a stalled consumer # is restarted {} after its last ack",
                said(&go_settings, Fault::Stalled)
            ),
            format!(
                "a deaf replica or an unbound # consumer {} after the fault",
                said(&go_settings, deaf)
            ),
        ] {
            assert!(
                go.contains(&sentence),
                "go-consumer-deployment.yaml: {sentence}"
            );
        }
        assert_eq!(said(&go_settings, deaf), said(&go_settings, Fault::Unbound));
        let bento = flat(include_str!("../examples/kubernetes/bento-deployment.yaml"));
        let r = Settings::RECOMMENDED;
        for sentence in [
            format!(
                "gave up is restarted {} after NATS # answers",
                said(&r, Fault::GaveUp)
            ),
            format!("an unbound consumer {} after", said(&r, Fault::Unbound)),
            format!(
                "a stalled one {} # after its last ack",
                said(&r, Fault::Stalled)
            ),
        ] {
            assert!(
                bento.contains(&sentence),
                "bento-deployment.yaml: {sentence}"
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
