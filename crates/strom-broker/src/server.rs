//! Starting and stopping a node: a KRaft node with the controller role (a metadata
//! quorum voter on the controller listener), the broker role (an observer of the
//! metadata log that registers and heartbeats) or both — a single node without
//! `process.roles` being both, the one voter of its quorum. The broker
//! binds its listener, accepts connections, runs the retention, flush and expiry
//! schedulers, and shuts down cleanly — after a controlled shutdown in a cluster.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use strom_controller::{ControllerClient, QuorumConfig, QuorumController};
use strom_metadata::{Endpoint, MetadataImage};

use crate::config::Listener;
use crate::dynamic_config::DynamicBrokerConfigs;
use crate::log_cleaner::LogCleaner;
use crate::log_manager::LogManager;
use crate::memory::{MemoryTrimmer, TRIM_CHECK_INTERVAL_MS};
use crate::metadata_cache::MetadataCache;
use crate::metrics::{self, BrokerMetrics};
use crate::quorum_channel::QuorumChannel;
use crate::replication::alter_partition::{self, AlterPartitionSender};
use crate::replication::{self, Replication};
use crate::standalone_upgrade::StandaloneUpgrade;
use crate::{broker_lifecycle, metadata_loader};
use strom_coordinator::group::{CoordinatorConfig, GroupCoordinator};
use strom_replica::fetch_session::FetchSessionCache;
use strom_replica::high_watermark_checkpoint::{self, HighWatermarks};
use strom_wire::now_ms;

use crate::{connection, BrokerConfig, BrokerError, BrokerState};

/// A broker ready to start.
pub struct Broker {
    config: BrokerConfig,
}

/// A started node. A controller-only node has no broker part.
pub struct RunningBroker {
    pub broker: Option<BrokerPart>,
    pub controller: Option<ControllerPart>,
    /// Says why the node must stop on its own (a broker that could not register).
    pub failed: tokio::sync::oneshot::Receiver<String>,
    /// Its directories, locked until it stops.
    _locks: crate::dir_lock::DirLocks,
}

/// The broker role of a running node.
pub struct BrokerPart {
    pub state: Arc<BrokerState>,
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    accept: Vec<JoinHandle<()>>,
    /// What an earlier release's single node left to bring into `__consumer_offsets`.
    upgrade: Option<StandaloneUpgrade>,
}

/// The controller role of a running node.
pub struct ControllerPart {
    pub quorum: Arc<QuorumController>,
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    serve: JoinHandle<()>,
}

impl Broker {
    pub fn new(config: BrokerConfig) -> Self {
        Self { config }
    }

    /// Starts the node's roles: the controller first, so a combined node's broker finds
    /// its quorum. A node that formats itself formats its directories first, and its
    /// controller brings in what an earlier release's single node kept in files of its
    /// own ([`crate::standalone_upgrade`]) before its broker reads the metadata.
    pub async fn start(mut self) -> Result<RunningBroker, BrokerError> {
        let dirs = self.config.identity_dirs();
        let locks = crate::dir_lock::lock_all(&dirs)?;
        let upgrade = if self.config.kraft.formats_itself {
            crate::meta_properties::load(&dirs, self.config.node_id, true)?;
            StandaloneUpgrade::find(&self.config)?
        } else {
            None
        };
        // Every directory's identity is checked before anything binds a port, so an
        // unformatted or foreign directory is what the error names.
        crate::meta_properties::load(&dirs, self.config.node_id, false)?;
        if self.config.kraft.voters.is_empty() {
            return Err(BrokerError::Unsupported(format!(
                "controller.quorum.bootstrap.servers is set without controller.quorum.voters, and {} holds no voter set: format this node with `strom storage format --standalone` (Kafka 4's quickstart), or list the voters in controller.quorum.voters",
                self.config.metadata_dir().display()
            )));
        }
        let roles = self.config.kraft.roles;
        let incarnation_id = uuid::Uuid::new_v4();
        let local_broker = roles.broker.then_some(incarnation_id);
        let controller = match roles.controller {
            true => Some(start_controller(&mut self.config, local_broker).await?),
            false => None,
        };
        if let (Some(upgrade), Some(controller)) = (&upgrade, &controller) {
            upgrade
                .write_metadata(&controller.quorum, &self.config)
                .await?;
        }
        let (failed_tx, failed) = tokio::sync::oneshot::channel();
        let broker = match roles.broker {
            true => Some(
                self.start_broker(incarnation_id, failed_tx, upgrade)
                    .await?,
            ),
            false => None,
        };
        Ok(RunningBroker {
            broker,
            controller,
            failed,
            _locks: locks,
        })
    }

    /// Opens the logs, binds the listener and starts serving.
    async fn start_broker(
        self,
        incarnation_id: uuid::Uuid,
        failed: tokio::sync::oneshot::Sender<String>,
        upgrade: Option<StandaloneUpgrade>,
    ) -> Result<BrokerPart, BrokerError> {
        let (dynamic_configs, logs) = self.open_logs().await?;
        let coordinator = CoordinatorConfig {
            min_session_timeout_ms: self.config.group_min_session_timeout_ms,
            max_session_timeout_ms: self.config.group_max_session_timeout_ms,
            max_size: self.config.group_max_size,
            initial_rebalance_delay_ms: self.config.group_initial_rebalance_delay_ms,
            offsets_retention_ms: self.config.offsets_retention_ms,
        };
        let groups = GroupCoordinator::new(coordinator);
        let listener = TcpListener::bind(self.config.listener.bind_address()).await?;
        let local_addr = listener.local_addr()?;
        let advertised = self.config.advertised(local_addr);
        let first_name = self
            .config
            .kraft
            .client_listener()
            .map_or("PLAINTEXT", |l| l.name.as_str())
            .to_string();
        let others = self.bind_other_client_listeners(&first_name).await?;
        let mut endpoints = vec![Endpoint {
            listener: first_name.clone(),
            host: advertised.host.clone(),
            port: advertised.port,
        }];
        endpoints.extend(others.iter().map(|(name, _, a)| Endpoint {
            listener: name.to_string(),
            host: a.host.clone(),
            port: a.port,
        }));
        let voters = self
            .config
            .kraft
            .voters
            .iter()
            .map(|v| (v.id, format!("{}:{}", v.host, v.port)))
            .collect();
        let quorum = Arc::new(QuorumChannel::new(
            ControllerClient::new(voters),
            logs.cluster_id().to_string(),
            self.config.node_id,
        ));
        let metadata = MetadataCache::new(MetadataImage::new(logs.cluster_id(), -1));
        let identity = broker_lifecycle::Identity {
            incarnation_id,
            endpoints,
            rack: None,
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (isr_changes, isr_proposals) = AlterPartitionSender::channel();
        let checkpointed: HighWatermarks = self
            .config
            .log_dirs
            .iter()
            .flat_map(|d| high_watermark_checkpoint::read(d))
            .collect();
        let fetch_sessions =
            FetchSessionCache::new(self.config.max_incremental_fetch_session_cache_slots);
        let metrics = Arc::new(BrokerMetrics::default());
        if let Some(address) = &self.config.metrics_listener {
            let bound = TcpListener::bind(address).await.map_err(|e| {
                BrokerError::Io(std::io::Error::new(
                    e.kind(),
                    format!("cannot bind strom.metrics.listener {address}: {e}"),
                ))
            })?;
            let served = metrics.clone();
            tokio::spawn(accept_until_shutdown(
                bound,
                shutdown_rx.clone(),
                move |stream, _| {
                    tokio::spawn(metrics::answer(stream, served.clone()));
                },
            ));
        }
        let logs = Arc::new(logs);
        let cleaner_config = dynamic_configs
            .current(&self.config.given, self.config.node_id)
            .map_or(self.config.log_cleaner, |c| c.log_cleaner);
        let log_cleaner = LogCleaner::start(
            logs.clone(),
            metrics.clone(),
            cleaner_config,
            &self.config.log_dirs,
        );
        let state = Arc::new(BrokerState {
            replication: Replication::new(isr_changes.clone(), checkpointed, shutdown_rx.clone()),
            advertised,
            config: self.config,
            metadata,
            logs,
            log_cleaner,
            groups,
            memory: MemoryTrimmer::default(),
            quorum: quorum.clone(),
            fetch_sessions,
            dynamic_configs,
            metrics,
        });
        tokio::spawn(alter_partition::run(
            state.clone(),
            isr_proposals,
            shutdown_rx.clone(),
        ));
        tokio::spawn(metadata_loader::run(
            state.clone(),
            quorum.clone(),
            shutdown_rx.clone(),
        ));
        tokio::spawn(broker_lifecycle::run(
            state.clone(),
            quorum,
            identity,
            shutdown_rx.clone(),
            failed,
        ));
        spawn_schedulers(&state, &shutdown_rx);
        let first = (Arc::from(first_name.as_str()), listener);
        let accept = std::iter::once(first)
            .chain(others.into_iter().map(|(name, bound, _)| (name, bound)))
            .map(|(name, bound)| {
                tokio::spawn(accept_loop(bound, name, state.clone(), shutdown_rx.clone()))
            })
            .collect();
        Ok(BrokerPart {
            state,
            local_addr,
            shutdown,
            accept,
            upgrade,
        })
    }

    /// The dynamic broker configs the metadata log left, and every hosted partition's log
    /// opened with the log defaults they give: a broker registers with every hosted
    /// partition open, as Kafka's does.
    async fn open_logs(&self) -> Result<(DynamicBrokerConfigs, LogManager), BrokerError> {
        let dynamic_configs =
            DynamicBrokerConfigs::open(&self.config.log_dirs[0].join("__strom_metadata"))?;
        let defaults = dynamic_configs
            .log_defaults(&self.config.given, self.config.node_id)
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "the stored dynamic broker configs are invalid; starting with server.properties alone");
                self.config.log_defaults.clone()
            });
        let config = self.config.clone();
        let logs = tokio::task::spawn_blocking(move || {
            let logs = LogManager::open(&config, defaults)?;
            logs.load_partitions();
            Ok::<_, BrokerError>(logs)
        })
        .await
        .map_err(|e| BrokerError::Io(std::io::Error::other(e)))??;
        Ok((dynamic_configs, logs))
    }

    /// Binds every client listener of `listeners` after the first (`first`): Kafka's
    /// named listeners, each advertised under its name (`advertised.listeners`, or the
    /// bound address), so clients of each network are told the brokers' addresses on it.
    async fn bind_other_client_listeners(
        &self,
        first: &str,
    ) -> Result<Vec<(Arc<str>, TcpListener, Listener)>, BrokerError> {
        let kraft = &self.config.kraft;
        let mut bound = Vec::new();
        for named in kraft
            .listeners
            .iter()
            .filter(|l| l.name != first && !kraft.controller_listener_names.contains(&l.name))
        {
            let listener = TcpListener::bind(named.listener.bind_address()).await?;
            let local = listener.local_addr()?;
            let advertised = kraft
                .advertised(&named.name)
                .cloned()
                .unwrap_or_else(|| Listener {
                    host: if named.listener.host.is_empty() {
                        local.ip().to_string()
                    } else {
                        named.listener.host.clone()
                    },
                    port: local.port(),
                });
            tracing::info!(listener = %named.name, address = %local, "listening");
            bound.push((Arc::from(named.name.as_str()), listener, advertised));
        }
        Ok(bound)
    }
}

/// Starts this node's metadata quorum voter on its controller listener. A node that
/// formats itself is the one voter, on whatever port its listener was given.
/// `local_broker` is the incarnation of a combined node's broker.
async fn start_controller(
    config: &mut BrokerConfig,
    local_broker: Option<uuid::Uuid>,
) -> Result<ControllerPart, BrokerError> {
    let listener = config.kraft.controller_listener().ok_or_else(|| {
        BrokerError::Unsupported("a controller needs a controller listener".into())
    })?;
    let metadata_dir = config.metadata_dir();
    let cluster_id =
        crate::meta_properties::load(std::slice::from_ref(&metadata_dir), config.node_id, false)?;
    let bound = TcpListener::bind(listener.listener.bind_address()).await?;
    let local_addr = bound.local_addr()?;
    if config.kraft.formats_itself {
        config.kraft.bind_own_voter(local_addr.port());
    }
    let kraft = &config.kraft;
    let quorum = QuorumController::start(QuorumConfig {
        node_id: config.node_id,
        cluster_id,
        voters: kraft
            .voters
            .iter()
            .map(|v| (v.id, format!("{}:{}", v.host, v.port)))
            .collect(),
        dir: metadata_dir.join("__cluster_metadata-0"),
        election_timeout_ms: kraft.election_timeout_ms,
        fetch_timeout_ms: kraft.fetch_timeout_ms,
        broker_session_timeout_ms: kraft.broker_session_timeout_ms,
        leader_imbalance_check_interval_ms: kraft
            .auto_leader_rebalance_enable
            .then_some(kraft.leader_imbalance_check_interval_seconds * 1000),
        unclean_leader_election_enable: config.log_defaults.unclean_leader_election,
        unclean_leader_election_interval_ms: kraft.unclean_leader_election_interval_ms,
        max_bytes_between_snapshots: kraft.metadata_max_bytes_between_snapshots,
        max_snapshot_interval_ms: kraft.metadata_max_snapshot_interval_ms,
        local_broker_incarnation: local_broker,
        max_partitions_per_broker: config.max_partitions_per_broker,
    })
    .await?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let serve = tokio::spawn(strom_controller::server::serve(
        bound,
        quorum.clone(),
        shutdown_rx,
    ));
    Ok(ControllerPart {
        quorum,
        local_addr,
        shutdown,
        serve,
    })
}

/// Starts the broker's periodic tasks: retention, producer and offset expiry, flushing,
/// ISR shrinking, high-watermark checkpoints and memory trimming.
fn spawn_schedulers(state: &Arc<BrokerState>, shutdown: &watch::Receiver<bool>) {
    let config = &state.config;
    let every = |interval_ms: u64, task: fn(&BrokerState)| {
        spawn_scheduler(state.clone(), shutdown.clone(), interval_ms, task)
    };
    every(config.retention_check_interval_ms, |s| {
        s.logs.run_retention()
    });
    every(config.producer_id_expiration_check_interval_ms, |s| {
        s.logs.expire_producers()
    });
    every(config.offsets_retention_check_interval_ms, |s| {
        s.groups.expire_offsets(Instant::now(), now_ms())
    });
    let flush_interval = config
        .flush_scheduler_interval_ms
        .min(u64::try_from(config.log_defaults.flush_ms).unwrap_or(u64::MAX));
    every(flush_interval, |s| s.logs.flush_due());
    let lag = config.replication.lag_time_max_ms;
    every(
        u64::try_from(lag / 2).unwrap_or(1).max(1),
        alter_partition::shrink_lagging_isrs,
    );
    every(
        config.replication.high_watermark_checkpoint_interval_ms,
        replication::checkpoint_high_watermarks,
    );
    every(TRIM_CHECK_INTERVAL_MS, |s| {
        s.memory.trim_if_connections_closed()
    });
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

/// Accepts the connections of the listener named `name` (brokers are described to its
/// clients by their endpoints of that listener).
async fn accept_loop(
    listener: TcpListener,
    name: Arc<str>,
    state: Arc<BrokerState>,
    shutdown: watch::Receiver<bool>,
) {
    let connections = shutdown.clone();
    accept_until_shutdown(listener, shutdown, |stream, peer| {
        let serve = connection::serve(
            state.clone(),
            name.clone(),
            stream,
            peer,
            connections.clone(),
        );
        tokio::spawn(serve);
    })
    .await
}

/// Hands every connection `listener` accepts to `accepted` until `shutdown` turns true. A
/// failed accept (out of descriptors, say) is retried after 10 ms, not at once.
async fn accept_until_shutdown(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    mut accepted: impl FnMut(TcpStream, SocketAddr),
) {
    loop {
        tokio::select! {
            connection = listener.accept() => match connection {
                Ok((stream, peer)) => accepted(stream, peer),
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
    /// Shuts the node down: the broker first (a controlled shutdown in a cluster, then
    /// its logs closed cleanly), then the controller, which hands its leadership over.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        let result = match self.broker {
            Some(broker) => broker.shutdown().await,
            None => Ok(()),
        };
        if let Some(controller) = self.controller {
            controller.quorum.shutdown().await;
            let _ = controller.shutdown.send(true);
            let _ = controller.serve.await;
        }
        result
    }
}

impl BrokerPart {
    /// Waits until a node that formats itself serves: unfenced by its controller and in
    /// its own metadata image (so a Metadata request names it), leading every partition
    /// it hosts, with what an earlier release's files held brought in. A cluster broker
    /// serves what the controller assigns it as it comes, at once.
    pub async fn ready(&mut self) -> Result<(), BrokerError> {
        let state = self.state.clone();
        if !state.config.kraft.formats_itself {
            return Ok(());
        }
        state.quorum.wait_unfenced().await;
        let mut applied = state.metadata.subscribe();
        let me = strom_metadata::BrokerId(state.node_id());
        let serving =
            |image: &MetadataImage| image.is_active(me) && image.leads_every_partition_it_hosts(me);
        while !serving(&state.metadata.image()) {
            if applied.changed().await.is_err() {
                break;
            }
        }
        if let Some(upgrade) = self.upgrade.take() {
            upgrade.commit_offsets(&state).await?;
        }
        Ok(())
    }

    /// Moves leaderships away (in a cluster), stops accepting, closes connections and
    /// closes every log cleanly.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        self.state.logs.stop_loading();
        let timeout = Duration::from_millis(self.state.config.kraft.broker_session_timeout_ms);
        broker_lifecycle::controlled_shutdown(&self.state, &self.state.quorum, timeout).await;
        let _ = self.shutdown.send(true);
        self.state.replication.fetchers.stop_all();
        for accept in self.accept {
            let _ = accept.await;
        }
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || {
            state.log_cleaner.shutdown();
            replication::checkpoint_high_watermarks(&state);
            state.logs.shutdown()
        })
        .await
        .map_err(|e| BrokerError::Io(std::io::Error::other(e)))?
    }
}
