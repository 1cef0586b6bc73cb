//! `--describe`: one row per partition the group is assigned or has an offset for, in
//! kafka-consumer-groups.sh's column layout (columns widen to their longest value, at
//! least 15 characters; `-` where there is nothing to show).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use super::client::{GroupClient, TopicPartition};

/// One line of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub current_offset: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub consumer_id: String,
    pub host: String,
    pub client_id: String,
}

impl Row {
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end_offset? - self.current_offset?)
    }
}

fn dash(value: Option<i64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// What `--describe` prints on stderr before the table: the state of the group, if it
/// is not stable. `None` if the group does not exist (nothing else is printed).
pub fn state_notice(group: &str, state: &str) -> Option<String> {
    match state {
        "Dead" => None,
        "Empty" => Some(format!("\nConsumer group '{group}' has no active members.")),
        "PreparingRebalance" | "CompletingRebalance" => Some(format!(
            "\nWarning: Consumer group '{group}' is rebalancing."
        )),
        _ => Some(String::new()),
    }
}

/// The rows of one group: assigned partitions member by member, then partitions with a
/// committed offset and no member.
pub fn rows(client: &GroupClient, group: &str) -> Result<Vec<Row>> {
    let info = client.describe(group)?;
    let all = client.partitions(None)?;
    let committed = client.committed(group, &all)?;
    let mut rows = Vec::new();
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    let mut end_offsets: BTreeMap<TopicPartition, Option<i64>> = BTreeMap::new();
    let mut end_of = |tp: &TopicPartition| {
        *end_offsets
            .entry(tp.clone())
            .or_insert_with(|| client.watermarks(tp).ok().map(|(_, high)| high))
    };
    for member in &info.members {
        let mut partitions = member.assignment.clone();
        partitions.sort();
        for tp in partitions {
            rows.push(Row {
                group: group.to_string(),
                topic: tp.0.clone(),
                partition: tp.1,
                current_offset: committed.get(&tp).copied(),
                log_end_offset: end_of(&tp),
                consumer_id: member.member_id.clone(),
                host: member.host.clone(),
                client_id: member.client_id.clone(),
            });
            assigned.insert(tp);
        }
    }
    for (tp, offset) in &committed {
        if assigned.contains(tp) {
            continue;
        }
        rows.push(Row {
            group: group.to_string(),
            topic: tp.0.clone(),
            partition: tp.1,
            current_offset: Some(*offset),
            log_end_offset: end_of(tp),
            consumer_id: "-".into(),
            host: "-".into(),
            client_id: "-".into(),
        });
    }
    Ok(rows)
}

/// The table, header first, as kafka-consumer-groups.sh prints it.
pub fn render(rows: &[Row]) -> String {
    let width = |f: &dyn Fn(&Row) -> usize| rows.iter().map(f).max().unwrap_or(0).max(15);
    let group_w = width(&|r| r.group.len());
    let topic_w = width(&|r| r.topic.len());
    let consumer_w = width(&|r| r.consumer_id.len());
    let host_w = width(&|r| r.host.len());
    let line = |cols: [&str; 9]| {
        format!(
            "{:<group_w$} {:<topic_w$} {:<10} {:<15} {:<15} {:<15} {:<consumer_w$} {:<host_w$} {}\n",
            cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8]
        )
    };
    let mut out = String::from("\n");
    out.push_str(&line([
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]));
    for r in rows {
        out.push_str(&line([
            &r.group,
            &r.topic,
            &r.partition.to_string(),
            &dash(r.current_offset),
            &dash(r.log_end_offset),
            &dash(r.lag()),
            &r.consumer_id,
            &r.host,
            &r.client_id,
        ]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_at_least_fifteen_wide_and_unknowns_are_dashes() {
        let row = Row {
            group: "g".into(),
            topic: "a-rather-long-topic-name".into(),
            partition: 3,
            current_offset: None,
            log_end_offset: Some(10),
            consumer_id: "-".into(),
            host: "-".into(),
            client_id: "-".into(),
        };
        let table = render(&[row]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "");
        assert!(lines[1]
            .starts_with("GROUP           TOPIC                    PARTITION  CURRENT-OFFSET "));
        assert!(lines[2].starts_with("g               a-rather-long-topic-name 3          -               10              -   "));
    }
}
