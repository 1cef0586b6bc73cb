//! `strom consumer-perf-test` arguments: Kafka's flags (jopt-simple conventions and
//! messages), both the 3.x names the seeds use and the 4.2 ones, plus `--json`/`--html`.

use crate::cli::{self, CliError, OptionSpec};
use crate::date_format::DateFormat;
use crate::load_client::LoadClient;
use strom_client::properties::{self, Properties};

const SPECS: &[OptionSpec] = &[
    OptionSpec::flag("help"),
    OptionSpec::flag("version"),
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("broker-list"),
    OptionSpec::one("topic"),
    OptionSpec::one("messages"),
    OptionSpec::one("num-records"),
    OptionSpec::one("group"),
    OptionSpec::one("fetch-size"),
    OptionSpec::one("socket-buffer-size"),
    OptionSpec::flag("from-latest"),
    OptionSpec::one("consumer.config"),
    OptionSpec::one("command-config"),
    OptionSpec::many("command-property"),
    OptionSpec::flag("print-metrics"),
    OptionSpec::flag("show-detailed-stats"),
    OptionSpec::one("timeout"),
    OptionSpec::one("reporting-interval"),
    OptionSpec::one("date-format"),
    OptionSpec::flag("hide-header"),
    OptionSpec::one("threads"),
    OptionSpec::one("num-fetch-threads"),
    OptionSpec::one("json"),
    OptionSpec::one("html"),
    OptionSpec::one("client"),
];

#[derive(Debug, Clone)]
pub struct ConsumerArgs {
    pub bootstrap_server: Option<String>,
    pub topic: String,
    pub num_messages: u64,
    /// `None` means Kafka's `perf-consumer-<random>`.
    pub group: Option<String>,
    pub fetch_size: u64,
    pub socket_buffer_size: u64,
    pub from_latest: bool,
    pub properties: Properties,
    pub print_metrics: bool,
    pub show_detailed_stats: bool,
    pub timeout_ms: u64,
    pub reporting_interval_ms: u64,
    pub date_format: DateFormat,
    pub date_pattern: String,
    pub hide_header: bool,
    /// Consumers in the group; Kafka ignores `--threads`, strom honours it.
    pub threads: usize,
    pub json: Option<String>,
    pub html: Option<String>,
    /// strom: the Kafka client that consumes.
    pub client: LoadClient,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Help,
    Version,
    /// A message printed before the help, as `CommandLineUtils.printUsageAndExit` does.
    Error(String),
}

impl ConsumerArgs {
    /// `--bootstrap-server` > `--broker-list` > `bootstrap.servers` in the properties.
    pub fn bootstrap(&self) -> Option<String> {
        self.bootstrap_server.clone().or_else(|| {
            self.properties
                .iter()
                .rev()
                .find(|(k, _)| k == "bootstrap.servers")
                .map(|(_, v)| v.clone())
        })
    }
}

pub fn parse(args: &[String]) -> Result<ConsumerArgs, Outcome> {
    if args.is_empty() {
        return Err(Outcome::Error(
            "USAGE: This tool helps in performance test for the full zookeeper consumer"
                .to_string(),
        ));
    }
    let p = cli::parse(args, SPECS, false).map_err(|e| Outcome::Error(cli_message(&e)))?;
    if p.has("help") {
        return Err(Outcome::Help);
    }
    if p.has("version") {
        return Err(Outcome::Version);
    }
    let topic = p
        .value("topic")
        .ok_or_else(|| missing("topic"))?
        .to_string();
    let num_messages = match (p.value("num-records"), p.value("messages")) {
        (Some(_), _) => number(&p, "num-records")?,
        (None, Some(_)) => number(&p, "messages")?,
        (None, None) => return Err(missing("messages")),
    };
    let reporting_interval_ms = match p.value("reporting-interval") {
        Some(raw) if !raw.chars().all(|c| c.is_ascii_digit()) || raw.is_empty() => {
            return Err(Outcome::Error(format!(
                "Cannot parse argument '{raw}' of option reporting-interval"
            )))
        }
        Some(_) => number(&p, "reporting-interval")?,
        None => 5000,
    };
    if reporting_interval_ms == 0 {
        return Err(Outcome::Error(
            "Reporting interval must be greater than 0.".to_string(),
        ));
    }
    let date_pattern = p
        .value("date-format")
        .unwrap_or("yyyy-MM-dd HH:mm:ss:SSS")
        .to_string();
    let date_format = DateFormat::new(&date_pattern).map_err(|e| Outcome::Error(e.to_string()))?;
    let threads = match p.value("threads") {
        Some(_) => number(&p, "threads")?,
        None => 1,
    };
    if threads == 0 {
        return Err(Outcome::Error(
            "--threads must be greater than 0.".to_string(),
        ));
    }
    Ok(ConsumerArgs {
        bootstrap_server: p
            .value("bootstrap-server")
            .or(p.value("broker-list"))
            .map(String::from),
        topic,
        num_messages,
        group: p.value("group").map(String::from),
        fetch_size: optional_number(&p, "fetch-size", 1024 * 1024)?,
        socket_buffer_size: optional_number(&p, "socket-buffer-size", 2 * 1024 * 1024)?,
        from_latest: p.has("from-latest"),
        properties: collect_properties(&p)?,
        print_metrics: p.has("print-metrics"),
        show_detailed_stats: p.has("show-detailed-stats"),
        timeout_ms: optional_number(&p, "timeout", 10_000)?,
        reporting_interval_ms,
        date_format,
        date_pattern,
        hide_header: p.has("hide-header"),
        threads: threads as usize,
        json: p.value("json").map(String::from),
        html: p.value("html").map(String::from),
        client: match p.value("client") {
            None => LoadClient::default(),
            Some(value) => LoadClient::parse(value).map_err(Outcome::Error)?,
        },
    })
}

fn collect_properties(p: &cli::Parsed) -> Result<Properties, Outcome> {
    let mut props = Properties::new();
    for file_flag in ["consumer.config", "command-config"] {
        if let Some(path) = p.value(file_flag) {
            props.extend(properties::load(path).map_err(|e| Outcome::Error(format!("{e:#}")))?);
        }
    }
    for pair in p.values("command-property") {
        match pair.split_once('=') {
            Some((k, v)) => props.push((k.to_string(), v.to_string())),
            None => return Err(Outcome::Error(format!("Invalid command property: {pair}"))),
        }
    }
    Ok(props)
}

fn missing(name: &str) -> Outcome {
    Outcome::Error(format!("Missing required argument \"[{name}]\""))
}

fn number(p: &cli::Parsed, name: &str) -> Result<u64, Outcome> {
    let raw = p.value(name).unwrap_or_default();
    raw.parse::<u64>()
        .map_err(|_| Outcome::Error(format!("Cannot parse argument '{raw}' of option {name}")))
}

fn optional_number(p: &cli::Parsed, name: &str, default: u64) -> Result<u64, Outcome> {
    match p.value(name) {
        Some(_) => number(p, name),
        None => Ok(default),
    }
}

fn cli_message(e: &CliError) -> String {
    match e {
        CliError::Unrecognized(token) => format!(
            "{} is not a recognized option",
            token.trim_start_matches('-')
        ),
        CliError::Ambiguous(token, _) => format!(
            "{} is not a recognized option",
            token.trim_start_matches('-')
        ),
        CliError::MissingValue(name) => format!("Option {name} requires an argument"),
        CliError::UnexpectedValue(name) => format!("Option {name} does not take an argument"),
    }
}

/// jopt-simple's option table, as Kafka prints it with `--help` or after an error.
pub fn help() -> String {
    let rows: &[(&str, &str)] = &[
        ("--bootstrap-server <String: server to connect to>", "The server(s) to connect to. Without it (and without --broker-list or bootstrap.servers), strom starts an embedded broker."),
        ("--broker-list <String: broker-list>", "DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified."),
        ("--client <String: librdkafka|native>", "strom: the Kafka client that consumes: librdkafka, what applications use, or strom's native client, whose cost per record is a fraction of librdkafka's so that the broker limits the run. (default: librdkafka)"),
        ("--command-config <String: config file>", "Config properties file."),
        ("--command-property <String: prop=value>", "Consumer config property; may be repeated."),
        ("--consumer.config <String: config file>", "Consumer config properties file."),
        ("--date-format <String: date format>", "The date format to use for formatting the time field. See java.text.SimpleDateFormat for options. (default: yyyy-MM-dd HH:mm:ss:SSS)"),
        ("--fetch-size <Integer: size>", "The amount of data to fetch in a single request. (default: 1048576)"),
        ("--from-latest", "If the consumer does not already have an established offset to consume from, start with the latest message present in the log rather than the earliest message."),
        ("--group <String: gid>", "The group id to consume on. (default: perf-consumer-<random>)"),
        ("--help", "Print usage information."),
        ("--hide-header", "If set, skips printing the header for the stats"),
        ("--html <String: file>", "strom: write a self-contained HTML report."),
        ("--json <String: file>", "strom: write every figure, the settings and the environment as JSON."),
        ("--messages <Long: count>", "REQUIRED: The number of messages to consume."),
        ("--num-fetch-threads <Integer: count>", "DEPRECATED AND IGNORED: Number of fetcher threads. (default: 1)"),
        ("--num-records <Long: count>", "The number of records to consume (replaces --messages)."),
        ("--print-metrics", "Print out the metrics."),
        ("--reporting-interval <Long: interval_ms>", "Interval in milliseconds at which to print progress info. (default: 5000)"),
        ("--show-detailed-stats", "If set, stats are reported for each reporting interval as configured by reporting-interval"),
        ("--socket-buffer-size <Integer: size>", "The size of the tcp RECV size. (default: 2097152)"),
        ("--threads <Integer: count>", "Number of consumers in the group; strom honours it and sums their figures. (default: 1)"),
        ("--timeout [Long: milliseconds]", "The maximum allowed time in milliseconds between returned records. (default: 10000)"),
        ("--topic <String: topic>", "REQUIRED: The topic to consume from."),
        ("--version", "Display Kafka version."),
    ];
    let mut out = String::from("Option                                   Description                            \n------                                   -----------                            \n");
    for (option, text) in rows {
        out.push_str(&format!("{option:<40} {text}\n"));
    }
    out
}
