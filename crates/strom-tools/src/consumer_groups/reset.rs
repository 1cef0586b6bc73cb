//! `--reset-offsets`: compute new committed offsets for a group that has no active
//! members, print them, and commit them with `--execute`.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use super::client::{GroupClient, TopicPartition};

/// Where to move each partition's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    /// An absolute offset, clamped to the partition's range as Kafka's tool does.
    Offset(i64),
}

/// Which partitions to reset: `--topic t` (all its partitions), `--topic t:0,2`, or
/// `--all-topics` (every partition the group has an offset for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Topics(Vec<String>),
    AllTopics,
}

/// Parses `--topic` values: `t` or `t:0,1,2`. Returns (topic, partitions if listed).
pub fn parse_topic(value: &str) -> Result<(String, Option<Vec<i32>>)> {
    match value.split_once(':') {
        None => Ok((value.to_string(), None)),
        Some((topic, list)) => {
            let partitions = list
                .split(',')
                .map(|p| p.trim().parse::<i32>())
                .collect::<Result<Vec<_>, _>>();
            match partitions {
                Ok(p) if !p.is_empty() => Ok((topic.to_string(), Some(p))),
                _ => bail!("invalid partition list in --topic {value}"),
            }
        }
    }
}

/// The partitions `scope` names, checked against the cluster's metadata.
fn partitions(client: &GroupClient, group: &str, scope: &Scope) -> Result<Vec<TopicPartition>> {
    match scope {
        Scope::AllTopics => {
            let all = client.partitions(None)?;
            Ok(client.committed(group, &all)?.into_keys().collect())
        }
        Scope::Topics(values) => {
            let mut out = Vec::new();
            for value in values {
                let (topic, listed) = parse_topic(value)?;
                let existing = client.partitions(Some(std::slice::from_ref(&topic)))?;
                if existing.is_empty() {
                    bail!("topic '{topic}' does not exist");
                }
                match listed {
                    None => out.extend(existing),
                    Some(list) => {
                        for p in list {
                            let tp = (topic.clone(), p);
                            if !existing.contains(&tp) {
                                bail!("partition {p} of topic '{topic}' does not exist");
                            }
                            out.push(tp);
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

/// The new offset of every partition in `scope`. Warnings (an offset out of range) go to
/// stderr, worded as Kafka's tool words them.
pub fn plan(
    client: &GroupClient,
    group: &str,
    scope: &Scope,
    to: ResetTo,
) -> Result<BTreeMap<TopicPartition, i64>> {
    let state = client.describe(group)?.state;
    if !matches!(state.as_str(), "Empty" | "Dead") {
        bail!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        );
    }
    let mut plan = BTreeMap::new();
    for tp in partitions(client, group, scope)? {
        let (low, high) = client.watermarks(&tp)?;
        let offset = match to {
            ResetTo::Earliest => low,
            ResetTo::Latest => high,
            ResetTo::Offset(o) if o > high => {
                eprintln!(
                    "New offset ({o}) is higher than latest offset for topic partition {}-{}. Value will be set to {high}",
                    tp.0, tp.1
                );
                high
            }
            ResetTo::Offset(o) if o < low => {
                eprintln!(
                    "New offset ({o}) is lower than earliest offset for topic partition {}-{}. Value will be set to {low}",
                    tp.0, tp.1
                );
                low
            }
            ResetTo::Offset(o) => o,
        };
        plan.insert(tp, offset);
    }
    Ok(plan)
}

/// The table of new offsets, as Kafka's tool prints it.
pub fn render(group: &str, plan: &BTreeMap<TopicPartition, i64>) -> String {
    let mut out = format!(
        "\n{:<30} {:<30} {:<10} {:<15}\n",
        "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"
    );
    for ((topic, partition), offset) in plan {
        out.push_str(&format!(
            "{group:<30} {topic:<30} {partition:<10} {offset:<15}\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_values_name_all_or_some_partitions() {
        assert_eq!(parse_topic("t").unwrap(), ("t".into(), None));
        assert_eq!(
            parse_topic("t:0,2").unwrap(),
            ("t".into(), Some(vec![0, 2]))
        );
        assert!(parse_topic("t:x").is_err());
    }
}
