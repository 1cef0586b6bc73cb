//! A broker's (or a tool's) way to the controllers: it sends writes and heartbeats to the
//! active controller, following NOT_CONTROLLER answers and trying the other voters when
//! one does not answer, and reuses connections between calls.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request as KafkaRequest};
use parking_lot::Mutex;

use kafka_protocol::messages::AlterPartitionResponse;
use strom_metadata::BrokerId;

use crate::kafka_api;
use crate::rpc::{codes, Connection, IsrChange, IsrChangeResult, Request, Response, RpcError};

/// The longest pause between two tries. Kafka retries quorum requests every
/// `controller.quorum.retry.backoff.ms` (20 ms); strom doubles from 20 ms up to this, so
/// that a failover is noticed within a tenth of a second of the new leader's election.
const MAX_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// The voters of the quorum, and which one leads as far as this client knows.
#[derive(Debug)]
pub struct ControllerClient {
    voters: Vec<(i32, String)>,
    leader: AtomicI32,
    idle: Mutex<Vec<(i32, Connection)>>,
}

/// Why a call found no controller to answer it.
#[derive(Debug, thiserror::Error)]
#[error("no active controller answered within {0:?} (voters: {1})")]
pub struct NoController(pub Duration, pub String);

impl ControllerClient {
    pub fn new(voters: Vec<(i32, String)>) -> Self {
        Self {
            voters,
            leader: AtomicI32::new(-1),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The active controller as last seen (-1: unknown).
    pub fn leader(&self) -> i32 {
        self.leader.load(Ordering::Relaxed)
    }

    /// Forgets the active controller (it did not answer as one): the next call tries the
    /// voters in turn.
    pub fn forget_leader(&self) {
        self.leader.store(-1, Ordering::Relaxed);
    }

    /// Notes the active controller a response named.
    pub fn set_leader(&self, leader: i32) {
        if leader >= 0 {
            self.leader.store(leader, Ordering::Relaxed);
        }
    }

    fn address(&self, id: i32) -> Option<&str> {
        self.voters
            .iter()
            .find(|(v, _)| *v == id)
            .map(|(_, a)| a.as_str())
    }

    /// An idle connection to voter `id`, or a new one.
    async fn connection(&self, id: i32, timeout: Duration) -> std::io::Result<Connection> {
        let addr = self
            .address(id)
            .ok_or_else(|| std::io::Error::other(format!("{id} is not a voter")))?
            .to_string();
        let pooled = {
            let mut idle = self.idle.lock();
            idle.iter()
                .position(|(v, _)| *v == id)
                .map(|i| idle.swap_remove(i).1)
        };
        match pooled {
            Some(c) => Ok(c),
            None => Connection::connect(&addr, timeout).await,
        }
    }

    /// One exchange with voter `id`, on an idle connection if there is one.
    pub async fn call_voter(
        &self,
        id: i32,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
        let mut conn = self.connection(id, timeout).await?;
        let response = conn.call(request, timeout).await?;
        self.idle.lock().push((id, conn));
        Ok(response)
    }

    /// Sends the request `make` builds to the active controller, following redirects
    /// and trying every voter in turn, until one answers or `deadline` passes.
    pub async fn call(
        &self,
        make: impl Fn() -> Request,
        per_try: Duration,
        deadline: Duration,
    ) -> Result<Response, NoController> {
        self.call_active(per_try, deadline, |target, timeout| {
            let request = make();
            async move {
                Ok(match self.call_voter(target, &request, timeout).await? {
                    Response::NotController { leader } => Attempt::NotController(leader),
                    response => Attempt::Answered(response),
                })
            }
        })
        .await
    }

    /// Sends the Kafka request `body` at `version` to the active controller, trying every
    /// voter in turn while the answer says (`not_controller`) that it came from a voter
    /// that does not lead, until one answers or `deadline` passes.
    async fn call_kafka<R>(
        &self,
        version: i16,
        body: &R,
        not_controller: impl Fn(&R::Response) -> bool,
        per_try: Duration,
        deadline: Duration,
    ) -> Result<R::Response, NoController>
    where
        R: KafkaRequest + Encodable,
        R::Response: Decodable + HeaderVersion,
    {
        self.call_active(per_try, deadline, |target, timeout| {
            let not_controller = &not_controller;
            async move {
                let mut conn = self.connection(target, timeout).await?;
                let response = conn.call_kafka(version, body, timeout).await?;
                self.idle.lock().push((target, conn));
                Ok(if not_controller(&response) {
                    Attempt::NotController(None)
                } else {
                    Attempt::Answered(response)
                })
            }
        })
        .await
    }

    /// AlterPartition (56) in Kafka's wire format: broker `broker_id`'s proposed ISRs to
    /// the active controller, each change's result back in order.
    pub async fn alter_partition(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
        changes: &[IsrChange],
        per_try: Duration,
        deadline: Duration,
    ) -> Result<Result<Vec<IsrChangeResult>, RpcError>, NoController> {
        let request = kafka_api::alter_partition_request(broker_id, broker_epoch, changes);
        let response = self
            .call_kafka(
                kafka_api::ALTER_PARTITION_VERSION,
                &request,
                |r: &AlterPartitionResponse| r.error_code == codes::NOT_CONTROLLER,
                per_try,
                deadline,
            )
            .await?;
        Ok(kafka_api::alter_partition_results(changes, &response))
    }

    /// Runs `attempt` against the active controller as far as this client knows, else
    /// the voters in turn, following a named leader, with a doubling pause between
    /// tries, until an attempt is answered or `deadline` passes.
    async fn call_active<T, F, Fut>(
        &self,
        per_try: Duration,
        deadline: Duration,
        mut attempt: F,
    ) -> Result<T, NoController>
    where
        F: FnMut(i32, Duration) -> Fut,
        Fut: std::future::Future<Output = std::io::Result<Attempt<T>>>,
    {
        let end = tokio::time::Instant::now() + deadline;
        let mut next = 0usize;
        let mut backoff = Duration::from_millis(20);
        loop {
            let target = match self.leader() {
                -1 => {
                    next = (next + 1) % self.voters.len();
                    self.voters[next].0
                }
                l => l,
            };
            let remaining = end.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                let voters = self
                    .voters
                    .iter()
                    .map(|(id, a)| format!("{id}@{a}"))
                    .collect::<Vec<_>>()
                    .join(",");
                return Err(NoController(deadline, voters));
            }
            match attempt(target, per_try.min(remaining)).await {
                Ok(Attempt::NotController(leader)) => match leader {
                    Some(l) if l != target => {
                        self.set_leader(l);
                        continue;
                    }
                    _ => self.forget_leader(),
                },
                Ok(Attempt::Answered(answer)) => {
                    self.set_leader(target);
                    return Ok(answer);
                }
                Err(e) => {
                    tracing::debug!(controller = target, error = %e, "controller call failed");
                    self.forget_leader();
                }
            }
            tokio::time::sleep(
                backoff.min(end.saturating_duration_since(tokio::time::Instant::now())),
            )
            .await;
            backoff = (backoff * 2).min(MAX_RETRY_BACKOFF);
        }
    }
}

/// What one try at the active controller gave.
enum Attempt<T> {
    Answered(T),
    /// The voter does not lead; the leader it named, if any.
    NotController(Option<i32>),
}
