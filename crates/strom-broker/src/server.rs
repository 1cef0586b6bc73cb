//! Starting and stopping a broker: bind the listener, accept connections, run the
//! retention, flush and expiry schedulers, and shut down cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::group::{CoordinatorConfig, GroupCoordinator};
use crate::log_manager::LogManager;
use crate::memory::{MemoryTrimmer, TRIM_CHECK_INTERVAL_MS};
use crate::metadata_cache::MetadataCache;
use crate::producer_id_manager::ProducerIdManager;
use crate::standalone_controller;
use crate::{connection, now_ms, BrokerConfig, BrokerError, BrokerState};

/// A broker ready to start.
pub struct Broker {
    config: BrokerConfig,
}

/// A started broker.
pub struct RunningBroker {
    pub state: Arc<BrokerState>,
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Broker {
    pub fn new(config: BrokerConfig) -> Self {
        Self { config }
    }

    /// Opens the logs, binds the listener and starts serving.
    pub async fn start(self) -> Result<RunningBroker, BrokerError> {
        if let Some(reason) = self.config.kraft.unsupported(self.config.node_id) {
            return Err(BrokerError::Unsupported(reason));
        }
        let config = self.config.clone();
        let logs = tokio::task::spawn_blocking(move || LogManager::open(&config))
            .await
            .map_err(|e| BrokerError::Io(std::io::Error::other(e)))??;
        let producer_ids =
            ProducerIdManager::open(self.config.log_dirs[0].join("__strom_metadata"))?;
        let groups = GroupCoordinator::open(
            CoordinatorConfig {
                min_session_timeout_ms: self.config.group_min_session_timeout_ms,
                max_session_timeout_ms: self.config.group_max_session_timeout_ms,
                max_size: self.config.group_max_size,
                initial_rebalance_delay_ms: self.config.group_initial_rebalance_delay_ms,
                offsets_retention_ms: self.config.offsets_retention_ms,
            },
            &self.config.log_dirs[0].join("__strom_metadata"),
        )?;
        let listener = TcpListener::bind(self.config.listener.bind_address()).await?;
        let local_addr = listener.local_addr()?;
        let advertised = self.config.advertised(local_addr);
        let metadata = MetadataCache::new(standalone_controller::initial_image(
            &self.config,
            &advertised,
            &logs,
        ));
        let state = Arc::new(BrokerState {
            advertised,
            config: self.config,
            metadata,
            logs,
            producer_ids,
            groups,
            memory: MemoryTrimmer::default(),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        spawn_scheduler(
            state.clone(),
            shutdown_rx.clone(),
            state.config.retention_check_interval_ms,
            |s| s.logs.run_retention(),
        );
        spawn_scheduler(
            state.clone(),
            shutdown_rx.clone(),
            state.config.producer_id_expiration_check_interval_ms,
            |s| s.logs.expire_producers(),
        );
        spawn_scheduler(
            state.clone(),
            shutdown_rx.clone(),
            state.config.offsets_retention_check_interval_ms,
            |s| s.groups.expire_offsets(Instant::now(), now_ms()),
        );
        let flush_interval = state
            .config
            .flush_scheduler_interval_ms
            .min(u64::try_from(state.config.log_defaults.flush_ms).unwrap_or(u64::MAX));
        spawn_scheduler(state.clone(), shutdown_rx.clone(), flush_interval, |s| {
            s.logs.flush_due()
        });
        spawn_scheduler(
            state.clone(),
            shutdown_rx.clone(),
            TRIM_CHECK_INTERVAL_MS,
            |s| s.memory.trim_if_connections_closed(),
        );
        let accept = tokio::spawn(accept_loop(listener, state.clone(), shutdown_rx));
        Ok(RunningBroker {
            state,
            local_addr,
            shutdown,
            accept,
        })
    }
}

/// Runs `task` every `interval_ms` on a blocking thread until shutdown. An interval too
/// large to matter (Kafka's "never" is Long.MAX_VALUE) runs nothing.
fn spawn_scheduler(
    state: Arc<BrokerState>,
    mut shutdown: watch::Receiver<bool>,
    interval_ms: u64,
    task: fn(&BrokerState),
) {
    if interval_ms >= 365 * 24 * 3_600_000 {
        return;
    }
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_millis(interval_ms));
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    let s = state.clone();
                    if let Err(e) = tokio::task::spawn_blocking(move || task(&s)).await {
                        tracing::error!(error = %e, "scheduled task panicked");
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<BrokerState>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(connection::serve(state.clone(), stream, peer, shutdown.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

impl RunningBroker {
    /// Stops accepting, closes connections and closes every log cleanly.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        let _ = self.shutdown.send(true);
        let _ = self.accept.await;
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || state.logs.shutdown())
            .await
            .map_err(|e| BrokerError::Io(std::io::Error::other(e)))?
    }
}
