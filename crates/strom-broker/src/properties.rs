//! Java `.properties` parsing, enough for Kafka's `server.properties`: `key=value`,
//! `key: value` or `key value`, `#`/`!` comments, blank lines and `\` line continuations.

use std::collections::BTreeMap;

/// Properties from `(key, value)` pairs (tests build configurations this way).
#[cfg(test)]
pub fn from_pairs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Parses properties text into an ordered map; later keys win, as in Java.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(stripped) = line.strip_suffix('\\') {
            pending.push_str(stripped);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let split = entry.find(['=', ':', ' ', '\t']);
        let (key, value) = match split {
            Some(i) => {
                let value = entry[i + 1..].trim_start_matches([' ', '\t']);
                let value = value.strip_prefix(['=', ':']).unwrap_or(value);
                (&entry[..i], value.trim())
            }
            None => (entry.as_str(), ""),
        };
        out.insert(key.trim().to_string(), value.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_kafka_style_properties() {
        let p = parse(
            "# comment\n! also\nnode.id=1\nlog.dirs : /tmp/a,\\\n  /tmp/b\nnum.partitions 3\n\nempty=\n",
        );
        assert_eq!(p["node.id"], "1");
        assert_eq!(p["log.dirs"], "/tmp/a,/tmp/b");
        assert_eq!(p["num.partitions"], "3");
        assert_eq!(p["empty"], "");
    }
}
