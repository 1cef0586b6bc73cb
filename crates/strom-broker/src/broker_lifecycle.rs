//! A cluster broker's life as the controller sees it (Kafka's `BrokerLifecycleManager`):
//! register with a fresh incarnation id, heartbeat every `broker.heartbeat.interval.ms`
//! reporting the metadata offset it has applied, stay fenced until the controller says it
//! caught up, register again if the controller forgot it, and on SIGTERM shut down in a
//! controlled way: ask to shut down at once (not at the next periodic heartbeat,
//! KAFKA-13167) and keep asking until the controller has moved every leadership away.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use strom_controller::rpc::{codes, Request, Response};
use strom_metadata::{BrokerId, Endpoint};
use tokio::sync::watch;
use uuid::Uuid;

use crate::quorum_channel::QuorumChannel;
use crate::BrokerState;

/// The broker's registration data.
#[derive(Debug, Clone)]
pub struct Identity {
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

fn heartbeat_timeout(state: &BrokerState) -> Duration {
    Duration::from_millis((state.config.kraft.broker_session_timeout_ms / 2).max(100))
}

/// Registers, retrying until `deadline` passes; `Err` with the last reason then. A
/// refusal is retried too: DUPLICATE_BROKER_REGISTRATION lasts only until the previous
/// incarnation's session expires (a broker restarted right after a kill -9).
async fn register(
    state: &BrokerState,
    quorum: &QuorumChannel,
    identity: &Identity,
    deadline: Duration,
) -> Result<i64, String> {
    let end = tokio::time::Instant::now() + deadline;
    let mut last = String::new();
    while tokio::time::Instant::now() < end {
        let remaining = end.saturating_duration_since(tokio::time::Instant::now());
        let response = quorum
            .client
            .call(
                || Request::BrokerRegistration {
                    cluster_id: quorum.cluster_id.clone(),
                    broker_id: BrokerId(quorum.node_id),
                    incarnation_id: identity.incarnation_id,
                    endpoints: identity.endpoints.clone(),
                    rack: identity.rack.clone(),
                },
                heartbeat_timeout(state),
                remaining,
            )
            .await;
        match response {
            Ok(Response::BrokerRegistration(Ok(epoch))) => {
                quorum.epoch.store(epoch, Ordering::Release);
                quorum.set_fenced(true);
                tracing::info!(
                    node = quorum.node_id,
                    broker_epoch = epoch,
                    "registered with the controller"
                );
                return Ok(epoch);
            }
            Ok(Response::BrokerRegistration(Err(e)))
                if e.code == codes::INCONSISTENT_CLUSTER_ID =>
            {
                return Err(e.to_string())
            }
            Ok(Response::BrokerRegistration(Err(e))) => {
                tracing::info!(error = %e, "registration refused; retrying");
                last = e.to_string();
            }
            Ok(other) => last = format!("unexpected controller response {other:?}"),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200).min(remaining)).await;
    }
    Err(last)
}

/// One heartbeat; `Ok(should_shut_down)`.
async fn heartbeat(
    state: &BrokerState,
    quorum: &QuorumChannel,
    want_shut_down: bool,
) -> Result<bool, (i16, String)> {
    let interval = Duration::from_millis(state.config.kraft.broker_heartbeat_interval_ms);
    let response = quorum
        .client
        .call(
            || Request::BrokerHeartbeat {
                cluster_id: quorum.cluster_id.clone(),
                broker_id: BrokerId(quorum.node_id),
                broker_epoch: quorum.epoch.load(Ordering::Acquire),
                current_metadata_offset: state.metadata.image().offset,
                want_fence: false,
                want_shut_down,
                offline_replicas: state.logs.offline_replicas(),
            },
            heartbeat_timeout(state),
            interval.max(Duration::from_millis(100)),
        )
        .await
        .map_err(|e| (codes::REQUEST_TIMED_OUT, e.to_string()))?;
    match response {
        Response::BrokerHeartbeat(Ok(reply)) => {
            let was = quorum.set_fenced(reply.is_fenced);
            if was && !reply.is_fenced {
                tracing::info!(node = quorum.node_id, "unfenced by the controller: serving");
                // On stdout beside the ready line: launchers (`strom cluster`, the cluster
                // tests) wait for it to know this incarnation has really joined. A
                // single node's ready line comes only once it is unfenced.
                if !state.config.kraft.formats_itself {
                    println!("strom broker {} unfenced", quorum.node_id);
                }
            } else if !was && reply.is_fenced {
                tracing::warn!(node = quorum.node_id, "fenced by the controller");
            }
            Ok(reply.should_shut_down)
        }
        Response::BrokerHeartbeat(Err(e)) => Err((e.code, e.message)),
        other => Err((
            codes::UNKNOWN_SERVER_ERROR,
            format!("unexpected controller response {other:?}"),
        )),
    }
}

/// Registers and heartbeats until `stop`; sends on `failed` if the first registration
/// cannot be made within `initial.broker.registration.timeout.ms` (Kafka's broker then
/// exits).
pub async fn run(
    state: Arc<BrokerState>,
    quorum: Arc<QuorumChannel>,
    identity: Identity,
    mut stop: watch::Receiver<bool>,
    failed: tokio::sync::oneshot::Sender<String>,
) {
    let initial = Duration::from_millis(state.config.kraft.initial_broker_registration_timeout_ms);
    tokio::select! {
        r = register(&state, &quorum, &identity, initial) => if let Err(e) = r {
            let _ = failed.send(format!(
                "could not register with the controller quorum within initial.broker.registration.timeout.ms ({} ms): {e}",
                initial.as_millis()
            ));
            return;
        },
        _ = stop.changed() => return,
    }
    let interval = Duration::from_millis(state.config.kraft.broker_heartbeat_interval_ms);
    let mut applied = state.metadata.subscribe();
    loop {
        // Heartbeat at once when this broker catches up with its registration, so it is
        // unfenced without waiting out an interval.
        let caught_up_now = async {
            let epoch = quorum.epoch.load(Ordering::Acquire);
            if quorum.is_fenced() {
                let _ = applied.wait_for(|o| *o >= epoch).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = caught_up_now => {}
            _ = state.logs.storage_failures.notified() => {}
            _ = stop.changed() => return,
        }
        match heartbeat(&state, &quorum, false).await {
            Ok(_) => {}
            Err((code, message))
                if code == codes::STALE_BROKER_EPOCH || code == codes::BROKER_ID_NOT_REGISTERED =>
            {
                tracing::warn!(error = %message, "the controller does not know this registration; registering again");
                let _ = register(&state, &quorum, &identity, interval * 5).await;
            }
            Err((_, message)) => tracing::debug!(error = %message, "heartbeat failed"),
        }
    }
}

/// Controlled shutdown: asks the controller to move this broker's leaderships away and
/// waits until it says the broker may stop, or `timeout` passes.
pub async fn controlled_shutdown(
    state: &BrokerState,
    quorum: &QuorumChannel,
    timeout: Duration,
) -> bool {
    if quorum.epoch.load(Ordering::Acquire) < 0 {
        return true;
    }
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    // A failover takes one to two election timeouts; a quorum silent for longer than
    // three has lost its majority (the last nodes of a cluster being stopped), and no
    // controller will ever answer.
    let give_up = Duration::from_millis(3 * state.config.kraft.election_timeout_ms);
    let mut failing_since = None;
    while tokio::time::Instant::now() < deadline {
        match heartbeat(state, quorum, true).await {
            Ok(true) => {
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "controlled shutdown: the controller moved every leadership away"
                );
                return true;
            }
            Ok(false) => failing_since = None,
            Err((_, message)) => {
                tracing::debug!(error = %message, "controlled shutdown heartbeat failed");
                let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() > give_up {
                    tracing::warn!(
                        "controlled shutdown: no active controller answers (the quorum has no majority); shutting down without it"
                    );
                    return false;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!("controlled shutdown did not complete in time; shutting down anyway");
    false
}
