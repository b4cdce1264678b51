//! `serve`'s answers: a probe's HTTP response made from the rule's answer, the one line (as
//! the exec probe prints it, with the verdict's age) or the check's JSON document (with
//! `age_ms`); the refusals; and the line `serve` logs when the looks' verdict changes.

use super::check::SCHEMA_VERSION;
use super::human;
use super::words::clip;
use crate::facts::{Judged, ProbePath, Refusal};
use crate::rules::serve::{Answer, NotJudged};
use serde::Serialize;
use std::time::Duration;

/// The line of a look as it ended, for `serve`'s log.
pub fn look_line(judged: &Judged) -> String {
    human::line(&judged.verdict, &judged.summary)
}

/// The line of a look that ended in natsprobe's own trouble, for `serve`'s log.
pub fn trouble_line(what: &str) -> String {
    clip(format!("not judged: natsprobe's look failed: {what}"))
}

/// The line `serve` logs as `--exit-unhealthy` ends it.
pub fn exiting(after: u32, code: u8) -> String {
    let looks = match after {
        1 => "the last look".to_string(),
        n => format!("{n} looks in a row"),
    };
    format!("natsprobe serve: {looks} judged the app unhealthy: exiting {code} (--exit-unhealthy)")
}

/// The trouble of a look not started for want of memory.
pub fn no_room(limit: u64, usage: u64) -> String {
    format!(
        "no look started: {} KiB of the container's {:.1} MiB memory limit free, a look needs {} MiB",
        limit.saturating_sub(usage) >> 10,
        limit as f64 / f64::from(1 << 20),
        crate::rules::serve::ROOM_FOR_A_LOOK >> 20
    )
}

/// One HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// The answer to a scrape of `/metrics`: the page, in the format it asked for.
pub fn metrics(scrape: &super::metrics::Scrape, open_metrics: bool) -> Response {
    Response {
        status: 200,
        content_type: match open_metrics {
            true => super::metrics::OPEN_METRICS,
            false => super::metrics::PROMETHEUS,
        },
        body: super::metrics::page(scrape, open_metrics),
    }
}

/// The answer to a probe.
pub fn answer(answer: &Answer, json: bool) -> Response {
    let status = if answer.passes() { 200 } else { 503 };
    let body = match (answer, json) {
        (Answer::Verdict { judged, age }, true) => {
            with_age(&judged.json, &judged.verdict, answer.word(), *age)
        }
        (other, false) => line(other),
        (other, true) => serde_json::to_string(&ServeJson {
            schema_version: SCHEMA_VERSION,
            command: "serve",
            verdict: other.word(),
            passes: other.passes(),
            summary: line(other),
            age_ms: match other {
                Answer::NotJudged {
                    why: NotJudged::Trouble { age, .. },
                    ..
                } => Some(age.as_millis() as u64),
                Answer::Own { beat, .. } => Some(beat.as_millis() as u64),
                _ => None,
            },
        })
        .expect("a plain struct serializes"),
    };
    let content_type = if json { JSON } else { TEXT };
    Response {
        status,
        content_type,
        body,
    }
}

#[derive(Serialize)]
struct ServeJson {
    schema_version: u32,
    command: &'static str,
    verdict: &'static str,
    passes: bool,
    summary: String,
    age_ms: Option<u64>,
}

/// The words of an answer: a check's verdict with its age, or `serve`'s own.
fn line(answer: &Answer) -> String {
    let not_judged = "a restart of the app would not help";
    match answer {
        Answer::Verdict { judged, age } => {
            format!("{} (looked {} ago)", look_line(judged), ago(*age))
        }
        Answer::NotJudged {
            why: NotJudged::FirstLook { since },
            path,
        } => match path {
            ProbePath::Startup => format!(
                "not judged yet: natsprobe's first look has not ended (serving for {})",
                ago(*since)
            ),
            _ => format!(
                "not judged: natsprobe's first look has not ended (serving for {}); {not_judged}",
                ago(*since)
            ),
        },
        Answer::NotJudged {
            why: NotJudged::Trouble { what, age },
            ..
        } => clip(format!(
            "not judged: natsprobe's last look failed {} ago: {what}; {not_judged}",
            ago(*age)
        )),
        Answer::NotJudged {
            why: NotJudged::Stalled { beat },
            ..
        } => format!(
            "not judged: natsprobe's looks are stalled (none ended for {}; its /selfz fails); {not_judged}",
            ago(*beat)
        ),
        Answer::Own {
            beat,
            stalled: false,
        } => format!(
            "healthy: natsprobe's looks are moving (the last ended {} ago)",
            ago(*beat)
        ),
        Answer::Own {
            beat,
            stalled: true,
        } => format!(
            "unhealthy: natsprobe's looks are stalled: none ended for {} (a restart of natsprobe helps)",
            ago(*beat)
        ),
    }
}

/// The check's JSON document with the verdict's age first, and its verdict in the answer's
/// word (`/metrics`' too): `not_judged` where the check passed without judging.
fn with_age(json: &str, was: &str, word: &str, age: Duration) -> String {
    let (from, to) = (
        format!("\"verdict\":\"{was}\""),
        format!("\"verdict\":\"{word}\""),
    );
    let json = json.replacen(&from, &to, 1);
    let rest = json.strip_prefix('{').unwrap_or(&json);
    let sep = if rest.trim_start().starts_with('}') {
        ""
    } else {
        ","
    };
    format!("{{\"age_ms\":{}{sep}{rest}", age.as_millis())
}

/// A duration as a person reads an age: `0.4s`, `12.0s`, `3m 5s`.
fn ago(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 120.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m {}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// A refused request.
pub fn refusal(refusal: Refusal) -> Response {
    let (status, body) = match refusal {
        Refusal::BadRequest => (400, "natsprobe serve: not a request it understands"),
        Refusal::Method => (405, "natsprobe serve: only GET and HEAD are answered"),
        Refusal::NotFound => (
            404,
            "natsprobe serve answers /livez, /startupz (with --startup), /selfz and /metrics",
        ),
        Refusal::StartupNotAsked => (404, "natsprobe serve: /startupz needs serve --startup"),
        Refusal::TooLarge => (431, "natsprobe serve: request too large"),
    };
    Response {
        status,
        content_type: TEXT,
        body: body.to_string(),
    }
}

/// The bytes on the wire: HTTP/1.1, one response, the connection closed after it.
pub fn http(response: &Response, head_only: bool) -> Vec<u8> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let content_type = response.content_type;
    let body = format!("{}\n", response.body);
    let allow = if response.status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
        response.status,
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Owner;
    use crate::report::test_support::{live, report, trying};

    /// The line `serve` logs as `--exit-unhealthy` ends it: how many looks, and the code.
    #[test]
    fn the_exit_is_said_with_its_looks_and_code() {
        assert_eq!(
            exiting(3, 88),
            "natsprobe serve: 3 looks in a row judged the app unhealthy: exiting 88 (--exit-unhealthy)"
        );
        assert_eq!(
            exiting(1, 90),
            "natsprobe serve: the last look judged the app unhealthy: exiting 90 (--exit-unhealthy)"
        );
    }

    /// The line made from a check's JSON is the line the check prints, for every verdict.
    #[test]
    fn the_line_from_json_is_the_checks_line() {
        let cases = [
            report(&live(), &[4222], Owner::Anyone, false),
            report(&trying(), &[4222], Owner::Anyone, false),
            report(&[], &[4222], Owner::Anyone, false),
        ];
        for case in cases {
            let v: serde_json::Value = serde_json::from_str(&case.json()).unwrap();
            assert_eq!(
                human::line(
                    v["verdict"].as_str().unwrap(),
                    v["summary"].as_str().unwrap()
                ),
                case.human()
            );
        }
        let e = crate::report::error("could not evaluate: --timeout 800ms passed", true);
        let v: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(
            human::line(
                v["verdict"].as_str().unwrap(),
                v["summary"].as_str().unwrap()
            ),
            crate::report::error("could not evaluate: --timeout 800ms passed", false)
        );
        let cut =
            crate::report::cut_short("not judged: x", crate::rules::check::Health::Healthy, true);
        let v: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(
            human::line(
                v["verdict"].as_str().unwrap(),
                v["summary"].as_str().unwrap()
            ),
            crate::report::cut_short("not judged: x", crate::rules::check::Health::Healthy, false)
        );
    }

    #[test]
    fn an_answer_carries_its_age_and_its_status() {
        let judged = Judged {
            code: 1,
            verdict: "unhealthy".into(),
            summary: "no ESTABLISHED TCP connection to remote port 4222".into(),
            json: r#"{"schema_version":1,"verdict":"unhealthy"}"#.into(),
            startup: false,
            ..Judged::default()
        };
        let a = Answer::Verdict {
            judged: &judged,
            age: Duration::from_millis(2345),
        };
        let text = answer(&a, false);
        assert_eq!(text.status, 503);
        assert_eq!(
            text.body,
            "unhealthy: no ESTABLISHED TCP connection to remote port 4222 (looked 2.3s ago)"
        );
        let json = answer(&a, true);
        let v: serde_json::Value = serde_json::from_str(&json.body).unwrap();
        assert_eq!(v["age_ms"], 2345);
        assert_eq!(v["verdict"], "unhealthy");
        let stalled = Answer::NotJudged {
            why: NotJudged::Stalled {
                beat: Duration::from_secs(20),
            },
            path: ProbePath::Live,
        };
        assert_eq!(answer(&stalled, false).status, 200);
        let v: serde_json::Value = serde_json::from_str(&answer(&stalled, true).body).unwrap();
        assert_eq!(v["verdict"], "not_judged");
        assert_eq!(v["passes"], true);
        let wire = String::from_utf8(http(&answer(&stalled, false), false)).unwrap();
        assert!(wire.starts_with("HTTP/1.1 200 OK\r\n"), "{wire}");
        assert!(
            wire.ends_with("a restart of the app would not help\n"),
            "{wire}"
        );
        let head = String::from_utf8(http(&refusal(Refusal::Method), true)).unwrap();
        assert!(
            head.contains("Allow: GET, HEAD\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
    }
}
