//! A NATS service of the tests' own that answers requests on some subjects only after a
//! delay: a server whose every answer comes late. Run in the NATS pod's namespace.

use super::NetNs;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Late {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Requests answered so far.
    pub answered: Arc<AtomicUsize>,
}

impl Late {
    /// Answers every request on `subjects` with `body`, `delay` after it came.
    pub fn start(
        ns: &NetNs,
        url: &str,
        subjects: &[&str],
        body: &'static str,
        delay: Duration,
    ) -> Late {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let url = url.to_string();
        let subjects: Vec<String> = subjects.iter().map(|s| s.to_string()).collect();
        let (flag, count) = (Arc::clone(&stop), Arc::clone(&answered));
        let thread = ns.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = async_nats::connect(url)
                    .await
                    .expect("the responder connects");
                let mut subs = Vec::new();
                for s in subjects {
                    subs.push(client.subscribe(s).await.unwrap());
                }
                client.flush().await.unwrap();
                let _ = ready_tx.send(());
                let mut pending: Vec<(tokio::time::Instant, async_nats::Subject)> = Vec::new();
                while !flag.load(Ordering::SeqCst) {
                    for sub in &mut subs {
                        while let Some(Some(m)) = std::future::poll_fn(|cx| {
                            std::task::Poll::Ready(
                                match futures_core::Stream::poll_next(Pin::new(&mut *sub), cx) {
                                    std::task::Poll::Ready(m) => Some(m),
                                    std::task::Poll::Pending => None,
                                },
                            )
                        })
                        .await
                        {
                            if let Some(reply) = m.reply {
                                pending.push((tokio::time::Instant::now() + delay, reply));
                            }
                        }
                    }
                    let now = tokio::time::Instant::now();
                    let (due, later): (Vec<_>, Vec<_>) =
                        pending.into_iter().partition(|(at, _)| *at <= now);
                    pending = later;
                    for (_, reply) in due {
                        let _ = client.publish(reply, body.into()).await;
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    let _ = client.flush().await;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the responder subscribed");
        Late {
            stop,
            thread: Some(thread),
            answered,
        }
    }
}

impl Drop for Late {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
