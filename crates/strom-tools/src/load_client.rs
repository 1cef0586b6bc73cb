//! `--client`: which Kafka client generates the load.

use std::fmt;

/// The load generator's client. librdkafka is the default because it is what
/// applications run; the native client costs a fraction of it per record, so the broker
/// rather than the client limits what a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadClient {
    #[default]
    Librdkafka,
    Native,
}

impl LoadClient {
    /// Parses a `--client` value.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "librdkafka" => Ok(Self::Librdkafka),
            "native" => Ok(Self::Native),
            other => Err(format!(
                "--client must be librdkafka or native, not {other}"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Librdkafka => "librdkafka",
            Self::Native => "native",
        }
    }
}

impl fmt::Display for LoadClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_clients_and_names_the_choices_on_error() {
        assert_eq!(LoadClient::parse("native"), Ok(LoadClient::Native));
        assert_eq!(LoadClient::parse("librdkafka"), Ok(LoadClient::Librdkafka));
        assert!(LoadClient::parse("java")
            .unwrap_err()
            .contains("librdkafka or native"));
    }
}
