//! `--json FILE`: the report as pretty-printed JSON, for scripts and dashboards.

use anyhow::{Context, Result};

use crate::report::Report;

pub fn write(report: &Report, path: &str) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {path}"))
}
