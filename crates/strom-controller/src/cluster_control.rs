//! Cluster control, as Kafka's `ClusterControlManager` and `BrokerHeartbeatManager`:
//! broker registration, heartbeats, fencing and controlled shutdown. The decisions are
//! pure (image and contact times in, records and reply out); the contact times live only
//! in the active controller's memory, as in Kafka, and a newly active controller starts
//! every broker's session afresh.
//!
//! Contact times are noted before a heartbeat waits for anything (KAFKA-17793: a busy
//! controller must not fence the brokers whose heartbeats are queued behind its work).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use strom_metadata::{BrokerId, BrokerRegistration, Endpoint, MetadataImage, MetadataRecord};
use uuid::Uuid;

use crate::replication_control::{broker_back, broker_gone, leader_count, replicas_offline};
use crate::rpc::{codes, HeartbeatReply, RpcError};

/// What the active controller knows of one broker's session.
#[derive(Debug, Clone, Copy)]
struct Contact {
    last: Instant,
    metadata_offset: i64,
}

/// The brokers' sessions on the active controller.
#[derive(Debug, Default)]
pub struct BrokerHeartbeats {
    contacts: HashMap<BrokerId, Contact>,
    /// Brokers in controlled shutdown, with the metadata offset by which their state was
    /// committed: each may stop once every other active broker has applied that offset
    /// (Kafka's `controlledShutdownOffset`), so clients asking any broker already find the
    /// new leaders of what it led.
    shutdown_offsets: HashMap<BrokerId, i64>,
    /// `unclean.leader.election.enable` of the controller's server.properties: the
    /// default for topics that do not set it.
    unclean_leader_election: bool,
    /// The broker id and incarnation of the broker in the controller's own process (a
    /// combined node): a registration of that id by another incarnation is an earlier
    /// run of this process, gone for sure, and never given a session.
    local: Option<(BrokerId, Uuid)>,
}

/// A broker's registration request.
#[derive(Debug, Clone)]
pub struct Registration {
    pub broker_id: BrokerId,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// A broker's heartbeat request.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub broker_id: BrokerId,
    pub broker_epoch: i64,
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shut_down: bool,
    /// Its replicas a storage error took offline (topic id, partition).
    pub offline_replicas: Vec<(Uuid, i32)>,
}

impl BrokerHeartbeats {
    /// No sessions yet; `unclean_leader_election` is the default for topics that do not
    /// set `unclean.leader.election.enable`; `local` is the broker in the controller's own
    /// process, if any.
    pub fn new(unclean_leader_election: bool, local: Option<(BrokerId, Uuid)>) -> Self {
        Self {
            contacts: HashMap::new(),
            shutdown_offsets: HashMap::new(),
            unclean_leader_election,
            local,
        }
    }

    /// Whether `broker` is an earlier incarnation of the broker in this controller's own
    /// process: waiting out its session would only keep the restarted broker from
    /// registering.
    fn is_earlier_local(&self, broker: &BrokerRegistration) -> bool {
        self.local.is_some_and(|(id, incarnation)| {
            broker.id == id && broker.incarnation_id != incarnation
        })
    }

    /// A newly active controller gives every registered broker a full session, except an
    /// earlier incarnation of the broker in its own process.
    pub fn reset(&mut self, image: &MetadataImage, now: Instant) {
        self.contacts = image
            .brokers
            .iter()
            .filter(|(_, b)| !self.is_earlier_local(b))
            .map(|(b, _)| {
                (
                    *b,
                    Contact {
                        last: now,
                        metadata_offset: -1,
                    },
                )
            })
            .collect();
    }

    /// Notes that `broker` was heard from.
    pub fn touch(&mut self, broker: BrokerId, metadata_offset: i64, now: Instant) {
        let c = self.contacts.entry(broker).or_insert(Contact {
            last: now,
            metadata_offset,
        });
        c.last = now;
        c.metadata_offset = c.metadata_offset.max(metadata_offset);
    }

    fn alive(&self, broker: BrokerId, session: Duration, now: Instant) -> bool {
        self.contacts
            .get(&broker)
            .is_some_and(|c| now.saturating_duration_since(c.last) < session)
    }

    /// BrokerRegistration: the records that (re-)register the broker, fenced until it
    /// catches up. A live broker's id registered again by another incarnation is refused
    /// (DUPLICATE_BROKER_REGISTRATION); a restarted broker's old registration, if it still
    /// led partitions, first loses them.
    pub fn register(
        &mut self,
        image: &MetadataImage,
        registration: &Registration,
        session: Duration,
        now: Instant,
    ) -> Result<Vec<MetadataRecord>, RpcError> {
        let id = registration.broker_id;
        let mut records = Vec::new();
        if let Some(old) = image.brokers.get(&id) {
            if old.incarnation_id != registration.incarnation_id
                && !old.fenced
                && self.alive(id, session, now)
            {
                return Err(RpcError::new(
                    codes::DUPLICATE_BROKER_REGISTRATION,
                    format!(
                        "Another broker is registered with that broker id {} (incarnation {}); its session has not expired.",
                        id.0, old.incarnation_id
                    ),
                ));
            }
            records.extend(broker_gone(image, id, self.unclean_leader_election));
        }
        records.push(MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: registration.incarnation_id,
            endpoints: registration.endpoints.clone(),
            rack: registration.rack.clone(),
            fenced: true,
        });
        self.touch(id, -1, now);
        self.shutdown_offsets.remove(&id);
        Ok(records)
    }

    /// BrokerHeartbeat: the records the heartbeat causes (unfencing a caught-up broker and
    /// electing it where partitions have no leader; entering controlled shutdown and
    /// moving its leaderships away) and the reply, computed against the image after them.
    /// `applied` holds the metadata offset each broker last said it had applied (its
    /// metadata fetches): a broker in controlled shutdown may stop once it leads nothing
    /// and every other active broker has applied the change.
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        hb: &Heartbeat,
        applied: &HashMap<BrokerId, i64>,
        now: Instant,
    ) -> Result<(Vec<MetadataRecord>, HeartbeatReply), RpcError> {
        let broker = image.brokers.get(&hb.broker_id).ok_or_else(|| {
            RpcError::new(
                codes::BROKER_ID_NOT_REGISTERED,
                format!("Broker {} is not registered.", hb.broker_id.0),
            )
        })?;
        if broker.epoch != hb.broker_epoch {
            return Err(RpcError::new(
                codes::STALE_BROKER_EPOCH,
                format!(
                    "Expected broker epoch {}, but got broker epoch {}.",
                    broker.epoch, hb.broker_epoch
                ),
            ));
        }
        self.touch(hb.broker_id, hb.current_metadata_offset, now);
        let caught_up = hb.current_metadata_offset >= broker.epoch;
        let mut records = Vec::new();
        let change = |fenced: Option<bool>, shutting: Option<bool>| {
            MetadataRecord::BrokerRegistrationChange {
                broker_id: hb.broker_id,
                broker_epoch: broker.epoch,
                fenced,
                in_controlled_shutdown: shutting,
            }
        };
        if hb.want_shut_down {
            if !broker.fenced && !broker.in_controlled_shutdown {
                records.push(change(None, Some(true)));
                let after = image.apply_at(image.offset, &records);
                records.extend(broker_gone(
                    &after,
                    hb.broker_id,
                    self.unclean_leader_election,
                ));
            }
        } else if broker.fenced && !hb.want_fence && caught_up {
            records.push(change(Some(false), None));
            let after = image.apply_at(image.offset, &records);
            records.extend(broker_back(
                &after,
                hb.broker_id,
                self.unclean_leader_election,
            ));
        } else if !broker.fenced && hb.want_fence {
            records.push(change(Some(true), None));
            let after = image.apply_at(image.offset, &records);
            records.extend(broker_gone(
                &after,
                hb.broker_id,
                self.unclean_leader_election,
            ));
        }
        if !hb.offline_replicas.is_empty() {
            let after = image.apply_at(image.offset, &records);
            records.extend(replicas_offline(
                &after,
                hb.broker_id,
                &hb.offline_replicas,
                self.unclean_leader_election,
            ));
        }
        // Most heartbeats change nothing: the image is then as it is, not a copy.
        let changed;
        let after = if records.is_empty() {
            image
        } else {
            changed = image.apply_at(image.offset, &records);
            &changed
        };
        let now_broker = &after.brokers[&hb.broker_id];
        if hb.want_shut_down && broker.in_controlled_shutdown {
            // The image holds the controlled shutdown: it is committed by its offset.
            self.shutdown_offsets
                .entry(hb.broker_id)
                .or_insert(image.offset);
        } else if !broker.in_controlled_shutdown {
            self.shutdown_offsets.remove(&hb.broker_id);
        }
        let others_know = self
            .shutdown_offsets
            .get(&hb.broker_id)
            .is_some_and(|offset| {
                after
                    .brokers
                    .values()
                    .filter(|b| b.id != hb.broker_id && !b.fenced && !b.in_controlled_shutdown)
                    .all(|b| applied.get(&b.id).is_some_and(|a| a >= offset))
            });
        let should_shut_down = hb.want_shut_down
            && (now_broker.fenced || (leader_count(after, hb.broker_id) == 0 && others_know));
        // A broker that may shut down is fenced at once, as Kafka's SHUTDOWN_NOW does: it
        // serves nothing more, and its restart may register before the session expires.
        if should_shut_down && !now_broker.fenced {
            records.push(change(Some(true), None));
        }

        Ok((
            records,
            HeartbeatReply {
                is_caught_up: caught_up,
                is_fenced: now_broker.fenced || should_shut_down,
                should_shut_down,
            },
        ))
    }

    /// The brokers whose session expired: unfenced (or shutting down) brokers not heard
    /// from for `session`. A broker this controller has no contact time for — one the
    /// image had not applied yet when this voter became active (a restarted voter can
    /// win an election before it has replayed its log) — gets a full session from now,
    /// as every broker does when a controller becomes active.
    pub fn expired(
        &mut self,
        image: &MetadataImage,
        session: Duration,
        now: Instant,
    ) -> Vec<BrokerId> {
        for b in image.brokers.values() {
            if !self.is_earlier_local(b) {
                self.contacts.entry(b.id).or_insert(Contact {
                    last: now,
                    metadata_offset: -1,
                });
            }
        }
        image
            .brokers
            .values()
            .filter(|b| !b.fenced && !self.alive(b.id, session, now))
            .map(|b| b.id)
            .collect()
    }

    /// UnregisterBroker (64): the records that forget `broker`'s registration, as Kafka's
    /// controller does for a broker decommissioned for good: it first leaves every ISR it
    /// can leave and its leaderships move (as when it is fenced), then its registration
    /// goes. Its replicas stay in the assignments. BROKER_ID_NOT_REGISTERED if there is
    /// none; a broker still running registers again with its next heartbeat.
    pub fn unregister(
        &mut self,
        image: &MetadataImage,
        broker: BrokerId,
    ) -> Result<Vec<MetadataRecord>, RpcError> {
        let registered = image.brokers.get(&broker).ok_or_else(|| {
            RpcError::new(
                codes::BROKER_ID_NOT_REGISTERED,
                format!("Broker ID {} is not currently registered", broker.0),
            )
        })?;
        let mut records = if registered.fenced {
            broker_gone(image, broker, self.unclean_leader_election)
        } else {
            self.fence(image, broker)
        };
        records.push(MetadataRecord::UnregisterBroker {
            broker_id: broker,
            broker_epoch: registered.epoch,
        });
        self.contacts.remove(&broker);
        self.shutdown_offsets.remove(&broker);
        Ok(records)
    }

    /// The records that fence `broker` after its session expired.
    pub fn fence(&self, image: &MetadataImage, broker: BrokerId) -> Vec<MetadataRecord> {
        let Some(b) = image.brokers.get(&broker) else {
            return Vec::new();
        };
        let mut records = vec![MetadataRecord::BrokerRegistrationChange {
            broker_id: broker,
            broker_epoch: b.epoch,
            fenced: Some(true),
            in_controlled_shutdown: None,
        }];
        let after = image.apply_at(image.offset, &records);
        records.extend(broker_gone(&after, broker, self.unclean_leader_election));
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(id: i32) -> Registration {
        Registration {
            broker_id: BrokerId(id),
            incarnation_id: Uuid::new_v4(),
            endpoints: vec![],
            rack: None,
        }
    }

    const SESSION: Duration = Duration::from_secs(9);

    /// The image once `hb` has registered `registration` (epoch 1) and it is unfenced.
    fn registered_unfenced(
        hb: &mut BrokerHeartbeats,
        registration: &Registration,
        now: Instant,
    ) -> MetadataImage {
        let empty = MetadataImage::new("c", 1);
        let records = hb.register(&empty, registration, SESSION, now).unwrap();
        empty.apply_at(1, &records).apply_at(
            2,
            &[MetadataRecord::BrokerRegistrationChange {
                broker_id: registration.broker_id,
                broker_epoch: 1,
                fenced: Some(false),
                in_controlled_shutdown: None,
            }],
        )
    }

    #[test]
    fn a_broker_is_fenced_until_it_has_caught_up_with_its_registration() {
        let mut hb = BrokerHeartbeats::default();
        let now = Instant::now();
        let image = MetadataImage::new("c", 1);
        let records = hb.register(&image, &registration(1), SESSION, now).unwrap();
        let image = image.apply_at(5, &records);
        assert!(image.brokers[&BrokerId(1)].fenced);
        let beat = |offset| Heartbeat {
            broker_id: BrokerId(1),
            broker_epoch: 5,
            current_metadata_offset: offset,
            want_fence: false,
            want_shut_down: false,
            offline_replicas: Vec::new(),
        };
        let (records, reply) = hb
            .heartbeat(&image, &beat(4), &HashMap::new(), now)
            .unwrap();
        assert!(records.is_empty() && reply.is_fenced && !reply.is_caught_up);
        let (records, reply) = hb
            .heartbeat(&image, &beat(5), &HashMap::new(), now)
            .unwrap();
        assert!(!reply.is_fenced && reply.is_caught_up);
        let image = image.apply_at(6, &records);
        assert!(!image.brokers[&BrokerId(1)].fenced);
        let stale = Heartbeat {
            broker_epoch: 4,
            ..beat(6)
        };
        assert_eq!(
            hb.heartbeat(&image, &stale, &HashMap::new(), now)
                .unwrap_err()
                .code,
            codes::STALE_BROKER_EPOCH
        );
    }

    #[test]
    fn a_live_broker_id_cannot_be_registered_twice() {
        let mut hb = BrokerHeartbeats::default();
        let now = Instant::now();
        let first = registration(1);
        let image = registered_unfenced(&mut hb, &first, now);
        let e = hb
            .register(&image, &registration(1), SESSION, now)
            .unwrap_err();
        assert_eq!(e.code, codes::DUPLICATE_BROKER_REGISTRATION);
        assert!(
            hb.register(&image, &first, SESSION, now).is_ok(),
            "the same incarnation may register again"
        );
        let later = now + SESSION;
        assert_eq!(hb.expired(&image, SESSION, later), vec![BrokerId(1)]);
        assert!(hb
            .register(&image, &registration(1), SESSION, later)
            .is_ok());
    }

    #[test]
    fn an_earlier_incarnation_of_the_controllers_own_broker_is_never_given_a_session() {
        let now = Instant::now();
        let earlier = registration(1);
        let restarted = registration(1);
        let image = registered_unfenced(&mut BrokerHeartbeats::default(), &earlier, now);
        let mut hb = BrokerHeartbeats::new(false, Some((BrokerId(1), restarted.incarnation_id)));
        hb.reset(&image, now);
        assert_eq!(hb.expired(&image, SESSION, now), vec![BrokerId(1)]);
        assert!(hb.register(&image, &restarted, SESSION, now).is_ok());
        let mut elsewhere = BrokerHeartbeats::default();
        elsewhere.reset(&image, now);
        assert_eq!(
            elsewhere
                .register(&image, &restarted, SESSION, now)
                .map_err(|e| e.code),
            Err(codes::DUPLICATE_BROKER_REGISTRATION),
            "a controller in another process gives the earlier incarnation its session"
        );
    }

    #[test]
    fn a_broker_in_controlled_shutdown_stops_once_the_other_active_brokers_know() {
        let mut hb = BrokerHeartbeats::default();
        let now = Instant::now();
        let image = crate::replication_control::tests::cluster(&[1, 2]);
        let stop = Heartbeat {
            broker_id: BrokerId(1),
            broker_epoch: 1,
            current_metadata_offset: 1,
            want_fence: false,
            want_shut_down: true,
            offline_replicas: Vec::new(),
        };
        let none = HashMap::new();
        let (records, reply) = hb.heartbeat(&image, &stop, &none, now).unwrap();
        assert!(!reply.should_shut_down, "the shutdown is not committed yet");
        let image = image.apply_at(5, &records);
        let (_, reply) = hb.heartbeat(&image, &stop, &none, now).unwrap();
        assert!(!reply.should_shut_down, "broker 2 has not applied offset 5");
        let behind = HashMap::from([(BrokerId(2), 4)]);
        let (_, reply) = hb.heartbeat(&image, &stop, &behind, now).unwrap();
        assert!(
            !reply.should_shut_down,
            "broker 2 has applied only offset 4"
        );
        let caught_up = HashMap::from([(BrokerId(2), 5)]);
        let (records, reply) = hb.heartbeat(&image, &stop, &caught_up, now).unwrap();
        assert!(reply.should_shut_down && reply.is_fenced);
        assert!(!records.is_empty(), "it is fenced at once");
    }

    #[test]
    fn a_broker_the_controller_has_not_heard_of_gets_a_full_session_not_a_fence() {
        // A voter that became active before replaying the registration resets its
        // contacts without the broker; the broker must not be fenced at once.
        let mut hb = BrokerHeartbeats::default();
        let now = Instant::now();
        hb.reset(&MetadataImage::new("c", 1), now);
        let image = MetadataImage::new("c", 1).apply_at(
            1,
            &[MetadataRecord::RegisterBroker {
                broker_id: BrokerId(1),
                incarnation_id: Uuid::new_v4(),
                endpoints: vec![],
                rack: None,
                fenced: false,
            }],
        );
        let later = now + SESSION;
        assert!(hb.expired(&image, SESSION, later).is_empty());
        assert_eq!(
            hb.expired(&image, SESSION, later + SESSION),
            vec![BrokerId(1)]
        );
    }
}
