//! Test harness: starts the real `strom` binary on 127.0.0.1 with a port chosen by the
//! kernel, in a temporary log directory that outlives restarts, and stops it with SIGTERM
//! or `kill -9`.

#![allow(dead_code)]

pub mod client;
pub mod cluster;
pub mod raw;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a broker may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `strom server` child process.
pub struct StromBroker {
    child: Option<Child>,
    dir: tempfile::TempDir,
    overrides: Vec<String>,
    port: u16,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// `RLIMIT_NOFILE` (soft and hard) the broker runs under, when the test sets one.
    open_files_limit: Option<u64>,
}

impl StromBroker {
    /// Starts a broker with `overrides` (`key=value`) on a fresh log directory.
    pub fn start(overrides: &[&str]) -> Self {
        Self::start_limited(None, overrides)
    }

    /// Starts a broker whose `RLIMIT_NOFILE` is `open_files_limit` (soft and hard), as a
    /// machine with a low descriptor limit would run it; restarts keep the limit.
    pub fn start_limited(open_files_limit: Option<u64>, overrides: &[&str]) -> Self {
        Self::start_prepared(open_files_limit, |_| {}, overrides)
    }

    /// Starts a broker on a log directory that `setup` fills first (with an earlier
    /// release's files, say).
    pub fn start_on(setup: impl FnOnce(&Path), overrides: &[&str]) -> Self {
        Self::start_prepared(None, setup, overrides)
    }

    fn start_prepared(
        open_files_limit: Option<u64>,
        setup: impl FnOnce(&Path),
        overrides: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        setup(&dir.path().join("logs"));
        let mut broker = Self {
            child: None,
            dir,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            port: 0,
            stderr: None,
            open_files_limit,
        };
        broker.spawn(0);
        broker
    }

    /// The log directory, which survives restarts of this broker.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn spawn(&mut self, port: u16) {
        let cmd = self.command(port);
        let (child, stderr, line) = spawn_until_ready(cmd, "strom broker ");
        self.stderr = Some(stderr);
        // Kept before the line is read, so a failure below still kills it (on drop).
        self.child = Some(child);
        let addr = line
            .rsplit(' ')
            .next()
            .expect("ready line ends with the address");
        self.port = addr.rsplit(':').next().unwrap().parse().expect("port");
    }

    fn command(&self, port: u16) -> Command {
        let mut cmd = server_command(self.open_files_limit);
        cmd.arg("server")
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
            .arg("--override")
            .arg(format!("log.dirs={}", self.log_dir().display()));
        for o in &self.overrides {
            cmd.arg("--override").arg(o);
        }
        cmd.env("RUST_LOG", "info");
        cmd
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's process id (for /proc and signals).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("broker running").id()
    }

    /// Descriptors the broker process holds open.
    pub fn open_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("read /proc/<pid>/fd")
            .count()
    }

    /// The broker's resident set size in bytes.
    pub fn rss_bytes(&self) -> u64 {
        self.status_bytes("VmRSS:")
    }

    /// The most the broker's resident set has been, in bytes.
    pub fn peak_rss_bytes(&self) -> u64 {
        self.status_bytes("VmHWM:")
    }

    /// A size field (in kB) of /proc/<pid>/status, in bytes.
    fn status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/<pid>/status");
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
        kb * 1024
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn signal_terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    }

    /// Waits for the broker, already signalled, to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.child
            .take()
            .expect("broker running")
            .wait()
            .expect("wait")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `kill -9` the broker.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("wait");
        }
    }

    /// SIGTERM the broker and return its exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("broker running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        child.wait().expect("wait")
    }

    /// Starts the broker again on the same log directory and the same port.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker before restarting it");
        let port = self.port;
        self.spawn(port);
    }

    /// What the broker wrote to stderr, once it has stopped.
    pub fn stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for StromBroker {
    /// Kills the broker; when the test is failing, prints the end of what the broker
    /// logged, so a failure shows the broker's side as well as the client's.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            if let Some(stderr) = self.stderr.take().and_then(|h| h.join().ok()) {
                let start = stderr.len().saturating_sub(20_000);
                let start = (start..stderr.len())
                    .find(|i| stderr.is_char_boundary(*i))
                    .unwrap_or(0);
                let tail = &stderr[start..];
                eprintln!("--- the broker's stderr (last 20 kB) ---\n{tail}");
            }
        }
    }
}

/// The `strom` binary as a command, under `RLIMIT_NOFILE` `open_files_limit` if given.
fn server_command(open_files_limit: Option<u64>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strom"));
    if let Some(limit) = open_files_limit {
        // SAFETY: setrlimit is async-signal-safe, as a pre_exec hook must be.
        unsafe {
            cmd.pre_exec(move || {
                let rlimit = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd
}

/// Spawns `cmd` (a `strom server`) and waits for its stdout line that starts with `ready`
/// and names the address it listens on (a combined KRaft node prints its controller's
/// line before its broker's, and a cluster broker's "unfenced" line may come before
/// either); its stderr is collected by a thread until it exits. Panics with that stderr
/// if it does not start.
pub fn spawn_until_ready(
    cmd: Command,
    ready: &'static str,
) -> (Child, std::thread::JoinHandle<String>, String) {
    let (mut child, stderr, line) = spawn_server(cmd, ready);
    match line.recv_timeout(START_TIMEOUT) {
        Ok(line) => (child, stderr, line),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "strom did not start ({ready}); stderr:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
    }
}

/// Spawns `cmd` (a `strom server`); returns it, a thread collecting its stderr until it
/// exits, and a receiver of its stdout line that starts with `ready` and names the
/// address it listens on.
pub fn spawn_server(
    mut cmd: Command,
    ready: &'static str,
) -> (
    Child,
    std::thread::JoinHandle<String>,
    mpsc::Receiver<String>,
) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strom");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref().map_while(Result::ok) {
            if line.starts_with(ready) && line.contains(" listening on ") {
                let _ = tx.send(line);
                break;
            }
        }
        for _ in lines {}
    });
    (child, stderr, rx)
}

/// Runs `strom server` with `args` and expects it to exit (a configuration error).
pub fn run_server_expecting_exit(args: &[&str]) -> (ExitStatus, String) {
    run_limited_server_expecting_exit(None, args)
}

/// [`run_server_expecting_exit`] under `RLIMIT_NOFILE` `open_files_limit`.
pub fn run_limited_server_expecting_exit(
    open_files_limit: Option<u64>,
    args: &[&str],
) -> (ExitStatus, String) {
    let output = server_command(open_files_limit)
        .arg("server")
        .args(args)
        .output()
        .expect("run strom");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Path of a file under `tests/`.
pub fn test_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(relative)
}

/// Runs the `strom` binary with `args` to completion.
pub fn strom(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strom"))
        .args(args)
        .output()
        .expect("run strom")
}

/// The stdout of a run that must have succeeded (panics with both streams otherwise).
pub fn stdout_of(output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "strom failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `text` without the terminal colour codes tracing puts around field names.
pub fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// Fails the test unless it runs as root (network namespaces, tmpfs mounts), saying
/// `why`: a test that needs root and lacks it fails rather than passing silently.
pub fn assert_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "{why}: it needs root (CAP_NET_ADMIN), as CI has");
}

/// Counter `name` of the broker whose `strom.metrics.listener` is `address` (0 while it
/// cannot be read).
pub fn metric(address: &str, name: &str) -> u64 {
    strom_testkit::local_cluster::read_metrics(address)
        .ok()
        .and_then(|m| m.get(name).copied())
        .unwrap_or(0)
}
