//! The vocabulary of a config table, as Kafka's `ConfigDef`: a key's type, how its value
//! is checked (with Kafka's messages), and how much it matters. The broker's table
//! ([`crate::broker_configs`]) and the topics' ([`crate::topic_config`]) are made of it,
//! and docs/configuration.md is generated from both ([`crate::config_docs`]).

use crate::config::ConfigError;

/// DescribeConfigs' `config_type` values (Kafka's `ConfigDef.Type` ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// How a value is checked, with Kafka's validator messages.
#[derive(Debug, Clone, Copy)]
pub enum Validator {
    /// `ConfigDef.Range.atLeast(n)`
    AtLeast(i64),
    /// `ConfigDef.Range.between(a, b)`
    Between(i64, i64),
    /// gzip's levels: 1–9, or -1 for the codec's default.
    GzipLevel,
    /// `ConfigDef.ValidString.in(...)`
    OneOf(&'static [&'static str]),
    /// A list whose items are each one of these.
    ListOf(&'static [&'static str]),
    /// `*` or `partition:broker,...` (the replication throttles).
    ThrottledReplicas,
    /// A double between 0 and 1.
    Ratio,
    /// true or false.
    Boolean,
    /// Any value of the type.
    Any,
}

/// Kafka's `ConfigDef.Importance`: how much an operator should care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Importance {
    High,
    Medium,
    Low,
}

impl Importance {
    pub fn name(self) -> &'static str {
        match self {
            Importance::High => "high",
            Importance::Medium => "medium",
            Importance::Low => "low",
        }
    }
}

impl ConfigType {
    /// The type's name as Kafka's docs print it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "boolean",
            ConfigType::String => "string",
            ConfigType::Int => "int",
            ConfigType::Long => "long",
            ConfigType::Double => "double",
            ConfigType::List => "list",
        }
    }
}

impl Validator {
    /// Checks `value` of `key`, of type `config_type`, returning it normalized, or
    /// Kafka's message for why it is refused.
    pub fn check(
        &self,
        key: &str,
        config_type: ConfigType,
        value: &str,
    ) -> Result<String, ConfigError> {
        let value = value.trim();
        let number = || -> Result<i64, ConfigError> {
            let n: i64 = value
                .parse()
                .map_err(|_| ConfigError::invalid(key, value, "Not a number of type LONG"))?;
            if config_type == ConfigType::Int && i32::try_from(n).is_err() {
                return Err(ConfigError::invalid(key, value, "Not a number of type INT"));
            }
            Ok(n)
        };
        match *self {
            Validator::AtLeast(min) => {
                let n = number()?;
                if n < min {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("Value must be at least {min}"),
                    ));
                }
                Ok(n.to_string())
            }
            Validator::Between(min, max) => {
                let n = number()?;
                if n < min {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("Value must be at least {min}"),
                    ));
                }
                if n > max {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("Value must be no more than {max}"),
                    ));
                }
                Ok(n.to_string())
            }
            Validator::GzipLevel => {
                let n = number()?;
                if n != -1 && !(1..=9).contains(&n) {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        "Value must be between 1 and 9 or equal to -1",
                    ));
                }
                Ok(n.to_string())
            }
            Validator::OneOf(allowed) => {
                if !allowed.contains(&value) {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!("String must be one of: {}", allowed.join(", ")),
                    ));
                }
                Ok(value.to_string())
            }
            Validator::ListOf(allowed) => {
                let items: Vec<&str> = value.split(',').map(str::trim).collect();
                if let Some(bad) = items.iter().find(|i| !allowed.contains(i)) {
                    return Err(ConfigError::invalid(
                        key,
                        value,
                        format!(
                            "Invalid value {bad}: expected each item to be one of {}",
                            allowed.join(", ")
                        ),
                    ));
                }
                Ok(items.join(","))
            }
            Validator::ThrottledReplicas => {
                let ok = value.is_empty()
                    || value == "*"
                    || value.split(',').all(|pair| {
                        pair.trim().split_once(':').is_some_and(|(p, b)| {
                            p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                        })
                    });
                if !ok {
                    return Err(ConfigError::invalid(key, value, format!(
                        "{key} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    )));
                }
                Ok(value.to_string())
            }
            Validator::Ratio => match value.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(value.to_string()),
                Ok(_) => Err(ConfigError::invalid(
                    key,
                    value,
                    "Value must be between 0 and 1",
                )),
                Err(_) => Err(ConfigError::invalid(
                    key,
                    value,
                    "Not a number of type DOUBLE",
                )),
            },
            Validator::Boolean => match value.to_ascii_lowercase().as_str() {
                b @ ("true" | "false") => Ok(b.to_string()),
                _ => Err(ConfigError::invalid(
                    key,
                    value,
                    "Expected value to be either true or false",
                )),
            },
            Validator::Any => {
                if matches!(config_type, ConfigType::Long | ConfigType::Int) {
                    number()?;
                }
                Ok(value.to_string())
            }
        }
    }

    /// The values it accepts, as Kafka's docs show them ("[1,...]", "[0,...,9]").
    pub fn valid_values(&self) -> String {
        match *self {
            Validator::AtLeast(min) => format!("[{min},...]"),
            Validator::Between(min, max) => format!("[{min},...,{max}]"),
            Validator::GzipLevel => "[1,...,9] or -1".to_string(),
            Validator::OneOf(values) => format!("[{}]", values.join(", ")),
            Validator::ListOf(values) => format!("[{}]", values.join(", ")),
            Validator::ThrottledReplicas => {
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...".to_string()
            }
            Validator::Ratio => "[0,...,1]".to_string(),
            Validator::Boolean | Validator::Any => String::new(),
        }
    }
}
