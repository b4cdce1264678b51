//! The natsprobe binary: parses the command line, runs one command under its deadline, prints
//! its one answer and exits with its code. The only place that prints and exits; the
//! deadline's handler and the panic hook end runs that cannot return here, with the same
//! codes.

use clap::error::ErrorKind;
use natsprobe::cli::{self, CheckCommand::Check, Command};
use natsprobe::config::{duration, CheckConfig, GuardConfig};
use natsprobe::error::Error;
use natsprobe::exit::Exit;
use natsprobe::rules::check::Health;
use natsprobe::rules::connection::WhenServerDown;
use natsprobe::{budget, commands, deadline, report};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Every allocation counted against the run's memory budget (`natsprobe::budget`).
#[global_allocator]
static ALLOCATOR: budget::Budget = budget::Budget;

use natsprobe_core::timing::PRINT_MARGIN;

fn main() -> ExitCode {
    let started = Instant::now();
    // `serve`'s looks' process (`serve --look …`, as serve starts it): the OOM killer's first
    // choice, marked before it allocates anything.
    if std::env::args_os().nth(2).is_some_and(|a| a == "--look") {
        natsprobe::observe::look::first_for_the_oom_killer();
    }
    // With panic=abort a panic would end the probe with SIGABRT and no word of why.
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(
            std::io::stderr(),
            "could not evaluate: internal error: {info}"
        );
        std::process::exit(Exit::CannotEvaluate.code().into());
    }));

    let args = cli::with_default_subcommand(std::env::args_os());
    let cli = match cli::parse(&args) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::from(Exit::Healthy.code());
        }
        Err(e) => {
            let mut text = e.render().to_string();
            if let Some(note) = cli::env_source(&e, &args, &|name| {
                std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
            }) {
                let first_line_end = text.find('\n').unwrap_or(text.len());
                text.insert_str(first_line_end, &format!(" ({note})"));
            }
            // A script that asked for JSON gets JSON, even for a flag clap rejected: the
            // first line, without clap's "error: " and usage hints.
            if cli::wants_json(&args, &|name| std::env::var(name).ok()) {
                let first = text.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                let _ = writeln!(
                    std::io::stdout(),
                    "{}",
                    report::error(&format!("natsprobe: {message}"), true)
                );
            } else {
                let _ = write!(std::io::stderr(), "{text}");
            }
            return ExitCode::from(Exit::Usage.code());
        }
    };
    let env = |name: &str| std::env::var(name).ok();
    let outcome = match cli.command {
        Command::Check(Check(args)) => validated(args.json, args.validate(&env), &|config| {
            run_check(config, started, None)
        }),
        Command::Guard(args) => validated(args.json, args.validate(&env), &|config| {
            run_guard(config, started)
        }),
        Command::Diagnose(args) => validated(args.json, args.validate(&env), &|config| {
            // Colour only for a person: a terminal, and never with NO_COLOR set.
            let colour =
                std::io::stdout().is_terminal() && env("NO_COLOR").is_none_or(|v| v.is_empty());
            run_check(config, started, Some(colour))
        }),
        Command::Serve(serve) => validated(serve.check.json, serve.validate(&env), &|config| {
            match config.look {
                // The looks' process: a check each time `serve` asks, answering in JSON.
                true => run_looks(config.check),
                false => run_serve(config, &args[2..]),
            }
        }),
        Command::Install(args) => match commands::install::run(&args.dest) {
            Ok(done) => Outcome {
                text: Text::Line(format!(
                    "installed natsprobe {} to {} ({} bytes, mode 0755)",
                    cli::VERSION,
                    done.path.display(),
                    done.bytes
                )),
                to_stderr: false,
                exit: Exit::Healthy,
            },
            Err(e) => failure(e, false),
        },
    };
    let _ = match (outcome.to_stderr, outcome.text) {
        (true, Text::Line(text)) => writeln!(std::io::stderr(), "{text}"),
        (false, Text::Line(text)) => writeln!(std::io::stdout(), "{text}"),
        (_, Text::Guard { report, json }) => {
            // Written as it is rendered: a report over 100,000 durables is never one string.
            let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
            report.write(json, &mut out).and_then(|()| out.flush())
        }
    };
    ExitCode::from(outcome.exit.code())
}

/// A command's validated configuration run, or the flag that failed validation: exit 2, worded
/// as the command's output would be.
fn validated<C>(json: bool, config: Result<C, Error>, run: &dyn Fn(C) -> Outcome) -> Outcome {
    match config {
        Ok(config) => run(config),
        Err(e) => failure(e, json),
    }
}

/// What a run prints, where, and how it exits.
struct Outcome {
    text: Text,
    to_stderr: bool,
    exit: Exit,
}

/// A run's answer: a line (or a few), or the guard's report, written out a row at a time.
enum Text {
    Line(String),
    Guard {
        report: report::guard::GuardReport,
        json: bool,
    },
}

/// The one place an error becomes words and an exit code. JSON consumers read stdout; a
/// human line goes where errors go.
fn failure(e: Error, json: bool) -> Outcome {
    Outcome {
        text: Text::Line(report::error(&cli::describe(&e), json)),
        to_stderr: !json,
        exit: e.exit(),
    }
}

/// The deadline's line and the memory budget's are made in advance, by the one formatter,
/// around a marker for the phase.
const MARK: &str = "<<phase>>";

fn prepared(message: String, json: bool) -> (String, String) {
    let text = report::error(&cli::describe(&Error::CannotEvaluate(message)), json);
    around_mark(&text)
}

/// What comes before the marker, and after it to the line's end.
fn around_mark(text: &str) -> (String, String) {
    let (prefix, suffix) = text
        .split_once(MARK)
        .expect("the marker survives both formats");
    (prefix.to_string(), format!("{suffix}\n"))
}

/// Sets the run's memory budget of `bytes`, its line made now (`budget`): the bytes in MiB,
/// and then `more`.
fn budgeted((bytes, more): (usize, &str), json: bool) {
    let (prefix, suffix) = prepared(
        format!(
            "more than {} MiB{more} of memory needed while {MARK} (a server sending without end?)",
            bytes >> 20
        ),
        json,
    );
    deadline::prepare_budget_message(prefix, suffix);
    budget::set_limit(bytes);
}

/// What a check says when the memory budget runs out while it waits on NATS (`budget`): not
/// judged, with `health`, as for a server that answers too late.
fn budget_cut_short((bytes, more): (usize, &str), health: Health, json: bool) {
    let (prefix, suffix) = around_mark(&report::cut_short(
        &format!(
            "not judged: more than {} MiB{more} of memory needed while {MARK} (NATS sent without end: a restart would not help)",
            bytes >> 20
        ),
        health,
        json,
    ));
    deadline::prepare_budget_not_judged(prefix, suffix);
}

/// Runs `work` under the run's deadline (see `deadline`): it answers by `timeout` whatever
/// the work is blocked on. With `cut_short`, a check whose time runs out while it waits on
/// NATS ends with that health, not judged, as for a server that does not answer
/// (`--when-server-down`).
fn under_deadline<T>(
    timeout: Duration,
    named: &str,
    json: bool,
    started: Instant,
    (memory, cut_short): ((usize, &str), Option<Health>),
    work: impl FnOnce(Instant) -> Result<T, Error>,
) -> Result<T, Error> {
    let deadline = started + timeout.saturating_sub(PRINT_MARGIN);
    budgeted(memory, json);
    if let Some(health) = cut_short {
        let (prefix, suffix) = around_mark(&report::cut_short(
            &format!("not judged: {named} passed while {MARK} (NATS answered too late: a restart would not help)"),
            health,
            json,
        ));
        deadline::prepare_not_judged(prefix, suffix, Exit::from(health).code());
        budget_cut_short(memory, health, json);
    }
    let (prefix, suffix) = prepared(format!("{named} passed while {MARK}"), json);
    let armed = deadline::arm(
        deadline.saturating_duration_since(Instant::now()),
        prefix,
        suffix,
        json,
    );
    let result = work(deadline);
    // Stopped: the answer is ready and must not be interleaved with the deadline's line.
    drop(armed);
    result
}

/// `check`, or with `diagnose: Some(colour)` `diagnose` (the check with every socket listed,
/// explained), under `--timeout`; `diagnose` exits as the check would. The answer is rendered
/// after the deadline is stopped, as before it was armed: under emulation formatting is slow.
fn run_check(mut config: CheckConfig, started: Instant, diagnose: Option<bool>) -> Outcome {
    enum Report {
        Check(natsprobe::report::check::CheckReport),
        Diagnose(natsprobe::report::diagnose::DiagnoseReport, bool),
    }
    config.verbose |= diagnose.is_some();
    let (json, verbose) = (config.json, config.verbose);
    let named = format!("--timeout {}", duration::display(config.timeout));
    let cut_short = match config.core.connection.when_server_down {
        WhenServerDown::Pass => Health::Healthy,
        WhenServerDown::Fail => Health::Unhealthy,
    };
    let ran = under_deadline(
        config.timeout,
        &named,
        json,
        started,
        ((budget::CHECK, ""), Some(cut_short)),
        |deadline| match diagnose {
            None => commands::check::run(&config, deadline).map(Report::Check),
            Some(colour) => {
                commands::diagnose::run(&config, deadline).map(|r| Report::Diagnose(r, colour))
            }
        },
    );
    let (text, health) = match ran {
        Ok(Report::Check(r)) => (report::render_check(&r, json, verbose), r.health),
        Ok(Report::Diagnose(r, colour)) => {
            (report::render_diagnose(&r, json, colour), r.check.health)
        }
        Err(e) => return failure(e, json),
    };
    Outcome {
        text: Text::Line(text),
        to_stderr: false,
        exit: health.into(),
    }
}

/// The looks' process of `serve`: one check each time `serve` asks on stdin (`live` or
/// `startup`), under its own deadline and memory budget, answered with its JSON and the line
/// that closes it (`natsprobe-look-end CODE LOGINS`), the NATS connection held between them
/// (`observe::held`). Ends (exit 0) when `serve` is gone. A look cut short by its deadline or
/// its budget ends the process with that answer: `serve` starts another for the next look.
fn run_looks(config: CheckConfig) -> Outcome {
    use natsprobe::facts::Meaning;
    use natsprobe::observe::{held, look};
    held::hold();
    while let Some(meaning) = look::next_request() {
        let mut config = config.clone();
        config.core.connection.startup = meaning == Meaning::Startup;
        let outcome = run_check(config, Instant::now(), None);
        let Text::Line(text) = outcome.text else {
            unreachable!("a check's answer is a line")
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{text}\n{}",
            look::end_line(outcome.exit.code(), natsprobe::observe::nats::logins())
        )
        .and_then(|()| out.flush());
    }
    Outcome {
        text: Text::Line(String::new()),
        to_stderr: true,
        exit: Exit::Healthy,
    }
}

/// `serve` runs until a signal ends it; it returns only when it cannot start (its address
/// taken, say): exit 2 or 3, as for any other command. Its memory is budgeted as a run's is;
/// its log (`kubectl logs`) is where the reason behind a failed probe is written, since the
/// kubelet's event for an httpGet probe names only the status code.
fn run_serve(config: natsprobe::config::ServeConfig, look_args: &[std::ffi::OsString]) -> Outcome {
    fn log_line(line: &str) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let json = config.check.json;
    commands::serve::end_on_signals();
    budgeted((budget::SERVE, ""), json);
    deadline::set_phase(deadline::Phase::Serving);
    /// `--exit-unhealthy`: the code the pod's restart rules name.
    fn end(code: u8) -> ! {
        std::process::exit(code.into())
    }
    match commands::serve::run(&config, look_args, &log_line, end) {
        Ok(never) => match never {},
        Err(e) => failure(e, json),
    }
}

/// The guard's deadline covers both looks and the interval between them.
fn run_guard(config: GuardConfig, started: Instant) -> Outcome {
    let json = config.json;
    let timeout = commands::guard::deadline(&config);
    let named = format!(
        "the guard's deadline ({}: --interval, twice --timeout, and 1s)",
        duration::display(timeout)
    );
    let per_durable = format!(" and {} KiB a durable", budget::GUARD_PER_DURABLE >> 10);
    let memory = (budget::GUARD, per_durable.as_str());
    match under_deadline(timeout, &named, json, started, (memory, None), |_| {
        commands::guard::run(&config)
    }) {
        Ok(report) => Outcome {
            exit: report.health.into(),
            text: Text::Guard { report, json },
            to_stderr: false,
        },
        Err(e) => failure(e, json),
    }
}
