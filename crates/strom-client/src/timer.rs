//! The producer's wake-up at a deadline to the nanosecond. tokio's timers tick in whole
//! milliseconds and round a deadline up to the next tick, so a batch whose linger ends,
//! or a throttled record that falls due, would wait up to a millisecond longer than it
//! should: as much as the latencies a throttled run measures at low rates. A `timerfd`
//! wakes the runtime's epoll within the kernel's timer slack (50 µs) instead, as
//! librdkafka's microsecond timers do.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use crate::clock;

pub struct DeadlineTimer {
    fd: AsyncFd<OwnedFd>,
    /// The deadline the timer is armed with and has not yet been read as expired: a
    /// wait for the same deadline (the send loop waits again after each answer) needs
    /// no system call to arm it.
    armed_ns: Cell<Option<u64>>,
}

impl DeadlineTimer {
    /// A timer registered with the current tokio runtime.
    pub fn new() -> io::Result<Self> {
        // SAFETY: a plain system call; the descriptor it returns is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the `OwnedFd` keeps the descriptor open, and the same one, for as long
        // as the `AsyncFd` owns it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? };
        Ok(Self {
            fd,
            armed_ns: Cell::new(None),
        })
    }

    /// Waits until [`clock::now_ns`] reads `until_ns` (at once if it has). Arming the timer
    /// replaces any earlier deadline and its expiry, so a wait that was cancelled leaves
    /// nothing behind for the next.
    pub async fn sleep_until(&self, until_ns: u64) -> io::Result<()> {
        if self.armed_ns.get() != Some(until_ns) {
            self.arm(until_ns)?;
        }
        loop {
            let mut ready = self.fd.readable().await?;
            // Readiness may be left over from an expiry the re-arming discarded: the read
            // then finds nothing and the wait goes on.
            match ready.try_io(|fd| {
                let mut expirations = [0u8; 8];
                // SAFETY: reads 8 bytes into an 8-byte buffer.
                let n = unsafe {
                    libc::read(
                        fd.as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            }) {
                Ok(result) => {
                    // The expiry is consumed; nothing is readable until the timer is
                    // armed again, so the next wait need not read to find that out.
                    ready.clear_ready();
                    self.armed_ns.set(None);
                    return result;
                }
                Err(_would_block) => continue,
            }
        }
    }

    /// Arms the timer for `until_ns`, replacing any earlier deadline and its expiry.
    fn arm(&self, until_ns: u64) -> io::Result<()> {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let spec = libc::itimerspec {
            it_interval: zero,
            it_value: clock::monotonic_timespec(until_ns),
        };
        // SAFETY: `spec` is a valid itimerspec and the descriptor is a timerfd.
        let armed = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if armed < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_ns.set(Some(until_ns));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_at_its_deadline_and_a_rearmed_timer_forgets_the_old_one() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let timer = DeadlineTimer::new().unwrap();
            let deadline = clock::now_ns() + 3_000_000;
            timer.sleep_until(deadline).await.unwrap();
            assert!(clock::now_ns() >= deadline);
            // A deadline that passes while nobody waits any more...
            let passed = clock::now_ns();
            tokio::select! {
                biased;
                _ = timer.sleep_until(passed) => {}
                () = std::future::ready(()) => {}
            }
            // ...is over when waited for again, without arming the timer again,
            timer.sleep_until(passed).await.unwrap();
            // and its expiry, read or not, does not cut a later wait short.
            tokio::select! {
                biased;
                _ = timer.sleep_until(clock::now_ns()) => {}
                () = std::future::ready(()) => {}
            }
            let later = clock::now_ns() + 2_000_000;
            timer.sleep_until(later).await.unwrap();
            assert!(
                clock::now_ns() >= later,
                "woke for an expiry it had replaced"
            );
        });
    }
}
