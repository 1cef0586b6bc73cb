//! A broker's (or a tool's) way to the controllers: it sends writes and heartbeats to the
//! active controller, following NOT_CONTROLLER answers and trying the other voters when
//! one does not answer, and reuses connections between calls.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::rpc::{Connection, Request, Response};

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

    /// One exchange with voter `id`, on an idle connection if there is one.
    pub async fn call_voter(
        &self,
        id: i32,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
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
        let mut conn = match pooled {
            Some(c) => c,
            None => Connection::connect(&addr, timeout).await?,
        };
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
            match self
                .call_voter(target, &make(), per_try.min(remaining))
                .await
            {
                Ok(Response::NotController { leader }) => match leader {
                    Some(l) if l != target => {
                        self.set_leader(l);
                        continue;
                    }
                    _ => self.forget_leader(),
                },
                Ok(response) => {
                    self.set_leader(target);
                    return Ok(response);
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
