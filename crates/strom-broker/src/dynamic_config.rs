//! Dynamic broker configs (KIP-226): the log defaults an operator changes on a running
//! cluster with `kafka-configs --entity-type brokers --alter`, for one broker (`--entity-name
//! 1`) or for every broker (`--entity-default`), without a restart.
//!
//! Precedence is Kafka's: a topic's override, then the broker's own dynamic value, then the
//! cluster-wide dynamic default, then `server.properties`, then the built-in default. The
//! effective broker config is the static properties overlaid with the two dynamic layers and
//! parsed again by [`BrokerConfig::from_properties`], so `log.retention.ms` still wins over
//! `.hours` whichever layer each came from, and a dynamic value is checked exactly as the
//! same key in `server.properties` is.
//!
//! Only the broker-level defaults of topic configs (`log.retention.ms`, `message.max.bytes`,
//! `min.insync.replicas`, ...) can change at runtime: they are what Kafka's dynamic log
//! config covers and what strom reads per request. A cluster keeps the values in the
//! metadata log (`ConfigRecord`s of a broker resource), and each broker a copy in a JSON
//! file beside its topic records, which is a standalone node's only record of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, MutexGuard, RwLock};
use strom_log::LogConfig;
use strom_metadata::{BrokerId, ConfigResource, MetadataImage};

use crate::config::{BrokerConfig, ConfigError};
use crate::{broker_configs, topic_config, BrokerError, BrokerState};
use strom_wire::ApiError;

/// Dynamic configs by entity: `None` is the cluster-wide default, `Some(id)` a broker's own.
type Entries = BTreeMap<Option<i32>, BTreeMap<String, String>>;

/// The dynamic broker configs this broker knows of, for every entity, and their copy on
/// disk (`<metadata dir>/dynamic-broker-configs.json`): a standalone node's only record of
/// them; on a cluster broker a copy of the metadata log's, read at start-up so that the
/// logs open — and the first retention pass runs — with the values last known even
/// before the controllers answer.
#[derive(Debug)]
pub struct DynamicBrokerConfigs {
    file: PathBuf,
    entries: RwLock<Entries>,
    /// Held through a standalone node's validate, store and apply, so that two changes
    /// cannot apply in the opposite order to the one they were stored in.
    updates: Mutex<()>,
}

impl DynamicBrokerConfigs {
    /// The configs stored in `dir`, if any.
    pub fn open(dir: &Path) -> Result<Self, BrokerError> {
        let file = dir.join("dynamic-broker-configs.json");
        let entries = match std::fs::read(&file) {
            Ok(bytes) => {
                let stored: BTreeMap<String, BTreeMap<String, String>> =
                    serde_json::from_slice(&bytes).map_err(|e| {
                        BrokerError::Io(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{}: {e}", file.display()),
                        ))
                    })?;
                stored
                    .into_iter()
                    .map(|(entity, configs)| (entity.parse().ok(), configs))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Entries::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(Self {
            file,
            entries: RwLock::new(entries),
            updates: Mutex::new(()),
        })
    }

    /// The dynamic configs of `broker` (`None`: the cluster-wide default).
    pub fn get(&self, broker: Option<i32>) -> BTreeMap<String, String> {
        self.entries
            .read()
            .get(&broker)
            .cloned()
            .unwrap_or_default()
    }

    /// Takes the broker resources' configs from a metadata image and keeps a copy on disk
    /// when they changed; whether they did.
    pub fn update_from_image(&self, image: &MetadataImage) -> bool {
        let entries: Entries = image
            .configs
            .iter()
            .filter_map(|(resource, configs)| match resource {
                ConfigResource::Broker(id) => Some((id.map(|b: BrokerId| b.0), configs.clone())),
                ConfigResource::Topic(_) => None,
            })
            .collect();
        if *self.entries.read() == entries {
            return false;
        }
        if let Err(e) = self.write(&entries) {
            tracing::warn!(file = %self.file.display(), error = %e, "could not keep a copy of the dynamic broker configs");
        }
        *self.entries.write() = entries;
        true
    }

    /// Serializes a standalone node's changes (see `updates`).
    pub fn lock_updates(&self) -> MutexGuard<'_, ()> {
        self.updates.lock()
    }

    /// Makes `configs` the whole dynamic set of `broker` on a standalone node, on disk
    /// first.
    pub fn store(
        &self,
        broker: Option<i32>,
        configs: BTreeMap<String, String>,
    ) -> std::io::Result<()> {
        let mut next = self.entries.read().clone();
        if configs.is_empty() {
            next.remove(&broker);
        } else {
            next.insert(broker, configs);
        }
        self.write(&next)?;
        *self.entries.write() = next;
        Ok(())
    }

    /// Writes `entries` to a temporary file and renames it over the file, each made
    /// durable, so that a crash leaves the old set or the new one.
    fn write(&self, entries: &Entries) -> std::io::Result<()> {
        let stored: BTreeMap<String, &BTreeMap<String, String>> = entries
            .iter()
            .map(|(entity, configs)| {
                (
                    entity.map_or_else(String::new, |id| id.to_string()),
                    configs,
                )
            })
            .collect();
        strom_log::durable_file::replace_durably(&self.file, &serde_json::to_vec_pretty(&stored)?)
    }

    /// `server.properties` overlaid with the cluster-wide default and then with `node_id`'s
    /// own dynamic configs: the properties the broker runs with — with `replaced`'s entity
    /// given its proposed set instead of its stored one (another broker's proposed set
    /// goes on top of this broker's properties, the only static ones known here).
    fn layered(
        &self,
        given: &BTreeMap<String, String>,
        node_id: i32,
        replaced: Option<(Option<i32>, &BTreeMap<String, String>)>,
    ) -> BTreeMap<String, String> {
        let entries = self.entries.read();
        let mut props = given.clone();
        let mut entities = vec![None, Some(node_id)];
        if let Some((entity, _)) = replaced.filter(|(e, _)| !entities.contains(e)) {
            entities.push(entity);
        }
        for entity in entities {
            let values = match replaced {
                Some((e, proposed)) if e == entity => Some(proposed),
                _ => entries.get(&entity),
            };
            if let Some(values) = values {
                props.extend(values.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        props
    }

    /// The log defaults `node_id` runs with now.
    pub fn log_defaults(
        &self,
        given: &BTreeMap<String, String>,
        node_id: i32,
    ) -> Result<LogConfig, ConfigError> {
        self.current(given, node_id).map(|c| c.log_defaults)
    }

    /// The configuration `node_id` runs with now: `given` overlaid with the dynamic
    /// configs.
    pub fn current(
        &self,
        given: &BTreeMap<String, String>,
        node_id: i32,
    ) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_properties(&self.layered(given, node_id, None))
    }
}

/// Recomputes the broker's log defaults and log cleaner settings from its configs as
/// they are now and applies them.
pub fn apply(state: &BrokerState) {
    match state
        .dynamic_configs
        .current(&state.config.given, state.node_id())
    {
        Ok(current) => {
            state.logs.set_defaults(current.log_defaults);
            state.log_cleaner.reconfigure(current.log_cleaner);
            tracing::info!("dynamic broker configs applied");
        }
        Err(e) => tracing::error!(error = %e, "dynamic broker configs not applied"),
    }
}

/// Whether `key` can be changed at runtime.
pub fn is_dynamic(key: &str) -> bool {
    topic_config::by_broker_synonym(key).is_some()
        || broker_configs::def(key).is_some_and(|d| d.dynamic)
}

/// The entity a broker resource name names: `""` is the cluster-wide default.
pub fn parse_entity(name: &str) -> Result<Option<i32>, ApiError> {
    if name.is_empty() {
        return Ok(None);
    }
    name.parse::<i32>()
        .ok()
        .filter(|id| *id >= 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                ResponseError::InvalidRequest,
                format!("Invalid broker name {name}"),
            )
        })
}

/// Checks that `configs`, as the whole new dynamic set of `entity`, can be applied: every
/// key dynamic, every value what `server.properties` would accept (messages as Kafka's).
/// Returns the set with values in their canonical form (`TRUE` → `true`), as stored.
pub fn validate(
    current: &DynamicBrokerConfigs,
    given: &BTreeMap<String, String>,
    node_id: i32,
    entity: Option<i32>,
    configs: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let resource = format!(
        "ConfigResource(type=BROKER, name='{}')",
        entity.map_or_else(String::new, |id| id.to_string())
    );
    let invalid = |message: String| {
        ApiError::new(
            ResponseError::InvalidRequest,
            format!("Invalid config value for resource {resource}: {message}"),
        )
    };
    let unknown: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|k| {
            matches!(
                BrokerConfig::from_properties(&BTreeMap::from([(k.to_string(), String::new())])),
                Err(ConfigError::UnknownKey(_))
            )
        })
        .collect();
    if !unknown.is_empty() {
        return Err(invalid(format!(
            "Unknown broker configs: {}",
            unknown.join(", ")
        )));
    }
    let static_only: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|k| !is_dynamic(k))
        .collect();
    if !static_only.is_empty() {
        return Err(invalid(format!(
            "Cannot update these configs dynamically: Set({})",
            static_only.join(", ")
        )));
    }
    let props = current.layered(given, node_id, Some((entity, configs)));
    BrokerConfig::from_properties(&props).map_err(|e| invalid(e.to_string()))?;
    Ok(configs
        .iter()
        .map(|(k, v)| {
            let canonical = topic_config::by_broker_synonym(k).and_then(|d| d.validate(v).ok());
            (k.clone(), canonical.unwrap_or_else(|| v.clone()))
        })
        .collect())
}
