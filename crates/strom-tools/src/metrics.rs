//! `--print-metrics`: librdkafka's statistics in the layout of Kafka's
//! `ToolsUtils.printMetrics` (`group:name:{tags} : value`, sorted, `%.3f` for doubles).
//!
//! The Java client's metric names do not exist in librdkafka; its own statistics are
//! printed instead, under the same layout so scripts that parse the block keep working.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::java_format::fixed;

/// The metric lines, with Kafka's leading blank line and header; empty when no statistics
/// arrived.
pub fn lines(stats_json: Option<&[u8]>, group: &str, client_id: &str) -> Vec<String> {
    let Some(stats) = stats_json.and_then(|raw| serde_json::from_slice::<Value>(raw).ok()) else {
        return Vec::new();
    };
    let mut metrics: BTreeMap<String, Value> = BTreeMap::new();
    let tags = format!("{{client-id={client_id}}}");
    if let Some(top) = stats.as_object() {
        for (name, value) in top.iter().filter(|(_, v)| v.is_number()) {
            metrics.insert(format!("{group}:{name}:{tags}"), value.clone());
        }
    }
    if let Some(brokers) = stats.get("brokers").and_then(Value::as_object) {
        for (broker, b) in brokers.iter().filter(|(name, _)| !name.starts_with(":0/")) {
            let broker_tags = format!("{{broker={broker}, client-id={client_id}}}");
            for name in [
                "tx",
                "txbytes",
                "rx",
                "rxbytes",
                "txerrs",
                "rxerrs",
                "req_timeouts",
            ] {
                if let Some(v) = b.get(name) {
                    metrics.insert(
                        format!("{group}-node-metrics:{name}:{broker_tags}"),
                        v.clone(),
                    );
                }
            }
            for (window, prefix) in [
                ("rtt", "request-latency"),
                ("int_latency", "internal-latency"),
            ] {
                for stat in ["avg", "p99", "max"] {
                    if let Some(us) = b
                        .get(window)
                        .and_then(|w| w.get(stat))
                        .and_then(Value::as_f64)
                    {
                        let ms = Value::from(us / 1000.0);
                        metrics.insert(
                            format!("{group}-node-metrics:{prefix}-{stat}-ms:{broker_tags}"),
                            ms,
                        );
                    }
                }
            }
        }
    }
    format_block(&metrics)
}

/// ToolsUtils' block: `"\n%-Ns   %s"` header, then `"%-Ns : %.3f"` or `"%-Ns : %s"` rows.
pub fn format_block(metrics: &BTreeMap<String, Value>) -> Vec<String> {
    if metrics.is_empty() {
        return Vec::new();
    }
    let width = metrics.keys().map(String::len).max().unwrap_or(0);
    let mut out = vec![
        String::new(),
        format!("{:<width$}   {}", "Metric Name", "Value"),
    ];
    for (name, value) in metrics {
        let shown = match value {
            Value::Number(n) if n.is_f64() => fixed(n.as_f64().unwrap_or(0.0), 3),
            other => other.to_string(),
        };
        out.push(format!("{name:<width$} : {shown}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_layout_matches_tools_utils() {
        let mut m = BTreeMap::new();
        m.insert("g:b:{client-id=c}".to_string(), Value::from(2.0));
        m.insert("g:a:{client-id=c}".to_string(), Value::from(7));
        let lines = format_block(&m);
        assert_eq!(lines[0], "");
        assert_eq!(lines[1], "Metric Name         Value");
        assert_eq!(lines[2], "g:a:{client-id=c} : 7");
        assert_eq!(lines[3], "g:b:{client-id=c} : 2.000");
    }

    #[test]
    fn reads_librdkafka_statistics() {
        let json = br#"{"name":"x","msg_cnt":3,"txmsgs":10,"brokers":{"127.0.0.1:9092/1":{"tx":5,"rtt":{"avg":1500,"p99":3000,"max":4000}}}}"#;
        let out = lines(Some(json), "producer-metrics", "perf-producer-client");
        assert!(out.iter().any(|l| l
            .starts_with("producer-metrics:txmsgs:{client-id=perf-producer-client}")
            && l.ends_with(": 10")));
        assert!(out
            .iter()
            .any(|l| l.contains("request-latency-avg-ms") && l.ends_with(": 1.500")));
        assert!(lines(None, "g", "c").is_empty());
    }
}
