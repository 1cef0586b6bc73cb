//! `strom producer-perf-test` arguments: Kafka's flags (argparse4j conventions and messages)
//! plus strom's `--json` and `--html`.

use crate::cli::{self, CliError, OptionSpec};
use crate::load_client::LoadClient;
use strom_client::properties::{self, Properties};

/// argparse4j's program name in Kafka 3.x, used in usage and error lines.
pub const PROG: &str = "producer-performance";

const SPECS: &[OptionSpec] = &[
    OptionSpec::flag("help"),
    OptionSpec::one("topic"),
    OptionSpec::one("num-records"),
    OptionSpec::one("payload-delimiter"),
    OptionSpec::one("throughput"),
    OptionSpec::many("producer-props"),
    OptionSpec::one("producer.config"),
    OptionSpec::flag("print-metrics"),
    OptionSpec::one("transactional-id"),
    OptionSpec::one("transaction-duration-ms"),
    OptionSpec::one("warmup-records"),
    OptionSpec::one("record-size"),
    OptionSpec::one("payload-file"),
    OptionSpec::flag("payload-monotonic"),
    OptionSpec::one("bootstrap-server"),
    OptionSpec::many("command-property"),
    OptionSpec::one("command-config"),
    OptionSpec::one("reporting-interval"),
    OptionSpec::one("record-key-range"),
    OptionSpec::one("key-distribution"),
    OptionSpec::one("json"),
    OptionSpec::one("html"),
    OptionSpec::one("client"),
];

/// Where payloads come from: the required one-of group of Kafka's parser.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadSource {
    RecordSize(usize),
    File { path: String, delimiter: String },
    Monotonic,
}

/// KIP-1299 key choice when `--record-key-range` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDistribution {
    Range,
    Random,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProducerArgs {
    pub topic: String,
    pub num_records: u64,
    pub payload: PayloadSource,
    /// Records per second; negative disables throttling, as in Kafka.
    pub throughput: f64,
    /// Every property from files and flags, lowest precedence first.
    pub properties: Properties,
    pub bootstrap_server: Option<String>,
    pub print_metrics: bool,
    pub transactional_id: Option<String>,
    pub transaction_duration_ms: Option<u64>,
    pub warmup_records: u64,
    pub reporting_interval_ms: u64,
    pub key_range: Option<(u64, KeyDistribution)>,
    pub json: Option<String>,
    pub html: Option<String>,
    /// strom: the Kafka client that generates the load.
    pub client: LoadClient,
}

/// Why parsing stopped: help requested, or an error worded as Kafka's parser words it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Help,
    Error(String),
}

impl ProducerArgs {
    /// The bootstrap servers the user gave in any of Kafka's ways, by Kafka's precedence.
    pub fn bootstrap(&self) -> Option<String> {
        self.bootstrap_server.clone().or_else(|| {
            self.properties
                .iter()
                .rev()
                .find(|(k, _)| k == "bootstrap.servers")
                .map(|(_, v)| v.clone())
        })
    }

    /// Whether transactions are on: a transactional id from the flag or a property.
    pub fn transactions_enabled(&self) -> bool {
        self.transactional_id.is_some()
            || self.properties.iter().any(|(k, _)| k == "transactional.id")
            || self.transaction_duration_ms.is_some()
    }
}

pub fn parse(args: &[String]) -> Result<ProducerArgs, Outcome> {
    if args.is_empty() {
        return Err(Outcome::Help);
    }
    let p = cli::parse(args, SPECS, false).map_err(|e| Outcome::Error(cli_message(&e)))?;
    if p.has("help") {
        return Err(Outcome::Help);
    }
    let err = |m: &str| Outcome::Error(m.to_string());
    let topic = required(&p, "topic")?.to_string();
    let num_records: i64 =
        convert(&p, "num-records", "Long")?.ok_or_else(|| required_err("num-records"))?;
    let throughput: f64 =
        convert(&p, "throughput", "Double")?.ok_or_else(|| required_err("throughput"))?;
    let payload = payload_source(&p)?;
    let transaction_duration_ms: Option<i64> = convert(&p, "transaction-duration-ms", "Long")?;
    let warmup_records: i64 = convert(&p, "warmup-records", "Long")?.unwrap_or(0);
    let reporting_interval_ms: i64 = convert(&p, "reporting-interval", "Long")?.unwrap_or(5000);
    let key_range: Option<i64> = convert(&p, "record-key-range", "Long")?;

    if num_records <= 0 {
        return Err(err("--num-records should be greater than zero"));
    }
    if let PayloadSource::RecordSize(0) = payload {
        return Err(err("--record-size should be greater than zero"));
    }
    if transaction_duration_ms.is_some_and(|d| d <= 0) {
        return Err(err("--transaction-duration-ms should be greater than zero"));
    }
    if warmup_records < 0 {
        return Err(err(
            "--warmup-records should be greater than or equal to zero",
        ));
    }
    if warmup_records >= num_records {
        return Err(err(
            "The value for --warmup-records must be strictly fewer than the number of records in the test, --num-records.",
        ));
    }
    if reporting_interval_ms <= 0 {
        return Err(err("--reporting-interval should be greater than zero."));
    }
    if key_range.is_some_and(|r| r <= 0) {
        return Err(err("--record-key-range should be greater than zero."));
    }
    let distribution = match p.value("key-distribution").map(str::to_ascii_uppercase).as_deref() {
        None | Some("RANGE") => KeyDistribution::Range,
        Some("RANDOM") => KeyDistribution::Random,
        Some(other) => {
            return Err(Outcome::Error(format!(
                "argument --key-distribution: invalid choice: '{other}' (choose from 'RANGE', 'RANDOM')"
            )))
        }
    };

    Ok(ProducerArgs {
        topic,
        num_records: num_records as u64,
        payload,
        throughput,
        properties: collect_properties(&p)?,
        bootstrap_server: p.value("bootstrap-server").map(String::from),
        print_metrics: p.has("print-metrics"),
        transactional_id: p.value("transactional-id").map(String::from),
        transaction_duration_ms: transaction_duration_ms.map(|d| d as u64),
        warmup_records: warmup_records as u64,
        reporting_interval_ms: reporting_interval_ms as u64,
        key_range: key_range.map(|r| (r as u64, distribution)),
        json: p.value("json").map(String::from),
        html: p.value("html").map(String::from),
        client: match p.value("client") {
            None => LoadClient::default(),
            Some(value) => LoadClient::parse(value).map_err(Outcome::Error)?,
        },
    })
}

/// Files first, then flags, so flags win; `--command-*` (4.2) beat the older flags.
fn collect_properties(p: &cli::Parsed) -> Result<Properties, Outcome> {
    let mut props = Properties::new();
    for file_flag in ["producer.config", "command-config"] {
        if let Some(path) = p.value(file_flag) {
            let loaded = properties::load(path).map_err(|e| Outcome::Error(format!("{e:#}")))?;
            props.extend(loaded);
        }
    }
    for list_flag in ["producer-props", "command-property"] {
        for pair in p.values(list_flag) {
            let pieces: Vec<&str> = pair.split('=').collect();
            match pieces.as_slice() {
                [key, value] => props.push((key.to_string(), value.to_string())),
                _ => return Err(Outcome::Error(format!("Invalid property: {pair}"))),
            }
        }
    }
    Ok(props)
}

fn payload_source(p: &cli::Parsed) -> Result<PayloadSource, Outcome> {
    let given: Vec<&str> = ["record-size", "payload-file", "payload-monotonic"]
        .into_iter()
        .filter(|name| p.has(name))
        .collect();
    match given.as_slice() {
        [] => Err(Outcome::Error(
            "one of the arguments --record-size --payload-file --payload-monotonic is required"
                .to_string(),
        )),
        [_first, second, ..] => Err(Outcome::Error(format!(
            "argument --{second}: not allowed with argument --{}",
            given[0]
        ))),
        ["record-size"] => {
            let size: i32 = convert(p, "record-size", "Integer")?.expect("present");
            Ok(PayloadSource::RecordSize(size.max(0) as usize))
        }
        ["payload-file"] => Ok(PayloadSource::File {
            path: p.value("payload-file").expect("present").to_string(),
            // argparse4j's default is the two characters `\n`, which Kafka maps to a newline.
            delimiter: match p.value("payload-delimiter") {
                None | Some("\\n") => "\n".to_string(),
                Some(d) => d.to_string(),
            },
        }),
        _ => Ok(PayloadSource::Monotonic),
    }
}

fn required<'a>(p: &'a cli::Parsed, name: &str) -> Result<&'a str, Outcome> {
    p.value(name).ok_or_else(|| required_err(name))
}

fn required_err(name: &str) -> Outcome {
    Outcome::Error(format!("argument --{name} is required"))
}

/// Converts an option value as argparse4j's typed arguments do, with its message.
fn convert<T: std::str::FromStr>(
    p: &cli::Parsed,
    name: &str,
    java_type: &str,
) -> Result<Option<T>, Outcome> {
    let Some(raw) = p.value(name) else {
        return Ok(None);
    };
    let parsed = match java_type {
        // Java's Double.valueOf accepts a trailing d/f type suffix and surrounding spaces.
        "Double" => raw
            .trim()
            .trim_end_matches(['d', 'D', 'f', 'F'])
            .parse::<T>()
            .ok(),
        _ => raw.parse::<T>().ok(),
    };
    parsed.map(Some).ok_or_else(|| {
        Outcome::Error(format!(
            "argument --{name}: could not convert '{raw}' to {java_type} (For input string: \"{raw}\")"
        ))
    })
}

fn cli_message(e: &CliError) -> String {
    match e {
        CliError::Unrecognized(token) => format!("unrecognized arguments: '{token}'"),
        CliError::Ambiguous(token, names) => {
            let list: Vec<String> = names.iter().map(|n| format!("--{n}")).collect();
            format!("ambiguous option: {token} could match {}", list.join(", "))
        }
        CliError::MissingValue(name)
            if *name == "producer-props" || *name == "command-property" =>
        {
            format!("argument --{name}: expected at least one argument")
        }
        CliError::MissingValue(name) => format!("argument --{name}: expected one argument"),
        CliError::UnexpectedValue(name) => format!("argument --{name}: ignored explicit argument"),
    }
}

/// argparse4j's usage block, as printed before an error.
pub fn usage() -> String {
    let indent = " ".repeat("usage: ".len() + PROG.len() + 1);
    let lines = [
        "[-h] --topic TOPIC --num-records NUM-RECORDS",
        "[--payload-delimiter PAYLOAD-DELIMITER]",
        "--throughput THROUGHPUT",
        "[--producer-props PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]]",
        "[--producer.config CONFIG-FILE] [--print-metrics]",
        "[--transactional-id TRANSACTIONAL-ID]",
        "[--transaction-duration-ms TRANSACTION-DURATION]",
        "[--warmup-records WARMUP-RECORDS]",
        "[--bootstrap-server BOOTSTRAP-SERVER]",
        "[--command-property PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]]",
        "[--command-config CONFIG-FILE]",
        "[--reporting-interval REPORTING-INTERVAL]",
        "[--record-key-range RECORD-KEY-RANGE]",
        "[--key-distribution {RANGE,RANDOM}]",
        "[--json FILE] [--html FILE] [--client {librdkafka,native}]",
        "(--record-size RECORD-SIZE | --payload-file PAYLOAD-FILE | --payload-monotonic)",
    ];
    let mut out = format!("usage: {PROG} {}\n", lines[0]);
    lines[1..]
        .iter()
        .for_each(|l| out.push_str(&format!("{indent}{l}\n")));
    out
}

/// The full help, printed for `--help` or no arguments.
pub fn help() -> String {
    let options: &[(&str, &str)] = &[
        ("-h, --help", "show this help message and exit"),
        ("--topic TOPIC", "produce messages to this topic"),
        ("--num-records NUM-RECORDS", "number of messages to produce"),
        ("--payload-delimiter PAYLOAD-DELIMITER", "provides delimiter to be used when --payload-file is provided. Defaults to new line. Note that this parameter will be ignored if --payload-file is not provided. (default: \\n)"),
        ("--throughput THROUGHPUT", "throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set this to -1 to disable throttling."),
        ("--producer-props PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]", "kafka producer related configuration properties like bootstrap.servers,client.id etc. These configs take precedence over those passed via --producer.config."),
        ("--producer.config CONFIG-FILE", "producer config properties file."),
        ("--print-metrics", "print out metrics at the end of the test. (default: false)"),
        ("--transactional-id TRANSACTIONAL-ID", "The transactional id to use. This config takes precedence over the transactional.id specified via --producer.config or --producer-props. Note that if the transactional id is not specified while --transaction-duration-ms is provided, the default value for the transactional id will be performance-producer- followed by a random uuid."),
        ("--transaction-duration-ms TRANSACTION-DURATION", "The max age of each transaction. The commitTransaction will be called after this time has elapsed. The value should be greater than 0. If the transactional id is specified via --producer-props, --producer.config, or --transactional-id but --transaction-duration-ms is not specified, the default value will be 3000."),
        ("--warmup-records WARMUP-RECORDS", "The number of records to treat as warmup; these initial records will not be included in steady-state statistics. An additional summary line will be printed describing the steady-state statistics. (default: 0)"),
        ("--bootstrap-server BOOTSTRAP-SERVER", "The server(s) to connect to. Without it (and without bootstrap.servers), strom starts an embedded broker."),
        ("--command-property PROP-NAME=PROP-VALUE [PROP-NAME=PROP-VALUE ...]", "Kafka producer related configuration properties. These take precedence over --command-config."),
        ("--command-config CONFIG-FILE", "Producer config properties file."),
        ("--reporting-interval REPORTING-INTERVAL", "Interval in milliseconds at which to print progress info. (default: 5000)"),
        ("--record-key-range RECORD-KEY-RANGE", "Give records keys in [0, RECORD-KEY-RANGE). Without it records have no key."),
        ("--key-distribution {RANGE,RANDOM}", "How keys are chosen in the key range: i % range, or uniformly at random. (default: RANGE)"),
        ("--json FILE", "strom: write every figure, the settings, the environment and the time series as JSON."),
        ("--html FILE", "strom: write a self-contained HTML page with throughput and latency plots."),
        ("--client {librdkafka,native}", "strom: the Kafka client that generates the load: librdkafka, what applications use, or strom's native client, whose cost per record is a fraction of librdkafka's so that the broker limits the run. (default: librdkafka)"),
        ("--record-size RECORD-SIZE", "message size in bytes. Note that you must provide exactly one of --record-size or --payload-file or --payload-monotonic."),
        ("--payload-file PAYLOAD-FILE", "file to read the message payloads from. This works only for UTF-8 encoded text files. Payloads will be read from this file and a payload will be randomly selected when sending messages. Note that you must provide exactly one of --record-size or --payload-file or --payload-monotonic."),
        ("--payload-monotonic", "payload is monotonically increasing integer. Note that you must provide exactly one of --record-size or --payload-file or --payload-monotonic. (default: false)"),
    ];
    let mut out = usage();
    out.push_str("\nThis tool is used to verify the producer performance. To enable transactions, you can specify a transaction id or set a transaction duration using --transaction-duration-ms. There are three ways to specify the transaction id: set transaction.id=<id> via --producer-props, set transaction.id=<id> in the config file via --producer.config, or use --transaction-id <id>.\n\noptional arguments:\n");
    for (flag, text) in options {
        out.push_str(&format!("  {flag}\n{}\n", wrap(text, 24, 79)));
    }
    out
}

fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent + line.len() + 1 + word.len() > width {
            lines.push(format!("{}{line}", " ".repeat(indent)));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(format!("{}{line}", " ".repeat(indent)));
    }
    lines.join("\n")
}
