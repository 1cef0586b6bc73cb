//! The start-up check of `RLIMIT_NOFILE` against what the broker will hold open.
//!
//! Segment files are opened through one bounded cache (`log.open.files.max`), so what the
//! logs need does not grow with the number of partitions. Start-up raises the soft limit
//! to the hard one when the soft one is too low (as a service manager would), and refuses
//! to start, saying in one line how many descriptors it needs and how to get them, when
//! even the hard limit is too low, instead of failing later with "Too many open files".

use crate::BrokerError;

/// Descriptors kept for everything but cached segment files: client connections, the
/// listener, metadata and offset stores, files opened for a moment (indexes, checkpoints,
/// snapshots), tokio's own.
pub const RESERVED_FOR_CONNECTIONS_AND_METADATA: u64 = 1024;

/// Descriptors a broker with these settings needs.
pub fn needed(log_open_files_max: usize, recovery_threads: usize) -> u64 {
    log_open_files_max as u64 + RESERVED_FOR_CONNECTIONS_AND_METADATA + 4 * recovery_threads as u64
}

/// Makes sure the process may open `needed` descriptors, raising the soft limit if the
/// hard one allows. Returns the soft limit in force.
pub fn ensure(needed: u64) -> Result<u64, BrokerError> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    if limit.rlim_cur >= needed {
        return Ok(limit.rlim_cur);
    }
    if limit.rlim_max < needed {
        return Err(BrokerError::Config(crate::config::ConfigError::invalid(
            "log.open.files.max",
            &(needed - RESERVED_FOR_CONNECTIONS_AND_METADATA).to_string(),
            format!(
                "the broker needs {needed} open files (log.open.files.max plus \
                 {RESERVED_FOR_CONNECTIONS_AND_METADATA} for connections and metadata) but \
                 RLIMIT_NOFILE allows {} (hard limit {}): raise it (`ulimit -n {needed}`, \
                 LimitNOFILE={needed} for systemd) or lower log.open.files.max",
                limit.rlim_cur, limit.rlim_max
            ),
        )));
    }
    let raised = libc::rlimit {
        rlim_cur: limit.rlim_max,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    tracing::info!(
        from = limit.rlim_cur,
        to = limit.rlim_max,
        needed,
        "raised the open-files soft limit"
    );
    Ok(limit.rlim_max)
}
