//! Incremental fetch sessions (KIP-227), as Kafka's `FetchSessionCache`: a client that
//! fetches the same partitions over and over names them once, then sends only what
//! changed (a new fetch offset, a partition added or forgotten), and the broker answers
//! only for partitions with something new (records, a moved high watermark or log start,
//! an error). A consumer of thousands of partitions stops paying for all of them on
//! every round trip.
//!
//! The broker's side costs what changed, too: an incremental fetch reads only the
//! session's *active* partitions — those the request names, those whose
//! [`PartitionWatch`] fired since the last answer (an append, a moved high watermark or
//! log start, a new leader epoch, a deletion), and those the last answer left unsettled
//! (it had news, an error, or a follower outside the ISR). A partition whose answer had
//! nothing new and is settled rests until its watch fires, so the thousands of idle
//! partitions a follower shares with its leader cost neither side anything per fetch.
//!
//! A follower learns of a partition it must now fetch from this broker (a new topic, a
//! moved leadership) from the metadata, while its fetch may be parked here for up to
//! `replica.fetch.wait.max.ms`. The leader [`FetchSessionCache::expect`]s the partition
//! from that follower's sessions: a parked fetch answers at once, and until the follower
//! names the partition (or [`EXPECTED_FOR`] passes) its fetches wait at most
//! [`EXPECTED_WAIT`], so the new partition's first acknowledgements are not held back and
//! the follower keeps its session (a fresh one would name every partition again).
//!
//! The request's `session_id` and `session_epoch` decide what it is:
//!
//! | session_id | epoch | meaning |
//! |---|---|---|
//! | 0 | -1 | a full fetch without a session |
//! | 0 | 0 | a full fetch that opens a session (id 0 in the answer: none was free) |
//! | id | -1 | closes session `id`; a full fetch without a session |
//! | id | 0 | closes session `id` and opens a new one |
//! | id | n > 0 | an incremental fetch: `n` must be the epoch the session expects |
//!
//! At most `max.incremental.fetch.session.cache.slots` sessions exist; when all are taken,
//! the least recently used one is evicted if it has been idle for
//! [`EVICTION_IDLE`] (Kafka's `min.incremental.fetch.session.eviction.ms`), otherwise the
//! new client fetches without a session. Each session holds what its requests named, and
//! all of them together at most [`MAX_CACHED_PARTITIONS`] partitions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

use crate::partition::Partition;
use crate::partition_watch::{ChangeSet, PartitionWatch};

/// Fetch v7+ carries session ids and epochs.
pub const SESSIONS_SINCE: i16 = 7;
/// Fetch v15+ names a follower in `ReplicaState` instead of `replica_id` (KIP-903).
pub const REPLICA_STATE_SINCE: i16 = 15;
/// A session idle this long may be evicted for a new one.
pub const EVICTION_IDLE: Duration = Duration::from_secs(120);
/// The most partitions all sessions together may hold (a few hundred bytes each). Kafka
/// bounds only the number of sessions; strom also bounds what they hold, so clients that
/// name millions of partitions (real or made up) cannot grow the cache without bound. A
/// session that would pass it is not opened, or is closed, and its client fetches
/// without one.
pub const MAX_CACHED_PARTITIONS: usize = 500_000;

/// How long a leader expects a follower to name a partition it now leads.
pub const EXPECTED_FOR: Duration = Duration::from_secs(1);
/// The longest a fetch waits while its session is expected to name a partition: the
/// follower applies the same metadata within milliseconds of its leader.
pub const EXPECTED_WAIT: Duration = Duration::from_millis(10);

const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// A partition of a session: by topic id (v13+) or name (v7–12), and index.
pub type PartitionKey = (Uuid, TopicName, i32);

/// What a session remembers of one partition: the client's latest request for it, what
/// the last answer told the client, and the watch that marks it changed.
#[derive(Debug)]
struct CachedPartition {
    request: FetchPartition,
    high_watermark: i64,
    log_start_offset: i64,
    /// The number of the last answer that returned records from it: partitions are read
    /// in the order they last returned records, as Kafka moves them to the back, so a
    /// response capped by `max_bytes` cannot starve the later ones.
    last_returned: u64,
    watch: Arc<PartitionWatch<PartitionKey>>,
}

#[derive(Debug)]
struct Session {
    /// The broker whose fetcher opened it (-1: a consumer).
    replica_id: i32,
    /// The epoch the next incremental request must carry.
    next_epoch: i32,
    partitions: HashMap<PartitionKey, CachedPartition>,
    /// The partitions the next incremental fetch reads (see the module doc).
    active: HashSet<PartitionKey>,
    /// The partitions whose watches fired.
    changes: Arc<ChangeSet<PartitionKey>>,
    /// Answers given, numbering them for `last_returned`.
    answers: u64,
    /// Partitions this broker now leads that the session's follower is expected to name,
    /// until the instant given.
    expected: HashMap<PartitionKey, Instant>,
    last_used: Instant,
}

impl Session {
    fn new(replica_id: i32, now: Instant) -> Self {
        Self {
            replica_id,
            next_epoch: 1,
            partitions: HashMap::new(),
            active: HashSet::new(),
            changes: ChangeSet::new(),
            answers: 0,
            expected: HashMap::new(),
            last_used: now,
        }
    }

    /// Adds `p` of topic `topic` (id and name as the request gave them) or takes its new
    /// fetch position; either way it is read next.
    fn upsert(&mut self, topic: &FetchTopic, p: &FetchPartition) {
        let key = (topic.topic_id, topic.topic.clone(), p.partition);
        match self.partitions.get_mut(&key) {
            Some(cached) => cached.request = p.clone(),
            None => {
                let watch = self.changes.watch(key.clone());
                self.partitions.insert(
                    key.clone(),
                    CachedPartition {
                        request: p.clone(),
                        high_watermark: -1,
                        log_start_offset: -1,
                        last_returned: 0,
                        watch,
                    },
                );
            }
        }
        self.active.insert(key);
    }

    /// The request that reads the active partitions, least recently returning first.
    fn active_request(&self, req: FetchRequest) -> FetchRequest {
        let mut keys: Vec<&PartitionKey> = self.active.iter().collect();
        keys.sort_unstable_by_key(|k| (self.partitions[*k].last_returned, *k));
        // Consecutive partitions of one topic share an entry; a topic can appear more
        // than once (as in Kafka's answers) when the order interleaves it with others.
        let mut topics: Vec<FetchTopic> = Vec::new();
        for key in keys {
            let (topic_id, name, _) = key;
            let request = self.partitions[key].request.clone();
            match topics.last_mut() {
                Some(t) if t.topic_id == *topic_id && t.topic == *name => {
                    t.partitions.push(request)
                }
                _ => topics.push(
                    FetchTopic::default()
                        .with_topic_id(*topic_id)
                        .with_topic(name.clone())
                        .with_partitions(vec![request]),
                ),
            }
        }
        req.with_topics(topics)
            .with_forgotten_topics_data(Vec::new())
    }

    /// The watches of the active partitions, for the fetch that reads them.
    fn watch_active(&self) -> SessionWatch {
        let watches = self
            .active
            .iter()
            .map(|k| (k.clone(), self.partitions[k].watch.clone()))
            .collect();
        SessionWatch {
            changes: self.changes.clone(),
            watches,
            expecting: !self.expected.is_empty(),
        }
    }
}

/// How one Fetch request uses the sessions, decided by [`FetchSessionCache::prepare`]
/// and finished by [`FetchSessionCache::complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionUse {
    /// No session: the answer holds every requested partition.
    Sessionless,
    /// A full fetch that opened session `id` (0: none was free).
    Full { id: i32 },
    /// An incremental fetch in session `id`: the answer holds changed partitions only.
    Incremental { id: i32 },
}

/// The watches of the partitions one session fetch reads, for its long poll: it registers
/// each partition's watch before reading it, and waits on the session's changes.
#[derive(Debug)]
pub struct SessionWatch {
    changes: Arc<ChangeSet<PartitionKey>>,
    watches: HashMap<PartitionKey, Arc<PartitionWatch<PartitionKey>>>,
    expecting: bool,
}

impl SessionWatch {
    /// Registers the watch of `key`, which resolved to `partition`.
    pub fn register(&self, key: &PartitionKey, partition: &Partition) {
        if let Some(watch) = self.watches.get(key) {
            watch.register(partition);
        }
    }

    /// The longest this fetch may wait: [`EXPECTED_WAIT`] while the session is expected
    /// to name a partition, else what the request asks.
    pub fn max_wait(&self, asked: Duration) -> Duration {
        if self.expecting {
            asked.min(EXPECTED_WAIT)
        } else {
            asked
        }
    }

    /// Waits until a partition of the session changes.
    pub async fn changed(&self) {
        self.changes.changed().await
    }

    /// Whether any partition of the session changed since this fetch was prepared.
    pub fn has_changes(&self) -> bool {
        self.changes.any(|_| true)
    }

    /// Whether a partition this fetch does not read has changed: the fetch then answers
    /// at once, and the next one reads it.
    pub fn others_changed(&self) -> bool {
        self.changes.any(|k| !self.watches.contains_key(k))
    }
}

/// A Fetch request as its session makes it: for an incremental fetch the session's
/// active partitions, with the offsets it now holds.
#[derive(Debug)]
pub struct PreparedFetch {
    pub request: FetchRequest,
    pub how: SessionUse,
    /// The session's watches (`None` without a session).
    pub watch: Option<SessionWatch>,
}

/// The broker's fetch sessions.
#[derive(Debug)]
pub struct FetchSessionCache {
    max_slots: usize,
    /// [`MAX_CACHED_PARTITIONS`], smaller in tests.
    max_partitions: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
}

impl FetchSessionCache {
    pub fn new(max_slots: usize) -> Self {
        Self {
            max_slots,
            max_partitions: MAX_CACHED_PARTITIONS,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Decides how `req` (of Fetch `version`) uses the sessions at `now`. For an
    /// incremental fetch the returned request names the session's active partitions (see
    /// the module doc), with the offsets it now holds, so the rest of the Fetch handler
    /// reads them as it reads a full request. A session the request does not match is
    /// FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH, as in Kafka.
    pub fn prepare(
        &self,
        req: FetchRequest,
        version: i16,
        now: Instant,
    ) -> Result<PreparedFetch, ResponseError> {
        let (id, epoch) = (req.session_id, req.session_epoch);
        let sessionless = |request| PreparedFetch {
            request,
            how: SessionUse::Sessionless,
            watch: None,
        };
        // Most clients (librdkafka, kafkajs) never use sessions: they cost no lock.
        if version < SESSIONS_SINCE || (id == 0 && epoch == FINAL_EPOCH) {
            return Ok(sessionless(req));
        }
        let mut inner = self.inner.lock();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if id != 0 {
                inner.sessions.remove(&id);
            }
            if epoch == FINAL_EPOCH {
                return Ok(sessionless(req));
            }
            let replica_id = replica_id(&req, version);
            let id = inner.open(self.max_slots, self.max_partitions, &req, replica_id, now);
            return Ok(PreparedFetch {
                request: req,
                how: SessionUse::Full { id },
                watch: inner.sessions.get(&id).map(Session::watch_active),
            });
        }
        let current = inner
            .sessions
            .get(&id)
            .ok_or(ResponseError::FetchSessionIdNotFound)?;
        if epoch != current.next_epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        let others = inner.cached_partitions() - current.partitions.len();
        let session = inner.sessions.get_mut(&id).expect("looked up above");
        session.next_epoch = next_epoch(epoch);
        session.last_used = now;
        for topic in &req.topics {
            for p in &topic.partitions {
                session.upsert(topic, p);
            }
        }
        for forgotten in &req.forgotten_topics_data {
            for index in &forgotten.partitions {
                let key = (forgotten.topic_id, forgotten.topic.clone(), *index);
                session.partitions.remove(&key);
                session.active.remove(&key);
            }
        }
        for key in session.changes.take() {
            if session.partitions.contains_key(&key) {
                session.active.insert(key);
            }
        }
        let partitions = &session.partitions;
        session
            .expected
            .retain(|key, until| *until > now && !partitions.contains_key(key));
        if others + session.partitions.len() > self.max_partitions {
            inner.sessions.remove(&id);
            return Err(ResponseError::FetchSessionIdNotFound);
        }
        Ok(PreparedFetch {
            watch: Some(session.watch_active()),
            request: session.active_request(req),
            how: SessionUse::Incremental { id },
        })
    }

    /// Finishes the answer to a request that [`Self::prepare`] decided `how` to serve:
    /// names the session, remembers what each partition's answer told the client, lets
    /// the partitions with nothing new rest unless they are `unsettled`, and for an
    /// incremental fetch leaves those out of the answer.
    pub fn complete(
        &self,
        how: SessionUse,
        mut response: FetchResponse,
        unsettled: &HashSet<PartitionKey>,
    ) -> FetchResponse {
        let (id, incremental) = match how {
            SessionUse::Sessionless | SessionUse::Full { id: 0 } => return response,
            SessionUse::Full { id } => (id, false),
            SessionUse::Incremental { id } => (id, true),
        };
        let mut inner = self.inner.lock();
        let Some(session) = inner.sessions.get_mut(&id) else {
            // Evicted or closed while this fetch waited: the client opens another.
            return response.with_session_id(0);
        };
        session.answers += 1;
        let answer = session.answers;
        for topic in &mut response.responses {
            topic.partitions.retain(|p| {
                let key = (topic.topic_id, topic.topic.clone(), p.partition_index);
                let Some(cached) = session.partitions.get_mut(&key) else {
                    return true;
                };
                let returned = p.records.as_ref().is_some_and(|r| !r.is_empty());
                // A full answer tells the client every partition's watermarks.
                let moved = incremental
                    && (p.high_watermark != cached.high_watermark
                        || p.log_start_offset != cached.log_start_offset);
                let news = p.error_code != 0 || returned || p.diverging_epoch.epoch >= 0 || moved;
                cached.high_watermark = p.high_watermark;
                cached.log_start_offset = p.log_start_offset;
                if returned {
                    cached.last_returned = answer;
                }
                if !news && !unsettled.contains(&key) {
                    session.active.remove(&key);
                }
                news || !incremental
            });
        }
        response.responses.retain(|t| !t.partitions.is_empty());
        response.with_session_id(id)
    }

    /// Expects the sessions of follower `replica_id` to name `partitions` (by topic id and
    /// index), which this broker has just started to lead: see the module doc.
    pub fn expect(&self, replica_id: i32, partitions: &[(Uuid, i32)], now: Instant) {
        let mut inner = self.inner.lock();
        let sessions = inner
            .sessions
            .values_mut()
            .filter(|s| s.replica_id == replica_id);
        for session in sessions {
            for (topic_id, index) in partitions {
                let key = (*topic_id, TopicName::default(), *index);
                if !session.partitions.contains_key(&key) {
                    session.expected.insert(key.clone(), now + EXPECTED_FOR);
                    session.changes.mark(key);
                }
            }
        }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.inner.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// The partitions all sessions hold.
    fn cached_partitions(&self) -> usize {
        self.sessions.values().map(|s| s.partitions.len()).sum()
    }

    /// Opens a session holding `req`'s partitions; 0 when every slot is taken by a
    /// session used within [`EVICTION_IDLE`], or the sessions would hold more than
    /// `max_partitions`.
    fn open(
        &mut self,
        max_slots: usize,
        max_partitions: usize,
        req: &FetchRequest,
        replica_id: i32,
        now: Instant,
    ) -> i32 {
        let named: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
        if max_slots == 0 || self.cached_partitions() + named > max_partitions {
            return 0;
        }
        if self.sessions.len() >= max_slots {
            let idlest = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, s)| (*id, s.last_used));
            match idlest {
                Some((id, used)) if now.saturating_duration_since(used) >= EVICTION_IDLE => {
                    self.sessions.remove(&id);
                }
                _ => return 0,
            }
        }
        // Random, as Kafka's: a client that still holds an id from before a restart, or
        // another client's by mistake, is unlikely to reach (or close) someone's session.
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as i32) & i32::MAX;
            if id != 0 && !self.sessions.contains_key(&id) {
                break id;
            }
        };
        let mut session = Session::new(replica_id, now);
        for topic in &req.topics {
            for p in &topic.partitions {
                session.upsert(topic, p);
            }
        }
        self.sessions.insert(id, session);
        id
    }
}

/// The broker a Fetch of `version` comes from (-1: a consumer): named in `ReplicaState`
/// from v15 (KIP-903), in `replica_id` before.
pub fn replica_id(req: &FetchRequest, version: i16) -> i32 {
    if version >= REPLICA_STATE_SINCE {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    }
}

/// The epoch after `epoch`, wrapping past `i32::MAX` to 1 as Kafka's does.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_request::ForgottenTopic;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};

    const V: i16 = 16;

    fn topic_id(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn request(id: i32, epoch: i32, partitions: &[(u8, i32, i64)]) -> FetchRequest {
        let topics = partitions
            .iter()
            .map(|(t, p, offset)| {
                FetchTopic::default()
                    .with_topic_id(topic_id(*t))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(*p)
                        .with_fetch_offset(*offset)])
            })
            .collect();
        FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(topics)
    }

    /// The (topic, partition, fetch offset) a prepared request names, in order.
    fn named(req: &FetchRequest) -> Vec<(u8, i32, i64)> {
        req.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic_id.as_bytes()[0], p.partition, p.fetch_offset))
            })
            .collect()
    }

    /// An answer for each of `req`'s partitions: (high watermark, record bytes).
    fn response(req: &FetchRequest, answers: &[(i64, usize)]) -> FetchResponse {
        let mut answers = answers.iter();
        let responses = req
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let (hw, bytes) = answers.next().expect("an answer per partition");
                        PartitionData::default()
                            .with_partition_index(p.partition)
                            .with_high_watermark(*hw)
                            .with_records(Some(Bytes::from(vec![0u8; *bytes])))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions)
            })
            .collect();
        FetchResponse::default().with_responses(responses)
    }

    fn answered(r: &FetchResponse) -> Vec<(u8, i32)> {
        r.responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic_id.as_bytes()[0], p.partition_index))
            })
            .collect()
    }

    /// Prepares `req` and returns the request to read and how.
    fn prepare(cache: &FetchSessionCache, req: FetchRequest) -> (FetchRequest, SessionUse) {
        let prepared = cache.prepare(req, V, Instant::now()).unwrap();
        (prepared.request, prepared.how)
    }

    /// Completes `how` with every partition settled.
    fn complete(cache: &FetchSessionCache, how: SessionUse, r: FetchResponse) -> FetchResponse {
        cache.complete(how, r, &HashSet::new())
    }

    #[test]
    fn a_session_sends_only_what_changed_and_answers_only_what_is_new() {
        let cache = FetchSessionCache::new(10);
        let (req, how) = prepare(&cache, request(0, 0, &[(1, 0, 5), (1, 1, 7), (2, 0, 9)]));
        let id = match how {
            SessionUse::Full { id } => id,
            other => panic!("{other:?}"),
        };
        assert!(id > 0);
        let full = complete(&cache, how, response(&req, &[(10, 0), (10, 0), (10, 0)]));
        assert_eq!((full.session_id, answered(&full).len()), (id, 3));

        // Only partition 1-1 moved on; 2-0 is forgotten.
        let mut incremental = request(id, 1, &[(1, 1, 8)]);
        incremental.forgotten_topics_data = vec![ForgottenTopic::default()
            .with_topic_id(topic_id(2))
            .with_partitions(vec![0])];
        let (req, how) = prepare(&cache, incremental);
        assert_eq!(how, SessionUse::Incremental { id });
        assert_eq!(
            named(&req),
            vec![(1, 1, 8)],
            "1-0 had nothing new: it rests"
        );
        let answer = complete(&cache, how, response(&req, &[(10, 100)]));
        assert_eq!(answered(&answer), vec![(1, 1)]);

        // 1-1 returned records and is read again, and has a moved high watermark, which
        // is news too.
        let (req, how) = prepare(&cache, request(id, 2, &[]));
        assert_eq!(named(&req), vec![(1, 1, 8)]);
        let answer = complete(&cache, how, response(&req, &[(11, 0)]));
        assert_eq!(answered(&answer), vec![(1, 1)]);
        let (req, how) = prepare(&cache, request(id, 3, &[]));
        assert_eq!(named(&req), vec![(1, 1, 8)]);
        let answer = complete(&cache, how, response(&req, &[(11, 0)]));
        assert!(answered(&answer).is_empty());
        let (req, _) = prepare(&cache, request(id, 4, &[]));
        assert!(named(&req).is_empty(), "nothing changed: nothing is read");
    }

    #[test]
    fn a_resting_partition_is_read_again_when_its_watch_fires_or_it_is_unsettled() {
        let cache = FetchSessionCache::new(10);
        let prepared = cache
            .prepare(request(0, 0, &[(1, 0, 5), (1, 1, 7)]), V, Instant::now())
            .unwrap();
        let SessionUse::Full { id } = prepared.how else {
            panic!("{:?}", prepared.how)
        };
        let watch = prepared.watch.expect("a session watches its partitions");
        let key = (topic_id(1), TopicName::default(), 1);
        let unsettled = HashSet::from([key.clone()]);
        cache.complete(
            prepared.how,
            response(&prepared.request, &[(10, 0), (10, 0)]),
            &unsettled,
        );
        let (req, how) = prepare(&cache, request(id, 1, &[]));
        assert_eq!(
            named(&req),
            vec![(1, 1, 7)],
            "an unsettled partition is read"
        );
        complete(&cache, how, response(&req, &[(10, 0)]));
        let (req, how) = prepare(&cache, request(id, 2, &[]));
        assert!(named(&req).is_empty());
        complete(&cache, how, response(&req, &[]));

        crate::partition_watch::Waiter::wake(&*watch.watches[&key]);
        assert!(
            !watch.others_changed(),
            "the fetch that holds the watch reads 1-1"
        );
        let (req, _) = prepare(&cache, request(id, 3, &[]));
        assert_eq!(named(&req), vec![(1, 1, 7)], "a fired watch makes it read");
    }

    #[test]
    fn partitions_that_returned_records_are_read_last_next_time() {
        let cache = FetchSessionCache::new(10);
        let (req, how) = prepare(&cache, request(0, 0, &[(1, 0, 0), (1, 1, 0), (1, 2, 0)]));
        let SessionUse::Full { id } = how else {
            panic!("{how:?}")
        };
        complete(&cache, how, response(&req, &[(10, 100), (10, 0), (10, 0)]));
        let (req, _) = prepare(&cache, request(id, 1, &[(1, 1, 0), (1, 2, 0)]));
        assert_eq!(named(&req), vec![(1, 1, 0), (1, 2, 0), (1, 0, 0)]);
    }

    #[test]
    fn a_wrong_epoch_or_unknown_session_is_refused_and_epoch_minus_one_closes() {
        let cache = FetchSessionCache::new(10);
        let now = Instant::now();
        assert_eq!(
            cache
                .prepare(request(0, -1, &[(1, 0, 0)]), V, now)
                .unwrap()
                .how,
            SessionUse::Sessionless
        );
        assert_eq!(
            cache
                .prepare(request(0, 0, &[(1, 0, 0)]), 6, now)
                .unwrap()
                .how,
            SessionUse::Sessionless,
            "Fetch v6 has no sessions"
        );
        let SessionUse::Full { id } = cache.prepare(request(0, 0, &[]), V, now).unwrap().how else {
            panic!("a session")
        };
        assert_eq!(
            cache.prepare(request(id, 2, &[]), V, now).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch
        );
        assert_eq!(
            cache.prepare(request(id ^ 1, 1, &[]), V, now).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        assert!(cache.prepare(request(id, 1, &[]), V, now).is_ok());
        assert_eq!(
            cache.prepare(request(id, 1, &[]), V, now).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch,
            "an epoch is used once"
        );
        cache.prepare(request(id, -1, &[]), V, now).unwrap();
        assert!(cache.is_empty());
    }

    #[test]
    fn sessions_hold_at_most_the_partition_budget() {
        let cache = FetchSessionCache {
            max_partitions: 3,
            ..FetchSessionCache::new(10)
        };
        let now = Instant::now();
        let two = request(0, 0, &[(1, 0, 0), (1, 1, 0)]);
        let SessionUse::Full { id } = cache.prepare(two.clone(), V, now).unwrap().how else {
            panic!("a session")
        };
        assert!(id > 0);
        assert_eq!(
            cache.prepare(two, V, now).unwrap().how,
            SessionUse::Full { id: 0 },
            "four partitions would pass the budget: no session"
        );
        assert!(cache.prepare(request(id, 1, &[(1, 2, 0)]), V, now).is_ok());
        assert_eq!(
            cache
                .prepare(request(id, 2, &[(1, 3, 0)]), V, now)
                .unwrap_err(),
            ResponseError::FetchSessionIdNotFound,
            "growing past the budget closes the session"
        );
        assert!(cache.is_empty());
    }

    #[test]
    fn a_full_cache_evicts_only_a_session_idle_for_two_minutes() {
        let cache = FetchSessionCache::new(1);
        let start = Instant::now();
        let first = cache.prepare(request(0, 0, &[]), V, start).unwrap().how;
        assert!(matches!(first, SessionUse::Full { id } if id > 0));
        let busy = cache.prepare(request(0, 0, &[]), V, start).unwrap().how;
        assert_eq!(busy, SessionUse::Full { id: 0 }, "no free slot");
        let later = start + EVICTION_IDLE;
        let second = cache.prepare(request(0, 0, &[]), V, later).unwrap().how;
        assert!(matches!(second, SessionUse::Full { id } if id > 0) && second != first);
        assert_eq!(cache.len(), 1);
    }
}
