//! The embedded default: with no bootstrap server given, each tool runs against a strom
//! broker it starts itself, so `strom bench` works out of the box.
//!
//! The broker is a child process of this same binary (`strom server`), not a thread, so the
//! load generator and the broker are measured as they would be on separate machines and a
//! broker crash cannot take the tool down. The broker announces readiness with one line on
//! stdout, `strom broker <node.id> listening on <host>:<port>`; its stderr goes to a file in
//! the temporary data directory and is shown if it fails to start.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

/// How long a broker may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running child broker; stopped (SIGTERM, then wait) and its data removed on drop.
pub struct EmbeddedBroker {
    child: Child,
    bootstrap: String,
    // Dropped after the child has exited, so the broker never writes into a removed directory.
    data_dir: TempDir,
}

impl EmbeddedBroker {
    /// Starts `strom server` on a free loopback port in a fresh temporary directory.
    pub fn start() -> Result<Self> {
        let exe = std::env::current_exe().context("cannot locate the strom binary")?;
        Self::start_with(Command::new(exe), &[])
    }

    /// Starts a broker from `command` (the `strom` binary), with extra `--override` settings.
    pub fn start_with(mut command: Command, overrides: &[(&str, &str)]) -> Result<Self> {
        let data_dir = tempfile::Builder::new()
            .prefix("strom-embedded-")
            .tempdir()
            .context("cannot create a temporary directory for the embedded broker")?;
        let log_dir = data_dir.path().join("data");
        let stderr_path = data_dir.path().join("broker.stderr");
        let stderr = std::fs::File::create(&stderr_path)?;
        // A group forms as soon as its members have joined, as with the
        // `group.initial.rebalance.delay.ms=0` of Kafka's sample server.properties: a
        // benchmark should not count a wait for members that will never come.
        command
            .arg("server")
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", "group.initial.rebalance.delay.ms=0"])
            .arg("--override")
            .arg(format!("log.dirs={}", log_dir.display()));
        for (key, value) in overrides {
            command.arg("--override").arg(format!("{key}={value}"));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .context("cannot start the embedded strom broker")?;
        let stdout = child.stdout.take().expect("stdout is piped");
        match wait_for_ready_line(stdout) {
            Ok(bootstrap) => Ok(Self {
                child,
                bootstrap,
                data_dir,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(e.context(format!(
                    "the embedded broker did not start; its last output:\n{}",
                    tail.join("\n")
                )))
            }
        }
    }

    /// `host:port` to use as `bootstrap.servers`.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    pub fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    /// The broker's process id, to read its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; the child has not been reaped yet, so the
        // pid cannot have been reused.
        let terminated = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) } == 0;
        if !terminated {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Reads the broker's stdout until the ready line, then keeps draining it on a thread so
/// the broker never blocks on a full pipe.
fn wait_for_ready_line(stdout: impl Read + Send + 'static) -> Result<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("embedded-broker-stdout".to_string())
        .spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let mut sent = false;
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(address) = parse_ready_line(&line) {
                        let _ = tx.send(Ok(address));
                        sent = true;
                    }
                }
            }
            if !sent {
                let _ = tx.send(Err(anyhow!("the broker exited before it was ready")));
            }
        })?;
    match rx.recv_timeout(READY_TIMEOUT) {
        Ok(result) => result,
        Err(_) => bail!(
            "the broker printed no ready line within {} s",
            READY_TIMEOUT.as_secs()
        ),
    }
}

/// `strom broker 1 listening on 127.0.0.1:40123` → `127.0.0.1:40123`.
pub fn parse_ready_line(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("strom broker ")?;
    let (node_id, address) = rest.split_once(" listening on ")?;
    node_id.parse::<i64>().ok()?;
    address.rsplit_once(':')?.1.parse::<u16>().ok()?;
    Some(address.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ready_line() {
        assert_eq!(
            parse_ready_line("strom broker 1 listening on 127.0.0.1:40123"),
            Some("127.0.0.1:40123".to_string())
        );
        assert_eq!(
            parse_ready_line("strom broker x listening on 127.0.0.1:1"),
            None
        );
        assert_eq!(parse_ready_line("some log line"), None);
        assert_eq!(
            parse_ready_line("strom broker 1 listening on nowhere"),
            None
        );
    }

    #[test]
    fn a_broker_that_exits_early_is_an_error() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo starting; exit 3", "sh"]);
        let err = EmbeddedBroker::start_with(command, &[])
            .err()
            .expect("must fail");
        assert!(format!("{err:#}").contains("exited before it was ready"));
    }

    #[test]
    fn reads_the_address_from_a_fake_broker() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "echo 'log noise'; echo 'strom broker 7 listening on 127.0.0.1:9999'; exec sleep 30",
            "sh",
        ]);
        let broker = EmbeddedBroker::start_with(command, &[]).unwrap();
        assert_eq!(broker.bootstrap(), "127.0.0.1:9999");
        let dir = broker.data_dir().to_path_buf();
        drop(broker);
        assert!(!dir.exists());
    }
}
