//! The guard's look at a whole account, a page at a time: the stream names
//! (`$JS.API.STREAM.NAMES`, 1024 a page), then every consumer of each stream
//! (`$JS.API.CONSUMER.LIST.<stream>`, 256 a page), a few streams at once, all on one
//! connection, never one round trip per consumer. Each consumer is handed on as soon as its
//! page is in, so a look holds a few pages, not the account.
//!
//! Order matters where facts are compared: a page's stream is read *after* the page
//! (`$JS.API.STREAM.INFO.<stream>`), so the stream's first sequence is never older than the
//! consumers' ack floors. Read the other way round, retention that deleted a consumer's
//! unacknowledged messages (and moved its floor) after the stream was read looks like acks.
//!
//! Expected consumers the listings do not name are asked for by name. In a cluster only the
//! meta leader answers a listing, and a consumer whose leader does not answer in time comes
//! back as `missing`/`offline`: asked again by name, else unknown in this look, not absent. An
//! election (10008) or a request that timed out is asked again inside the look's deadline.

use super::jetstream::{self, ApiError, ParseError};
use super::nats::{observed, stream_of, Session};
use crate::facts::{ConsumerName, Look, Observed, StreamFacts, Unknown};
use natsprobe_core::timing::{LISTING_PAUSE, LISTING_TRY};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::time::Instant;

/// A request's subject and JSON body.
type Request = (String, String);

/// Streams whose consumers are listed at once: each holds at most one page (256 consumers,
/// about 0.5 MB of JSON) while it is decoded.
const STREAMS_AT_ONCE: usize = 16;

/// An answer larger than this is no real page: 256 consumer infos with long names and
/// metadata come to well under 2 MiB. The hostile case (a server sending without end), named
/// as such rather than parsed.
pub const MAX_ANSWER: usize = 8 << 20;

/// Looks at every stream and consumer of the account, and at each of `expected` (a durable
/// `*` stands for a whole stream, which must exist), handing each consumer to `each` as soon
/// as it is known. Err: the account's JetStream could not be listed at all (unreachable, not
/// enabled, not permitted).
pub async fn look(
    session: &Session,
    expected: &[ConsumerName],
    deadline: Instant,
    each: &mut dyn FnMut(ConsumerName, Observed),
) -> Result<Look, Unknown> {
    let streams = stream_names(session, deadline).await?;
    let names: Vec<&String> = streams.iter().collect();
    let next = Cell::new(0);
    let look = RefCell::new(Look::default());
    let seen_expected: RefCell<BTreeSet<ConsumerName>> = RefCell::default();
    let each = RefCell::new(each);
    let hand_on = |name: ConsumerName, observed: Observed| {
        if expected.contains(&name) {
            seen_expected.borrow_mut().insert(name.clone());
        }
        (each.borrow_mut())(name, observed);
    };
    let worker = || async {
        while let Some(stream) = names.get(next.replace(next.get() + 1)) {
            match one_stream(session, stream, deadline, &hand_on).await {
                Ok(()) => {}
                // Deleted between the names and its listing: it is simply not there.
                Err(Unknown::Failed(why)) if why == STREAM_GONE => {}
                Err(why) => {
                    look.borrow_mut()
                        .unknown_streams
                        .insert(stream.to_string(), why);
                }
            }
        }
    };
    join_all((0..STREAMS_AT_ONCE.min(names.len())).map(|_| worker())).await;
    let look = look.into_inner();

    // Expected consumers the listings did not name: asked by name, so "absent" is the
    // server's word, not the listing's silence.
    let unseen: Vec<&ConsumerName> = {
        let seen = seen_expected.borrow();
        expected.iter().filter(|n| !seen.contains(n)).collect()
    };
    let mut unnamed: Vec<ConsumerName> = Vec::new();
    for name in unseen {
        let unknown = look.unknown_streams.get(&name.stream).cloned();
        let observed = match (
            name.durable.as_str(),
            streams.contains(&name.stream),
            unknown,
        ) {
            // The stream's own row (`STREAM/*`, unknown) stands for it.
            ("*", _, Some(_)) | ("*", true, None) => continue,
            (_, _, Some(why)) => Observed::NotJudged(why),
            ("*", false, None) => Observed::StreamMissing,
            _ => {
                unnamed.push(name.clone());
                continue;
            }
        };
        hand_on(name.clone(), observed);
    }
    if !unnamed.is_empty() {
        let asked = session.consumers(&unnamed, deadline).await;
        for (name, observed) in unnamed.into_iter().zip(asked) {
            hand_on(name, observed);
        }
    }
    Ok(look)
}

/// `Unknown::Failed`'s text for a stream deleted since its name was listed (10059).
const STREAM_GONE: &str = "stream not found";

/// Every consumer of one stream, a page at a time: the page, then the consumers it could not
/// report (asked by name), then the stream (read last), then each consumer handed on.
async fn one_stream(
    session: &Session,
    stream: &str,
    deadline: Instant,
    hand_on: &dyn Fn(ConsumerName, Observed),
) -> Result<(), Unknown> {
    let subject = session.api(&format!("CONSUMER.LIST.{stream}"));
    let mut offset = 0u64;
    loop {
        let body = ask_one(session, (subject.clone(), paged(offset)), deadline).await?;
        let page = jetstream::parse_consumer_list(&body).map_err(|e| match e.api_code() {
            Some(ApiError::STREAM_NOT_FOUND) => Unknown::Failed(STREAM_GONE.into()),
            _ => e.unknown(),
        })?;
        drop(body);
        let unreported = unreported(session, stream, &page.missing, deadline).await;
        let needs_stream = page.items.iter().any(|c| c.workable() > 0)
            || unreported.iter().any(|(_, o)| stream_of(o).is_some());
        let stream_facts = match needs_stream {
            true => stream_info(session, stream, deadline).await,
            false => None,
        };
        let name = |durable: String| ConsumerName {
            stream: stream.to_string(),
            durable,
        };
        for facts in page.items {
            let consumer = name(facts.name.clone());
            let stream = stream_facts.clone();
            hand_on(consumer, Observed::Found { facts, stream });
        }
        for (durable, observed) in unreported {
            let observed = match observed {
                Observed::Found { facts, .. } => Observed::Found {
                    facts,
                    stream: stream_facts.clone(),
                },
                other => other,
            };
            hand_on(name(durable), observed);
        }
        offset += page.limit;
        if page.limit == 0 || offset >= page.total {
            return Ok(());
        }
    }
}

/// The stream's facts now; None when it cannot be read (its consumers are judged without it).
async fn stream_info(session: &Session, stream: &str, deadline: Instant) -> Option<StreamFacts> {
    let request = (session.api(&format!("STREAM.INFO.{stream}")), String::new());
    let body = ask_one(session, request, deadline).await.ok()?;
    jetstream::parse_stream_info(&body).ok()
}

/// Consumers a page names but could not report (their leader did not answer in time): asked
/// for by name, again through elections, until the deadline; else unknown.
async fn unreported(
    session: &Session,
    stream: &str,
    missing: &[String],
    deadline: Instant,
) -> Vec<(String, Observed)> {
    if missing.is_empty() {
        return Vec::new();
    }
    let requests = missing
        .iter()
        .map(|d| (session.consumer_info(stream, d), String::new()))
        .collect();
    let answers = ask_again(session, requests, deadline).await;
    missing
        .iter()
        .cloned()
        .zip(answers)
        .map(|(durable, answer)| {
            let observed = match observed(answer) {
                Observed::NotJudged(_) => Observed::NotJudged(Unknown::NotReported),
                other => other,
            };
            (durable, observed)
        })
        .collect()
}

fn paged(offset: u64) -> String {
    format!(r#"{{"offset":{offset}}}"#)
}

/// Every stream's name, every page of `$JS.API.STREAM.NAMES`: the first, then the rest at once
/// (a few pages even for thousands of streams).
async fn stream_names(session: &Session, deadline: Instant) -> Result<BTreeSet<String>, Unknown> {
    let subject = session.api("STREAM.NAMES");
    let first = ask_one(session, (subject.clone(), paged(0)), deadline).await?;
    let head = jetstream::parse_stream_names(&first).map_err(ParseError::unknown)?;
    let mut names: BTreeSet<String> = head.items.into_iter().collect();
    if head.limit == 0 || head.total <= head.limit {
        return Ok(names);
    }
    let requests = (1..)
        .map(|i| i * head.limit)
        .take_while(|o| *o < head.total)
        .map(|o| (subject.clone(), paged(o)))
        .collect();
    let pages: Vec<Vec<u8>> = ask_again(session, requests, deadline)
        .await
        .into_iter()
        .map(|answer| bounded(answer?))
        .collect::<Result<_, _>>()?;
    for page in pages {
        let page = jetstream::parse_stream_names(&page).map_err(ParseError::unknown)?;
        names.extend(page.items);
    }
    Ok(names)
}

/// An answer no larger than any real page, or why not.
fn bounded(body: Vec<u8>) -> Result<Vec<u8>, Unknown> {
    match body.len() > MAX_ANSWER {
        true => Err(Unknown::Failed(format!(
            "an answer of {} MiB, larger than any real page ({} MiB at most): a server sending without end?",
            body.len() >> 20,
            MAX_ANSWER >> 20
        ))),
        false => Ok(body),
    }
}

/// One request, asked again through elections and timeouts until the deadline.
async fn ask_one(
    session: &Session,
    request: Request,
    deadline: Instant,
) -> Result<Vec<u8>, Unknown> {
    bounded(
        ask_again(session, vec![request], deadline)
            .await
            .pop()
            .expect("one answer per request")?,
    )
}

/// Asks, and asks again what an election (10008) or a timeout left unanswered, until the
/// deadline.
async fn ask_again(
    session: &Session,
    requests: Vec<Request>,
    deadline: Instant,
) -> Vec<Result<Vec<u8>, Unknown>> {
    let mut answers: Vec<Option<Result<Vec<u8>, Unknown>>> = vec![None; requests.len()];
    let mut todo: BTreeSet<usize> = (0..requests.len()).collect();
    loop {
        let batch: Vec<usize> = todo.iter().copied().collect();
        let asked = batch.iter().map(|&i| requests[i].clone()).collect();
        // Each try gets a quarter of what is left (at least a second): a request lost in an
        // election (sent to a server that died, or to a meta leader that stepped down) is
        // never answered, and must not take the whole deadline with it. The API answers in
        // milliseconds otherwise.
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        let this_try = (now + LISTING_TRY.of(left).max(LISTING_TRY.at_least)).min(deadline);
        let got = session.ask_all(asked, this_try).await;
        for (i, answer) in batch.into_iter().zip(got) {
            let again = match &answer {
                Ok(body) => jetstream::is_temporarily_unavailable(body),
                Err(
                    Unknown::JetStreamTimeout | Unknown::TemporarilyUnavailable | Unknown::Deadline,
                ) => true,
                Err(_) => false,
            };
            if !again {
                todo.remove(&i);
            }
            answers[i] = Some(match (again, answer) {
                (true, Ok(_)) => Err(Unknown::TemporarilyUnavailable),
                (_, answer) => answer,
            });
        }
        let pause = LISTING_PAUSE;
        if todo.is_empty() || Instant::now() + pause >= deadline {
            break;
        }
        tokio::time::sleep(pause).await;
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or(Err(Unknown::Deadline)))
        .collect()
}

/// Runs the futures at once on this task until every one has finished.
async fn join_all<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    let mut running: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        running.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        match running.is_empty() {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every future runs to its end, all at once: the one that waits the fewest turns ends
    /// first, whatever its place (one after another, they would end in their order).
    #[test]
    fn joined_futures_run_at_once_to_their_end() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ended = RefCell::new(Vec::new());
        rt.block_on(join_all((0..5u64).rev().map(|i| {
            let ended = &ended;
            async move {
                for _ in 0..i {
                    tokio::task::yield_now().await;
                }
                ended.borrow_mut().push(i);
            }
        })));
        assert_eq!(ended.into_inner(), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn an_answer_larger_than_any_page_is_named_not_parsed() {
        assert!(bounded(vec![b' '; MAX_ANSWER]).is_ok());
        let why = bounded(vec![b' '; MAX_ANSWER + 1]).unwrap_err();
        assert!(
            why.to_string().contains("larger than any real page"),
            "{why}"
        );
    }
}
