//! Which duplicates a run's producer made itself: the copies it sent again under a bumped
//! producer epoch, told from the batch headers in the partition's segment files.
//!
//! librdkafka bumps its producer epoch when a request is refused with
//! OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier one is unanswered, and sends that earlier
//! request's records again from sequence 0, though they may have been written
//! (confluentinc/librdkafka#4953, seen against Kafka's brokers too). Under a new epoch
//! they are a new batch by the protocol, which no broker can recognise as a retry. A copy
//! in an epoch an earlier copy of its record already had is the cluster's, as is a copy
//! of another producer or one whose record was first read in another partition. Whether
//! the cluster's answer caused the sequence error is read from the saved logs: the nodes'
//! refused sequences and the producer's `debug=eos` lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use strom_wire::batch::RecordBatches;

use crate::faults::Duplicate;
use strom_testkit::local_cluster::LocalCluster;

/// The copies among `duplicated` that the producer sent again under a new epoch, as
/// (partition, offset). A partition whose headers cannot be read counts none: the report
/// then keeps all its duplicates.
pub fn resent_by_client(
    cluster: &LocalCluster,
    topic: &str,
    duplicated: &[Duplicate],
) -> BTreeSet<(i32, i64)> {
    let mut resent = BTreeSet::new();
    let partitions: BTreeSet<i32> = duplicated.iter().map(|(_, _, (p, _))| *p).collect();
    for p in partitions {
        let copies: Vec<(usize, i64, i64)> = duplicated
            .iter()
            .filter(|(_, first, again)| first.0 == p && again.0 == p)
            .map(|(record, first, again)| (*record, first.1, again.1))
            .collect();
        let offsets: BTreeSet<i64> = copies.iter().flat_map(|(_, a, b)| [*a, *b]).collect();
        match batch_producers(&partition_dir(cluster, topic, p), &offsets) {
            Ok(producers) => resent.extend(
                resent_copies(&copies, &producers)
                    .into_iter()
                    .map(|o| (p, o)),
            ),
            Err(e) => eprintln!("the batch headers of {topic}-{p} could not be read: {e:#}"),
        }
    }
    resent
}

/// Partition `p`'s directory on the first node that has one: every replica holds the
/// same batches below the high watermark, up to which the run read back.
fn partition_dir(cluster: &LocalCluster, topic: &str, p: i32) -> PathBuf {
    let name = format!("{topic}-{p}");
    cluster
        .nodes
        .iter()
        .map(|n| n.dir.join("data").join(&name))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Of one partition's duplicates (record, offset first read at, offset read at again),
/// the offsets of the copies written under a newer epoch of the same producer id than
/// every earlier copy of their record (`producers`: each offset's batch's producer id
/// and epoch). A copy in an epoch an earlier copy already had is the cluster's.
fn resent_copies(copies: &[(usize, i64, i64)], producers: &BTreeMap<i64, (i64, i16)>) -> Vec<i64> {
    let mut by_record: BTreeMap<usize, BTreeSet<i64>> = BTreeMap::new();
    for (record, first, again) in copies {
        by_record
            .entry(*record)
            .or_default()
            .extend([*first, *again]);
    }
    let mut resent = Vec::new();
    for offsets in by_record.values() {
        let mut offsets = offsets.iter();
        let Some(&(id, mut newest)) = offsets.next().and_then(|o| producers.get(o)) else {
            continue;
        };
        for offset in offsets {
            match producers.get(offset) {
                Some(&(again_id, epoch)) if again_id == id && epoch > newest => {
                    resent.push(*offset);
                    newest = epoch;
                }
                _ => {}
            }
        }
    }
    resent.sort_unstable();
    resent
}

/// The producer id and epoch of the batch holding each of `offsets`, from the headers of
/// the segment files in partition directory `dir`.
fn batch_producers(dir: &Path, offsets: &BTreeSet<i64>) -> Result<BTreeMap<i64, (i64, i16)>> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    let mut producers = BTreeMap::new();
    for segment in segments {
        let bytes = std::fs::read(&segment)?;
        // A crash can leave a torn batch at a segment's end: the batches before it count.
        for (header, _) in RecordBatches::new(&bytes).map_while(Result::ok) {
            for offset in offsets.range(header.base_offset..=header.last_offset()) {
                producers.insert(*offset, (header.producer_id, header.producer_epoch));
            }
        }
    }
    Ok(producers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of `count` records of producer 0 in `epoch`, at `base_offset`.
    fn batch(base_offset: i64, count: usize, epoch: i16) -> Vec<u8> {
        let mut builder = strom_wire::batch_builder::BatchBuilder::new(Vec::new(), 0);
        for _ in 0..count {
            builder.append(0, None, Some(b"v"), &[]);
        }
        let mut bytes = builder
            .finish(
                strom_wire::codec::Codec::None,
                -1,
                strom_wire::batch_builder::ProducerFields {
                    producer_id: 0,
                    producer_epoch: epoch,
                    base_sequence: 0,
                },
            )
            .unwrap();
        strom_wire::batch::set_base_offset(&mut bytes, base_offset);
        bytes
    }

    #[test]
    fn each_offsets_producer_epoch_is_read_from_its_batch_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let first = [batch(0, 3, 0), batch(3, 2, 0)].concat();
        // The second segment ends in a torn batch, as a crash leaves one.
        let mut second = [batch(5, 4, 1)].concat();
        second.extend_from_slice(&batch(9, 2, 1)[..20]);
        std::fs::write(dir.path().join("00000000000000000000.log"), first).unwrap();
        std::fs::write(dir.path().join("00000000000000000005.log"), second).unwrap();
        std::fs::write(dir.path().join("00000000000000000005.index"), [0u8; 8]).unwrap();
        let producers = batch_producers(dir.path(), &BTreeSet::from([1, 4, 8, 9])).unwrap();
        assert_eq!(
            producers,
            BTreeMap::from([(1, (0, 0)), (4, (0, 0)), (8, (0, 1))])
        );
    }

    #[test]
    fn only_a_copy_in_a_newer_producer_epoch_than_every_earlier_copy_is_a_client_resend() {
        // Record 7 at 10 (epoch 0), again at 20 (epoch 1) and at 30 (epoch 1 again: the
        // cluster's); record 8 at 11 and 21, both epoch 0; record 9 at 12 (producer 0)
        // and 22 (producer 5, epoch 1).
        let copies = [(7, 10, 20), (7, 10, 30), (8, 11, 21), (9, 12, 22)];
        let producers = BTreeMap::from([
            (10, (0, 0)),
            (20, (0, 1)),
            (30, (0, 1)),
            (11, (0, 0)),
            (21, (0, 0)),
            (12, (0, 0)),
            (22, (5, 1)),
        ]);
        assert_eq!(resent_copies(&copies, &producers), [20]);
    }
}
