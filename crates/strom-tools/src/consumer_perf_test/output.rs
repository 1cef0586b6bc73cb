//! Kafka's consumer output lines, byte for byte.

use crate::java_format::fixed;

const EXTENDED_HEADER: &str = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec";
const MIB: f64 = 1024.0 * 1024.0;

pub fn header(detailed: bool) -> String {
    if detailed {
        format!("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{EXTENDED_HEADER}")
    } else {
        format!("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{EXTENDED_HEADER}")
    }
}

/// The figures of the summary row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub start_ms: i64,
    pub end_ms: i64,
    pub bytes: u64,
    pub messages: u64,
    pub join_time_ms: u64,
}

impl Summary {
    pub fn elapsed_sec(&self) -> f64 {
        (self.end_ms - self.start_ms) as f64 / 1000.0
    }
    pub fn mib(&self) -> f64 {
        self.bytes as f64 / MIB
    }
    pub fn fetch_time_ms(&self) -> i64 {
        (self.end_ms - self.start_ms) - self.join_time_ms as i64
    }
}

/// `"%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f%n"`.
pub fn summary_row(s: &Summary, format_date: impl Fn(i64) -> String) -> String {
    let mib = s.mib();
    let elapsed = s.elapsed_sec();
    let fetch_ms = s.fetch_time_ms();
    format!(
        "{}, {}, {}, {}, {}, {}, {}, {}, {}, {}",
        format_date(s.start_ms),
        format_date(s.end_ms),
        fixed(mib, 4),
        fixed(mib / elapsed, 4),
        s.messages,
        fixed(s.messages as f64 / elapsed, 4),
        s.join_time_ms,
        fetch_ms,
        fixed(mib / (fetch_ms as f64 / 1000.0), 4),
        fixed(s.messages as f64 / (fetch_ms as f64 / 1000.0), 4),
    )
}

/// One `--show-detailed-stats` interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub bytes: u64,
    pub last_bytes: u64,
    pub messages: u64,
    pub last_messages: u64,
    pub start_ms: i64,
    pub end_ms: i64,
    pub join_time_ms: u64,
}

/// `printBasicProgress` then `printExtendedProgress`, threadId always 0.
pub fn progress_row(p: &Progress, format_date: impl Fn(i64) -> String) -> String {
    let elapsed_ms = (p.end_ms - p.start_ms) as f64;
    let interval_mib = (p.bytes - p.last_bytes) as f64 / MIB;
    let interval_messages = p.messages - p.last_messages;
    let fetch_ms = p.end_ms - p.start_ms - p.join_time_ms as i64;
    let (fetch_mib_sec, fetch_msg_sec) = if fetch_ms <= 0 {
        (0.0, 0.0)
    } else {
        (
            1000.0 * interval_mib / fetch_ms as f64,
            1000.0 * interval_messages as f64 / fetch_ms as f64,
        )
    };
    format!(
        "{}, 0, {}, {}, {}, {}, {}, {}, {}, {}",
        format_date(p.end_ms),
        fixed(p.bytes as f64 / MIB, 4),
        fixed(1000.0 * interval_mib / elapsed_ms, 4),
        p.messages,
        fixed(interval_messages as f64 / elapsed_ms * 1000.0, 4),
        p.join_time_ms,
        fetch_ms,
        fixed(fetch_mib_sec, 4),
        fixed(fetch_msg_sec, 4),
    )
}

pub fn timeout_warning(timeout_ms: u64) -> String {
    format!(
        "WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) exceeded. You can use the --timeout option to increase the timeout."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_kafkas() {
        assert_eq!(
            header(false),
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        );
        assert_eq!(
            header(true),
            "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        );
    }

    #[test]
    fn summary_row_matches_kafkas_example() {
        // PR #13215: 3446 records of 1000 bytes in 3291 ms with a 69 ms join.
        let s = Summary {
            start_ms: 0,
            end_ms: 3291,
            bytes: 3446 * 1000,
            messages: 3446,
            join_time_ms: 3222,
        };
        let row = summary_row(&s, |ms| {
            if ms == 0 {
                "2023-02-07 17:53:25:127".into()
            } else {
                "2023-02-07 17:53:28:418".into()
            }
        });
        assert_eq!(
            row,
            "2023-02-07 17:53:25:127, 2023-02-07 17:53:28:418, 3.2864, 0.9986, 3446, 1047.0981, 3222, 69, 47.6284, 49942.0290"
        );
    }

    #[test]
    fn progress_row_has_thread_zero_and_zero_rates_without_fetch_time() {
        let p = Progress {
            bytes: 2 * 1024 * 1024,
            last_bytes: 1024 * 1024,
            messages: 200,
            last_messages: 100,
            start_ms: 0,
            end_ms: 1000,
            join_time_ms: 1000,
        };
        assert_eq!(
            progress_row(&p, |_| "T".into()),
            "T, 0, 2.0000, 1.0000, 200, 100.0000, 1000, 0, 0.0000, 0.0000"
        );
    }

    #[test]
    fn division_by_zero_prints_java_spellings() {
        let s = Summary {
            start_ms: 5,
            end_ms: 5,
            bytes: 0,
            messages: 0,
            join_time_ms: 0,
        };
        assert!(summary_row(&s, |_| "T".into()).ends_with("0, NaN, 0, 0, NaN, NaN"));
    }
}
