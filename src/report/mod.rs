//! Reports: a verdict and the facts it rests on, as typed structs that serialize to one JSON
//! document (`schema_version`), and as words: one line for the kubelet's events, more with
//! `-v`. Everything here returns strings; `main` writes them.

pub mod check;
pub mod diagnose;
pub mod guard;
pub mod human;
pub mod input;
pub mod metrics;
pub mod remembered;
pub mod serve;
pub mod words;

use serde::Serialize;

/// A run that ended without a verdict (exit 2 or 3), as JSON.
#[derive(Debug, Serialize)]
struct ErrorReport<'a> {
    schema_version: u32,
    verdict: &'static str,
    summary: &'a str,
}

/// The text of a run that ended without a verdict: one line, or one JSON object.
pub fn error(message: &str, json: bool) -> String {
    without_report("error", message, json)
}

/// The text of a check cut short while it waited on NATS: not judged, with the verdict
/// that stands for a server that does not answer (`--when-server-down`).
pub fn cut_short(message: &str, health: crate::rules::check::Health, json: bool) -> String {
    without_report(health.as_str(), message, json)
}

/// A verdict word and its summary, with nothing more to report: the JSON object, or the line.
fn without_report(verdict: &'static str, summary: &str, json: bool) -> String {
    match json {
        true => serde_json::to_string(&ErrorReport {
            schema_version: check::SCHEMA_VERSION,
            verdict,
            summary,
        })
        .expect("a plain struct serializes"),
        false => human::line(verdict, summary),
    }
}

/// The text of a `diagnose`: the JSON document, or the terminal report (ANSI styles with
/// `colour`).
pub fn render_diagnose(report: &diagnose::DiagnoseReport, json: bool, colour: bool) -> String {
    match json {
        true => serde_json::to_string(report).expect("a plain struct serializes"),
        false => report.render(colour),
    }
}

/// The text of a `check`: the JSON document, or the line (and the `-v` lines).
pub fn render_check(report: &check::CheckReport, json: bool, verbose: bool) -> String {
    match (json, verbose) {
        (true, _) => serde_json::to_string(report).expect("a plain struct serializes"),
        (false, true) => [std::slice::from_ref(&report.line), &report.details[..]]
            .concat()
            .join("\n"),
        (false, false) => report.line.clone(),
    }
}

#[cfg(test)]
pub(crate) mod test_support;
