//! `strom dump-log`, like `kafka-dump-log.sh` (Kafka's `DumpLogSegments`): prints what a
//! partition's files hold, in Kafka's words and order, so a user sees what the broker
//! (and its log cleaner) kept.
//!
//! `--files F1,F2,…` takes `.log` segments (each batch; records with `--deep-iteration`,
//! keys and values with `--print-data-log`), `.index` and `.timeindex` files (their
//! entries, checked against the segment: mismatches go to stderr, `--verify-index-only`
//! prints nothing else, `--index-sanity-check` only checks) and `.snapshot` producer
//! state. `--offsets-decoder` prints `__consumer_offsets` records as Kafka's JSON.
//! strom's offset and time index entries name a batch's base offset (Kafka's its last
//! offset); the checks follow strom's rule.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use bytes::Bytes;
use kafka_protocol::records::{RecordBatchDecoder, TimestampType};
use strom_coordinator::group::offsets_topic;
use strom_log::index_file::IndexEntry;
use strom_log::offset_index::OffsetPosition;
use strom_log::time_index::TimestampOffset;
use strom_log::ProducerStateManager;
use strom_wire::batch::verify_crc;
use strom_wire::{Codec, RecordBatchHeader};

const USAGE: &str = "USAGE: strom dump-log --files <file1,file2,...> [--print-data-log] \
[--deep-iteration] [--skip-record-metadata] [--offsets-decoder] [--index-sanity-check] \
[--verify-index-only] [--max-bytes <n>] [--max-message-size <n>]";

/// The options, as Kafka's tool names them.
#[derive(Debug, Default)]
struct Options {
    files: Vec<String>,
    print_data_log: bool,
    deep_iteration: bool,
    skip_record_metadata: bool,
    offsets_decoder: bool,
    index_sanity_check: bool,
    verify_index_only: bool,
    max_bytes: usize,
}

/// Entry point of `strom dump-log`.
pub fn main(args: Vec<String>) -> ExitCode {
    let options = match parse(&args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(1);
        }
    };
    let mut errors = Errors::default();
    let mut out = String::new();
    for file in &options.files {
        out.push_str(&format!("Dumping {file}\n"));
        let path = Path::new(file);
        let dumped = match path.extension().and_then(|e| e.to_str()) {
            Some("log") => dump_log(path, &options, &mut out, &mut errors),
            Some("index") => dump_index(path, &options, &mut out, &mut errors),
            Some("timeindex") => dump_time_index(path, &options, &mut out, &mut errors),
            Some("snapshot") => dump_producer_snapshot(path, &mut out),
            _ => {
                eprintln!("Ignoring unknown file {file}");
                Ok(())
            }
        };
        print!("{out}");
        out.clear();
        if let Err(e) = dumped {
            eprintln!("strom dump-log: {file}: {e}");
            return ExitCode::from(1);
        }
    }
    errors.print();
    ExitCode::SUCCESS
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        max_bytes: i32::MAX as usize,
        ..Options::default()
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("Option {name} requires an argument"))
        };
        match name {
            "--files" => options.files = value(name)?.split(',').map(str::to_string).collect(),
            "--print-data-log" => options.print_data_log = true,
            "--deep-iteration" => options.deep_iteration = true,
            "--skip-record-metadata" => options.skip_record_metadata = true,
            "--offsets-decoder" => options.offsets_decoder = true,
            "--index-sanity-check" => options.index_sanity_check = true,
            "--verify-index-only" => options.verify_index_only = true,
            "--max-bytes" => options.max_bytes = number(name, &value(name)?)?,
            "--max-message-size" => {
                number(name, &value(name)?)?;
            }
            "--transaction-log-decoder"
            | "--cluster-metadata-decoder"
            | "--remote-log-metadata-decoder"
            | "--share-group-state-decoder"
            | "--key-decoder-class"
            | "--value-decoder-class" => {
                return Err(format!("{name} is not supported by strom dump-log"))
            }
            "--help" => return Err(String::new()),
            other => return Err(format!("{other} is not a recognized option")),
        }
    }
    if options.files.is_empty() {
        return Err("Missing required argument \"[files]\"".to_string());
    }
    // As Kafka: a decoder implies printing the data, which implies deep iteration.
    options.print_data_log |= options.offsets_decoder;
    options.deep_iteration |= options.print_data_log;
    Ok(options)
}

fn number(name: &str, value: &str) -> Result<usize, String> {
    value
        .parse()
        .map_err(|_| format!("Option {name}: '{value}' is not a number"))
}

/// What the checks found, printed to stderr at the end as Kafka's tool does.
#[derive(Debug, Default)]
struct Errors {
    /// Per index file: (indexed offset, offset of the batch found there).
    index_mismatches: BTreeMap<String, Vec<(i64, i64)>>,
    /// Per segment: (offset, the next record's offset) where offsets skip.
    non_consecutive: BTreeMap<String, Vec<(i64, i64)>>,
    /// Per time index: (indexed timestamp, the batch's maximum timestamp).
    time_mismatches: BTreeMap<String, Vec<(i64, i64)>>,
}

impl Errors {
    fn print(&self) {
        for (file, mismatches) in &self.index_mismatches {
            eprintln!("Mismatches in :{file}");
            for (indexed, found) in mismatches {
                eprintln!("  Index offset: {indexed}, log offset: {found}");
            }
        }
        for (file, mismatches) in &self.time_mismatches {
            eprintln!("Found timestamp mismatch in :{file}");
            for (indexed, found) in mismatches {
                eprintln!("  Index timestamp: {indexed}, log timestamp: {found}");
            }
        }
        for (file, pairs) in &self.non_consecutive {
            eprintln!("Non-consecutive offsets in {file}");
            for (previous, next) in pairs {
                eprintln!("  {previous} is followed by {next}");
            }
        }
    }
}

/// The base offset a file's name gives.
fn base_offset(path: &Path) -> Result<i64, String> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('.').next())
        .and_then(|stem| stem.parse().ok())
        .ok_or_else(|| "the file name does not start with a base offset".to_string())
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

fn dump_log(
    path: &Path,
    options: &Options,
    out: &mut String,
    errors: &mut Errors,
) -> Result<(), String> {
    let mut bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    bytes.truncate(options.max_bytes);
    let _ = writeln!(out, "Log starting offset: {}", base_offset(path)?);
    let mut position = 0usize;
    let mut last_offset = -1i64;
    while let Some(header) = whole_batch(&bytes[position..]) {
        let batch = &bytes[position..position + header.total_len()];
        batch_line(&header, batch, position, out);
        if options.deep_iteration {
            let pairs = errors.non_consecutive.entry(absolute(path)).or_default();
            record_lines(&header, batch, options, &mut last_offset, pairs, out);
        }
        position += header.total_len();
    }
    errors.non_consecutive.retain(|_, pairs| !pairs.is_empty());
    let trailing = bytes.len() - position;
    if trailing > 0 && options.max_bytes == i32::MAX as usize {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let _ = writeln!(out, "Found {trailing} invalid bytes at the end of {name}");
    }
    Ok(())
}

/// The header of the whole batch `bytes` starts with, if it holds one.
fn whole_batch(bytes: &[u8]) -> Option<RecordBatchHeader> {
    let header = RecordBatchHeader::parse(bytes).ok()?;
    (header.total_len() <= bytes.len()).then_some(header)
}

fn timestamp_type(header: &RecordBatchHeader) -> &'static str {
    if header.is_log_append_time() {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// Java's `OptionalLong.toString`.
fn optional_long(value: Option<i64>) -> String {
    value.map_or_else(
        || "OptionalLong.empty".to_string(),
        |v| format!("OptionalLong[{v}]"),
    )
}

fn batch_line(header: &RecordBatchHeader, batch: &[u8], position: usize, out: &mut String) {
    let codec = match Codec::from_attributes(header.attributes) {
        Some(Codec::None) => "none",
        Some(Codec::Gzip) => "gzip",
        Some(Codec::Snappy) => "snappy",
        Some(Codec::Lz4) => "lz4",
        Some(Codec::Zstd) => "zstd",
        None => "unknown",
    };
    let _ = writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} \
         deleteHorizonMs: {} position: {position} {}: {} size: {} magic: {} compresscodec: {codec} \
         crc: {} isvalid: {}",
        header.base_offset,
        header.last_offset(),
        header.record_count,
        header.base_sequence,
        header.last_sequence(),
        header.producer_id,
        header.producer_epoch,
        header.partition_leader_epoch,
        header.is_transactional(),
        header.is_control(),
        optional_long(header.delete_horizon_ms()),
        timestamp_type(header),
        header.max_timestamp,
        header.total_len(),
        header.magic,
        header.crc,
        verify_crc(batch).is_ok(),
    );
}

/// One line per record (as Kafka's `dumpBatchRecords`), noting where offsets skip.
fn record_lines(
    header: &RecordBatchHeader,
    batch: &[u8],
    options: &Options,
    last_offset: &mut i64,
    non_consecutive: &mut Vec<(i64, i64)>,
    out: &mut String,
) {
    let decoded = match RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(batch)) {
        Ok(decoded) => decoded,
        Err(e) => {
            let _ = writeln!(out, "| the records of this batch do not decode: {e}");
            return;
        }
    };
    for record in decoded.records {
        if record.offset != *last_offset + 1 {
            non_consecutive.push((*last_offset, record.offset));
        }
        *last_offset = record.offset;
        let mut line = String::new();
        if !options.skip_record_metadata {
            let kind = match record.timestamp_type {
                TimestampType::Creation => "CreateTime",
                TimestampType::LogAppend => "LogAppendTime",
            };
            let size = |b: &Option<Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
            let headers: Vec<String> = record.headers.keys().map(|k| k.to_string()).collect();
            let _ = write!(
                line,
                "| offset: {} {kind}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
                record.offset,
                record.timestamp,
                size(&record.key),
                size(&record.value),
                record.sequence,
                headers.join(",")
            );
        }
        if options.print_data_log && !header.is_control() {
            let prefix = if options.skip_record_metadata {
                "| "
            } else {
                " "
            };
            line.push_str(&record_contents(&record, options.offsets_decoder, prefix));
        }
        let _ = writeln!(out, "{line}");
    }
}

/// `key: … payload: …` as Kafka's string decoder or `--offsets-decoder` prints them.
fn record_contents(
    record: &kafka_protocol::records::Record,
    offsets_decoder: bool,
    prefix: &str,
) -> String {
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let (key, value) = if offsets_decoder {
        match record.key.as_ref().map(|k| offsets_topic::describe_record(k, record.value.as_deref())) {
            Some(Some((key, value))) => (Some(key), Some(value)),
            Some(None) => (Some(format!("Unknown record type at offset {}, skipping.", record.offset)), None),
            None => (
                Some(format!("Failed to decode message at offset {} using offset topic decoder (message had a missing key)", record.offset)),
                None,
            ),
        }
    } else {
        (
            record.key.as_ref().map(text),
            record.value.as_ref().map(text),
        )
    };
    let mut contents = String::new();
    let mut prefix = prefix;
    if let Some(key) = key {
        contents.push_str(&format!("{prefix}key: {key}"));
        prefix = " ";
    }
    if let Some(value) = value {
        contents.push_str(&format!("{prefix}payload: {value}"));
    }
    contents
}

/// An index file's base offset, whether it holds whole entries only, its entries and
/// the segment beside it.
fn read_index<E: IndexEntry>(path: &Path) -> Result<(i64, bool, Vec<E>, Vec<u8>), String> {
    let base = base_offset(path)?;
    let raw = std::fs::read(path).map_err(|e| e.to_string())?;
    let entries = raw.chunks_exact(E::SIZE).map(E::decode).collect();
    Ok((base, raw.len() % E::SIZE == 0, entries, segment_of(path)?))
}

/// The segment beside an index file, read whole.
fn segment_of(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path.with_extension("log")).map_err(|e| format!("its segment: {e}"))
}

/// The header of the batch at `position` of `log`.
fn header_at(log: &[u8], position: usize) -> Option<RecordBatchHeader> {
    log.get(position..).and_then(whole_batch)
}

fn dump_index(
    path: &Path,
    options: &Options,
    out: &mut String,
    errors: &mut Errors,
) -> Result<(), String> {
    let (base, whole, raw, log) = read_index::<OffsetPosition>(path)?;
    let entries: Vec<(i64, usize)> = raw
        .iter()
        .map(|e| (base + i64::from(e.relative_offset), e.position as usize))
        .collect();
    if entries.is_empty() {
        let _ = writeln!(out, "{} is empty.", path.display());
        return Ok(());
    }
    if options.index_sanity_check {
        let sane = whole
            && entries
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
            && entries.iter().all(|(_, p)| *p < log.len().max(1));
        if !sane {
            return Err(format!(
                "Corrupt index found, index file ({}) failed the sanity check",
                path.display()
            ));
        }
        let _ = writeln!(out, "{} passed sanity check.", path.display());
        return Ok(());
    }
    for (offset, position) in entries {
        let found = header_at(&log, position).map_or(-1, |h| h.base_offset);
        if found != offset {
            errors
                .index_mismatches
                .entry(absolute(path))
                .or_default()
                .push((offset, found));
        }
        if !options.verify_index_only {
            let _ = writeln!(out, "offset: {offset} position: {position}");
        }
    }
    Ok(())
}

fn dump_time_index(
    path: &Path,
    options: &Options,
    out: &mut String,
    errors: &mut Errors,
) -> Result<(), String> {
    let (base, whole, raw, log) = read_index::<TimestampOffset>(path)?;
    let entries: Vec<(i64, i64)> = raw
        .iter()
        .map(|e| (e.timestamp, base + i64::from(e.relative_offset)))
        .collect();
    if options.index_sanity_check {
        if !whole || entries.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(format!(
                "Corrupt time index found, time index file ({}) failed the sanity check",
                path.display()
            ));
        }
        let _ = writeln!(out, "{} passed sanity check.", path.display());
        return Ok(());
    }
    let batches = batch_headers(&log);
    for (timestamp, offset) in entries {
        if let Some(batch) = batches.iter().find(|h| h.base_offset == offset) {
            if batch.max_timestamp != timestamp {
                errors
                    .time_mismatches
                    .entry(absolute(path))
                    .or_default()
                    .push((timestamp, batch.max_timestamp));
            }
        }
        if !options.verify_index_only {
            let _ = writeln!(out, "timestamp: {timestamp} offset: {offset}");
        }
    }
    Ok(())
}

fn batch_headers(log: &[u8]) -> Vec<RecordBatchHeader> {
    let mut headers = Vec::new();
    let mut position = 0;
    while let Some(header) = header_at(log, position) {
        position += header.total_len();
        headers.push(header);
    }
    headers
}

fn dump_producer_snapshot(path: &Path, out: &mut String) -> Result<(), String> {
    let offset = base_offset(path)?;
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let Some(state) = ProducerStateManager::decode(&bytes, offset) else {
        eprintln!("Snapshot {} is corrupt", path.display());
        return Ok(());
    };
    for (producer_id, epoch, newest) in state.newest_batches() {
        let _ = write!(
            out,
            "producerId: {producer_id} producerEpoch: {epoch} coordinatorEpoch: -1 \
             currentTxnFirstOffset: OptionalLong.empty lastTimestamp: {}",
            newest.map_or(-1, |b| b.max_timestamp)
        );
        if let Some(b) = newest {
            let _ = write!(
                out,
                " firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                b.first_sequence,
                b.last_sequence,
                b.last_offset,
                b.last_offset - b.first_offset,
                b.max_timestamp
            );
        }
        let _ = writeln!(out);
    }
    Ok(())
}
