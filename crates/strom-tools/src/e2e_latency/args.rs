//! `strom e2e-latency` arguments: Kafka's positional form (up to 4.1) and the 4.2 flag
//! form (KIP-1172), which it converts to.

use crate::cli::{self, OptionSpec};
use crate::load_client::LoadClient;
use strom_client::properties::{self, Properties};

pub const USAGE: &str = "USAGE: java org.apache.kafka.tools.EndToEndLatency broker_list topic num_messages producer_acks message_size_bytes [optional] properties_file";

/// strom's own options, printed after Kafka's usage line.
pub const STROM_OPTIONS: &str = "strom options, with either form: --json FILE, --html FILE, --client librdkafka|native (the Kafka client that sends and reads back; default: librdkafka)";

const SPECS: &[OptionSpec] = &[
    OptionSpec::flag("help"),
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("topic"),
    OptionSpec::one("num-records"),
    OptionSpec::one("producer-acks"),
    OptionSpec::one("record-size"),
    OptionSpec::one("command-config"),
    OptionSpec::one("record-key-size"),
    OptionSpec::one("num-headers"),
    OptionSpec::one("record-header-key-size"),
    OptionSpec::one("record-header-size"),
    OptionSpec::one("json"),
    OptionSpec::one("html"),
    OptionSpec::one("client"),
];

#[derive(Debug, Clone, PartialEq)]
pub struct E2eArgs {
    /// `None` only in the flag form without `--bootstrap-server`: use an embedded broker.
    pub bootstrap: Option<String>,
    pub topic: String,
    pub num_messages: u64,
    pub acks: String,
    pub message_size: usize,
    pub properties: Properties,
    pub key_size: usize,
    pub num_headers: usize,
    pub header_key_size: usize,
    pub header_size: usize,
    pub json: Option<String>,
    pub html: Option<String>,
    /// strom: the Kafka client that produces and consumes.
    pub client: LoadClient,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Help,
    /// Printed alone on stderr, exit 1.
    Error(String),
}

pub fn parse(args: &[String]) -> Result<E2eArgs, Outcome> {
    let p = cli::parse(args, SPECS, true).map_err(|e| Outcome::Error(format!("{e:?}")))?;
    if p.has("help") {
        return Err(Outcome::Help);
    }
    // Kafka 4.2's flags, as opposed to the positional form; strom's own options
    // (--json, --html, --client) go with either.
    let flag_form = [
        "bootstrap-server",
        "topic",
        "num-records",
        "producer-acks",
        "record-size",
        "command-config",
    ]
    .iter()
    .any(|name| p.has(name));
    let positional = &p.positional;
    let (bootstrap, topic, num, acks, size, config) = if flag_form {
        if !positional.is_empty() {
            return Err(Outcome::Error(format!(
                "unexpected argument: {}",
                positional[0]
            )));
        }
        let need = |name: &str| {
            p.value(name)
                .map(String::from)
                .ok_or_else(|| Outcome::Error(format!("Missing required argument \"[{name}]\"")))
        };
        (
            p.value("bootstrap-server").map(String::from),
            need("topic")?,
            need("num-records")?,
            need("producer-acks")?,
            need("record-size")?,
            p.value("command-config").map(String::from),
        )
    } else {
        if positional.len() != 5 && positional.len() != 6 {
            return Err(Outcome::Error(USAGE.to_string()));
        }
        (
            Some(positional[0].clone()),
            positional[1].clone(),
            positional[2].clone(),
            positional[3].clone(),
            positional[4].clone(),
            positional.get(5).cloned(),
        )
    };
    if acks != "1" && acks != "all" {
        return Err(Outcome::Error(
            "Latency testing requires synchronous acknowledgement. Please use 1 or all".to_string(),
        ));
    }
    let number = |raw: &str| {
        raw.parse::<u64>().map_err(|_| {
            Outcome::Error(format!(
                "java.lang.NumberFormatException: For input string: \"{raw}\""
            ))
        })
    };
    let optional = |name: &str| p.value(name).map_or(Ok(0), number);
    let properties = match config {
        Some(path) => properties::load(&path).map_err(|e| Outcome::Error(format!("{e:#}")))?,
        None => Properties::new(),
    };
    Ok(E2eArgs {
        bootstrap,
        topic,
        num_messages: number(&num)?,
        acks,
        message_size: number(&size)? as usize,
        properties,
        key_size: optional("record-key-size")? as usize,
        num_headers: optional("num-headers")? as usize,
        header_key_size: optional("record-header-key-size")? as usize,
        header_size: optional("record-header-size")? as usize,
        json: p.value("json").map(String::from),
        html: p.value("html").map(String::from),
        client: match p.value("client") {
            None => LoadClient::default(),
            Some(value) => LoadClient::parse(value).map_err(Outcome::Error)?,
        },
    })
}
