//! `strom bench` arguments.

use crate::cli::{self, CliError, OptionSpec};

/// Records per unthrottled run by default: keeps the whole bench under a minute on a
/// 2-core machine with an embedded broker.
pub const DEFAULT_RECORDS: u64 = 2_000_000;

const SPECS: &[OptionSpec] = &[
    OptionSpec::flag("help"),
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("records"),
    OptionSpec::one("json"),
    OptionSpec::one("html"),
];

#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    pub bootstrap_server: Option<String>,
    /// Records of each unthrottled producer run and each consumer run; the throttled run
    /// sends half as many (five seconds at 100k records/s by default).
    pub records: u64,
    pub json: String,
    pub html: String,
}

pub const HELP: &str =
    "usage: strom bench [--bootstrap-server HOST:PORT] [--records N] [--json FILE] [--html FILE]

Reproduces the seed experiments (reports 000 and 002) and prints strom's figures beside the
published ones:
  - producer, 100-byte records, 6 partitions, seed 002's default settings
  - producer, 100-byte records, 6 partitions, seed 002's tuned settings
    (compression.type=lz4 linger.ms=5 batch.size=100000 acks=all
     max.in.flight.requests.per.connection=1 retries=5 buffer.memory=67108864)
  - producer throttled at 100000 records/s, 10-byte records, 2 partitions (seed 000)
  - consumer with fetch sizes 10000, 100000 and 1000000 (seed 000)

  --bootstrap-server  run against this cluster (default: an embedded strom broker)
  --records N         records per run (default: 2000000; the throttled run sends N/2)
  --json FILE         JSON report (default: strom-bench.json)
  --html FILE         HTML report (default: strom-bench.html)
";

pub enum Outcome {
    Help,
    Error(String),
}

pub fn parse(args: &[String]) -> Result<BenchArgs, Outcome> {
    let p = cli::parse(args, SPECS, false).map_err(|e| {
        Outcome::Error(match e {
            CliError::Unrecognized(t) => format!("unrecognized argument: {t}"),
            CliError::MissingValue(n) => format!("--{n} needs a value"),
            other => format!("{other:?}"),
        })
    })?;
    if p.has("help") {
        return Err(Outcome::Help);
    }
    let records = match p.value("records") {
        None => DEFAULT_RECORDS,
        Some(raw) => match raw.parse::<u64>() {
            Ok(n) if n >= 2 => n,
            _ => {
                return Err(Outcome::Error(format!(
                    "--records must be an integer of at least 2, not {raw}"
                )))
            }
        },
    };
    Ok(BenchArgs {
        bootstrap_server: p.value("bootstrap-server").map(String::from),
        records,
        json: p.value("json").unwrap_or("strom-bench.json").to_string(),
        html: p.value("html").unwrap_or("strom-bench.html").to_string(),
    })
}
