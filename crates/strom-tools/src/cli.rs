//! A small long-option tokenizer shared by the tools.
//!
//! Kafka's tools use argparse4j (producer) and jopt-simple (consumer), which agree on what
//! this module does — `--name value`, `--name=value`, multi-value options, unique-prefix
//! abbreviations — and disagree on error wording. So this module reports *what* went
//! wrong as a [`CliError`], and each tool words it as its Kafka counterpart does.

use std::collections::HashMap;

/// How many values an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Flag,
    One,
    /// argparse4j's `nargs("+")`: every following token up to the next `--option`.
    OneOrMore,
}

#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub name: &'static str,
    pub takes: Takes,
}

impl OptionSpec {
    pub const fn flag(name: &'static str) -> Self {
        Self {
            name,
            takes: Takes::Flag,
        }
    }
    pub const fn one(name: &'static str) -> Self {
        Self {
            name,
            takes: Takes::One,
        }
    }
    pub const fn many(name: &'static str) -> Self {
        Self {
            name,
            takes: Takes::OneOrMore,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// A token that is no known option (or an unexpected positional argument).
    Unrecognized(String),
    /// An abbreviation matching several options.
    Ambiguous(String, Vec<&'static str>),
    /// An option that needs a value was last, or followed by another option.
    MissingValue(&'static str),
    /// A flag given a value with `--flag=value`.
    UnexpectedValue(&'static str),
}

/// The options present on the command line, values in order of appearance.
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    values: HashMap<&'static str, Vec<String>>,
    /// Tokens that are no option at all, for tools with positional arguments.
    pub positional: Vec<String>,
}

impl Parsed {
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The last value of a single-valued option (later occurrences override earlier ones).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value given to an option, across occurrences.
    pub fn values(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }
}

/// A parse error worded as jopt-simple words it (kafka-topics.sh, kafka-configs.sh).
pub fn jopt_message(e: &CliError) -> String {
    match e {
        CliError::Unrecognized(t) | CliError::Ambiguous(t, _) => {
            format!("{} is not a recognized option", t.trim_start_matches('-'))
        }
        CliError::MissingValue(n) => format!("Option {n} requires an argument"),
        CliError::UnexpectedValue(n) => format!("Option {n} does not take an argument"),
    }
}

/// The answer to `--zookeeper HOST:PORT` (the seeds' command lines): Kafka 3+ and strom
/// take brokers, so say which `--bootstrap-server` form to use instead.
pub fn zookeeper_message(tool: &str, zookeeper: &str) -> String {
    format!(
        "zookeeper is not a recognized option: Kafka 3+ and strom take the brokers instead of ZooKeeper ({zookeeper}): use --bootstrap-server <broker host:port>, for example `strom {tool} --bootstrap-server localhost:9092 ...`"
    )
}

/// Tokenizes `args` against `specs`. With `allow_positional`, bare tokens are collected
/// instead of rejected.
pub fn parse(
    args: &[String],
    specs: &[OptionSpec],
    allow_positional: bool,
) -> Result<Parsed, CliError> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let token = &args[i];
        i += 1;
        let Some(body) = token.strip_prefix("--").filter(|b| !b.is_empty()) else {
            if allow_positional {
                parsed.positional.push(token.clone());
                continue;
            }
            return Err(CliError::Unrecognized(token.clone()));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let spec = find(specs, name)?;
        let entry = parsed.values.entry(spec.name).or_default();
        match (spec.takes, inline) {
            (Takes::Flag, Some(_)) => return Err(CliError::UnexpectedValue(spec.name)),
            (Takes::Flag, None) => {}
            (_, Some(value)) => entry.push(value),
            (Takes::One, None) => match args.get(i) {
                Some(value) if !is_option(value) => {
                    entry.push(value.clone());
                    i += 1;
                }
                _ => return Err(CliError::MissingValue(spec.name)),
            },
            (Takes::OneOrMore, None) => {
                let start = i;
                while i < args.len() && !is_option(&args[i]) {
                    entry.push(args[i].clone());
                    i += 1;
                }
                if i == start {
                    return Err(CliError::MissingValue(spec.name));
                }
            }
        }
    }
    Ok(parsed)
}

/// `-1` is a value (as `--throughput -1` needs), `--x` and `-h` are options.
fn is_option(token: &str) -> bool {
    token.starts_with("--")
        || (token.starts_with('-') && token.parse::<f64>().is_err() && token.len() > 1)
}

fn find(specs: &[OptionSpec], name: &str) -> Result<OptionSpec, CliError> {
    if let Some(spec) = specs.iter().find(|s| s.name == name) {
        return Ok(*spec);
    }
    let candidates: Vec<&OptionSpec> = specs.iter().filter(|s| s.name.starts_with(name)).collect();
    match candidates.as_slice() {
        [only] => Ok(**only),
        [] => Err(CliError::Unrecognized(format!("--{name}"))),
        many => Err(CliError::Ambiguous(
            format!("--{name}"),
            many.iter().map(|s| s.name).collect(),
        )),
    }
}

/// Ends a tool the way Kafka's end: success, or the uncaught exception's line on stderr
/// and exit status 1.
pub fn finish(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Exception in thread \"main\" {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[OptionSpec] = &[
        OptionSpec::one("topic"),
        OptionSpec::one("throughput"),
        OptionSpec::many("producer-props"),
        OptionSpec::flag("print-metrics"),
        OptionSpec::one("producer.config"),
    ];

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_values_flags_and_lists() {
        let p = parse(
            &args("--topic t --throughput -1 --producer-props a=1 b=2 --print-metrics"),
            SPECS,
            false,
        )
        .unwrap();
        assert_eq!(p.value("topic"), Some("t"));
        assert_eq!(p.value("throughput"), Some("-1"));
        assert_eq!(p.values("producer-props"), ["a=1", "b=2"]);
        assert!(p.has("print-metrics"));
    }

    #[test]
    fn accepts_equals_and_unique_prefixes() {
        let p = parse(&args("--topic=x --thr 5"), SPECS, false).unwrap();
        assert_eq!(p.value("topic"), Some("x"));
        assert_eq!(p.value("throughput"), Some("5"));
    }

    #[test]
    fn reports_problems() {
        assert_eq!(
            parse(&args("--nope"), SPECS, false).unwrap_err(),
            CliError::Unrecognized("--nope".into())
        );
        assert_eq!(
            parse(&args("--topic"), SPECS, false).unwrap_err(),
            CliError::MissingValue("topic")
        );
        assert_eq!(
            parse(&args("--producer-props --topic t"), SPECS, false).unwrap_err(),
            CliError::MissingValue("producer-props")
        );
        assert!(matches!(
            parse(&args("--produc x"), SPECS, false).unwrap_err(),
            CliError::Ambiguous(_, _)
        ));
        assert_eq!(
            parse(&args("stray"), SPECS, false).unwrap_err(),
            CliError::Unrecognized("stray".into())
        );
    }

    #[test]
    fn collects_positionals_when_allowed() {
        let p = parse(&args("host:9092 topic 10 --topic x"), SPECS, true).unwrap();
        assert_eq!(p.positional, ["host:9092", "topic", "10"]);
    }
}
