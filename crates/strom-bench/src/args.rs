//! `strom bench` arguments, shared by its experiments (`strom bench` itself and
//! `strom bench consumer-scaling`), which differ only in their defaults; and the report
//! flags of the cluster benches, whose other flags clap defines.

use strom_tools::cli::{self, CliError, OptionSpec};
use strom_tools::load_client::LoadClient;
use strom_tools::report::Report;

/// What a bench command uses for the flags the user leaves out.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    pub records: u64,
    pub json: &'static str,
    pub html: &'static str,
}

/// `strom bench`: 2M records per unthrottled run keeps the whole bench under a minute on
/// a 2-core machine with an embedded broker.
pub const BENCH: Defaults = Defaults {
    records: 2_000_000,
    json: "strom-bench.json",
    html: "strom-bench.html",
};

const SPECS: &[OptionSpec] = &[
    OptionSpec::flag("help"),
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("records"),
    OptionSpec::one("json"),
    OptionSpec::one("html"),
    OptionSpec::flag("replicated"),
    OptionSpec::one("client"),
];

#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    pub bootstrap_server: Option<String>,
    /// Records of each run: for `strom bench`, each unthrottled producer run and each
    /// consumer run (the throttled run sends half as many: five seconds at 100k
    /// records/s by default); for consumer-scaling, each topic.
    pub records: u64,
    pub json: String,
    pub html: String,
    /// Seed 002's replicated case too: the producer runs on a 6-partition topic of
    /// replication factor 3 of a 3-broker cluster.
    pub replicated: bool,
    /// The load generators, each running every experiment (`--client both`: librdkafka,
    /// then native).
    pub clients: Vec<LoadClient>,
}

pub const HELP: &str =
    "usage: strom bench [--bootstrap-server HOST:PORT] [--records N] [--client C] [--replicated]
                   [--json FILE] [--html FILE]

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
  --replicated        also seed 002's replicated case: both producer runs on a
                      6-partition topic of replication factor 3 (acks=all), and the
                      default settings with acks=1, on a local 3-broker cluster (or the
                      --bootstrap-server cluster), beside LinkedIn's 2014 figures for 3x
                      synchronous and asynchronous replication
  --client C          the load generator: librdkafka (what applications use), native
                      (strom's own client, a fraction of librdkafka's cost per record, so
                      the broker limits the figures) or both, side by side
                      (default: librdkafka)
  --json FILE         JSON report (default: strom-bench.json)
  --html FILE         HTML report (default: strom-bench.html)

Seed 004's consumer-scaling experiment: strom bench consumer-scaling --help
";

/// `--json` and `--html` of the cluster benches (`strom bench controller`, `network`,
/// `quorum` and `faults`): each is written, by default to a file named after the
/// command, as `strom bench` writes `strom-bench.json`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ReportFiles {
    /// JSON report [default: strom-bench-COMMAND.json, e.g. strom-bench-controller.json]
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// HTML report [default: strom-bench-COMMAND.html, e.g. strom-bench-controller.html]
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
}

impl ReportFiles {
    /// The JSON and HTML paths of `strom bench COMMAND`.
    pub fn paths(&self, command: &str) -> (String, String) {
        let default = |extension: &str| format!("strom-bench-{command}.{extension}");
        (
            self.json.clone().unwrap_or_else(|| default("json")),
            self.html.clone().unwrap_or_else(|| default("html")),
        )
    }

    /// Writes both reports of `strom bench COMMAND` and says where they are.
    pub fn write(&self, command: &str, report: &Report) -> anyhow::Result<()> {
        let (json, html) = self.paths(command);
        crate::write_reports(report, &json, &html)
    }
}

pub enum Outcome {
    Help,
    Error(String),
}

pub fn parse(args: &[String], defaults: &Defaults) -> Result<BenchArgs, Outcome> {
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
        None => defaults.records,
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
        json: p.value("json").unwrap_or(defaults.json).to_string(),
        html: p.value("html").unwrap_or(defaults.html).to_string(),
        replicated: p.has("replicated"),
        clients: match p.value("client") {
            None => vec![LoadClient::default()],
            Some("both") => vec![LoadClient::Librdkafka, LoadClient::Native],
            Some(value) => vec![LoadClient::parse(value).map_err(|_| {
                Outcome::Error(format!(
                    "--client must be librdkafka, native or both, not {value}"
                ))
            })?],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn leaves_out_flags_to_the_commands_defaults() {
        let parsed = parse(&[], &BENCH).unwrap_or_else(|_| panic!("no flags are valid"));
        assert_eq!(
            parsed,
            BenchArgs {
                bootstrap_server: None,
                records: 2_000_000,
                json: "strom-bench.json".into(),
                html: "strom-bench.html".into(),
                replicated: false,
                clients: vec![LoadClient::Librdkafka],
            }
        );
    }

    #[test]
    fn reads_every_flag() {
        let parsed = parse(
            &args(
                "--bootstrap-server h:9092 --records 3000 --json a.json --html a.html --replicated --client both",
            ),
            &BENCH,
        )
        .unwrap_or_else(|_| panic!("valid flags"));
        assert_eq!(parsed.bootstrap_server.as_deref(), Some("h:9092"));
        assert_eq!(parsed.records, 3000);
        assert!(parsed.replicated);
        assert_eq!(parsed.clients, [LoadClient::Librdkafka, LoadClient::Native]);
        assert_eq!(
            (parsed.json.as_str(), parsed.html.as_str()),
            ("a.json", "a.html")
        );
    }

    #[test]
    fn cluster_benches_name_their_reports_after_themselves() {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            reports: ReportFiles,
        }
        let paths = |s: &str| {
            <Flags as clap::Parser>::try_parse_from(args(&format!("strom {s}")))
                .unwrap_or_else(|e| panic!("{e}"))
                .reports
                .paths("controller")
        };
        assert_eq!(
            paths(""),
            (
                "strom-bench-controller.json".into(),
                "strom-bench-controller.html".into()
            )
        );
        assert_eq!(
            paths("--json /tmp/c.json"),
            ("/tmp/c.json".into(), "strom-bench-controller.html".into())
        );
        assert_eq!(paths("--html c.html").1, "c.html");
    }

    #[test]
    fn rejects_bad_input() {
        let error = |s: &str| match parse(&args(s), &BENCH) {
            Err(Outcome::Error(message)) => message,
            _ => panic!("{s} must be rejected"),
        };
        assert_eq!(
            error("--records 1"),
            "--records must be an integer of at least 2, not 1"
        );
        assert!(error("--records x").contains("not x"));
        assert!(error("--client java").contains("librdkafka, native or both"));
        assert_eq!(error("--records"), "--records needs a value");
        assert_eq!(error("--threads 3"), "unrecognized argument: --threads");
        assert!(matches!(parse(&args("--help"), &BENCH), Err(Outcome::Help)));
    }
}
