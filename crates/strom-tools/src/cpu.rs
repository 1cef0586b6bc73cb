//! CPU seconds a run cost the load generator and the broker.
//!
//! Throughput alone hides what it costs: a broker that reaches the same records/s on half
//! the CPU is the better broker, and a load generator that saturates its own cores measures
//! itself rather than the broker. So each run reports the user+system CPU time of this
//! process (the client) and, when the brokers are processes this tool started, of those.
//! The kernel counts it per process; reading it before and after a run costs nothing the
//! run would notice.

use std::fmt;

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// CPU seconds (user + system) a run used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuUse {
    /// This process: the load generator, with every thread of it.
    pub client_s: f64,
    /// The broker processes, summed; `None` when they are not this tool's to read (an
    /// external cluster), or one of them exited during the run.
    pub broker_s: Option<f64>,
}

impl fmt::Display for CpuUse {
    /// `client 1.23 s, broker 0.45 s`, the figures stderr and the reports show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {:.2} s, broker ", self.client_s)?;
        match self.broker_s {
            Some(s) => write!(f, "{s:.2} s"),
            None => f.write_str("unknown (external cluster)"),
        }
    }
}

/// Snapshots of client and broker CPU time at the start of a run; [`CpuMeter::finish`]
/// gives what the run used since.
#[derive(Debug)]
pub struct CpuMeter {
    client_start: f64,
    /// The broker processes and their CPU seconds at the start, when readable.
    broker: Option<(Vec<u32>, f64)>,
}

impl CpuMeter {
    /// Starts measuring; `broker_pids` are the broker processes (`None` for a cluster
    /// this tool did not start).
    pub fn start(broker_pids: Option<Vec<u32>>) -> Self {
        let broker = broker_pids.and_then(|pids| {
            let start = processes_cpu_seconds(&pids).ok()?;
            Some((pids, start))
        });
        Self {
            client_start: self_cpu_seconds(),
            broker,
        }
    }

    /// The CPU seconds used since [`CpuMeter::start`].
    pub fn finish(&self) -> CpuUse {
        CpuUse {
            client_s: self_cpu_seconds() - self.client_start,
            broker_s: self
                .broker
                .as_ref()
                .and_then(|(pids, start)| processes_cpu_seconds(pids).ok().map(|end| end - start)),
        }
    }
}

/// User + system CPU seconds of this process, all threads (children excluded: the
/// embedded broker is one).
pub fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// User + system CPU seconds of process `pid`, from `/proc/<pid>/stat`.
pub fn process_cpu_seconds(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let ticks = stat_cpu_ticks(&stat).with_context(|| format!("unexpected contents of {path}"))?;
    Ok(ticks as f64 / clock_ticks_per_second())
}

/// The sum over `pids` of [`process_cpu_seconds`].
fn processes_cpu_seconds(pids: &[u32]) -> Result<f64> {
    pids.iter().map(|&pid| process_cpu_seconds(pid)).sum()
}

/// utime + stime, in clock ticks, of a `/proc/<pid>/stat` line.
fn stat_cpu_ticks(stat: &str) -> Result<u64> {
    // The command name (field 2) is in parentheses and may itself hold spaces and ')', so
    // the numbered fields are counted from after its last ')': field 3 (state) comes
    // first, utime and stime are fields 14 and 15.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        bail!("no command name");
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        let text = fields.get(n - 3).with_context(|| format!("no field {n}"))?;
        text.parse()
            .with_context(|| format!("field {n} is no number: {text}"))
    };
    Ok(field(14)? + field(15)?)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // Linux has used 100 for decades; a failed call would otherwise divide by -1.
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_after_an_awkward_command_name() {
        let stat =
            "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(stat_cpu_ticks(stat).unwrap(), 325);
        assert!(stat_cpu_ticks("4242 (short) S 1").is_err());
        assert!(stat_cpu_ticks("garbage").is_err());
    }

    #[test]
    fn this_process_is_readable_both_ways() {
        let busy = std::time::Instant::now();
        let mut x = 0u64;
        while busy.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(self_cpu_seconds() > 0.0);
        assert!(process_cpu_seconds(std::process::id()).unwrap() > 0.0);
    }

    #[test]
    fn meter_gives_deltas_and_no_broker_figure_without_pids() {
        let meter = CpuMeter::start(None);
        let cpu = meter.finish();
        assert!(cpu.client_s >= 0.0);
        assert_eq!(cpu.broker_s, None);
        assert!(cpu
            .to_string()
            .ends_with("broker unknown (external cluster)"));

        let own = CpuMeter::start(Some(vec![std::process::id()]));
        let cpu = own.finish();
        assert!(cpu.broker_s.unwrap() >= 0.0);
    }

    #[test]
    fn prints_two_decimals() {
        let cpu = CpuUse {
            client_s: 1.234,
            broker_s: Some(0.449),
        };
        assert_eq!(cpu.to_string(), "client 1.23 s, broker 0.45 s");
    }
}
