//! An async-nats application pulling from a JetStream consumer with `messages()`, the API new
//! Rust code uses: one replica of a pull consumer's group. The tests run it as a pod's client
//! (`probe-tests/pull_replicas.rs`); it shows what `check --own-subscription` judges of a pull
//! replica: its connection's publishes (pull requests, acks).
//!
//!     cargo run --example pull_replica -- URL STREAM/DURABLE [--expires MS] [--handle MS]
//!
//! It prints `ready` once pulling. Each message is handled for --handle ms, then acked.
//! SIGUSR1 stops the pull loop and keeps the connection (prints `stopped`); SIGUSR2 wedges the
//! handler on the message in hand (prints `wedged`).

use futures_util::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static WEDGED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    match signal {
        libc::SIGUSR1 => STOP.store(true, Ordering::SeqCst),
        _ => WEDGED.store(true, Ordering::SeqCst),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, name) = match args.as_slice() {
        [url, name, ..] => (url.clone(), name.clone()),
        _ => {
            eprintln!("usage: pull_replica URL STREAM/DURABLE [--expires MS] [--handle MS]");
            std::process::exit(2);
        }
    };
    let opt = |flag: &str, default: u64| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let expires = Duration::from_millis(opt("--expires", 30_000));
    let handle = Duration::from_millis(opt("--handle", 0));
    let (stream, durable) = name.split_once('/').expect("STREAM/DURABLE");
    // SAFETY: the handler only stores to atomics.
    unsafe {
        libc::signal(libc::SIGUSR1, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGUSR2, on_signal as *const () as libc::sighandler_t);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let client = async_nats::ConnectOptions::new()
            .name("async-nats-pull-replica")
            .retry_on_initial_connect()
            .connect(&url)
            .await
            .expect("connect");
        let js = async_nats::jetstream::new(client.clone());
        let consumer: async_nats::jetstream::consumer::PullConsumer = js
            .get_consumer_from_stream(durable, stream)
            .await
            .expect("the consumer");
        let mut messages = consumer
            .stream()
            .expires(expires)
            .heartbeat(expires / 2)
            .messages()
            .await
            .expect("messages");
        println!("ready");
        let mut said_wedged = false;
        while !STOP.load(Ordering::SeqCst) {
            if WEDGED.load(Ordering::SeqCst) && !said_wedged {
                said_wedged = true;
                println!("wedged");
            }
            // A signal is seen within 100 ms; a message is handled, then acked, unless the
            // handler is wedged: then it is never finished.
            let next = tokio::time::timeout(Duration::from_millis(100), messages.next()).await;
            let Ok(Some(Ok(message))) = next else {
                continue;
            };
            tokio::time::sleep(handle).await;
            while WEDGED.load(Ordering::SeqCst) {
                if !said_wedged {
                    said_wedged = true;
                    println!("wedged");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = message.ack().await;
        }
        println!("stopped");
        // The loop ended: the connection stays open, as an application whose loop died keeps
        // it.
        drop(messages);
        println!("loop ended");
        std::future::pending::<()>().await;
        drop(client);
    });
}
