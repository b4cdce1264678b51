//! The documents stay true to the code (tests only): the tables the rules own (causes, times
//! to restart), the examples' figures, the README's shape (short, its recipes early, its
//! manifests the tested files' own lines), every relative link resolving, every flag in the
//! reference, and no issue numbers (history is the CHANGELOG's).

#[cfg(test)]
mod tests {
    /// The table of causes (docs/reference.md) is the rules' table: every cause has its row,
    /// with its class; and every document says what exit 2 is for the same way.
    #[test]
    fn the_documents_say_one_thing_about_exit_2() {
        use crate::rules::cause;
        let readme = include_str!("../README.md");
        let reference = include_str!("../docs/reference.md");
        for c in cause::ALL {
            let class = cause::class(c).as_str();
            let row = reference
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", c.as_str())))
                .unwrap_or_else(|| {
                    panic!(
                        "docs/reference.md's table of causes has no row for {}",
                        c.as_str()
                    )
                });
            assert!(
                row.contains(&format!("| {class} |")),
                "docs/reference.md says another class for {}: {row}",
                c.as_str()
            );
            // And its exit: 0 for NATS's causes, 2 past the window for the others.
            let exit = row.rsplit('|').nth(1).unwrap_or_default().trim();
            let transient = cause::class(c) == cause::Class::Transient;
            assert_eq!(
                exit == "0",
                transient,
                "docs/reference.md says exit {exit:?} for {}",
                c.as_str()
            );
            assert!(transient || exit.contains('2'), "{row}");
        }
        // Prose is wrapped: compared with its whitespace made single spaces.
        let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let help = flat(&crate::cli::command().render_long_help().to_string());
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
                "A refused request never makes a fault (exit 1)",
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

    /// docs/checks.md's words, principles and table are the core's: each word defined once,
    /// at most eight principles, and the one table of answers `rules::answers`' own: every
    /// cause a NATS answer can have in exactly its row, each row's clock, fault and exit as
    /// the row does them, and the pod without a connection as NATS not there.
    /// Each word of docs/checks.md's glossary names, right after it, the one function or type
    /// of the core it is (`rules::remembered::is_look`), and that item is there: a word whose
    /// code is renamed or gone fails here.
    #[test]
    fn each_word_is_one_item_of_the_core() {
        let checks = include_str!("../docs/checks.md");
        let core = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src");
        let words = &checks[checks.find("\n## Words\n").unwrap()..];
        let words = &words[..words[1..].find("\n## ").unwrap()];
        let entries: Vec<&str> = words.split("\n- **").skip(1).collect();
        assert!(entries.len() >= 8, "{} words", entries.len());
        for entry in entries {
            let (word, rest) = entry.split_once("** (`").expect("a word names its code");
            let path = rest.split_once('`').unwrap().0;
            let segments: Vec<&str> = path.split("::").collect();
            // The longest run of leading segments that is a file is the module; the rest is
            // the item, the last segment its name.
            let (file, item) = (1..segments.len())
                .rev()
                .find_map(|n| {
                    let file = core.join(format!("{}.rs", segments[..n].join("/")));
                    file.exists().then(|| (file, segments[n..].to_vec()))
                })
                .unwrap_or_else(|| panic!("{word}: no module for {path}"));
            let source = std::fs::read_to_string(&file).unwrap();
            let name = item.last().unwrap();
            let defined = ["fn", "struct", "enum", "const"].iter().any(|kind| {
                source.contains(&format!("{kind} {name}("))
                    || source.contains(&format!("{kind} {name} "))
                    || source.contains(&format!("{kind} {name}<"))
            });
            assert!(
                defined,
                "{word}: {path} is not defined in {}",
                file.display()
            );
        }
    }

    #[test]
    fn the_principles_are_the_rules() {
        use crate::facts::Gap;
        use crate::rules::answers::Row;
        use crate::rules::cause::{self, Class};
        let checks = include_str!("../docs/checks.md");
        let section = |heading: &str| {
            let start = checks
                .find(&format!("\n## {heading}\n"))
                .unwrap_or_else(|| panic!("docs/checks.md has no section {heading}"));
            let rest = &checks[start + heading.len() + 5..];
            &rest[..rest.find("\n## ").unwrap_or(rest.len())]
        };
        let words = section("Words");
        for word in [
            "look",
            "window",
            "fresh",
            "calm",
            "not judged",
            "carried",
            "starts over",
        ] {
            assert!(
                words.contains(&format!("- **{word}** (`")),
                "docs/checks.md's words do not define {word}"
            );
        }
        let principles = section("The principles")
            .lines()
            .filter(|l| {
                l.split_once(". **")
                    .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
            })
            .count();
        assert!((1..=8).contains(&principles), "{principles} principles");
        let table = section("What each answer does");
        let row = |starts: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("| {starts}")))
                .unwrap_or_else(|| panic!("docs/checks.md's table has no row {starts}"))
        };
        let cell = |row: &str, n: usize| {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            cells.get(n).copied().unwrap_or_default().to_string()
        };
        for r in Row::ALL {
            let line = row(r.words());
            let causes: Vec<&str> = cause::ALL
                .iter()
                .filter(|c| c.row() == Some(r))
                .map(|c| c.as_str())
                .collect();
            let listed: Vec<String> = cell(line, 1)
                .split(", ")
                .map(|c| c.trim_matches('`').to_string())
                .collect();
            assert_eq!(listed, causes, "{line}");
            let clock = cell(line, 2);
            assert_eq!(
                clock.starts_with("counts"),
                r.clock() == Gap::None,
                "{line}"
            );
            assert_eq!(
                clock.starts_with("starts over"),
                r.clock() == Gap::Resets,
                "{line}"
            );
            assert_eq!(
                cell(line, 3).starts_with("stands"),
                r.clock() == Gap::None,
                "{line}"
            );
            assert_eq!(
                cell(line, 4).contains("exit 2 once it lasted the window, if never judged"),
                r.class() == Class::ConfigurationIfNeverJudged,
                "{line}"
            );
        }
        // A consumer NATS answered for where a restart cannot help: the clock counts on (the
        // look saw it), the fault the last look saw is void, and the run is not judged, exit 0.
        for c in [
            cause::Cause::ServerNotDelivering,
            cause::Cause::RestartDidNotHelp,
        ] {
            let line = table
                .lines()
                .find(|l| cell(l, 1) == format!("`{}`", c.as_str()))
                .unwrap_or_else(|| panic!("docs/checks.md's table has no row for {c:?}"));
            assert!(line.starts_with("| answered,"), "{line}");
            assert!(cell(line, 2).starts_with("counts"), "{line}");
            assert!(cell(line, 3).starts_with("void"), "{line}");
            assert_eq!(cell(line, 4), "not judged (exit 0)", "{line}");
            assert_eq!(cause::class(c), Class::Transient, "{c:?}");
        }
        // A run that holds no connection to ask by: NATS not there, for the consumers.
        let not_asked = row("not asked");
        assert!(cell(not_asked, 2).starts_with("starts over"));
        assert_eq!(Row::NotThere.clock(), Gap::Resets);
        let flat = checks.split_whitespace().collect::<Vec<_>>().join(" ");
        let (n, d) = natsprobe_core::timing::WINDOW_SHARE;
        assert!(flat.contains(&format!("inside {n}/{d} of the least window")));
        assert_eq!(natsprobe_core::timing::SAMPLE_EVERY_SHARE, (3, 4));
        assert!(flat.contains("(default ¾ of `--stall-after`: 45s)"));
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
            (
                "the consumer is unbound (nothing subscribed)",
                Fault::Unbound,
            ),
            ("the durable or its stream is gone", Fault::Absent),
            ("the consumer stalled (from its last ack)", Fault::Stalled),
            (
                "the consumer loses messages to retention (from its last ack)",
                Fault::Losing,
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
            (
                "a pull replica stopped pulling, its connection held (from its last pull request)",
                Fault::NotPulling,
            ),
        ];
        // What is never restarted, or not again: the core's property tests hold these
        // (`timelines::nats_holding_work_back_is_never_the_pods`,
        // `timelines::a_restart_that_did_not_help_is_not_repeated`), with this default.
        let again = display(natsprobe_core::timing::RESTART_AGAIN_AFTER);
        let row = format!("| NATS holds the work back (`server_not_delivering`) / the same stall after a restart for it (`restart_did_not_help`) | `--consumer` | never / not again before `--restart-again-after` ({again}) past the first failure |");
        assert!(readme.lines().any(|l| l == row), "README lacks: {row}");
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

    /// Each way a run finds a subscription's connection is one of the JSON's `found` words
    /// that docs/reference.md lists.
    #[test]
    fn the_reference_lists_every_found_word() {
        use crate::report::remembered::found_word;
        use crate::rules::remembered::{Found, Rematch, Trust};
        let reference = include_str!("../docs/reference.md");
        let row = reference
            .lines()
            .find(|l| l.starts_with("| `subscriptions[]` |"))
            .expect("the subscriptions row");
        let trust = Trust {
            length: std::time::Duration::ZERO,
            stretched_for: None,
            at_look: false,
        };
        let every = [
            Found::Trusted {
                held_ago: std::time::Duration::ZERO,
                trust,
            },
            Found::LookedUp { cid: 1 },
            Found::Matched(Rematch::FirstTime),
            Found::Waited,
            Found::NothingDelivered,
            Found::WithinWindow,
        ];
        for f in every {
            // A new way must be added above: this match has no arm for it.
            match f {
                Found::Trusted { .. }
                | Found::LookedUp { .. }
                | Found::Matched(_)
                | Found::Waited
                | Found::NothingDelivered
                | Found::WithinWindow => {}
            }
            let word = format!("`{}`", found_word(f));
            assert!(
                row.contains(&word),
                "docs/reference.md lacks `found` {word}"
            );
        }
    }

    /// The examples' comments give the times to restart that the rules compute for their
    /// own flags.
    #[test]
    fn the_examples_say_the_times_to_restart_of_their_flags() {
        use crate::config::duration::display;
        use crate::rules::restart::Cadence;
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
        // The README's section on the Go consumer says the same.
        let readme = flat(include_str!("../README.md"));
        let sentence = format!(
            "A deaf replica is restarted {} after it went deaf, a stalled consumer {} after its last ack.",
            said(&go_settings, deaf),
            said(&go_settings, Fault::Stalled)
        );
        assert!(readme.contains(&sentence), "README.md: {sentence}");
        // docs/checks.md quotes the README's row for a pull consumer's part.
        let checks = flat(include_str!("../docs/checks.md"));
        let sentence = format!(
            "(the README's time to restart: {} at the defaults)",
            said(&Settings::RECOMMENDED, Fault::NotPulling)
        );
        assert!(checks.contains(&sentence), "docs/checks.md: {sentence}");
        // And the FAQ quotes the README's table.
        let r = Settings::RECOMMENDED;
        let faq = flat(include_str!("../docs/faq.md"));
        let sentence = format!(
            "table: {} for a client that gave up, {} for a stalled consumer, {} for a deaf replica",
            said(&r, Fault::GaveUp),
            said(&r, Fault::Stalled),
            said(&r, deaf)
        );
        assert!(faq.contains(&sentence), "docs/faq.md: {sentence}");
        // Its Go `jetstream` recipe, at the defaults.
        let sentence = format!(
            "With the defaults a replica whose pull loop stopped is restarted {} after its last pull request.",
            said(&r, Fault::NotPulling)
        );
        assert!(faq.contains(&sentence), "docs/faq.md: {sentence}");
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

    const DOCUMENTS: [(&str, &str); 17] = [
        ("README.md", include_str!("../README.md")),
        ("docs/alerts.md", include_str!("../docs/alerts.md")),
        ("ARCHITECTURE.md", include_str!("../ARCHITECTURE.md")),
        ("SECURITY.md", include_str!("../SECURITY.md")),
        ("CHANGELOG.md", include_str!("../CHANGELOG.md")),
        ("docs/checks.md", include_str!("../docs/checks.md")),
        (
            "docs/chaos-drill.md",
            include_str!("../docs/chaos-drill.md"),
        ),
        (
            "docs/compatibility.md",
            include_str!("../docs/compatibility.md"),
        ),
        ("docs/design.md", include_str!("../docs/design.md")),
        ("docs/faq.md", include_str!("../docs/faq.md")),
        ("docs/guard.md", include_str!("../docs/guard.md")),
        ("docs/install.md", include_str!("../docs/install.md")),
        (
            "docs/performance.md",
            include_str!("../docs/performance.md"),
        ),
        (
            "docs/permissions.md",
            include_str!("../docs/permissions.md"),
        ),
        ("docs/reference.md", include_str!("../docs/reference.md")),
        (
            "docs/server-facts.md",
            include_str!("../docs/server-facts.md"),
        ),
        ("docs/topologies.md", include_str!("../docs/topologies.md")),
    ];

    /// A heading's anchor, as GitHub makes it.
    fn slug(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    fn anchors(text: &str) -> Vec<String> {
        let mut in_code = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            }
            if !in_code && line.starts_with('#') {
                out.push(slug(line.trim_start_matches('#')));
            }
        }
        out
    }

    #[test]
    fn every_relative_link_resolves() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let link = regex_lite_links;
        for (name, text) in DOCUMENTS {
            let dir = std::path::Path::new(name).parent().unwrap();
            for target in link(text) {
                if target.starts_with("http://") || target.starts_with("https://") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    std::path::PathBuf::from(name)
                } else {
                    dir.join(path)
                };
                let full = root.join(&file);
                assert!(
                    full.exists(),
                    "{name}: the link {target} names no file ({})",
                    file.display()
                );
                if let Some(anchor) = anchor {
                    let text = std::fs::read_to_string(&full).unwrap();
                    assert!(
                        anchors(&text).iter().any(|a| a == anchor),
                        "{name}: the link {target} names no heading of {}",
                        file.display()
                    );
                }
            }
        }
    }

    /// The `](target)` of every markdown link outside code.
    fn regex_lite_links(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut in_code = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code || line.starts_with("    ") {
                continue;
            }
            let mut rest = line;
            while let Some(i) = rest.find("](") {
                let after = &rest[i + 2..];
                let Some(end) = after.find(')') else { break };
                out.push(after[..end].to_string());
                rest = &after[end..];
            }
        }
        out
    }

    /// The README is the operator's fast path: at most 300 lines, the three recipes' tested
    /// manifests linked within its first 120, its YAML blocks those manifests' own lines.
    #[test]
    fn the_readme_is_short_and_its_recipes_are_the_tested_manifests() {
        let readme = include_str!("../README.md");
        let lines: Vec<&str> = readme.lines().collect();
        assert!(lines.len() <= 300, "README.md has {} lines", lines.len());
        let early = lines[..120.min(lines.len())].join("\n");
        for recipe in [
            "examples/kubernetes/bento-deployment.yaml",
            "examples/kubernetes/go-consumer-deployment.yaml",
            "examples/kubernetes/guard-cronjob.yaml",
        ] {
            assert!(
                early.contains(&format!("]({recipe})")),
                "{recipe} not linked in the first 120 lines"
            );
        }
        let manifests = [
            include_str!("../examples/kubernetes/bento-deployment.yaml"),
            include_str!("../examples/kubernetes/go-consumer-deployment.yaml"),
            include_str!("../examples/kubernetes/guard-cronjob.yaml"),
            include_str!("../examples/kubernetes/initcontainer-install.yaml"),
            include_str!("../examples/kubernetes/leaf-node-deployment.yaml"),
            include_str!("../examples/kubernetes/sidecar-process.yaml"),
            include_str!("../examples/kubernetes/native-sidecar.yaml"),
        ];
        let mut blocks = 0;
        let mut block: Option<Vec<&str>> = None;
        for line in &lines {
            match (&mut block, *line) {
                (None, "```yaml") => block = Some(Vec::new()),
                (Some(b), "```") => {
                    let text = b.join("\n");
                    assert!(
                        manifests.iter().any(|m| m.contains(&text)),
                        "a YAML block of the README is not a manifest's lines:\n{text}"
                    );
                    blocks += 1;
                    block = None;
                }
                (Some(b), l) => b.push(l),
                (None, _) => {}
            }
        }
        assert!(blocks >= 3, "{blocks} YAML blocks");
    }

    /// Every flag `--help` shows, of every command, is in the reference's flag tables.
    #[test]
    fn every_flag_is_in_the_reference() {
        let reference = include_str!("../docs/reference.md");
        let cli = crate::cli::command();
        for sub in cli.get_subcommands() {
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) || arg.is_hide_set() {
                    continue;
                }
                // In the first cell of a table's row.
                let named = reference.lines().any(|l| {
                    l.strip_prefix("| ")
                        .and_then(|rest| rest.split(" | ").next())
                        .is_some_and(|first| {
                            first.contains(&format!("`--{long} "))
                                || first.contains(&format!("`--{long}`"))
                        })
                });
                assert!(
                    named,
                    "docs/reference.md's flag tables have no row for {} --{long}",
                    sub.get_name()
                );
            }
        }
    }

    /// History is the CHANGELOG's: no document or example names an issue by number.
    #[test]
    fn no_document_names_an_issue_number() {
        for (name, text) in DOCUMENTS {
            if name == "CHANGELOG.md" {
                continue;
            }
            let lower = text.to_lowercase();
            for (i, _) in lower.match_indices("issue") {
                let after = lower[i + 5..].trim_start_matches(['s', ' ', '#']);
                assert!(
                    !after.starts_with(|c: char| c.is_ascii_digit()),
                    "{name} names an issue: {}",
                    &text[i..(i + 20).min(text.len())]
                );
            }
        }
    }

    /// The CHANGELOG's upgrade notes name the state files' version the build writes (a file of
    /// another is foreign: the check starts over once).
    #[test]
    fn the_upgrade_notes_name_the_state_version() {
        let changelog = include_str!("../CHANGELOG.md");
        let newest = &changelog[changelog.find("\n## ").expect("a version") + 4..];
        let newest = &newest[..newest.find("\n## ").unwrap_or(newest.len())];
        let notes = newest
            .split("\n### ")
            .find(|s| s.starts_with("Upgrading\n"))
            .expect("CHANGELOG.md has no Upgrading section under its newest version");
        let said = format!("version {}.", crate::observe::state::VERSION);
        assert!(
            notes.contains(&said),
            "the upgrade notes do not say: {said}"
        );
    }

    /// The Kubernetes releases the documents name are those `probe-tests/examples.rs`
    /// validates the manifests against: the oldest, the first for a restart in place, the newest.
    #[test]
    fn the_documents_name_the_releases_the_examples_are_validated_against() {
        let test = include_str!("../probe-tests/examples.rs");
        let release = |files: &str| {
            test.lines()
                .find_map(|l| {
                    let rest = l.trim().strip_prefix("(\"")?;
                    let (version, after) = rest.split_once("\", ")?;
                    after.starts_with(files).then(|| version.to_string())
                })
                .unwrap_or_else(|| panic!("probe-tests/examples.rs validates no {files}"))
        };
        let [oldest, in_place, newest] = ["&older)", "&newer)", "&manifests())"].map(release);
        let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        // The README and install.md name the minor releases, compatibility.md the patches.
        for (name, text, patch) in [
            ("README.md", include_str!("../README.md"), false),
            ("docs/install.md", include_str!("../docs/install.md"), false),
            (
                "docs/compatibility.md",
                include_str!("../docs/compatibility.md"),
                true,
            ),
        ] {
            let text = flat(text);
            let [o, i, n] = [&oldest, &in_place, &newest].map(|v| match patch {
                true => v.to_string(),
                false => v.trim_end_matches(".0").to_string(),
            });
            let said = format!("Kubernetes {o} ({i} where it restarts in place");
            let at = text
                .find(&said)
                .unwrap_or_else(|| panic!("{name} does not say: {said}"));
            let rest = &text[at + said.len()..];
            let newest = format!(") and {n}");
            assert!(
                rest[..rest.len().min(120)].contains(&newest),
                "{name} does not say {newest} after {said}"
            );
        }
    }

    /// docs/serve.md's table of metrics is the page's families, each with its labels, and
    /// the states and causes it lists are the core's.
    #[test]
    fn the_metrics_table_is_the_page() {
        use crate::facts::{Judged, PartName};
        use crate::report::metrics::{page, Scrape};
        use crate::rules::serve::{Looks, CAUSES};
        use crate::rules::{consumer, subscription};
        use std::time::Duration;
        let doc = include_str!("../docs/serve.md");
        let table: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `natsprobe_"))
            .collect();
        let mut looks = Looks::new(
            Duration::from_secs(10),
            Duration::from_millis(800),
            false,
            None,
            0,
        );
        looks.ended(
            crate::facts::Ended::Judged(Judged {
                summary: "s".into(),
                json: "{}".into(),
                verdict: "healthy".into(),
                parts: vec![crate::facts::Part {
                    name: PartName::Consumer {
                        stream: "S".into(),
                        durable: "D".into(),
                    },
                    state: "waiting".into(),
                    no_progress_ms: Some(1500),
                }],
                ..Judged::default()
            }),
            Duration::ZERO,
            Duration::from_millis(5),
        );
        let memory = looks.memory();
        let parts = [
            PartName::Consumer {
                stream: "S".into(),
                durable: "D".into(),
            },
            PartName::Own {
                stream: "S".into(),
                durable: "D".into(),
            },
        ];
        let text = page(
            &Scrape {
                memory: &memory,
                since_start: Duration::from_secs(1),
                now_ms: 1_700_000_000_000,
                parts: &parts,
                version: "0",
            },
            false,
        );
        let mut families = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let name = rest.split(' ').next().unwrap();
            let sample = text
                .lines()
                .find(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
                .unwrap();
            let labels: Vec<&str> = sample
                .split_once('{')
                .map(|(_, l)| {
                    l.split(',')
                        .map(|kv| kv.split('=').next().unwrap())
                        .collect()
                })
                .unwrap_or_default();
            let labels = match labels.is_empty() {
                true => String::new(),
                false => format!("{{{}}}", labels.join(",")),
            };
            families.push(format!("{}{labels}`", &name["natsprobe_".len()..]));
        }
        let documented: Vec<String> = table
            .iter()
            .map(|row| row.split(" |").next().unwrap().to_string())
            .collect();
        assert_eq!(documented, families, "docs/serve.md's metrics");
        let row = |name: &str| {
            *table
                .iter()
                .find(|r| r.starts_with(name))
                .unwrap_or_else(|| panic!("no row for {name}"))
        };
        for state in consumer::STATES {
            assert!(
                row("consumer_state").contains(&format!("`{state}`")),
                "{state}"
            );
        }
        for state in subscription::STATES {
            assert!(
                row("subscription_state").contains(&format!("`{state}`")),
                "{state}"
            );
        }
        for cause in CAUSES {
            assert!(
                row("looks_not_judged_total").contains(&format!("`{cause}`")),
                "{cause}"
            );
        }
    }

    /// Every figure the README, the documents and the examples repeat is the benchmarks'
    /// recorded output in docs/performance.md, said once there: each repetition is read from
    /// that table, so two places that disagree fail here.
    #[test]
    fn the_figures_are_the_benchmarks() {
        let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let perf = include_str!("../docs/performance.md");
        let readme = flat(include_str!("../README.md"));
        let serve = flat(include_str!("../docs/serve.md"));
        let design = flat(include_str!("../docs/design.md"));
        let sidecar = flat(include_str!("../examples/kubernetes/native-sidecar.yaml"));
        // The numbers of a table row's cell, by how the row begins.
        let cell = |row: &str, n: usize| -> Vec<String> {
            let line = perf
                .lines()
                .find(|l| l.starts_with(&format!("| {row}")))
                .unwrap_or_else(|| panic!("docs/performance.md has no row {row}"));
            let cell = line.trim_matches('|').split('|').nth(n).unwrap();
            cell.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
                .map(|n| n.trim_matches([',', '.']))
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect()
        };
        let says = |doc: &str, name: &str, sentence: String| {
            assert!(doc.contains(&sentence), "{name} does not say: {sentence}");
        };
        let kib = |s: &str| s.replace(',', "").parse::<f64>().unwrap();
        let mib = |s: &str| format!("{:.2}", kib(s) / 1024.0);
        let tenth = |s: &str| format!("{:.1}", s.parse::<f64>().unwrap());
        let hundredth = |s: &str| format!("{:.2}", s.parse::<f64>().unwrap());

        // A socket check, first and after a healthy run, and what 110 pods cost a node.
        let exact = cell("`natsprobe check`, after a healthy run (exact lookup)", 1);
        let first = cell(
            "`natsprobe check`, first run (walk, and the state file written)",
            1,
        );
        let share = cell("shared table, the exact lookup", 3);
        let walks = cell("shared table, a walk every run (the first run's cost)", 3);
        says(&readme, "README", format!("{} ms ({} ms of CPU) and {} KiB peak RSS; 110 pods probing every 10 s take {} % of a node's core, against {} % for a walk every run", exact[0], exact[1], exact[2], share[0], walks[0]));
        says(
            &readme,
            "README",
            format!(
                "A first run walks the table once: {} ms, {} KiB",
                first[0], first[2]
            ),
        );
        says(
            &design,
            "docs/design.md",
            format!(
                "{} ms, {} MiB (sockets, a run after a healthy one; a first run {} ms and {} MiB",
                exact[0],
                mib(&exact[2]),
                first[0],
                mib(&first[2])
            ),
        );
        let largest = perf
            .split("**")
            .find_map(|s| s.strip_suffix(" KiB the largest"))
            .expect("docs/performance.md names the largest peak RSS by shape");
        says(&readme, "README", format!("peaks at {largest} KiB or less"));

        // The exec probe, the check started directly, and serve's probe.
        let exec = cell("exec: `runc exec` of `natsprobe check`", 1);
        let direct = cell("`natsprobe check` started directly", 1);
        let http = cell("httpGet `/livez` to serve (client", 1);
        says(
            &readme,
            "README",
            format!(
                "takes {} ms of CPU, the check started directly {} ms",
                tenth(&exec[0]),
                hundredth(&direct[0])
            ),
        );
        says(
            &serve,
            "docs/serve.md",
            format!(
                "| exec: `runc exec` of `natsprobe check` into the running container | {} ms",
                tenth(&exec[0])
            ),
        );
        says(
            &serve,
            "docs/serve.md",
            format!(
                "| the check itself, started directly | {} ms |",
                hundredth(&direct[0])
            ),
        );
        says(
            &serve,
            "docs/serve.md",
            format!("runc's exec and the check: {} ms of CPU", tenth(&exec[0])),
        );
        says(
            &serve,
            "docs/serve.md",
            format!(
                "| httpGet `/livez` to `serve` (the client's side and serve's) | {} ms",
                hundredth(&http[0])
            ),
        );
        says(
            &readme,
            "README",
            format!("takes {} ms a probe", hundredth(&http[0])),
        );
        says(
            &sidecar,
            "native-sidecar.yaml",
            format!("about {} ms of CPU each", tenth(&exec[0])),
        );
    }
}
