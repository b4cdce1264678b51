//! `serve`'s looks and answers, as one machine: when the next look starts and with which
//! meaning, what each look's end leaves, and which answer a probe gets at any moment, without
//! waiting on anything. The principle (docs/serve.md): **a probe gets the freshest verdict a
//! look reached while it stands; natsprobe's own trouble is never a failure of the app.** A
//! verdict stands for `timing::stale_after`: across one look that could not end as a check
//! ends, so a fault once seen keeps being reported through natsprobe's own trouble while its
//! evidence is fresh. Past it, or before the first look, the answer is "not judged" (pass),
//! and only natsprobe's own path fails. `serve` drives it with the real looks and clock; the
//! property tests below drive it with simulated ones.

use crate::exit::Exit;
use crate::facts::{Ended, Judged, Meaning, Part, PartName, ProbePath};
use crate::timing::{stale_after, LOOK_GRACE};
use alloc::string::String;
use alloc::sync::Arc;
use core::time::Duration;

/// What `serve` holds when a probe asks, as ages.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    /// The last look the check answered, and how long ago it ended.
    pub judged: Option<(&'a Judged, Duration)>,
    /// natsprobe's own trouble in the last look, when it ended after `judged`'s, and how long
    /// ago.
    pub trouble: Option<(&'a str, Duration)>,
    /// How long ago the looks last moved: a look ended, or `serve` started.
    pub beat: Duration,
}

/// What the looks left; times are ms since `serve` started (a verdict kept by the `serve`
/// before this one is before 0). Cheap to clone (two pointers): a probe copies it and lets go
/// of the lock before it judges.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// The last look the check answered, and when it ended.
    pub judged: Option<(Arc<Judged>, i64)>,
    /// natsprobe's own trouble in a look that ended after `judged`'s, and when.
    pub trouble: Option<(Arc<str>, i64)>,
    /// When a look last ended (0: none yet, since `serve` started).
    pub beat: i64,
    /// How long a verdict stands.
    pub stale: Duration,
    /// How long the last look that ended took.
    pub took: Option<Duration>,
    /// What the looks came to since `serve` started.
    pub tally: Tally,
}

/// What `serve`'s looks came to since it started: its metrics' counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Looks by their verdict's word, in `VERDICTS`' order.
    pub looks: [u64; VERDICTS.len()],
    /// Looks not judged, by cause, in `CAUSES`' order.
    pub not_judged: [u64; CAUSES.len()],
    /// The logins to NATS the looks made (each connection NATS accepted, a reconnect of the
    /// held one included).
    pub logins: u64,
}

/// A verdict in one word, for a look and for what a probe is answered: the check's, or
/// `not_judged` where it passes because NATS could not say, or `serve` has no verdict that
/// stands.
pub const VERDICTS: [&str; 5] = [
    "healthy",
    "unhealthy",
    "not_judged",
    "configuration_error",
    "error",
];

/// Why a look was not judged: `look_failed` (natsprobe's own trouble), `server_down` (no
/// connection, and NATS does not answer), the `not_judged` word of the first consumer or
/// subscription NATS could not answer for (`rules::answers`), or a consumer's cause where a
/// restart cannot help (`server_not_delivering`, `restart_did_not_help`).
pub const CAUSES: [&str; 11] = [
    "look_failed",
    "server_down",
    "timeout",
    "unreachable",
    "not_permitted",
    "jetstream_unavailable",
    "cannot_see",
    "cannot_match",
    "server_not_delivering",
    "restart_did_not_help",
    "failed",
];

/// The word of a look the check answered, among `VERDICTS`: its JSON's (`configuration_error`
/// for a check that can never run as configured, `error` for one that could not run at all,
/// exit 2 or 3), or `not_judged` where it passed without judging (its JSON's `not_judged`).
pub fn verdict(judged: &Judged) -> &'static str {
    match judged.code {
        0 if judged.not_judged.is_some() => "not_judged",
        0 => "healthy",
        1 => "unhealthy",
        _ => VERDICTS
            .into_iter()
            .find(|v| *v == judged.verdict)
            .unwrap_or("error"),
    }
}

fn index(words: &[&str], word: &str) -> Option<usize> {
    words.iter().position(|w| *w == word)
}

impl Tally {
    fn count(&mut self, ended: &Ended) {
        let (word, cause) = match ended {
            Ended::Judged(j) => (verdict(j), j.not_judged.as_deref().unwrap_or("failed")),
            Ended::Trouble(_) => ("not_judged", "look_failed"),
        };
        self.looks[index(&VERDICTS, word).expect("a verdict's word")] += 1;
        if word == "not_judged" {
            let cause = index(&CAUSES, cause).unwrap_or(CAUSES.len() - 1);
            self.not_judged[cause] += 1;
        }
    }
}

impl Memory {
    /// What a probe at `now` reads, as ages.
    pub fn held(&self, now: Duration) -> Held<'_> {
        let now = now.as_millis() as i64;
        let age = |at: i64| super::consumer::ms(now.saturating_sub(at));
        Held {
            judged: self.judged.as_ref().map(|(j, at)| (&**j, age(*at))),
            trouble: self.trouble.as_ref().map(|(t, at)| (&**t, age(*at))),
            beat: age(self.beat),
        }
    }

    /// The answer to `path` at `now`.
    pub fn answer(&self, path: ProbePath, now: Duration) -> Answer<'_> {
        answer(path, &self.held(now), self.stale)
    }
}

/// The looks: their cadence, what they left, and what was last said of them.
#[derive(Debug, Clone)]
pub struct Looks {
    every: Duration,
    /// `serve --startup`: the looks carry its meaning until one has passed.
    startup: bool,
    startup_passed: bool,
    memory: Memory,
    /// When the next look starts.
    next_at: Duration,
    /// What the last look said, as logged: its meaning and kind.
    said: Option<(bool, String)>,
    /// `--exit-unhealthy`: when `serve` ends the pod's containers itself.
    exit: Option<ExitUnhealthy>,
    /// Live looks the check judged unhealthy in a row, by this `serve`.
    unhealthy_in_a_row: u32,
}

/// `serve --exit-unhealthy CODE --failure-threshold N`: `serve` exits with `code` once `after`
/// live looks in a row were judged unhealthy, for a kubelet that restarts the pod's
/// containers in place on that code (`restartPolicyRules`). By the principles of the probes:
/// only the check's `unhealthy` counts (never not judged, a configuration error or
/// natsprobe's own trouble); a look judged anything else ends the row; a troubled look leaves
/// it as it is while the last verdict stands, and ends it past that; and it is never latched:
/// a `serve` started again counts from nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitUnhealthy {
    pub code: u8,
    pub after: u32,
}

/// What a `serve` before this one left in the state dir.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Left {
    pub judged: Judged,
    /// When its look ended, by the wall clock (ms since the epoch).
    pub at_ms: i64,
    pub startup_passed: bool,
}

impl Looks {
    /// `serve` starting, a look every `every`, each with `timeout` and `LOOK_GRACE`; `left`:
    /// what a `serve` before this one kept, at the wall clock's `now_ms`. Its verdict is the
    /// answer while it stands, so a restart of `serve` neither resets the kubelet's count nor
    /// latches the fault.
    pub fn new(
        every: Duration,
        timeout: Duration,
        startup: bool,
        left: Option<Left>,
        now_ms: i64,
    ) -> Looks {
        let stale = stale_after(every, Looks::limit(timeout));
        let mut looks = Looks {
            every,
            startup,
            startup_passed: false,
            memory: Memory {
                stale,
                ..Memory::default()
            },
            next_at: Duration::ZERO,
            said: None,
            exit: None,
            unhealthy_in_a_row: 0,
        };
        if let Some(left) = left {
            if let Some(age) = still_stands(left.at_ms, now_ms, stale) {
                looks.startup_passed = left.startup_passed;
                looks.memory.judged = Some((Arc::new(left.judged), -(age.as_millis() as i64)));
            }
        }
        looks
    }

    /// With `--exit-unhealthy`.
    pub fn exiting(self, exit: ExitUnhealthy) -> Looks {
        Looks {
            exit: Some(exit),
            ..self
        }
    }

    /// The code to exit with now: `--exit-unhealthy`'s, once its count of unhealthy looks in
    /// a row is reached.
    pub fn exit(&self) -> Option<u8> {
        self.exit
            .filter(|e| self.unhealthy_in_a_row >= e.after)
            .map(|e| e.code)
    }

    /// How long a look may take before `serve` kills it: its `--timeout` and `LOOK_GRACE`.
    pub fn limit(timeout: Duration) -> Duration {
        timeout + LOOK_GRACE
    }

    /// When the next look starts (since `serve` started), and with which meaning:
    /// `--startup`'s while it was asked for and no startup look has passed.
    pub fn next(&self) -> (Duration, Meaning) {
        let meaning = match self.startup && !self.startup_passed {
            true => Meaning::Startup,
            false => Meaning::Live,
        };
        (self.next_at, meaning)
    }

    /// A look that began at `began` ended at `at` (since `serve` started). A verdict replaces
    /// the last one and clears the trouble after it; trouble is kept beside the verdict, which
    /// it neither replaces nor refreshes. The next look starts `every` after this one began,
    /// or now if it took longer. Whether to log it: what the looks say changed, or natsprobe's
    /// own trouble.
    pub fn ended(&mut self, ended: Ended, began: Duration, at: Duration) -> bool {
        let meaning = self.next().1 == Meaning::Startup;
        let ms = at.as_millis() as i64;
        self.unhealthy_in_a_row = match &ended {
            Ended::Judged(j) if j.code == Exit::Unhealthy.code() && !j.startup => {
                self.unhealthy_in_a_row + 1
            }
            Ended::Judged(_) => 0,
            Ended::Trouble(_) => match self.memory.answer(ProbePath::Live, at) {
                Answer::Verdict { .. } => self.unhealthy_in_a_row,
                _ => 0,
            },
        };
        self.memory.tally.count(&ended);
        self.memory.took = Some(at.saturating_sub(began));
        let kind = match ended {
            Ended::Judged(judged) => {
                let judged = self.settled(judged);
                self.startup_passed |= passes_startup(&judged);
                let kind = alloc::format!("{} {}", judged.code, judged.verdict);
                self.memory.judged = Some((Arc::new(judged), ms));
                self.memory.trouble = None;
                kind
            }
            Ended::Trouble(what) => {
                self.memory.trouble = Some((Arc::from(what), ms));
                String::from("trouble")
            }
        };
        self.memory.beat = ms;
        self.next_at = (began + self.every).max(at);
        let log = kind == "trouble"
            || self
                .said
                .as_ref()
                .is_none_or(|(m, k)| *k != kind || *m != meaning);
        self.said = Some((meaning, kind));
        log
    }

    /// A look's verdict as it is held: one that did not ask the consumers (`--sample-every`)
    /// holds their states as the last look that asked saw them, and the consumers' parts it
    /// did not judge (a pull consumer's, judged by the looks that ask) likewise.
    fn settled(&self, mut judged: Judged) -> Judged {
        if let (true, Some((last, _))) = (judged.consumers_skipped, &self.memory.judged) {
            let asked: alloc::vec::Vec<Part> = last
                .parts
                .iter()
                .filter(|p| match &p.name {
                    PartName::Consumer { .. } => true,
                    PartName::Own { .. } => judged.parts.iter().all(|q| q.name != p.name),
                    PartName::Subscription { .. } => false,
                })
                .cloned()
                .collect();
            judged.parts.extend(asked);
        }
        judged
    }

    /// What a `serve` started again is to find of a look that ended so, at `at_ms` by the
    /// wall clock (None for natsprobe's own trouble, which is not kept). `serve` keeps it
    /// before `ended` makes it the answer, so a verdict a probe was given is never lost to a
    /// `serve` killed a moment later.
    pub fn to_keep(&self, ended: &Ended, at_ms: i64) -> Option<Left> {
        let Ended::Judged(judged) = ended else {
            return None;
        };
        let judged = self.settled(judged.clone());
        Some(Left {
            startup_passed: self.startup_passed || passes_startup(&judged),
            judged,
            at_ms,
        })
    }

    /// The looks' process made `logins` logins to NATS since it was last asked.
    pub fn logged_in(&mut self, logins: u64) {
        self.memory.tally.logins += logins;
    }

    /// What the looks left, for a probe to answer from.
    pub fn memory(&self) -> Memory {
        self.memory.clone()
    }
}

/// A look with `--startup`'s meaning that passed.
fn passes_startup(judged: &Judged) -> bool {
    judged.startup && judged.code == 0
}

/// Why a probe is not judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotJudged<'a> {
    /// No look has ended yet.
    FirstLook { since: Duration },
    /// The last look ended in natsprobe's own trouble.
    Trouble { what: &'a str, age: Duration },
    /// No look has ended for longer than a verdict stands: the looks are stuck.
    Stalled { beat: Duration },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    /// The check's verdict, `age` old: passes exactly when the exec probe would have.
    Verdict { judged: &'a Judged, age: Duration },
    /// Not judged: a restart of the app would not help. Passes, except a startup probe
    /// before the first look (the app has not been judged started).
    NotJudged { why: NotJudged<'a>, path: ProbePath },
    /// natsprobe's own path: its looks move (pass) or are stalled (fail: restart natsprobe).
    Own { beat: Duration, stalled: bool },
}

impl Answer<'_> {
    /// Its verdict in one word, among `VERDICTS` (`/selfz`: its own, healthy or unhealthy).
    pub fn word(&self) -> &'static str {
        match self {
            Answer::Verdict { judged, .. } => verdict(judged),
            Answer::NotJudged { .. } => "not_judged",
            Answer::Own { stalled: false, .. } => "healthy",
            Answer::Own { stalled: true, .. } => "unhealthy",
        }
    }

    pub fn passes(&self) -> bool {
        match self {
            Answer::Verdict { judged, .. } => judged.code == 0,
            Answer::NotJudged { why, path } => {
                !(matches!(why, NotJudged::FirstLook { .. }) && *path == ProbePath::Startup)
            }
            Answer::Own { stalled, .. } => !stalled,
        }
    }
}

/// The answer to `path`, from what the looks left.
pub fn answer<'a>(path: ProbePath, held: &Held<'a>, stale_after: Duration) -> Answer<'a> {
    let stalled = held.beat > stale_after;
    if path == ProbePath::Own {
        return Answer::Own {
            beat: held.beat,
            stalled,
        };
    }
    if let Some((judged, age)) = held.judged.filter(|(_, age)| *age <= stale_after) {
        return Answer::Verdict { judged, age };
    }
    let why = if stalled {
        NotJudged::Stalled { beat: held.beat }
    } else if let Some((what, age)) = held.trouble {
        NotJudged::Trouble { what, age }
    } else {
        NotJudged::FirstLook { since: held.beat }
    };
    Answer::NotJudged { why, path }
}

/// How old a verdict a `serve` before this one kept is, when it still stands: kept at
/// `at_ms`, now `now_ms` (the wall clock, which may have stepped: a verdict from the future is
/// not believed).
pub fn still_stands(at_ms: i64, now_ms: i64, stale_after: Duration) -> Option<Duration> {
    let age = u64::try_from(now_ms.checked_sub(at_ms)?).ok()?;
    let age = Duration::from_millis(age);
    (age <= stale_after).then_some(age)
}

pub use crate::timing::ROOM_FOR_A_LOOK;

/// Whether a look may start, given the container's memory limit and usage (bytes), where it
/// has one: a look started without room would be the OOM killer's, at best, and `serve`
/// could go with it. Not started, it is natsprobe's own trouble, as a killed one is.
pub fn room_to_look(memory: Option<(u64, u64)>) -> bool {
    memory.is_none_or(|(limit, usage)| limit.saturating_sub(usage) >= ROOM_FOR_A_LOOK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Part;
    use crate::prelude::*;

    impl Looks {
        /// A look with `--startup`'s meaning has passed (for `serve_timelines`).
        pub(crate) fn startup_passed(&self) -> bool {
            self.startup_passed
        }
    }

    /// A look the check answered with `code`, its JSON's word as the check gives it.
    fn judged(code: u8) -> Judged {
        Judged {
            code,
            verdict: match code {
                0 => "healthy",
                1 => "unhealthy",
                2 => "configuration_error",
                _ => "error",
            }
            .into(),
            summary: "x".into(),
            json: "{}".into(),
            startup: false,
            ..Judged::default()
        }
    }

    const S: Duration = Duration::from_secs(12);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_fresh_verdict_is_the_answer_both_ways() {
        for code in [0, 1, 2, 3] {
            let j = judged(code);
            let held = Held {
                judged: Some((&j, secs(3))),
                trouble: None,
                beat: secs(3),
            };
            for path in [ProbePath::Live, ProbePath::Startup] {
                let a = answer(path, &held, S);
                assert_eq!(a.passes(), code == 0, "{path:?} {code}");
                assert!(matches!(a, Answer::Verdict { .. }));
            }
        }
    }

    /// A fault once seen keeps being reported through natsprobe's own trouble while its
    /// evidence is fresh; past that, not judged.
    #[test]
    fn own_trouble_neither_resets_nor_latches_a_fault() {
        let j = judged(1);
        let held = Held {
            judged: Some((&j, secs(9))),
            trouble: Some(("killed by signal 9", secs(1))),
            beat: secs(1),
        };
        assert!(!answer(ProbePath::Live, &held, S).passes());
        let held = Held {
            judged: Some((&j, secs(13))),
            ..held
        };
        let a = answer(ProbePath::Live, &held, S);
        assert!(a.passes());
        assert!(matches!(
            a,
            Answer::NotJudged {
                why: NotJudged::Trouble { .. },
                ..
            }
        ));
    }

    #[test]
    fn stalled_looks_pass_the_app_and_fail_natsprobe() {
        let j = judged(1);
        let held = Held {
            judged: Some((&j, secs(20))),
            trouble: None,
            beat: secs(20),
        };
        for path in [ProbePath::Live, ProbePath::Startup] {
            let a = answer(path, &held, S);
            assert!(a.passes(), "{path:?}");
            assert!(matches!(
                a,
                Answer::NotJudged {
                    why: NotJudged::Stalled { .. },
                    ..
                }
            ));
        }
        assert!(!answer(ProbePath::Own, &held, S).passes());
        let moving = Held {
            beat: secs(2),
            ..held
        };
        assert!(answer(ProbePath::Own, &moving, S).passes());
    }

    #[test]
    fn before_the_first_look_only_startup_waits() {
        let held = Held {
            judged: None,
            trouble: None,
            beat: secs(0),
        };
        assert!(answer(ProbePath::Live, &held, S).passes());
        assert!(!answer(ProbePath::Startup, &held, S).passes());
        assert!(answer(ProbePath::Own, &held, S).passes());
        let troubled = Held {
            trouble: Some(("could not start", secs(0))),
            ..held
        };
        assert!(answer(ProbePath::Startup, &troubled, S).passes());
    }

    /// `--exit-unhealthy`: only unhealthy live looks count; not judged, a configuration
    /// error, a startup look and trouble past the verdict's standing each end the row.
    #[test]
    fn serve_exits_on_unhealthy_looks_in_a_row_only() {
        let exit = ExitUnhealthy { code: 88, after: 2 };
        let looks = || Looks::new(secs(1), secs(1), false, None, 0).exiting(exit);
        let play = |ends: &[(Ended, u64)]| {
            let mut l = looks();
            let mut exits = alloc::vec::Vec::new();
            for (ended, at) in ends {
                l.ended(ended.clone(), secs(*at).saturating_sub(secs(1)), secs(*at));
                exits.push(l.exit());
            }
            exits
        };
        let (ok, bad) = (Ended::Judged(judged(0)), Ended::Judged(judged(1)));
        let trouble = Ended::Trouble("killed".into());
        assert_eq!(
            play(&[(bad.clone(), 1), (bad.clone(), 2)]),
            [None, Some(88)]
        );
        for breaks in [ok, Ended::Judged(judged(2)), Ended::Judged(judged(3))] {
            let got = play(&[(bad.clone(), 1), (breaks, 2), (bad.clone(), 3)]);
            assert_eq!(got, [None, None, None]);
        }
        let startup = Ended::Judged(Judged {
            startup: true,
            ..judged(1)
        });
        assert_eq!(play(&[(startup, 1), (bad.clone(), 2)]), [None, None]);
        // A look's limit is 2 s, so a verdict stands 5 s: trouble 2 s after it leaves the row,
        // 6 s after it ends the row.
        let got = play(&[(bad.clone(), 1), (trouble.clone(), 3), (bad.clone(), 4)]);
        assert_eq!(got, [None, None, Some(88)]);
        let got = play(&[(bad.clone(), 1), (trouble, 7), (bad.clone(), 8)]);
        assert_eq!(got, [None, None, None]);
        let mut without = Looks::new(secs(1), secs(1), false, None, 0);
        for at in 1..5 {
            without.ended(bad.clone(), secs(at - 1), secs(at));
        }
        assert_eq!(without.exit(), None);
    }

    /// `serve` logs a look when what the looks say changed (the verdict, or the kind of look),
    /// and natsprobe's own trouble every time.
    #[test]
    fn a_look_is_logged_when_it_says_something_new_and_trouble_always() {
        let mut looks = Looks::new(secs(1), secs(1), false, None, 0);
        let mut logged = |ended: Ended, at: u64| looks.ended(ended, secs(at - 1), secs(at));
        assert!(logged(Ended::Judged(judged(0)), 1));
        assert!(!logged(Ended::Judged(judged(0)), 2));
        assert!(logged(Ended::Judged(judged(1)), 3));
        assert!(!logged(Ended::Judged(judged(1)), 4));
        assert!(logged(Ended::Trouble("killed".into()), 5));
        assert!(logged(Ended::Trouble("killed".into()), 6));
        assert!(logged(Ended::Judged(judged(1)), 7));
    }

    #[test]
    fn the_bound_spans_one_lost_look() {
        assert_eq!(
            stale_after(secs(5), Duration::from_millis(1_800)),
            Duration::from_millis(11_800)
        );
        assert_eq!(still_stands(1_000, 4_000, secs(12)), Some(secs(3)));
        assert_eq!(still_stands(1_000, 14_000, secs(12)), None);
        assert_eq!(still_stands(5_000, 4_000, secs(12)), None);
        assert!(room_to_look(None));
        assert!(room_to_look(Some((32 << 20, 8 << 20))));
        assert!(!room_to_look(Some((8 << 20, 5 << 20))));
        assert!(!room_to_look(Some((4 << 20, 5 << 20))));
    }

    /// Each look is counted by its verdict's word, a look not judged also by its cause; a
    /// look's time and the logins are kept beside.
    #[test]
    fn the_looks_are_tallied() {
        let mut looks = Looks::new(secs(10), Duration::from_millis(800), false, None, 0);
        let mut not_judged = judged(0);
        not_judged.not_judged = Some("timeout".into());
        let mut unknown = judged(0);
        unknown.not_judged = Some("a word from a newer check".into());
        for (ended, at) in [
            (Ended::Judged(judged(0)), 1),
            (Ended::Judged(judged(1)), 2),
            (Ended::Judged(not_judged), 3),
            (Ended::Trouble("killed".into()), 4),
            (Ended::Judged(unknown), 5),
            (Ended::Judged(judged(2)), 6),
            (Ended::Judged(judged(3)), 7),
        ] {
            looks.ended(ended, secs(at), secs(at) + Duration::from_millis(40 * at));
        }
        looks.logged_in(2);
        let memory = looks.memory();
        let count = |words: &[&str], counts: &[u64], word| {
            counts[words.iter().position(|w| *w == word).unwrap()]
        };
        let t = memory.tally;
        for (word, n) in [
            ("healthy", 1),
            ("unhealthy", 1),
            ("not_judged", 3),
            ("configuration_error", 1),
            ("error", 1),
        ] {
            assert_eq!(count(&VERDICTS, &t.looks, word), n, "{word}");
        }
        for (cause, n) in [("timeout", 1), ("look_failed", 1), ("failed", 1)] {
            assert_eq!(count(&CAUSES, &t.not_judged, cause), n, "{cause}");
        }
        assert_eq!(t.not_judged.iter().sum::<u64>(), 3);
        assert_eq!(t.logins, 2);
        assert_eq!(memory.took, Some(Duration::from_millis(280)));
    }

    /// A probe's answer in one word: a verdict that passes without judging is `not_judged`,
    /// as is no verdict that stands; the words are `VERDICTS`'.
    #[test]
    fn each_answer_has_its_word() {
        let mut unjudged = judged(0);
        unjudged.not_judged = Some("server_down".into());
        fn fresh(j: &Judged) -> Held<'_> {
            Held {
                judged: Some((j, secs(1))),
                trouble: None,
                beat: secs(1),
            }
        }
        let words: Vec<&str> = [judged(0), judged(1), unjudged, judged(2), judged(3)]
            .iter()
            .map(|j| answer(ProbePath::Live, &fresh(j), S).word())
            .collect();
        assert_eq!(words, VERDICTS);
        let none = Held {
            judged: None,
            trouble: None,
            beat: secs(1),
        };
        assert_eq!(answer(ProbePath::Live, &none, S).word(), "not_judged");
    }

    /// Every word a consumer or subscription is not judged with is a cause `serve` counts.
    #[test]
    fn every_cause_is_counted_by_its_word() {
        for why in crate::rules::answers::tests::every_kind() {
            let word = crate::rules::answers::meaning(&why).word;
            assert!(CAUSES.contains(&word), "{word}");
        }
    }

    /// A look that did not ask JetStream (`--sample-every`) leaves each consumer's state as
    /// the last look that asked saw it; the next look that asks replaces it.
    #[test]
    fn a_look_between_asks_keeps_the_consumers_states() {
        let consumer = |state: &str| Part {
            name: PartName::Consumer {
                stream: "S".into(),
                durable: "D".into(),
            },
            state: state.into(),
            no_progress_ms: Some(0),
        };
        let pull = |state: &str| Part {
            name: PartName::Own {
                stream: "S".into(),
                durable: "D".into(),
            },
            state: state.into(),
            no_progress_ms: None,
        };
        let mut looks = Looks::new(secs(10), Duration::from_millis(800), false, None, 0);
        let mut asked = judged(0);
        asked.parts = vec![consumer("progressing"), pull("held")];
        looks.ended(Ended::Judged(asked), secs(0), secs(1));
        let mut skipped = judged(0);
        skipped.consumers_skipped = true;
        // What a `serve` started again finds is what the look holds.
        let left = looks
            .to_keep(&Ended::Judged(skipped.clone()), 11_000)
            .unwrap();
        // A pull consumer's part, judged by the looks that ask, too.
        assert_eq!(left.judged.parts, [consumer("progressing"), pull("held")]);
        assert_eq!((left.at_ms, left.startup_passed), (11_000, false));
        assert!(looks
            .to_keep(&Ended::Trouble("killed".into()), 11_000)
            .is_none());
        looks.ended(Ended::Judged(skipped.clone()), secs(10), secs(11));
        looks.ended(Ended::Judged(skipped), secs(20), secs(21));
        let parts = |looks: &Looks| looks.memory().judged.unwrap().0.parts.clone();
        assert_eq!(parts(&looks), [consumer("progressing"), pull("held")]);
        let mut asked = judged(1);
        asked.parts = vec![consumer("stalled")];
        looks.ended(Ended::Judged(asked), secs(30), secs(31));
        assert_eq!(parts(&looks), [consumer("stalled")]);
        // Without a connection the consumers are not asked, nor skipped: not judged.
        looks.ended(Ended::Judged(judged(1)), secs(40), secs(41));
        assert_eq!(parts(&looks), []);
    }
}
