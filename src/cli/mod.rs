//! The command line: clap definitions (doc comments are the help), `check` as the default
//! subcommand, argv handling, and the words of an error. The only place, with its files, that
//! knows flag names and environment variables: `check` (also `diagnose`'s flags) and their
//! validation into plain configuration (`crate::config`) before anything is read, `guard`,
//! and how every command reaches NATS (`nats`).

pub(crate) mod check;
mod guard;
mod nats;
mod serve;

pub use check::CheckArgs;
pub use guard::GuardArgs;
pub use serve::ServeArgs;

use crate::config::Setting;
use crate::error::Error;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("NATSPROBE_GIT_REV"),
    ")"
);

/// Liveness probe for NATS clients: exits 1 when this pod's client has given up its
/// connection, holds a dead one, or its consumer or subscription stopped, so the kubelet
/// restarts it; and 0 when a restart would not help.
///
/// Exit codes: 0 healthy, 1 unhealthy, 2 usage or configuration error, 3 could not evaluate.
/// The kubelet restarts a pod on any of 1, 2 and 3, so a check exits non-zero only where
/// nothing NATS does (down, slow, electing, its auth service down) can be the cause. Exit 2 is
/// a wrong flag or setting (no such --process, no place to keep samples), or a check not
/// judged for longer than the window: for a cause NATS can also give (a refused login, no
/// JetStream) only if it was never judged with this configuration; for the pod's own (the
/// client's start time unreadable, no room for samples) whether judged before or not.
/// `check` is the default: `natsprobe --port 4222` is `natsprobe check --port 4222`.
#[derive(Debug, Parser)]
#[command(name = "natsprobe", version = VERSION, disable_help_subcommand = true)]
#[command(max_term_width = 100)]
pub struct Cli<C: Subcommand = Command> {
    #[command(subcommand)]
    pub command: C,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(flatten)]
    Check(CheckCommand),
    /// Judge every durable in the account from two looks an interval apart; exit 1 on a fault
    /// seen in both (run it from a CronJob: the failed Job is the alert)
    Guard(GuardArgs),
    /// Explain what the check sees, for a person at a terminal (kubectl exec): every socket
    /// with its holder and traffic, every server's answer, each consumer's facts, and what to
    /// do. Takes the check's options; exits as the check would
    Diagnose(CheckArgs),
    /// Answer the kubelet's httpGet probes with the check's verdict, from memory: the check
    /// runs in the background every --every, the probes read its last answer (GET /livez,
    /// /startupz with --startup, and /selfz for natsprobe's own livenessProbe); GET /metrics
    /// for Prometheus
    Serve(ServeArgs),
    /// Copy this executable to DEST (a file, or a directory to put `natsprobe` in), atomically,
    /// mode 0755: for an initContainer filling a shared emptyDir
    Install(InstallArgs),
}

/// `check`, parsed alone or with the others.
#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    /// Check this pod's NATS client (the default): a live ESTABLISHED connection to the NATS
    /// port (not half-open); with --server, fail only while NATS answers; with --consumer, the
    /// consumer bound and progressing; with --own-subscription, this pod's part of it (the
    /// deliver subscription held, or pulls sent); with --subscription, this pod's connection
    /// holding the subscription
    Check(CheckArgs),
}

/// Parses a command line (`with_default_subcommand`'s): a `check` (or `serve`'s looks'
/// process) as the same program with that one subcommand, anything else with the whole `Cli`.
/// clap builds every subcommand's arguments before it parses one; a probe runs in every pod
/// every few seconds, and `check` is nearly all of its runs. The words of help and errors are
/// the same either way (`a_check_parses_and_errs_alike_alone`).
pub fn parse(args: &[OsString]) -> Result<Cli, clap::Error> {
    match args.get(1).and_then(|a| a.to_str()) {
        Some("check") => parsed(args).map(|c: Cli<CheckCommand>| Cli {
            command: Command::Check(c.command),
        }),
        // serve's looks' process, as serve starts it (never typed by a person).
        Some("serve") if args.get(2).is_some_and(|a| a == "--look") => {
            parsed(args).map(|c: Cli<LookCommand>| match c.command {
                LookCommand::Serve(args) => Cli {
                    command: Command::Serve(args),
                },
            })
        }
        _ => parsed(args),
    }
}

/// The whole command line as it is parsed, with the environment twins.
pub fn command() -> clap::Command {
    with_twins(<Cli>::command())
}

/// Every flag a person may give has its environment twin (`twin`), whose value help never
/// shows (it may hold a credential).
fn with_twins(command: clap::Command) -> clap::Command {
    command.mut_subcommands(|sub| {
        sub.mut_args(|arg| match arg.get_long() {
            Some(long) if !arg.is_hide_set() => {
                let twin = twin(long);
                arg.env(twin).hide_env_values(true)
            }
            _ => arg,
        })
    })
}

/// A flag's environment twin: `NATSPROBE_` and the flag's name (`--stall-after` reads
/// `NATSPROBE_STALL_AFTER`).
fn twin(long: &str) -> String {
    format!("NATSPROBE_{}", long.to_uppercase().replace('-', "_"))
}

/// A command line parsed by `P`'s definition with the environment twins.
fn parsed<P: Parser>(args: &[OsString]) -> Result<P, clap::Error> {
    let mut command = with_twins(P::command());
    let mut matches = command.try_get_matches_from_mut(args)?;
    P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))
}

#[derive(Debug, Subcommand)]
enum LookCommand {
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Where to put the probe: a file path, or an existing directory
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
}

/// A duration flag that must not be 0 (`zero` as its error says it: `0s`, `0ms`).
fn not_zero(flag: &str, value: std::time::Duration, zero: &str) -> Result<(), Error> {
    if value.is_zero() {
        return Err(Error::Usage(format!("{flag} must be more than {zero}")));
    }
    Ok(())
}

/// A command line's words, for tests.
#[cfg(test)]
pub(crate) fn argv(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

/// A command line parsed, and its command validated by `validate` with `env`'s variables, for
/// tests: the configuration, or the error's words (a usage error's message alone).
#[cfg(test)]
pub(crate) fn validated<C>(
    argv: &[OsString],
    env: &[(&str, &str)],
    validate: impl FnOnce(Command, &dyn Fn(&str) -> Option<String>) -> Result<C, Error>,
) -> Result<C, String> {
    let cli = parse(argv).map_err(|e| e.to_string())?;
    let lookup = |k: &str| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    };
    validate(cli.command, &lookup).map_err(|e| match e {
        Error::Usage(m) => m,
        other => describe(&other),
    })
}

/// An error in words: usage errors name their flag (or environment variable).
pub fn describe(e: &Error) -> String {
    match e {
        Error::Usage(m) => format!("natsprobe: {m}"),
        Error::Setting {
            setting,
            path,
            problem,
        } => {
            let path = path
                .as_ref()
                .map(|p| format!(" {}", p.display()))
                .unwrap_or_default();
            format!("natsprobe: {}{path}: {problem}", flag(*setting))
        }
        Error::CannotEvaluate(m) => format!("could not evaluate: {m}"),
    }
}

/// The flag behind a setting whose value turned out wrong when it was used.
pub fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::Pid => "--pid",
        Setting::Process => "--process",
        Setting::NetnsOf => "--netns-of",
        Setting::Creds => "--creds",
        Setting::Nkey => "--nkey",
        Setting::OwnSubscription => "--own-subscription",
        Setting::InstallDest => "install DEST",
        Setting::StateDir => "--state-dir",
    }
}

/// `check` is the default subcommand: when the first argument is a flag other than
/// help/version (or there is none), `check` is inserted. clap has no "default subcommand",
/// and flattening the check flags into the top level would make them collide with the
/// later subcommands' flags.
pub fn with_default_subcommand(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let insert = match args.get(1).and_then(|a| a.to_str()) {
        None => args.len() <= 1,
        Some("-h" | "--help" | "-V" | "--version") => false,
        Some(first) => first.starts_with('-'),
    };
    if insert {
        args.insert(1.min(args.len()), "check".into());
    }
    args
}

/// Whether a command line clap rejected asked for JSON: `--json` among the arguments, or a
/// true `NATSPROBE_JSON`.
pub fn wants_json(argv: &[OsString], env: &dyn Fn(&str) -> Option<String>) -> bool {
    argv.iter().any(|a| a == "--json")
        || env("NATSPROBE_JSON").is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on" | "y"
            )
        })
}

/// clap's message names the flag. When the bad value came from the flag's environment twin
/// (a pod spec's `env:`), that is said too, or the operator looks for a flag that is not there.
pub fn env_source(
    err: &clap::Error,
    argv: &[OsString],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = arg.split_whitespace().next()?;
    let given = argv.iter().any(|a| {
        let a = a.to_string_lossy();
        a == long || a.starts_with(&format!("{long}="))
    });
    if given {
        return None;
    }
    let twin = twin(long.strip_prefix("--")?);
    env(&twin).map(|_| format!("the value came from the environment variable {twin}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use check::tests::parse;
    use std::time::Duration;

    #[test]
    fn no_environment_value_is_ever_shown_in_help() {
        let command = command();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                if arg.get_env().is_some() {
                    assert!(
                        arg.is_hide_env_values_set(),
                        "--{:?} shows its env value",
                        arg.get_long()
                    );
                }
            }
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
        with_twins(Cli::<CheckCommand>::command()).debug_assert();
        with_twins(Cli::<LookCommand>::command()).debug_assert();
    }

    /// A look's command line parses alone as it does whole.
    #[test]
    fn a_look_parses_alike_alone() {
        let argv = argv(&[
            "natsprobe",
            "serve",
            "--look",
            "--port",
            "4222",
            "--every",
            "2s",
        ]);
        assert_eq!(
            format!("{:?}", super::parse(&argv).unwrap()),
            format!("{:?}", parsed::<Cli>(&argv).unwrap())
        );
    }

    /// `check` parsed alone says what the whole command line says: its help, its errors (with
    /// their usage lines and suggestions), and its values.
    #[test]
    fn a_check_parses_and_errs_alike_alone() {
        let alone = with_twins(Cli::<CheckCommand>::command());
        let whole = command();
        let mut check_alone = alone.find_subcommand("check").unwrap().clone();
        let mut check_whole = whole.find_subcommand("check").unwrap().clone();
        assert_eq!(
            check_alone.render_help().to_string(),
            check_whole.render_help().to_string()
        );
        assert_eq!(
            check_alone.render_long_help().to_string(),
            check_whole.render_long_help().to_string()
        );
        for argv in [
            &["natsprobe", "check", "--help"][..],
            &["natsprobe", "check", "-h"],
            &["natsprobe", "check", "--version"],
            &["natsprobe", "check", "--port", "0"],
            &["natsprobe", "check", "--port"],
            &["natsprobe", "check", "--prot", "4222"],
            &["natsprobe", "check", "--reader", "nope"],
            &["natsprobe", "check", "--min-connections", "x"],
            &["natsprobe", "check", "stray"],
            &["natsprobe", "check", "--json=maybe"],
            &["natsprobe", "check", "--timeout", "5"],
        ] {
            let argv = super::argv(argv);
            let words = |r: Result<Cli, clap::Error>| match r {
                Ok(cli) => format!("{cli:?}"),
                Err(e) => format!("{:?}: {}", e.kind(), e.render()),
            };
            assert_eq!(
                words(super::parse(&argv)),
                words(parsed::<Cli>(&argv)),
                "{argv:?}"
            );
        }
        let argv = argv(&["natsprobe", "check", "--port", "4222", "-v", "--pid", "7"]);
        assert_eq!(
            format!("{:?}", super::parse(&argv).unwrap()),
            format!("{:?}", parsed::<Cli>(&argv).unwrap())
        );
    }

    /// Every flag has a `NATSPROBE_*` twin named after it, e.g. `--min-connections` reads
    /// `NATSPROBE_MIN_CONNECTIONS`; a new flag without one fails here.
    #[test]
    fn every_flag_has_its_environment_twin() {
        let command = command();
        for sub in command.get_subcommands() {
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if arg.is_hide_set() {
                    // serve's own word to its looks' process: never from the environment.
                    assert_eq!(arg.get_env(), None, "--{long} is hidden");
                    continue;
                }
                if matches!(long, "help" | "version") {
                    continue;
                }
                let expected = format!("NATSPROBE_{}", long.to_uppercase().replace('-', "_"));
                let env = arg.get_env().map(|e| e.to_string_lossy().to_string());
                assert_eq!(env.as_deref(), Some(expected.as_str()), "--{long}");
            }
        }
    }

    /// A rejected command line asked for JSON by `--json` or a true `NATSPROBE_JSON`.
    #[test]
    fn json_is_wanted_by_the_flag_or_a_true_twin() {
        let unset = |_: &str| None;
        assert!(wants_json(&argv(&["natsprobe", "check", "--json"]), &unset));
        assert!(!wants_json(
            &argv(&["natsprobe", "check", "--port", "1"]),
            &unset
        ));
        let twin = |v: &'static str| move |n: &str| (n == "NATSPROBE_JSON").then(|| v.into());
        assert!(wants_json(&argv(&["natsprobe"]), &twin(" TRUE ")));
        assert!(!wants_json(&argv(&["natsprobe"]), &twin("0")));
    }

    /// A bad value not on the command line came from the flag's twin, and the error says so.
    #[test]
    fn a_bad_value_from_the_environment_is_said_to_be() {
        let err = super::parse(&argv(&["natsprobe", "check", "--port", "0"])).unwrap_err();
        let twin = |name: &str| (name == "NATSPROBE_PORT").then(|| "0".to_string());
        let none = |_: &str| None;
        let given = argv(&["natsprobe", "check", "--port", "0"]);
        assert_eq!(env_source(&err, &given, &twin), None);
        let given = argv(&["natsprobe", "check", "--port=0"]);
        assert_eq!(env_source(&err, &given, &twin), None);
        let not_given = argv(&["natsprobe", "check"]);
        assert_eq!(
            env_source(&err, &not_given, &twin).as_deref(),
            Some("the value came from the environment variable NATSPROBE_PORT")
        );
        assert_eq!(env_source(&err, &not_given, &none), None);
        let other = super::parse(&argv(&["natsprobe", "check", "--prot", "1"])).unwrap_err();
        assert_eq!(env_source(&other, &not_given, &twin), None);
    }

    /// An error's words name the flag (and the file) behind it.
    #[test]
    fn an_error_is_worded_with_its_flag() {
        use std::path::Path;
        assert_eq!(describe(&Error::Usage("bad".into())), "natsprobe: bad");
        let setting = |path: Option<&str>| Error::Setting {
            setting: Setting::StateDir,
            path: path.map(|p| Path::new(p).to_path_buf()),
            problem: "not a directory".into(),
        };
        assert_eq!(
            describe(&setting(Some("/x"))),
            "natsprobe: --state-dir /x: not a directory"
        );
        assert_eq!(
            describe(&setting(None)),
            "natsprobe: --state-dir: not a directory"
        );
        assert_eq!(
            describe(&Error::CannotEvaluate("no /proc".into())),
            "could not evaluate: no /proc"
        );
    }

    #[test]
    fn check_is_the_default_subcommand() {
        let explicit = parse(&["natsprobe", "check", "--port", "7422"]).unwrap();
        let implied = parse(&["natsprobe", "--port", "7422"]).unwrap();
        let bare = parse(&["natsprobe"]).unwrap();
        assert_eq!(explicit.core.connection, implied.core.connection);
        assert!(bare.servers.is_empty());
        assert_eq!(bare.core.connection.ports, [4222]);
        assert_eq!(bare.timeout, Duration::from_millis(800));
    }

    /// The defaults are the core's times (`natsprobe_core::timing`), each named once there with
    /// the principle it serves.
    #[test]
    fn the_defaults_are_the_cores_times() {
        use natsprobe_core::timing as t;
        let bare = parse(&["natsprobe"]).unwrap();
        assert_eq!(bare.timeout, t::TIMEOUT);
        assert_eq!(bare.core.consumer.stall_after, t::STALL_AFTER);
        assert_eq!(bare.core.restart_again_after, t::RESTART_AGAIN_AFTER);
        assert_eq!(
            bare.core.connection.half_open_after,
            Some(t::HALF_OPEN_AFTER)
        );
        assert_eq!(bare.core.sample_every, t::STALL_AFTER * 3 / 4);
        let env = |_: &str| None;
        let guard =
            super::parse(&argv(&["natsprobe", "guard", "--server", "nats://n:4222"])).unwrap();
        let Command::Guard(guard) = guard.command else {
            panic!("not the guard")
        };
        let guard = guard.validate(&env).unwrap();
        assert_eq!(
            (guard.interval, guard.timeout),
            (t::GUARD_INTERVAL, t::GUARD_TIMEOUT)
        );
        let serve = super::parse(&argv(&["natsprobe", "serve"])).unwrap();
        let Command::Serve(serve) = serve.command else {
            panic!("not serve")
        };
        assert_eq!(serve.validate(&env).unwrap().every, t::SERVE_EVERY);
    }

    #[test]
    fn default_subcommand_leaves_help_version_and_subcommands_alone() {
        for first in ["-h", "--help", "-V", "--version", "check"] {
            let argv = with_default_subcommand(["natsprobe", first].map(OsString::from));
            assert_eq!(argv.len(), 2, "{first}");
        }
        let argv = with_default_subcommand(["natsprobe", "-v"].map(OsString::from));
        assert_eq!(argv, ["natsprobe", "check", "-v"].map(OsString::from));
    }
}
