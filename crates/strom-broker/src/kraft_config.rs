//! Kafka's KRaft configuration: `process.roles`, the static quorum
//! (`controller.quorum.voters`), named listeners with `listener.security.protocol.map`,
//! `controller.listener.names`, `inter.broker.listener.name`, and the lifecycle and
//! quorum timeouts — with Kafka's defaults and the checks `KafkaConfig` makes, each
//! error naming its key.
//!
//! Every node is a KRaft node. One with `process.roles` is a broker, a controller or both
//! of the quorum `controller.quorum.voters`, on directories `strom storage format`
//! prepared. One without it (`strom server` with no setup) is what Kafka 4's
//! `kafka-storage format --standalone` makes of a single node: a combined broker and
//! controller, the one voter of its quorum, on a controller listener of its own beside the
//! client listener; it formats its directories itself on first start.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::{ConfigError, Listener};

/// The keys this module reads; `BrokerConfig` skips them.
pub const KEYS: &[&str] = &[
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms",
    "initial.broker.registration.timeout.ms",
    "metadata.log.dir",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "default.replication.factor",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "unclean.leader.election.interval.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms",
];

/// Kafka's default `listener.security.protocol.map`.
const DEFAULT_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// What a node does (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub broker: bool,
    pub controller: bool,
}

/// One voter of the static quorum, `id@host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

/// One entry of `listeners` / `advertised.listeners`: `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedListener {
    pub name: String,
    pub listener: Listener,
}

/// The KRaft part of a node's configuration.
#[derive(Debug, Clone)]
pub struct KraftConfig {
    pub roles: Roles,
    /// No `process.roles` was given: a one-voter combined node that formats itself on
    /// first start. Its controller listener (`CONTROLLER`, on the client listener's host)
    /// takes any free port, which [`Self::bind_own_voter`] writes into the voter set.
    pub formats_itself: bool,
    /// `controller.quorum.voters`, or the voter set a `--standalone` format wrote into
    /// the metadata directory when only `controller.quorum.bootstrap.servers` is set.
    pub voters: Vec<Voter>,
    /// `controller.quorum.bootstrap.servers` (Kafka 4's quickstart names the quorum so).
    pub quorum_bootstrap_servers: Option<String>,
    pub controller_listener_names: Vec<String>,
    pub listeners: Vec<NamedListener>,
    pub advertised_listeners: Vec<NamedListener>,
    /// `inter.broker.listener.name` (default: the listener of security protocol PLAINTEXT).
    pub inter_broker_listener_name: String,
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
    pub initial_broker_registration_timeout_ms: u64,
    /// `metadata.log.dir`; the first of `log.dirs` when unset.
    pub metadata_log_dir: Option<PathBuf>,
    pub election_timeout_ms: u64,
    pub fetch_timeout_ms: u64,
    pub default_replication_factor: i16,
    /// `auto.leader.rebalance.enable`: the active controller moves leadership back to
    /// preferred replicas every `leader.imbalance.check.interval.seconds`.
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    /// `unclean.leader.election.interval.ms`: how often the active controller looks for
    /// partitions without a leader that an unclean election may now give one.
    pub unclean_leader_election_interval_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` (20 MiB): a controller takes a
    /// snapshot once its log holds this much after the last one.
    pub metadata_max_bytes_between_snapshots: u64,
    /// `metadata.log.max.snapshot.interval.ms` (1 h): and once this long passed since
    /// the last one with anything new; 0 never snapshots by age.
    pub metadata_max_snapshot_interval_ms: u64,
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    props: &BTreeMap<String, String>,
    key: &str,
    default: T,
    min: T,
) -> Result<T, ConfigError> {
    let Some(v) = props.get(key) else {
        return Ok(default);
    };
    let n: T = v
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(key, v, "not a valid number"))?;
    if n < min {
        return Err(ConfigError::invalid(
            key,
            v,
            format!("Value must be at least {min}"),
        ));
    }
    Ok(n)
}

/// Parses `NAME://host:port,...`.
fn parse_listeners(key: &str, value: &str) -> Result<Vec<NamedListener>, ConfigError> {
    let mut out: Vec<NamedListener> = Vec::new();
    for entry in list(value) {
        let (name, address) = entry
            .split_once("://")
            .ok_or_else(|| ConfigError::invalid(key, value, "expected NAME://host:port"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| ConfigError::invalid(key, value, "expected NAME://host:port"))?;
        let port = port
            .parse()
            .map_err(|_| ConfigError::invalid(key, value, format!("invalid port in {entry}")))?;
        if out.iter().any(|l| l.name == name) {
            return Err(ConfigError::invalid(
                key,
                value,
                format!("each listener must have a different name, {name} is repeated"),
            ));
        }
        out.push(NamedListener {
            name: name.to_string(),
            listener: Listener {
                host: host.trim_matches(['[', ']']).to_string(),
                port,
            },
        });
    }
    Ok(out)
}

/// The controller listener of a node without `process.roles`: the one `listeners` names
/// in `controller.listener.names` if any, else `CONTROLLER` on the first client
/// listener's host and any free port (the quorum has no other voter to find it).
fn own_controller_listener(listeners: &[NamedListener], names: &[String]) -> NamedListener {
    if let Some(named) = listeners.iter().find(|l| names.contains(&l.name)) {
        return named.clone();
    }
    let host = listeners
        .first()
        .map(|l| l.listener.host.clone())
        .filter(|h| !h.is_empty() && h != "0.0.0.0" && h != "::")
        .unwrap_or_else(|| "127.0.0.1".to_string());
    NamedListener {
        name: "CONTROLLER".to_string(),
        listener: Listener { host, port: 0 },
    }
}

/// `process.roles`: broker, controller or both; unset, both (a node that formats its own
/// directory).
fn parse_roles(value: Option<&str>) -> Result<Roles, ConfigError> {
    let Some(v) = value else {
        return Ok(Roles {
            broker: true,
            controller: true,
        });
    };
    let parts = list(v);
    if parts.is_empty() {
        return Err(ConfigError::invalid(
            "process.roles",
            v,
            "must contain broker, controller or both",
        ));
    }
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for p in &parts {
        match p.as_str() {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            _ => {
                return Err(ConfigError::invalid(
                    "process.roles",
                    v,
                    format!("Unknown process role '{p}' (must be broker, controller or both)"),
                ))
            }
        }
    }
    Ok(roles)
}

/// `listener.security.protocol.map` (`given`, or Kafka's default), with Kafka's
/// `effectiveListenerSecurityProtocolMap`: in KRaft, with the map left at its default and
/// no SSL or SASL listener, the controller listeners are PLAINTEXT (Kafka's quickstart
/// configurations rely on it), and so are a self-formatting node's.
fn protocol_map(
    given: Option<&str>,
    formats_itself: bool,
    controller_listener_names: &[String],
    listeners: &[NamedListener],
) -> Result<BTreeMap<String, String>, ConfigError> {
    let map_value = given.unwrap_or(DEFAULT_PROTOCOL_MAP);
    let mut protocol_map = BTreeMap::new();
    for pair in list(map_value) {
        let (name, protocol) = pair.split_once(':').ok_or_else(|| {
            ConfigError::invalid(
                "listener.security.protocol.map",
                map_value,
                "expected NAME:PROTOCOL pairs",
            )
        })?;
        protocol_map.insert(name.to_string(), protocol.to_string());
    }
    let secured = |name: &str| matches!(name, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
    let plaintext_controllers = formats_itself
        || (given.is_none()
            && !controller_listener_names.iter().any(|n| secured(n))
            && !listeners.iter().any(|l| secured(&l.name)));
    if plaintext_controllers {
        for name in controller_listener_names {
            protocol_map
                .entry(name.clone())
                .or_insert_with(|| "PLAINTEXT".to_string());
        }
    }
    Ok(protocol_map)
}

/// Every listener has a protocol in the map (`map_value` as given), and it is PLAINTEXT,
/// the one strom serves yet (`listeners_value` as given, for the message).
fn check_plaintext(
    listeners: &[NamedListener],
    protocol_map: &BTreeMap<String, String>,
    map_value: &str,
    listeners_value: &str,
) -> Result<(), ConfigError> {
    for l in listeners {
        let protocol = protocol_map.get(&l.name).ok_or_else(|| {
            ConfigError::invalid(
                "listener.security.protocol.map",
                map_value,
                format!("No security protocol defined for listener {}", l.name),
            )
        })?;
        if protocol != "PLAINTEXT" {
            return Err(ConfigError::invalid(
                "listeners",
                listeners_value,
                format!("listener {} uses {protocol}: strom supports only the PLAINTEXT security protocol yet", l.name),
            ));
        }
    }
    Ok(())
}

/// Parses `controller.quorum.voters`: `id@host:port,...`.
pub fn parse_voters(value: &str) -> Result<Vec<Voter>, ConfigError> {
    let key = "controller.quorum.voters";
    list(value)
        .into_iter()
        .map(|entry| {
            let bad = || {
                ConfigError::invalid(
                    key,
                    value,
                    format!("Failed to parse {entry}: expected id@host:port"),
                )
            };
            let (id, address) = entry.split_once('@').ok_or_else(bad)?;
            let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
            Ok(Voter {
                id: id.parse().map_err(|_| bad())?,
                host: host.to_string(),
                port: port.parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

impl KraftConfig {
    /// Reads and checks the KRaft keys of `props` for node `node_id`.
    pub fn from_properties(
        props: &BTreeMap<String, String>,
        node_id: i32,
    ) -> Result<Self, ConfigError> {
        let get = |k: &str| props.get(k).map(String::as_str);
        let formats_itself = get("process.roles").is_none();
        let roles = parse_roles(get("process.roles"))?;
        let mut voters = parse_voters(get("controller.quorum.voters").unwrap_or(""))?;
        let quorum_bootstrap_servers = get("controller.quorum.bootstrap.servers")
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string);
        let mut controller_listener_names = list(get("controller.listener.names").unwrap_or(""));
        let mut listeners = parse_listeners(
            "listeners",
            get("listeners").unwrap_or("PLAINTEXT://127.0.0.1:9092"),
        )?;
        if formats_itself {
            let own = own_controller_listener(&listeners, &controller_listener_names);
            voters = vec![Voter {
                id: node_id,
                host: own.listener.host.clone(),
                port: own.listener.port,
            }];
            if !controller_listener_names.contains(&own.name) {
                controller_listener_names.push(own.name.clone());
            }
            if !listeners.iter().any(|l| l.name == own.name) {
                listeners.push(own);
            }
        }
        let advertised_listeners = match get("advertised.listeners") {
            Some(v) => parse_listeners("advertised.listeners", v)?,
            None => Vec::new(),
        };
        let protocol_map = protocol_map(
            get("listener.security.protocol.map"),
            formats_itself,
            &controller_listener_names,
            &listeners,
        )?;
        check_plaintext(
            &listeners,
            &protocol_map,
            get("listener.security.protocol.map").unwrap_or(DEFAULT_PROTOCOL_MAP),
            get("listeners").unwrap_or(""),
        )?;
        let inter_broker_listener_name = match get("inter.broker.listener.name") {
            Some(n) => n.to_string(),
            None => protocol_map
                .iter()
                .find(|(name, p)| *p == "PLAINTEXT" && !controller_listener_names.contains(name))
                .map_or_else(|| "PLAINTEXT".to_string(), |(name, _)| name.clone()),
        };
        let config = Self {
            roles,
            formats_itself,
            voters,
            quorum_bootstrap_servers,
            controller_listener_names,
            listeners,
            advertised_listeners,
            inter_broker_listener_name,
            broker_heartbeat_interval_ms: number(props, "broker.heartbeat.interval.ms", 2000, 1)?,
            broker_session_timeout_ms: number(props, "broker.session.timeout.ms", 9000, 1)?,
            initial_broker_registration_timeout_ms: number(
                props,
                "initial.broker.registration.timeout.ms",
                60_000,
                1,
            )?,
            metadata_log_dir: get("metadata.log.dir").map(PathBuf::from),
            election_timeout_ms: number(props, "controller.quorum.election.timeout.ms", 1000, 0)?,
            fetch_timeout_ms: number(props, "controller.quorum.fetch.timeout.ms", 2000, 0)?,
            default_replication_factor: number(props, "default.replication.factor", 1, 1)?,
            auto_leader_rebalance_enable: match get("auto.leader.rebalance.enable") {
                None | Some("true") => true,
                Some("false") => false,
                Some(v) => {
                    return Err(ConfigError::invalid(
                        "auto.leader.rebalance.enable",
                        v,
                        "Expected value to be either true or false",
                    ))
                }
            },
            leader_imbalance_check_interval_seconds: number(
                props,
                "leader.imbalance.check.interval.seconds",
                300,
                1,
            )?,
            unclean_leader_election_interval_ms: number(
                props,
                "unclean.leader.election.interval.ms",
                300_000,
                1,
            )?,
            metadata_max_bytes_between_snapshots: number(
                props,
                "metadata.log.max.record.bytes.between.snapshots",
                20 * 1024 * 1024,
                1,
            )?,
            metadata_max_snapshot_interval_ms: number(
                props,
                "metadata.log.max.snapshot.interval.ms",
                3_600_000,
                0,
            )?,
        };
        config.validate(node_id)?;
        Ok(config)
    }

    /// The cross-key checks of Kafka's `KafkaConfig` for KRaft nodes. A controller named
    /// only by `controller.quorum.bootstrap.servers` passes without voters: they come
    /// from its formatted metadata directory ([`crate::standalone_quorum`]).
    pub fn validate(&self, node_id: i32) -> Result<(), ConfigError> {
        if self.roles.broker && self.client_listener().is_none() {
            return Err(ConfigError::invalid(
                "listeners",
                "",
                "a broker needs a listener that is not a controller listener",
            ));
        }
        let roles = self.roles;
        let voters_value = self
            .voters
            .iter()
            .map(|v| format!("{}@{}:{}", v.id, v.host, v.port))
            .collect::<Vec<_>>()
            .join(",");
        if self.controller_listener_names.is_empty() {
            return Err(ConfigError::invalid(
                "controller.listener.names",
                "",
                "must not be empty when running in KRaft mode",
            ));
        }
        if self.voters.is_empty() && self.quorum_bootstrap_servers.is_some() {
            if !roles.controller {
                return Err(ConfigError::invalid(
                    "controller.quorum.bootstrap.servers",
                    self.quorum_bootstrap_servers.as_deref().unwrap_or(""),
                    "a broker-only node needs controller.quorum.voters (id@host:port): strom's quorums are static, but for a standalone controller formatted with --standalone",
                ));
            }
        } else if self.voters.is_empty() {
            return Err(ConfigError::invalid(
                "controller.quorum.voters",
                "",
                "must list the quorum's voters (id@host:port) when process.roles is set",
            ));
        }
        let is_voter = self.voters.iter().any(|v| v.id == node_id);
        let voters_pending = self.voters.is_empty();
        if roles.controller && !is_voter && !voters_pending {
            return Err(ConfigError::invalid("controller.quorum.voters", &voters_value, format!("If process.roles contains the 'controller' role, the node id {node_id} must be included in the set of voters")));
        }
        if !roles.controller && is_voter {
            return Err(ConfigError::invalid("controller.quorum.voters", &voters_value, format!("If process.roles contains just the 'broker' role, the node id {node_id} must not be included in the set of voters")));
        }
        let has_controller_listener = self
            .listeners
            .iter()
            .any(|l| self.controller_listener_names.contains(&l.name));
        if roles.controller && !has_controller_listener {
            return Err(ConfigError::invalid("controller.listener.names", &self.controller_listener_names.join(","), "must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"));
        }
        if self
            .controller_listener_names
            .contains(&self.inter_broker_listener_name)
        {
            return Err(ConfigError::invalid(
                "inter.broker.listener.name",
                &self.inter_broker_listener_name,
                "must not be a controller listener",
            ));
        }
        Ok(())
    }

    /// Sets the port of a node that formats itself in its voter set to the one its
    /// controller listener was bound to (it asks for any free port).
    pub fn bind_own_voter(&mut self, port: u16) {
        assert!(
            self.formats_itself,
            "only a self-formatting node names its own voter"
        );
        assert_eq!(
            self.voters.len(),
            1,
            "a self-formatting node is the one voter"
        );
        self.voters[0].port = port;
    }

    /// The first listener clients use (not a controller listener).
    pub fn client_listener(&self) -> Option<&NamedListener> {
        self.listeners
            .iter()
            .find(|l| !self.controller_listener_names.contains(&l.name))
    }

    /// The first controller listener (the one this node's quorum voter binds).
    pub fn controller_listener(&self) -> Option<&NamedListener> {
        self.listeners
            .iter()
            .find(|l| self.controller_listener_names.contains(&l.name))
    }

    /// The address advertised for the listener `name`, if `advertised.listeners` names it.
    pub fn advertised(&self, name: &str) -> Option<&Listener> {
        self.advertised_listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| &l.listener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::properties::from_pairs as props;

    /// Kafka's `config/kraft/server.properties` for a single combined node.
    fn quickstart() -> Vec<(&'static str, &'static str)> {
        vec![
            ("process.roles", "broker,controller"),
            ("controller.quorum.voters", "1@localhost:9093"),
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("advertised.listeners", "PLAINTEXT://localhost:9092"),
            ("controller.listener.names", "CONTROLLER"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
            ),
        ]
    }

    #[test]
    fn kafkas_quickstart_configuration_runs_as_a_combined_node() {
        let c = KraftConfig::from_properties(&props(&quickstart()), 1).unwrap();
        assert_eq!(
            c.roles,
            Roles {
                broker: true,
                controller: true
            }
        );
        assert!(!c.formats_itself);
        assert_eq!(c.client_listener().unwrap().name, "PLAINTEXT");
        assert_eq!(c.client_listener().unwrap().listener.port, 9092);
        assert_eq!(c.advertised("PLAINTEXT").unwrap().host, "localhost");
        assert_eq!(c.broker_session_timeout_ms, 9000);
        assert_eq!(c.broker_heartbeat_interval_ms, 2000);
        assert_eq!(c.election_timeout_ms, 1000);
        assert_eq!(c.fetch_timeout_ms, 2000);
        assert_eq!(c.metadata_max_bytes_between_snapshots, 20 * 1024 * 1024);
        assert_eq!(c.metadata_max_snapshot_interval_ms, 3_600_000);
    }

    #[test]
    fn a_kraft_node_without_a_protocol_map_has_plaintext_controller_listeners() {
        let without_map: Vec<_> = quickstart()
            .into_iter()
            .filter(|(k, _)| *k != "listener.security.protocol.map")
            .collect();
        assert!(KraftConfig::from_properties(&props(&without_map), 1).is_ok());
        let mut explicit = without_map.clone();
        explicit.push(("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"));
        let err = KraftConfig::from_properties(&props(&explicit), 1).unwrap_err();
        assert!(err.to_string().contains("listener CONTROLLER"), "{err}");
    }

    #[test]
    fn a_standalone_controller_may_name_its_quorum_by_bootstrap_servers_alone() {
        let bootstrap: Vec<_> = quickstart()
            .into_iter()
            .map(|(k, v)| match k {
                "controller.quorum.voters" => {
                    ("controller.quorum.bootstrap.servers", "localhost:9093")
                }
                _ => (k, v),
            })
            .collect();
        let c = KraftConfig::from_properties(&props(&bootstrap), 1).unwrap();
        assert!(
            c.voters.is_empty(),
            "they come from the formatted directory"
        );
        let mut broker_only = bootstrap.clone();
        broker_only.retain(|(k, _)| *k != "process.roles");
        broker_only.push(("process.roles", "broker"));
        let err = KraftConfig::from_properties(&props(&broker_only), 2).unwrap_err();
        assert!(
            err.to_string().contains("controller.quorum.voters"),
            "{err}"
        );
    }

    #[test]
    fn a_controller_only_node_needs_no_client_listener() {
        let p = vec![
            ("process.roles", "controller"),
            ("controller.quorum.voters", "1@h1:9093,2@h2:9093,3@h3:9093"),
            ("listeners", "CONTROLLER://:9093"),
            ("controller.listener.names", "CONTROLLER"),
            ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT"),
        ];
        let c = KraftConfig::from_properties(&props(&p), 1).unwrap();
        assert!(c.client_listener().is_none());
        assert_eq!(c.controller_listener().unwrap().listener.port, 9093);
    }

    /// Properties, a node id, and the key the error must name.
    type Case = (Vec<(&'static str, &'static str)>, i32, &'static str);

    #[test]
    fn kafkas_cross_checks_name_the_key() {
        let cases: Vec<Case> = vec![
            (
                vec![("controller.listener.names", "")],
                1,
                "controller.listener.names",
            ),
            (
                vec![("controller.quorum.voters", "2@h:9093")],
                1,
                "controller.quorum.voters",
            ),
            (
                vec![("controller.quorum.voters", "1-h:9093")],
                1,
                "controller.quorum.voters",
            ),
            (vec![("process.roles", "broker,router")], 1, "process.roles"),
            (
                vec![("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")],
                1,
                "listener.security.protocol.map",
            ),
            (
                vec![(
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:SSL",
                )],
                1,
                "listeners",
            ),
            (
                vec![("broker.session.timeout.ms", "0")],
                1,
                "broker.session.timeout.ms",
            ),
        ];
        for (overrides, node, key) in cases {
            let mut map = props(&quickstart());
            for (k, v) in overrides {
                map.insert(k.to_string(), v.to_string());
            }
            let err = KraftConfig::from_properties(&map, node).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn without_process_roles_the_node_is_a_one_voter_combined_node() {
        let mut c = KraftConfig::from_properties(&BTreeMap::new(), 1).unwrap();
        assert!(c.formats_itself && c.roles.broker && c.roles.controller);
        assert_eq!(c.client_listener().unwrap().listener.port, 9092);
        let controller = c.controller_listener().unwrap().clone();
        assert_eq!(controller.name, "CONTROLLER");
        assert_eq!(controller.listener.host, "127.0.0.1");
        assert_eq!(controller.listener.port, 0);
        c.bind_own_voter(40_000);
        assert_eq!(
            c.voters,
            vec![Voter {
                id: 1,
                host: "127.0.0.1".into(),
                port: 40_000
            }]
        );
    }
}
