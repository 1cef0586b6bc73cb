//! A process killed with SIGKILL while it replaces a file, again and again: the file
//! always holds one whole version. The test runs itself as the writer (a child process
//! of this test binary), and kills it at a different point of its writing each round.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use strom_log::durable_file::replace_atomically;

const TEST: &str = "a_kill_9_while_replacing_leaves_one_whole_version";
/// Set in the child: the file it replaces until it is killed.
const WRITER: &str = "STROM_DURABLE_FILE_WRITER";
const ROUNDS: u64 = 20;
/// Large enough that writing a version takes a good part of each replacement, so a kill
/// often lands while the bytes are written: a file written in place would then be found
/// cut short (it is, in round 0, when `replace_atomically` writes in place).
const PAYLOAD: usize = 4 << 20;

/// Version `n`: its number on the first line, then `PAYLOAD` bytes that depend on it.
fn version(n: u64) -> Vec<u8> {
    let mut bytes = format!("{n}\n").into_bytes();
    bytes.extend((0..PAYLOAD).map(|i| (n as usize).wrapping_mul(31).wrapping_add(i) as u8));
    bytes
}

/// The version the file holds, if it holds one whole.
fn whole_version(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let line = bytes.split(|b| *b == b'\n').next()?;
    let n: u64 = std::str::from_utf8(line).ok()?.parse().ok()?;
    (bytes == version(n)).then_some(n)
}

#[test]
fn a_kill_9_while_replacing_leaves_one_whole_version() {
    if let Some(path) = std::env::var_os(WRITER) {
        let path = Path::new(&path);
        let first = whole_version(path).map_or(0, |n| n + 1);
        for n in first.. {
            replace_atomically(path, &version(n)).expect("replace");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("versioned");
    let mut last = None;
    for round in 0..ROUNDS {
        let mut writer = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--test-threads=1"])
            .env(WRITER, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the writer");
        // Killed once it has written a few more versions: a different point each round.
        let wanted = last.map_or(0, |n| n + 1 + round % 7);
        let deadline = Instant::now() + Duration::from_secs(30);
        while whole_version(&path).is_none_or(|n| n < wanted) {
            assert!(Instant::now() < deadline, "the writer made no progress");
            std::thread::yield_now();
        }
        writer.kill().expect("SIGKILL");
        writer.wait().unwrap();
        let held = whole_version(&path);
        assert!(
            held.is_some_and(|n| n >= wanted),
            "round {round}: after the kill the file holds {held:?}, not a whole version ≥ {wanted}"
        );
        last = held;
    }
}
