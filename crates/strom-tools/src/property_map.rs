//! Kafka (Java client) property names mapped onto librdkafka's.
//!
//! Users paste `--producer-props` and config files written for the Java client. librdkafka
//! shares most names, renames a few (`buffer.memory` is `queue.buffering.max.kbytes`, in
//! KiB), and has no equivalent for Java-only ones (serializers, interceptors, JMX). Every
//! property is either passed on, translated, or dropped with a warning on stderr, so a
//! setting never silently does nothing.

use std::ffi::{c_char, CString};

use anyhow::{bail, Result};

/// Which client the properties configure; a few names only exist on one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Producer,
    Consumer,
}

/// librdkafka settings ready for `ClientConfig`, plus the warnings to show the user.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mapped {
    pub settings: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

impl Mapped {
    /// The last value given for `name`, as librdkafka will see it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name`, replacing any earlier value.
    pub fn set(&mut self, name: &str, value: &str) {
        self.settings.retain(|(k, _)| k != name);
        self.settings.push((name.to_string(), value.to_string()));
    }

    /// Sets `name` only if the user did not.
    pub fn set_default(&mut self, name: &str, value: &str) {
        if self.get(name).is_none() {
            self.settings.push((name.to_string(), value.to_string()));
        }
    }

    pub fn print_warnings(&self) {
        self.warnings.iter().for_each(|w| eprintln!("WARNING: {w}"));
    }
}

/// Properties that only mean something to the Java client, with the reason they are dropped.
fn java_only(name: &str) -> Option<&'static str> {
    Some(match name {
        "key.serializer" | "value.serializer" | "key.deserializer" | "value.deserializer" => {
            "strom sends and reads raw bytes, as ByteArraySerializer/ByteArrayDeserializer do"
        }
        "interceptor.classes"
        | "partitioner.class"
        | "metric.reporters"
        | "sasl.jaas.config"
        | "sasl.login.callback.handler.class"
        | "sasl.client.callback.handler.class"
        | "security.providers"
        | "ssl.engine.factory.class"
        | "config.providers" => "it names a Java class",
        "auto.include.jmx.reporter"
        | "metrics.num.samples"
        | "metrics.sample.window.ms"
        | "metrics.recording.level" => "Java client metrics have no librdkafka equivalent",
        "max.block.ms" => "librdkafka never blocks in produce; strom waits for queue space instead",
        "partitioner.ignore.keys"
        | "partitioner.adaptive.partitioning.enable"
        | "partitioner.availability.timeout.ms" => {
            "librdkafka's partitioner is set by `partitioner`"
        }
        "max.poll.records" => "librdkafka returns one record per poll",
        "metadata.max.idle.ms" | "client.dns.lookup" => "librdkafka has no such setting",
        "ssl.truststore.location"
        | "ssl.truststore.password"
        | "ssl.truststore.type"
        | "ssl.keystore.type" => "use ssl.ca.location / ssl.certificate.location (PEM) instead",
        _ => return None,
    })
}

/// Maps Kafka Java-client properties onto librdkafka's, in order.
///
/// Errors when librdkafka rejects a value (for example `acks=2`), with librdkafka's reason.
pub fn map(props: &[(String, String)], role: Role) -> Result<Mapped> {
    let mut mapped = Mapped::default();
    for (name, value) in props {
        if let Some(reason) = java_only(name) {
            mapped.warnings.push(format!(
                "ignoring Java-only property {name}={value}: {reason}"
            ));
            continue;
        }
        let (lib_name, lib_value) = translate(name, value, role);
        match check(&lib_name, &lib_value) {
            Check::Ok => mapped.set(&lib_name, &lib_value),
            Check::Unknown => mapped.warnings.push(format!(
                "ignoring property {name}={value}: librdkafka has no such property"
            )),
            Check::Invalid(reason) => bail!("Invalid value {value} for property {name}: {reason}"),
        }
    }
    Ok(mapped)
}

/// The librdkafka name and value for one Java-client property.
fn translate(name: &str, value: &str, role: Role) -> (String, String) {
    let renamed = |n: &str| (n.to_string(), value.to_string());
    match (name, role) {
        ("buffer.memory", _) => {
            let kib = value
                .trim()
                .parse::<u64>()
                .map_or(value.to_string(), |bytes| (bytes / 1024).max(1).to_string());
            ("queue.buffering.max.kbytes".to_string(), kib)
        }
        ("max.in.flight.requests.per.connection", _) => renamed("max.in.flight"),
        ("max.request.size", _) => renamed("message.max.bytes"),
        ("send.buffer.bytes", _) => renamed("socket.send.buffer.bytes"),
        ("receive.buffer.bytes", _) => renamed("socket.receive.buffer.bytes"),
        ("fetch.max.wait.ms", Role::Consumer) => renamed("fetch.wait.max.ms"),
        // Java's batch.size=0 disables batching; librdkafka's smallest batch is one byte.
        ("batch.size", _) if value.trim() == "0" => ("batch.size".to_string(), "1".to_string()),
        _ => renamed(name),
    }
}

enum Check {
    Ok,
    Unknown,
    Invalid(String),
}

/// Asks librdkafka itself whether it knows `name` and accepts `value`, on a scratch config.
fn check(name: &str, value: &str) -> Check {
    let (Ok(c_name), Ok(c_value)) = (CString::new(name), CString::new(value)) else {
        return Check::Invalid("contains a NUL byte".to_string());
    };
    let mut err = [0 as c_char; 512];
    // SAFETY: the conf is created and destroyed here; the strings and the error buffer
    // outlive the call, and librdkafka NUL-terminates what it writes into `err`.
    let result = unsafe {
        let conf = rdkafka_sys::rd_kafka_conf_new();
        let r = rdkafka_sys::rd_kafka_conf_set(
            conf,
            c_name.as_ptr(),
            c_value.as_ptr(),
            err.as_mut_ptr(),
            err.len(),
        );
        rdkafka_sys::rd_kafka_conf_destroy(conf);
        r
    };
    match result {
        rdkafka_sys::rd_kafka_conf_res_t::RD_KAFKA_CONF_OK => Check::Ok,
        rdkafka_sys::rd_kafka_conf_res_t::RD_KAFKA_CONF_UNKNOWN => Check::Unknown,
        rdkafka_sys::rd_kafka_conf_res_t::RD_KAFKA_CONF_INVALID => {
            let bytes: Vec<u8> = err
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            Check::Invalid(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn maps_seed_002_tuned_settings() {
        let m = map(
            &props(&[
                ("compression.type", "lz4"),
                ("linger.ms", "5"),
                ("batch.size", "100000"),
                ("acks", "all"),
                ("max.in.flight.requests.per.connection", "1"),
                ("retries", "5"),
                ("buffer.memory", "67108864"),
            ]),
            Role::Producer,
        )
        .unwrap();
        assert_eq!(m.get("queue.buffering.max.kbytes"), Some("65536"));
        assert_eq!(m.get("max.in.flight"), Some("1"));
        assert_eq!(m.get("compression.type"), Some("lz4"));
        assert_eq!(m.get("acks"), Some("all"));
        assert!(m.warnings.is_empty());
    }

    #[test]
    fn warns_about_java_only_and_unknown_properties() {
        let m = map(
            &props(&[
                (
                    "key.serializer",
                    "org.apache.kafka.common.serialization.ByteArraySerializer",
                ),
                ("no.such.thing", "1"),
            ]),
            Role::Producer,
        )
        .unwrap();
        assert!(m.settings.is_empty());
        assert_eq!(m.warnings.len(), 2);
        assert!(m.warnings[0].contains("key.serializer"));
        assert!(m.warnings[1].contains("no.such.thing"));
    }

    #[test]
    fn rejects_values_librdkafka_rejects() {
        let err = map(&props(&[("acks", "banana")]), Role::Producer).unwrap_err();
        assert!(err.to_string().contains("acks"), "{err}");
    }

    #[test]
    fn later_values_win_and_defaults_do_not_override() {
        let mut m = map(
            &props(&[("linger.ms", "1"), ("linger.ms", "7")]),
            Role::Producer,
        )
        .unwrap();
        assert_eq!(m.get("linger.ms"), Some("7"));
        m.set_default("linger.ms", "0");
        m.set_default("client.id", "perf-producer-client");
        assert_eq!(m.get("linger.ms"), Some("7"));
        assert_eq!(m.get("client.id"), Some("perf-producer-client"));
    }
}
