//! The guard's CronJob: a job every so often, one at a time, each run kept.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One run of the guard.
#[derive(Debug, Clone)]
pub struct GuardRun {
    pub ended: Instant,
    pub code: Option<i32>,
    pub line: String,
}

/// A CronJob: a job every `every`, one at a time.
pub(super) struct Cron {
    stop: Arc<AtomicBool>,
    runs: Arc<Mutex<Vec<GuardRun>>>,
    thread: JoinHandle<()>,
}

impl Cron {
    pub(super) fn start(
        every: Duration,
        job: impl Fn() -> (Option<i32>, String) + Send + 'static,
    ) -> Cron {
        let stop = Arc::new(AtomicBool::new(false));
        let runs: Arc<Mutex<Vec<GuardRun>>> = Arc::default();
        let (flag, kept) = (Arc::clone(&stop), Arc::clone(&runs));
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            while !flag.load(Ordering::SeqCst) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let began = Instant::now();
                let (code, line) = job();
                kept.lock().unwrap().push(GuardRun {
                    ended: Instant::now(),
                    code,
                    line,
                });
                next = began + every;
            }
        });
        Cron { stop, runs, thread }
    }

    pub(super) fn stop(self) -> Vec<GuardRun> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
        let runs = self.runs.lock().unwrap().clone();
        runs
    }
}
