//! `strom metadata-quorum`: Kafka's kafka-metadata-quorum.sh —
//! `--bootstrap-server HOST:PORT describe --status | --replication [--human-readable]` —
//! printing what Kafka 3.9's tool prints, from DescribeQuorum (API 55) and the cluster id
//! of Metadata, so it works against strom and against Kafka.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use kafka_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState};
use kafka_protocol::messages::DescribeQuorumResponse;

use crate::cli::{self, CliError, OptionSpec};
use strom_client::blocking;

const SPECS: &[OptionSpec] = &[
    OptionSpec::one("bootstrap-server"),
    OptionSpec::one("bootstrap-controller"),
    OptionSpec::one("command-config"),
    OptionSpec::flag("status"),
    OptionSpec::flag("replication"),
    OptionSpec::flag("human-readable"),
    OptionSpec::flag("help"),
];

const USAGE: &str = "\
usage: strom metadata-quorum --bootstrap-server HOST:PORT describe (--status | --replication [--human-readable])

This tool describes the metadata quorum of a KRaft cluster (as kafka-metadata-quorum.sh).
  --bootstrap-server HOST:PORT   a broker of the cluster (it forwards to the active controller)
  describe --status              the quorum's leader, epoch, high watermark, voters and observers
  describe --replication         each voter's and observer's log end offset, lag and fetch times
  --human-readable               with --replication: times as \"N ms ago\"
";

const TIMEOUT: Duration = Duration::from_secs(30);
/// Kafka prints the zero directory id of a voter without one as this.
const ZERO_DIRECTORY_ID: &str = "AAAAAAAAAAAAAAAAAAAAAA";

pub fn main(args: Vec<String>) -> ExitCode {
    let parsed = match cli::parse(&args, SPECS, true) {
        Ok(p) => p,
        Err(e) => {
            let message = match e {
                CliError::Unrecognized(t) => format!("unrecognized arguments: '{t}'"),
                CliError::Ambiguous(t, names) => {
                    format!("ambiguous option: {t} could match {}", names.join(", "))
                }
                CliError::MissingValue(n) => format!("argument --{n}: expected one argument"),
                CliError::UnexpectedValue(n) => {
                    format!("argument --{n}: ignored explicit argument")
                }
            };
            eprintln!("{USAGE}strom metadata-quorum: error: {message}");
            return ExitCode::from(1);
        }
    };
    if parsed.has("help") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(&parsed) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &cli::Parsed) -> Result<String> {
    if args.has("bootstrap-controller") {
        bail!("--bootstrap-controller is not supported: strom's controllers speak their own protocol; use --bootstrap-server with a broker, which forwards DescribeQuorum to the active controller");
    }
    let Some(bootstrap) = args.value("bootstrap-server") else {
        bail!("{USAGE}strom metadata-quorum: error: one of the arguments --bootstrap-server --bootstrap-controller is required");
    };
    if args.positional.first().map(String::as_str) != Some("describe") {
        bail!("{USAGE}strom metadata-quorum: error: a command is required: describe");
    }
    match (args.has("status"), args.has("replication")) {
        (true, true) => bail!(
            "Only one of --status or --replication should be specified with describe sub-command"
        ),
        (false, false) => {
            bail!("One of --status or --replication must be specified with describe sub-command")
        }
        (true, false) if args.has("human-readable") => {
            bail!("The option --human-readable is only supported along with --replication")
        }
        _ => {}
    }
    let quorum = blocking::describe_quorum(bootstrap, TIMEOUT)?;
    let Some(partition) = quorum.topics.first().and_then(|t| t.partitions.first()) else {
        bail!("DescribeQuorum returned no partition");
    };
    if partition.error_code != 0 {
        bail!("DescribeQuorum failed with error {}", partition.error_code);
    }
    if args.has("status") {
        let cluster_id = blocking::metadata(bootstrap, TIMEOUT)?
            .cluster_id
            .map(|c| c.to_string())
            .unwrap_or_default();
        Ok(status(&cluster_id, &quorum, partition))
    } else {
        Ok(replication(
            partition,
            args.has("human-readable"),
            strom_wire::now_ms(),
        ))
    }
}

/// `describe --status`: `Key:` padded to 24 columns, then the value.
pub fn status(cluster_id: &str, quorum: &DescribeQuorumResponse, p: &PartitionData) -> String {
    let leader = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id);
    let leader_end = leader.map_or(-1, |l| l.log_end_offset);
    let slowest = p.current_voters.iter().min_by_key(|v| v.log_end_offset);
    let max_lag = slowest.map_or(0, |s| leader_end - s.log_end_offset);
    let max_lag_time = match (slowest, leader) {
        (Some(s), _) if s.replica_id == p.leader_id => 0,
        (Some(s), Some(l))
            if s.last_caught_up_timestamp >= 0 && l.last_caught_up_timestamp >= 0 =>
        {
            l.last_caught_up_timestamp - s.last_caught_up_timestamp
        }
        _ => -1,
    };
    let endpoints = |id: i32| -> Vec<String> {
        quorum
            .nodes
            .iter()
            .filter(|n| n.node_id.0 == id)
            .flat_map(|n| n.listeners.iter())
            .map(|l| format!("\"{}://{}:{}\"", l.name.as_str(), l.host.as_str(), l.port))
            .collect()
    };
    let describe = |r: &ReplicaState| {
        let mut s = format!(
            "{{\"id\": {}, \"directoryId\": {}",
            r.replica_id.0,
            directory_json(r)
        );
        let e = endpoints(r.replica_id.0);
        if !e.is_empty() {
            s.push_str(&format!(", \"endpoints\": [{}]", e.join(", ")));
        }
        s.push('}');
        s
    };
    let list = |rs: &[ReplicaState]| {
        format!(
            "[{}]",
            rs.iter().map(describe).collect::<Vec<_>>().join(", ")
        )
    };
    let rows = [
        ("ClusterId", cluster_id.to_string()),
        ("LeaderId", p.leader_id.0.to_string()),
        ("LeaderEpoch", p.leader_epoch.to_string()),
        ("HighWatermark", p.high_watermark.to_string()),
        ("MaxFollowerLag", max_lag.to_string()),
        ("MaxFollowerLagTimeMs", max_lag_time.to_string()),
        ("CurrentVoters", list(&p.current_voters)),
        ("CurrentObservers", list(&p.observers)),
    ];
    rows.iter()
        .map(|(k, v)| format!("{:<24}{v}\n", format!("{k}:")))
        .collect()
}

fn directory_json(r: &ReplicaState) -> String {
    if r.replica_directory_id.is_nil() {
        "null".to_string()
    } else {
        format!("\"{}\"", base64_uuid(&r.replica_directory_id))
    }
}

/// A UUID as Kafka prints it: URL-safe base64 without padding.
pub fn base64_uuid(id: &uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// `describe --replication`: Kafka's pretty-printed table, every cell left-justified to
/// its column's width and followed by a tab.
pub fn replication(p: &PartitionData, human_readable: bool, now: i64) -> String {
    let leader_end = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id)
        .map_or(-1, |l| l.log_end_offset);
    let time = |t: i64| {
        if human_readable && t > 0 {
            format!("{} ms ago", (now - t).max(0))
        } else {
            t.to_string()
        }
    };
    let row = |r: &ReplicaState, status: &str| {
        vec![
            r.replica_id.0.to_string(),
            if r.replica_directory_id.is_nil() {
                ZERO_DIRECTORY_ID.to_string()
            } else {
                base64_uuid(&r.replica_directory_id)
            },
            r.log_end_offset.to_string(),
            (leader_end - r.log_end_offset).max(0).to_string(),
            time(r.last_fetch_timestamp),
            time(r.last_caught_up_timestamp),
            status.to_string(),
        ]
    };
    let mut rows: Vec<Vec<String>> = vec![[
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    rows.extend(
        p.current_voters
            .iter()
            .filter(|v| v.replica_id == p.leader_id)
            .map(|v| row(v, "Leader")),
    );
    rows.extend(
        p.current_voters
            .iter()
            .filter(|v| v.replica_id != p.leader_id)
            .map(|v| row(v, "Follower")),
    );
    rows.extend(p.observers.iter().map(|v| row(v, "Observer")));
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let mut line: String = r
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}\t"))
                .collect();
            line.push('\n');
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::BrokerId;

    fn replica(id: i32, end: i64, fetch: i64, caught_up: i64) -> ReplicaState {
        ReplicaState::default()
            .with_replica_id(BrokerId(id))
            .with_log_end_offset(end)
            .with_last_fetch_timestamp(fetch)
            .with_last_caught_up_timestamp(caught_up)
    }

    fn quorum() -> PartitionData {
        PartitionData::default()
            .with_leader_id(BrokerId(2))
            .with_leader_epoch(7)
            .with_high_watermark(10)
            .with_current_voters(vec![
                replica(1, 8, 990, 980),
                replica(2, 10, 1000, 1000),
                replica(3, 10, 995, 995),
            ])
            .with_observers(vec![replica(4, 10, 999, 999)])
    }

    #[test]
    fn status_prints_kafkas_key_value_lines() {
        let out = status("c1", &DescribeQuorumResponse::default(), &quorum());
        assert_eq!(
            out,
            "ClusterId:              c1\n\
             LeaderId:               2\n\
             LeaderEpoch:            7\n\
             HighWatermark:          10\n\
             MaxFollowerLag:         2\n\
             MaxFollowerLagTimeMs:   20\n\
             CurrentVoters:          [{\"id\": 1, \"directoryId\": null}, {\"id\": 2, \"directoryId\": null}, {\"id\": 3, \"directoryId\": null}]\n\
             CurrentObservers:       [{\"id\": 4, \"directoryId\": null}]\n"
        );
    }

    #[test]
    fn replication_prints_the_leader_then_followers_then_observers_in_tab_separated_columns() {
        let out = replication(&quorum(), false, 2000);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t");
        assert_eq!(lines[1], "2     \tAAAAAAAAAAAAAAAAAAAAAA\t10          \t0  \t1000              \t1000                 \tLeader  \t");
        assert!(
            lines[2].starts_with("1     \t")
                && lines[2].contains("\t2  \t")
                && lines[2].ends_with("Follower\t")
        );
        assert!(lines[4].starts_with("4     \t") && lines[4].ends_with("Observer\t"));
        assert!(replication(&quorum(), true, 2000).contains("1000 ms ago"));
    }

    #[test]
    fn directory_ids_print_as_kafka_base64() {
        let id = uuid::Uuid::from_u128(0x20c3_5e96_7e2f_4e7a_9c1c_8ae4_f5a3_03d9);
        assert_eq!(base64_uuid(&id).len(), 22);
        assert_eq!(base64_uuid(&uuid::Uuid::nil()), ZERO_DIRECTORY_ID);
    }
}
