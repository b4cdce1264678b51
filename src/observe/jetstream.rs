//! JetStream API answers, parsed from the raw JSON: `$JS.API.CONSUMER.INFO.<s>.<d>` and
//! `$JS.API.STREAM.INFO.<s>`. Raw, because the facts that matter are exactly the ones client
//! libraries drop or default: `ts` (absent before 2.10), `push_bound` (absent when false),
//! `last_active` (absent until the first ack since the server started).

use crate::facts::{AckPolicy, ConsumerFacts, Sequence, ServerTime, StreamFacts, Unknown};
use serde::Deserialize;
use std::time::Duration;

/// An error the JetStream API answered with (the system account's has no `err_code`: 0).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct ApiError {
    pub code: u16,
    pub err_code: u32,
    pub description: String,
}

impl ApiError {
    pub const STREAM_NOT_FOUND: u32 = 10059;
    pub const CONSUMER_NOT_FOUND: u32 = 10014;
    pub const TEMPORARILY_UNAVAILABLE: u32 = 10008;
    pub const NOT_ENABLED_FOR_ACCOUNT: u32 = 10039;
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("JetStream answered {}: {} ({})", .0.code, .0.description, .0.err_code)]
    Api(ApiError),
    #[error("not a JetStream answer: {0}")]
    Malformed(String),
}

impl ParseError {
    /// JetStream's code for the error the server answered with, if it answered with one.
    pub fn api_code(&self) -> Option<u32> {
        match self {
            ParseError::Api(e) => Some(e.err_code),
            ParseError::Malformed(_) => None,
        }
    }

    /// What it leaves unknown: an election (10008), or its words.
    pub fn unknown(self) -> Unknown {
        match self.api_code() {
            Some(ApiError::TEMPORARILY_UNAVAILABLE) => Unknown::TemporarilyUnavailable,
            _ => Unknown::Failed(self.to_string()),
        }
    }
}

/// An answer decoded as `T`, or why it is not one.
pub(super) fn json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ParseError> {
    serde_json::from_slice(body).map_err(|e| ParseError::Malformed(e.to_string()))
}

/// The error an answer carries, as an Err.
pub(super) fn api_error(error: Option<ApiError>) -> Result<(), ParseError> {
    error.map_or(Ok(()), |e| Err(ParseError::Api(e)))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawSequence {
    consumer_seq: u64,
    stream_seq: u64,
    last_active: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConsumerConfig {
    deliver_subject: Option<String>,
    deliver_group: Option<String>,
    ack_policy: Option<String>,
    ack_wait: Option<u64>,
    max_deliver: Option<i64>,
    max_ack_pending: Option<i64>,
    flow_control: bool,
    rate_limit_bps: u64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConsumer {
    error: Option<ApiError>,
    stream_name: String,
    name: String,
    created: String,
    config: RawConsumerConfig,
    delivered: Option<RawSequence>,
    ack_floor: Option<RawSequence>,
    num_ack_pending: u64,
    num_redelivered: u64,
    num_waiting: u64,
    num_pending: u64,
    push_bound: bool,
    paused: bool,
    ts: Option<String>,
}

fn sequence(raw: RawSequence) -> Sequence {
    Sequence {
        consumer_seq: raw.consumer_seq,
        stream_seq: raw.stream_seq,
        last_active: raw.last_active.as_deref().and_then(parse_time),
    }
}

pub fn parse_consumer_info(body: &[u8]) -> Result<ConsumerFacts, ParseError> {
    consumer_facts(json(body)?)
}

fn consumer_facts(raw: RawConsumer) -> Result<ConsumerFacts, ParseError> {
    api_error(raw.error)?;
    let (Some(ack_floor), Some(delivered)) = (raw.ack_floor, raw.delivered) else {
        return Err(ParseError::Malformed("no ack_floor or delivered".into()));
    };
    Ok(ConsumerFacts {
        stream: raw.stream_name,
        name: raw.name,
        created: raw.created,
        deliver_subject: raw.config.deliver_subject.filter(|s| !s.is_empty()),
        deliver_group: raw.config.deliver_group.filter(|s| !s.is_empty()),
        push_bound: raw.push_bound,
        num_pending: raw.num_pending,
        num_ack_pending: raw.num_ack_pending,
        num_waiting: raw.num_waiting,
        num_redelivered: raw.num_redelivered,
        ack_floor: sequence(ack_floor),
        delivered: sequence(delivered),
        ack_policy: match raw.config.ack_policy.as_deref() {
            Some("none") => AckPolicy::None,
            Some("all") => AckPolicy::All,
            _ => AckPolicy::Explicit,
        },
        max_deliver: raw.config.max_deliver.filter(|&n| n > 0).map(|n| n as u64),
        ack_wait: raw
            .config
            .ack_wait
            .filter(|&ns| ns > 0)
            .map(Duration::from_nanos),
        max_ack_pending: raw.config.max_ack_pending,
        flow_control: raw.config.flow_control,
        rate_limit_bps: Some(raw.config.rate_limit_bps).filter(|&b| b > 0),
        paused: raw.paused,
        ts: raw.ts.as_deref().and_then(parse_time),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawStreamConfig {
    retention: String,
    discard: String,
    max_msgs: Option<i64>,
    max_bytes: Option<i64>,
    /// Nanoseconds.
    max_age: Option<i64>,
    max_msgs_per_subject: Option<i64>,
    discard_new_per_subject: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawStreamState {
    first_seq: u64,
    last_seq: u64,
}

#[derive(Deserialize)]
struct RawStream {
    error: Option<ApiError>,
    config: Option<RawStreamConfig>,
    state: Option<RawStreamState>,
}

pub fn parse_stream_info(body: &[u8]) -> Result<StreamFacts, ParseError> {
    let raw: RawStream = json(body)?;
    api_error(raw.error)?;
    let (Some(config), Some(state)) = (raw.config, raw.state) else {
        return Err(ParseError::Malformed("no config or state".into()));
    };
    // The server writes -1 (or 0, or nothing) for "no limit"; its defaults when omitted.
    let limit = |n: Option<i64>| n.filter(|&n| n > 0).map(|n| n as u64);
    let or = |text: String, default: &str| match text.is_empty() {
        true => default.to_string(),
        false => text,
    };
    Ok(StreamFacts {
        retention: or(config.retention, "limits"),
        discard: or(config.discard, "old"),
        max_msgs: limit(config.max_msgs),
        max_bytes: limit(config.max_bytes),
        max_age: limit(config.max_age).map(Duration::from_nanos),
        max_msgs_per_subject: limit(config.max_msgs_per_subject),
        discard_new_per_subject: config.discard_new_per_subject,
        first_seq: state.first_seq,
        last_seq: state.last_seq,
    })
}

/// Whether an answer is JetStream's "temporarily unavailable" (10008: an election), which is
/// worth asking again.
pub fn is_temporarily_unavailable(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Only {
        error: Option<ApiError>,
    }
    serde_json::from_slice::<Only>(body)
        .ok()
        .and_then(|o| o.error)
        .is_some_and(|e| e.err_code == ApiError::TEMPORARILY_UNAVAILABLE)
}

/// One page of a JetStream listing (`$JS.API.STREAM.LIST`, `$JS.API.CONSUMER.LIST.<s>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub total: u64,
    pub offset: u64,
    pub limit: u64,
    pub items: Vec<T>,
    /// Names the server could not report this time (in a cluster: their leader did not
    /// answer in time; `missing`, and `offline` from 2.11 on).
    pub missing: Vec<String>,
}

/// A listing names its paging (`total`, `offset`, `limit`) on every page, empty or not: an
/// answer without it is not a listing, and must not read as an empty account.
#[derive(Deserialize)]
struct RawPage<T> {
    error: Option<ApiError>,
    total: Option<u64>,
    offset: Option<u64>,
    limit: Option<u64>,
    // `null` when empty.
    streams: Option<Vec<T>>,
    consumers: Option<Vec<T>>,
    missing: Option<Vec<String>>,
    offline: Option<serde_json::Value>,
}

fn page<T, U>(body: &[u8], each: impl Fn(T) -> Result<U, ParseError>) -> Result<Page<U>, ParseError>
where
    T: for<'de> Deserialize<'de>,
{
    let raw: RawPage<T> = json(body)?;
    api_error(raw.error)?;
    let (Some(total), Some(offset), Some(limit)) = (raw.total, raw.offset, raw.limit) else {
        return Err(ParseError::Malformed(
            "not a listing: no total, offset, limit".into(),
        ));
    };
    let items = raw
        .streams
        .or(raw.consumers)
        .unwrap_or_default()
        .into_iter()
        .map(each)
        .collect::<Result<Vec<U>, _>>()?;
    let mut missing = raw.missing.unwrap_or_default();
    // `offline` maps a name to why, or lists names.
    match raw.offline {
        Some(serde_json::Value::Object(map)) => missing.extend(map.into_iter().map(|(k, _)| k)),
        Some(serde_json::Value::Array(names)) => missing.extend(
            names
                .into_iter()
                .filter_map(|n| n.as_str().map(str::to_string)),
        ),
        _ => {}
    }
    Ok(Page {
        total,
        offset,
        limit,
        items,
        missing,
    })
}

/// A page of `$JS.API.STREAM.NAMES`: the streams' names.
pub fn parse_stream_names(body: &[u8]) -> Result<Page<String>, ParseError> {
    page(body, Ok)
}

/// A page of `$JS.API.CONSUMER.LIST.<stream>`: each consumer's facts.
pub fn parse_consumer_list(body: &[u8]) -> Result<Page<ConsumerFacts>, ParseError> {
    page(body, consumer_facts)
}

/// A consumer advisory the guard counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advisory {
    pub stream: String,
    pub consumer: String,
    pub kind: AdvisoryKind,
    /// The JetStream domain of the server that published it (`domain`, absent without one):
    /// across a leaf node connection the account hears every domain's advisories.
    pub domain: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdvisoryKind {
    /// `io.nats.jetstream.advisory.v1.terminated`, with its reason: "Unacknowledged message
    /// was deleted" or "Message deleted by stream limits" when retention deleted it, else the
    /// client's `+TERM` reason.
    Terminated { reason: String },
    /// `io.nats.jetstream.advisory.v1.max_deliver`: a message exhausted its deliveries.
    MaxDeliveries,
    /// `io.nats.jetstream.advisory.v1.api_audit`: an API request was answered (published for
    /// every answer while someone listens, jetstream_api.go `sendJetStreamAPIAuditAdvisory`).
    ApiAudit,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawAdvisory {
    #[serde(rename = "type")]
    kind: String,
    stream: String,
    consumer: String,
    reason: String,
    domain: String,
}

pub fn parse_advisory(body: &[u8]) -> Option<Advisory> {
    let raw: RawAdvisory = serde_json::from_slice(body).ok()?;
    let kind = match raw.kind.as_str() {
        "io.nats.jetstream.advisory.v1.terminated" => {
            AdvisoryKind::Terminated { reason: raw.reason }
        }
        "io.nats.jetstream.advisory.v1.max_deliver" => AdvisoryKind::MaxDeliveries,
        "io.nats.jetstream.advisory.v1.api_audit" => AdvisoryKind::ApiAudit,
        _ => return None,
    };
    Some(Advisory {
        stream: raw.stream,
        consumer: raw.consumer,
        kind,
        domain: Some(raw.domain).filter(|d| !d.is_empty()),
    })
}

/// RFC 3339 as Go's encoding/json writes `time.Time`: `2026-12-01T08:00:38.560578748Z` or
/// with an offset. Go's zero time (`0001-01-01T00:00:00Z`) means "never" and is None.
pub fn parse_time(text: &str) -> Option<ServerTime> {
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { text.get(r)?.parse().ok() };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if year <= 1
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos: i64 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        nanos = frac[..digits].parse::<i64>().ok()? * 10i64.pow(9 - digits as u32);
        rest = &frac[digits..];
    }
    let offset_seconds = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let h = i64::from((*h1 as char).to_digit(10)? * 10 + (*h2 as char).to_digit(10)?);
            let m = i64::from((*m1 as char).to_digit(10)? * 10 + (*m2 as char).to_digit(10)?);
            let s = h * 3600 + m * 60;
            if *sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    seconds.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The `domain` of an account info answer (`$JS.API.INFO`): the JetStream domain that
/// answered. Ok(None): it has none.
pub fn parse_account_domain(body: &[u8]) -> Result<Option<String>, ParseError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        error: Option<ApiError>,
        #[serde(rename = "type")]
        kind: String,
        domain: String,
    }
    let raw: Raw = json(body)?;
    api_error(raw.error)?;
    if raw.kind != "io.nats.jetstream.api.v1.account_info_response" {
        return Err(ParseError::Malformed(format!(
            "not an account info: {}",
            raw.kind
        )));
    }
    Ok(Some(raw.domain).filter(|d| !d.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from nats-server 2.10.26: a push consumer in a deliver group, never acking,
    /// on a capped discard-old stream under load.
    const INFO_2_10: &str = r#"{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"CAP","name":"W","created":"2026-12-01T08:00:37.196393002Z","config":{"durable_name":"W","name":"W","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":10,"deliver_subject":"d.w","deliver_group":"g","num_replicas":0},"delivered":{"consumer_seq":1410,"stream_seq":1410,"last_active":"2026-12-01T08:00:41.715057624Z"},"ack_floor":{"consumer_seq":1400,"stream_seq":1400,"last_active":"2026-12-01T08:00:41.715012276Z"},"num_ack_pending":10,"num_redelivered":0,"num_waiting":0,"num_pending":190,"push_bound":true,"ts":"2026-12-01T08:00:42.536597137Z"}"#;

    /// Recorded from Debian's nats-server 2.9.10: no `ts`.
    const INFO_2_9: &str = r#"{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"T","name":"D","created":"2026-12-01T08:01:12.765077769Z","config":{"durable_name":"D","name":"D","deliver_policy":"all","ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","max_ack_pending":1000,"deliver_subject":"d.d","deliver_group":"g","num_replicas":0},"delivered":{"consumer_seq":5,"stream_seq":5,"last_active":"2026-12-01T08:01:12.778824153Z"},"ack_floor":{"consumer_seq":5,"stream_seq":5,"last_active":"2026-12-01T08:01:12.779556859Z"},"num_ack_pending":0,"num_redelivered":0,"num_waiting":0,"num_pending":0,"push_bound":true}"#;

    #[test]
    fn consumer_info_from_2_10() {
        let f = parse_consumer_info(INFO_2_10.as_bytes()).unwrap();
        assert_eq!((f.stream.as_str(), f.name.as_str()), ("CAP", "W"));
        assert!(f.push() && f.push_bound);
        assert_eq!(f.deliver_group.as_deref(), Some("g"));
        assert_eq!(
            (f.num_pending, f.num_ack_pending, f.waiting()),
            (190, 10, 200)
        );
        assert_eq!(
            (f.ack_floor.consumer_seq, f.ack_floor.stream_seq),
            (1400, 1400)
        );
        assert_eq!(f.ack_wait, Some(Duration::from_secs(30)));
        assert_eq!(f.max_ack_pending, Some(10));
        let age = f.ts.unwrap() - f.ack_floor.last_active.unwrap();
        assert_eq!(age, 821_584_861, "ts - last_active in ns");
    }

    #[test]
    fn consumer_info_from_2_9_has_no_ts() {
        let f = parse_consumer_info(INFO_2_9.as_bytes()).unwrap();
        assert_eq!(f.ts, None);
        assert!(f.ack_floor.last_active.is_some());
    }

    #[test]
    fn absent_fields_mean_false_or_none() {
        let body = r#"{"stream_name":"S","name":"P","created":"2026-12-01T00:00:00Z","config":{"ack_policy":"explicit"},"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0},"num_ack_pending":0,"num_redelivered":0,"num_waiting":3,"num_pending":0}"#;
        let f = parse_consumer_info(body.as_bytes()).unwrap();
        assert!(!f.push() && !f.push_bound && !f.paused);
        assert_eq!(f.ack_floor.last_active, None);
        assert_eq!(f.num_waiting, 3);
    }

    #[test]
    fn an_answer_without_paging_is_not_a_listing() {
        // Not an empty account: a foreign or hostile answer.
        for body in [&br#"{"type":"x"}"#[..], br#"{"streams":[]}"#, br#"{}"#] {
            assert!(parse_stream_names(body).is_err(), "{body:?}");
            assert!(parse_consumer_list(body).is_err(), "{body:?}");
        }
        let empty =
            parse_stream_names(br#"{"total":0,"offset":0,"limit":1024,"streams":null}"#).unwrap();
        assert_eq!((empty.total, empty.items.len()), (0, 0));
    }

    #[test]
    fn api_errors_are_classified() {
        let cases = [
            (
                r#"{"error":{"code":404,"err_code":10014,"description":"consumer not found"}}"#,
                10014,
            ),
            (
                r#"{"error":{"code":404,"err_code":10059,"description":"stream not found"}}"#,
                10059,
            ),
            (
                r#"{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}"#,
                10008,
            ),
        ];
        for (body, code) in cases {
            match parse_consumer_info(body.as_bytes()) {
                Err(ParseError::Api(e)) => assert_eq!(e.err_code, code),
                other => panic!("{body}: {other:?}"),
            }
        }
        assert!(matches!(
            parse_consumer_info(b"not json"),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse_consumer_info(b"{}"),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn stream_info_keeps_the_retention_settings() {
        let limits = r#"{"config":{"name":"CAP","retention":"limits","max_msgs":200,"max_bytes":-1,"max_age":60000000000,"max_msgs_per_subject":-1,"discard":"old"},"state":{"messages":200,"first_seq":1401,"last_seq":1600}}"#;
        let s = parse_stream_info(limits.as_bytes()).unwrap();
        assert_eq!(
            (s.retention.as_str(), s.discard.as_str()),
            ("limits", "old")
        );
        assert_eq!((s.max_msgs, s.max_bytes), (Some(200), None));
        assert_eq!(s.max_age, Some(Duration::from_secs(60)));
        assert_eq!((s.first_seq, s.last_seq), (1401, 1600));
        let defaults = r#"{"config":{},"state":{"first_seq":1}}"#;
        let s = parse_stream_info(defaults.as_bytes()).unwrap();
        assert_eq!(
            (s.retention.as_str(), s.discard.as_str()),
            ("limits", "old")
        );
        assert_eq!(s.max_msgs_per_subject, None);
    }

    #[test]
    fn listings_page_and_tolerate_null() {
        let streams = r#"{"type":"io.nats.jetstream.api.v1.stream_names_response","total":1300,"offset":1024,"limit":1024,"streams":["CAP","ORDERS"]}"#;
        let page = parse_stream_names(streams.as_bytes()).unwrap();
        assert_eq!((page.total, page.offset, page.limit), (1300, 1024, 1024));
        assert_eq!(page.items, ["CAP", "ORDERS"]);
        let empty = r#"{"type":"io.nats.jetstream.api.v1.stream_names_response","total":0,"offset":0,"limit":1024,"streams":null}"#;
        assert!(parse_stream_names(empty.as_bytes())
            .unwrap()
            .items
            .is_empty());
        let consumers = format!(
            r#"{{"total":1,"offset":0,"limit":256,"consumers":[{INFO_2_10}],"offline":{{"x":"leader unreachable"}}}}"#
        );
        let page = parse_consumer_list(consumers.as_bytes()).unwrap();
        assert_eq!(page.items[0].name, "W");
        assert_eq!(page.missing, ["x"]);
        let err = r#"{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}"#;
        assert!(matches!(
            parse_consumer_list(err.as_bytes()),
            Err(ParseError::Api(ApiError {
                err_code: 10008,
                ..
            }))
        ));
    }

    #[test]
    fn advisories_the_guard_counts() {
        let terminated = br#"{"type":"io.nats.jetstream.advisory.v1.terminated","id":"x","timestamp":"2026-12-01T08:00:00Z","stream":"CAP","consumer":"W","consumer_seq":12,"stream_seq":400,"deliveries":1,"reason":"Unacknowledged message was deleted"}"#;
        assert_eq!(
            parse_advisory(terminated),
            Some(Advisory {
                stream: "CAP".into(),
                consumer: "W".into(),
                kind: AdvisoryKind::Terminated {
                    reason: "Unacknowledged message was deleted".into()
                },
                domain: None,
            })
        );
        // Recorded from nats-server 2.10.26: a hub's advisory, heard on a leaf node.
        let max = br#"{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"sUU2xukc3R1t9yC5Bc3Y2x","timestamp":"2026-12-02T00:56:43.844777339Z","stream":"MD","consumer":"md","stream_seq":1,"deliveries":1,"domain":"hub"}"#;
        let max = parse_advisory(max).unwrap();
        assert_eq!(max.kind, AdvisoryKind::MaxDeliveries);
        assert_eq!(max.domain.as_deref(), Some("hub"));
        let audit = br#"{"type":"io.nats.jetstream.advisory.v1.api_audit","id":"x","timestamp":"2026-12-02T00:56:43Z","server":"hub","client":{},"subject":"$JS.API.INFO","response":"{}","domain":"hub"}"#;
        assert_eq!(
            parse_advisory(audit).map(|a| a.kind),
            Some(AdvisoryKind::ApiAudit)
        );
        assert_eq!(parse_advisory(b"{}"), None);
        assert_eq!(parse_advisory(b"not json"), None);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("1970-01-01T00:00:01.5Z"), Some(1_500_000_000));
        assert_eq!(
            parse_time("2026-12-01T08:00:42.536597137Z"),
            Some(1_796_112_042_536_597_137)
        );
        assert_eq!(
            parse_time("2026-12-01T09:00:42.536597137+01:00"),
            parse_time("2026-12-01T08:00:42.536597137Z")
        );
        assert_eq!(
            parse_time("2000-02-29T12:00:00-05:30"),
            Some((951_825_600 + 5 * 3600 + 1800) * 1_000_000_000)
        );
        for bad in [
            "0001-01-01T00:00:00Z",
            "",
            "2026-12-01",
            "2026-13-01T00:00:00Z",
            "2026-12-01T00:00:00",
            "2026-12-01T00:00:00.Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
