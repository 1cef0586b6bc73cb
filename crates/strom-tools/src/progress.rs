//! A progress bar on stderr, drawn only when stderr is a terminal, so piped or redirected
//! output stays exactly Kafka's.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(200);
const WIDTH: usize = 30;

/// Counts completed units; a drawing thread renders them until `finish` or drop.
pub struct Progress {
    done: Arc<AtomicU64>,
    stop: Option<mpsc::Sender<()>>,
    drawer: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `label` towards `total` units, if stderr is a terminal.
    pub fn start(label: &str, total: u64) -> Self {
        let done = Arc::new(AtomicU64::new(0));
        if !std::io::stderr().is_terminal() {
            return Self {
                done,
                stop: None,
                drawer: None,
            };
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let counter = Arc::clone(&done);
        let label = label.to_string();
        let drawer = std::thread::Builder::new()
            .name("progress".to_string())
            .spawn(move || {
                let started = Instant::now();
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(REDRAW) {
                    let line = render(
                        &label,
                        counter.load(Ordering::Relaxed),
                        total,
                        started.elapsed(),
                    );
                    eprint!("\r{line}");
                    let _ = std::io::stderr().flush();
                }
                eprint!("\r{}\r", " ".repeat(WIDTH + 60));
            })
            .ok();
        Self {
            done,
            stop: Some(stop),
            drawer,
        }
    }

    /// The shared counter the measured loop increments.
    pub fn counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.done)
    }

    pub fn finish(mut self) {
        self.stop_drawing();
    }

    fn stop_drawing(&mut self) {
        self.stop.take();
        if let Some(drawer) = self.drawer.take() {
            let _ = drawer.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_drawing();
    }
}

/// One frame: `label [#####     ]  45% 450000/1000000  212345 rec/s`.
fn render(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let fraction = if total == 0 {
        1.0
    } else {
        (done as f64 / total as f64).min(1.0)
    };
    let filled = (fraction * WIDTH as f64) as usize;
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    format!(
        "{label} [{}{}] {:3.0}% {done}/{total} {rate:.0} rec/s",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        fraction * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_half_full_bar() {
        let line = render("produce", 50, 100, Duration::from_secs(1));
        assert!(line.starts_with("produce [###############               ]  50% 50/100 50 rec/s"));
    }
}
