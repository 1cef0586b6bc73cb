//! What `/proc` says of a process a bench started: its resident memory and its open
//! descriptors, the costs of hosting partitions that the density and controller benches
//! report beside their times.

use anyhow::{Context, Result};

/// The resident set size of process `pid`, in MiB (`VmRSS`).
pub fn resident_mb(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")?;
    Ok(kb / 1024.0)
}

/// How many descriptors process `pid` has open.
pub fn descriptor_count(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}
