//! `strom server [server.properties] [--override key=value]...`, like
//! `kafka-server-start.sh`.
//!
//! Once the broker serves it prints one line to stdout,
//! `strom broker <node.id> listening on <host>:<port>`, so that scripts and the perf tools'
//! embedded mode can start it on port 0 and learn the port: a node without
//! `process.roles` once its one-voter controller has unfenced it and it leads every
//! partition; a cluster node once its partitions are open (a controller prints
//! `strom controller <node.id> listening on <host>:<port>` first, and a broker
//! `strom broker <node.id> unfenced` when the controller unfences it). SIGTERM and SIGINT
//! shut it down cleanly (logs flushed and closed) with exit status 0.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use tokio::signal::unix::{signal, SignalKind};

use crate::{properties, Broker, BrokerConfig, RunningBroker};

const USAGE: &str = "USAGE: strom server [server.properties] [--override property=value]*";

/// Parses the command line into properties: the file's, then each override.
fn parse_args(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut props = BTreeMap::new();
    let mut overrides = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--override" => {
                let kv = iter
                    .next()
                    .ok_or("--override needs a property=value argument")?;
                overrides.push(kv.clone());
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            path if !path.starts_with('-') && props.is_empty() => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                props = properties::parse(&text);
            }
            other => return Err(format!("unexpected argument '{other}'\n{USAGE}")),
        }
    }
    for kv in overrides {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("invalid override '{kv}': expected property=value"))?;
        props.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(props)
}

/// Entry point of `strom server`.
pub fn main(args: Vec<String>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match parse_args(&args)
        .and_then(|p| BrokerConfig::from_properties(&p).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strom server: {e}");
            return ExitCode::from(1);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = config.num_io_threads {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        builder.worker_threads(threads.min(cores));
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strom server: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(run(config));
    // Everything durable is closed by now; tasks still parked (a controller connection's
    // long poll, a fetch waiting out its timeout) must not hold the exit up.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    code
}

/// How long tasks left after a clean shutdown may take to finish before the process exits.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

async fn run(config: BrokerConfig) -> ExitCode {
    let node_id = config.node_id;
    let formats_itself = config.kraft.formats_itself;
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            eprintln!("strom server: cannot install signal handlers");
            return ExitCode::from(1);
        }
    };
    let mut node = match Broker::new(config).start().await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("strom server: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(controller) = &node.controller {
        tracing::info!(node_id, address = %controller.local_addr, "controller started");
        if !formats_itself {
            println!(
                "strom controller {node_id} listening on {}",
                controller.local_addr
            );
        }
    }
    if let Some(broker) = &mut node.broker {
        tokio::select! {
            ready = broker.ready() => if let Err(e) = ready {
                eprintln!("strom server: {e}");
                let _ = node.shutdown().await;
                return ExitCode::from(1);
            },
            _ = term.recv() => return shut_down(node).await,
            _ = int.recv() => return shut_down(node).await,
        }
    }
    if let Some(broker) = &node.broker {
        let advertised = &broker.state.advertised;
        tracing::info!(node_id, address = %broker.local_addr, "broker started");
        println!(
            "strom broker {node_id} listening on {}:{}",
            advertised.host, advertised.port
        );
    }
    let _ = std::io::stdout().flush();
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
        Ok(reason) = &mut node.failed => {
            eprintln!("strom server: {reason}");
            let _ = node.shutdown().await;
            return ExitCode::from(1);
        }
    }
    shut_down(node).await
}

/// A clean shutdown on SIGTERM or SIGINT: exit status 0 once the logs are closed.
async fn shut_down(node: RunningBroker) -> ExitCode {
    tracing::info!("shutting down");
    match node.shutdown().await {
        Ok(()) => {
            tracing::info!("shut down");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strom server: unclean shutdown: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_args;

    #[test]
    fn overrides_win_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(&path, "num.partitions=3\nnode.id=2\n").unwrap();
        let args: Vec<String> = [path.to_str().unwrap(), "--override", "num.partitions=5"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let props = parse_args(&args).unwrap();
        assert_eq!(props["num.partitions"], "5");
        assert_eq!(props["node.id"], "2");
        assert!(parse_args(&["--override".to_string()]).is_err());
        assert!(parse_args(&["--override".into(), "novalue".into()]).is_err());
    }
}
