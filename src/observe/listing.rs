//! The guard's look at a whole account: every stream (`$JS.API.STREAM.LIST`, 256 a page) and
//! every consumer of each (`$JS.API.CONSUMER.LIST.<stream>`, 256 a page): first pages at once,
//! then the rest at once, all on one connection, never one round trip per consumer in
//! sequence. Expected consumers the listings do not name are asked for by name (at once).
//! In a cluster only the meta leader answers a listing, and a consumer whose leader does not
//! answer in time comes back as `missing`/`offline`: unknown in this look, not absent. An
//! election (10008) or a request that timed out is asked again inside the look's deadline.

use super::jetstream::{self, ApiError, ParseError};
use super::nats::Session;
use crate::facts::{ConsumerName, Listing, Observed, Unknown};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// A request's subject and JSON body.
type Request = (String, String);

/// Looks at every stream and consumer of the account, and at each of `expected` (a durable
/// `*` stands for a whole stream, which must exist), as of `at_ms` (the local clock). Err: the account's JetStream could not
/// be listed at all (unreachable, not enabled, not permitted).
pub async fn look(
    session: &Session,
    expected: &[ConsumerName],
    at_ms: i64,
    deadline: Instant,
) -> Result<Listing, Unknown> {
    let mut listing = Listing {
        at_ms,
        ..Listing::default()
    };
    // Streams.
    for page in pages(session, &session.api("STREAM.LIST"), deadline, |body| {
        jetstream::parse_stream_list(body).map(|p| (p.total, p.limit, p.items.len(), p))
    })
    .await?
    {
        for (name, facts) in page.items {
            listing.streams.insert(name, facts);
        }
        for name in page.missing {
            listing.unknown_streams.insert(name, Unknown::NotReported);
        }
    }

    // Streams the listing names but could not report (their leader did not answer in time):
    // asked for by name, again through elections, until the deadline; else unknown.
    let unreported: Vec<String> = listing.unknown_streams.keys().cloned().collect();
    if !unreported.is_empty() {
        let requests = unreported
            .iter()
            .map(|s| (session.api(&format!("STREAM.INFO.{s}")), String::new()))
            .collect();
        let answers = ask_again(session, requests, deadline).await;
        for (name, answer) in unreported.into_iter().zip(answers) {
            if let Ok(Ok(facts)) = answer.map(|body| jetstream::parse_stream_info(&body)) {
                listing.unknown_streams.remove(&name);
                listing.streams.insert(name, facts);
            }
        }
    }

    // Consumers of every stream, all streams at once.
    let names: Vec<String> = listing.streams.keys().cloned().collect();
    let lists = futures_join(names.iter().map(|stream| {
        let subject = session.api(&format!("CONSUMER.LIST.{stream}"));
        async move {
            let pages = pages(session, &subject, deadline, |body| {
                jetstream::parse_consumer_list(body).map(|p| (p.total, p.limit, p.items.len(), p))
            })
            .await;
            (stream.clone(), pages)
        }
    }))
    .await;
    // Consumers a listing names but could not report (their leader did not answer in time):
    // asked for by name, again through elections, until the deadline; else unknown.
    let mut unreported: Vec<ConsumerName> = Vec::new();
    for (stream, pages) in lists {
        let facts = listing.streams.get(&stream).cloned();
        match pages {
            Ok(pages) => {
                for page in pages {
                    for consumer in page.items {
                        let name = ConsumerName {
                            stream: stream.clone(),
                            durable: consumer.name.clone(),
                        };
                        let observed = Observed::Found {
                            facts: consumer,
                            stream: facts.clone(),
                        };
                        listing.consumers.insert(name, observed);
                    }
                    for durable in page.missing {
                        let name = ConsumerName {
                            stream: stream.clone(),
                            durable,
                        };
                        unreported.push(name);
                    }
                }
            }
            // Deleted between the two listings: it is simply not there.
            Err(Unknown::Failed(why)) if why.contains("10059") => {
                listing.streams.remove(&stream);
            }
            Err(why) => {
                listing.unknown_streams.insert(stream, why);
            }
        }
    }

    if !unreported.is_empty() {
        let requests = unreported
            .iter()
            .map(|n| {
                let subject = session.api(&format!("CONSUMER.INFO.{}.{}", n.stream, n.durable));
                (subject, String::new())
            })
            .collect();
        let answers = ask_again(session, requests, deadline).await;
        for (name, answer) in unreported.into_iter().zip(answers) {
            let observed = match answer.map(|body| jetstream::parse_consumer_info(&body)) {
                Ok(Ok(facts)) => Observed::Found {
                    stream: listing.streams.get(&name.stream).cloned(),
                    facts,
                },
                Ok(Err(e)) => match super::nats::classify(e) {
                    Observed::NotJudged(_) => Observed::NotJudged(Unknown::NotReported),
                    other => other,
                },
                Err(_) => Observed::NotJudged(Unknown::NotReported),
            };
            listing.consumers.insert(name, observed);
        }
    }

    // Expected consumers the listings did not name: asked by name, so "absent" is the
    // server's word, not the listing's silence.
    let mut unnamed: Vec<ConsumerName> = Vec::new();
    for name in expected {
        let stream_known = listing.streams.contains_key(&name.stream);
        let stream_unknown = listing.unknown_streams.get(&name.stream).cloned();
        if name.durable == "*" {
            let observed = match (stream_known, stream_unknown) {
                (true, _) => continue,
                (false, Some(why)) => Observed::NotJudged(why),
                (false, None) => Observed::StreamMissing,
            };
            listing.consumers.insert(name.clone(), observed);
        } else if !listing.consumers.contains_key(name) {
            match stream_unknown {
                Some(why) if !stream_known => {
                    listing
                        .consumers
                        .insert(name.clone(), Observed::NotJudged(why));
                }
                _ => unnamed.push(name.clone()),
            }
        }
    }
    if !unnamed.is_empty() {
        let asked = session.consumers(&unnamed, deadline).await;
        for (name, observed) in unnamed.into_iter().zip(asked) {
            let observed = match observed {
                Observed::Found { facts, .. } => {
                    let stream = listing.streams.get(&name.stream).cloned();
                    Observed::Found { facts, stream }
                }
                other => other,
            };
            listing.consumers.insert(name, observed);
        }
    }
    Ok(listing)
}

/// Every page of a listing: the first, then the rest at once. `decode` gives (total, limit,
/// items on the page, page).
async fn pages<P>(
    session: &Session,
    subject: &str,
    deadline: Instant,
    decode: impl Fn(&[u8]) -> Result<(u64, u64, usize, P), ParseError>,
) -> Result<Vec<P>, Unknown> {
    let request = |offset: u64| (subject.to_string(), format!(r#"{{"offset":{offset}}}"#));
    let first = ask_again(session, vec![request(0)], deadline)
        .await
        .pop()
        .expect("one answer per request")?;
    let (total, limit, _, first) = decode(&first).map_err(unknown)?;
    let mut pages = vec![first];
    if limit == 0 || total <= limit {
        return Ok(pages);
    }
    let offsets: Vec<u64> = (1..)
        .map(|i| i * limit)
        .take_while(|o| *o < total)
        .collect();
    let requests = offsets.iter().map(|&o| request(o)).collect();
    for answer in ask_again(session, requests, deadline).await {
        let (_, _, _, page) = decode(&answer?).map_err(unknown)?;
        pages.push(page);
    }
    Ok(pages)
}

fn unknown(e: ParseError) -> Unknown {
    match e {
        ParseError::Api(ApiError {
            err_code: ApiError::TEMPORARILY_UNAVAILABLE,
            ..
        }) => Unknown::TemporarilyUnavailable,
        other => Unknown::Failed(other.to_string()),
    }
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
        let this_try = (now + (left / 4).max(Duration::from_secs(1))).min(deadline);
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
        let pause = Duration::from_millis(250);
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

/// Runs the futures at once on this task and returns their outputs in order.
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if outputs[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(out) => outputs[i] = Some(out),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        match pending {
            true => std::task::Poll::Pending,
            false => std::task::Poll::Ready(()),
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_futures_answer_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let out = rt.block_on(futures_join((0..5u64).rev().map(|i| async move {
            tokio::time::sleep(Duration::from_millis(i * 3)).await;
            i
        })));
        assert_eq!(out, [4, 3, 2, 1, 0]);
    }
}
