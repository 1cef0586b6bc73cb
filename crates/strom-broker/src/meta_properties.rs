//! `meta.properties`: the identity of a storage directory, as Kafka's `MetaProperties`
//! writes it (`version=1`, `cluster.id`, `node.id`, `directory.id`).
//!
//! A node configured with `process.roles` (KRaft) only starts on directories formatted
//! by `strom storage format`, all of one cluster and one node id, so that a disk moved to
//! the wrong machine or a typo in `log.dirs` is refused instead of silently starting an
//! empty broker. A node without `process.roles` (`strom server` with no setup, the perf
//! tools' embedded broker) formats its directories itself on first start, as
//! `kafka-storage format --standalone` would.

use std::fs;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::properties;

const FILE: &str = "meta.properties";

/// The identity stored in one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    pub directory_id: String,
}

/// Why directories cannot be used, with the fix in the message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetaPropertiesError {
    #[error("no meta.properties found in {dir} (have you run `strom storage format --cluster-id <id> --config <server.properties>`? `strom storage random-uuid` makes an id)")]
    Unformatted { dir: String },
    #[error("invalid cluster.id in {path}: expected {expected}, but read {found}")]
    ClusterIdMismatch {
        path: String,
        expected: String,
        found: String,
    },
    #[error("stored node id {found} in {path} does not match node.id {expected}")]
    NodeIdMismatch {
        path: String,
        expected: i32,
        found: i32,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("log directory {dir} is already formatted; use --ignore-formatted to ignore this directory and format the others")]
    AlreadyFormatted { dir: String },
    #[error("{path}: {error}")]
    Io { path: String, error: String },
}

/// A new id as Kafka prints one (`Uuid.randomUuid()`): 16 random bytes in URL-safe
/// base64 without padding, 22 characters.
pub fn random_uuid() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn io(path: &Path, e: std::io::Error) -> MetaPropertiesError {
    MetaPropertiesError::Io {
        path: path.display().to_string(),
        error: e.to_string(),
    }
}

impl MetaProperties {
    /// Reads `dir/meta.properties`; `None` if the directory is not formatted.
    pub fn read(dir: &Path) -> Result<Option<Self>, MetaPropertiesError> {
        let path = dir.join(FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        let mut props = properties::parse(&text);
        let invalid = |reason: &str| MetaPropertiesError::Invalid {
            path: path.display().to_string(),
            reason: reason.to_string(),
        };
        let cluster_id = props
            .remove("cluster.id")
            .ok_or_else(|| invalid("no cluster.id"))?;
        let node_id = props
            .remove("node.id")
            .or_else(|| props.remove("broker.id"))
            .ok_or_else(|| invalid("no node.id"))?
            .parse()
            .map_err(|_| invalid("node.id is not a number"))?;
        Ok(Some(Self {
            cluster_id,
            node_id,
            directory_id: props.remove("directory.id").unwrap_or_default(),
        }))
    }

    /// Writes `dir/meta.properties` atomically and durably.
    pub fn write(&self, dir: &Path) -> Result<(), MetaPropertiesError> {
        fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let path = dir.join(FILE);
        let text = format!(
            "#\n#Written by strom storage format\nnode.id={}\ndirectory.id={}\nversion=1\ncluster.id={}\n",
            self.node_id, self.directory_id, self.cluster_id
        );
        strom_log::durable_file::replace_durably(&path, text.as_bytes()).map_err(|e| io(&path, e))
    }
}

/// Formats each of `dirs` for `cluster_id` and `node_id` (`strom storage format`): a new
/// `meta.properties` with its own directory id. An already formatted directory is an
/// error unless `ignore_formatted`, when it is left as it is.
pub fn format(
    dirs: &[PathBuf],
    cluster_id: &str,
    node_id: i32,
    ignore_formatted: bool,
) -> Result<Vec<PathBuf>, MetaPropertiesError> {
    let mut formatted = Vec::new();
    for dir in dirs {
        if MetaProperties::read(dir)?.is_some() {
            if ignore_formatted {
                continue;
            }
            return Err(MetaPropertiesError::AlreadyFormatted {
                dir: dir.display().to_string(),
            });
        }
        MetaProperties {
            cluster_id: cluster_id.to_string(),
            node_id,
            directory_id: random_uuid(),
        }
        .write(dir)?;
        formatted.push(dir.clone());
    }
    Ok(formatted)
}

/// Checks that every directory is formatted for one cluster and `node_id`, returning the
/// cluster id. With `auto_format` (a node that formats itself), unformatted directories
/// are formatted with the cluster id already found, or a new one.
pub fn load(
    dirs: &[PathBuf],
    node_id: i32,
    auto_format: bool,
) -> Result<String, MetaPropertiesError> {
    let mut cluster_id: Option<String> = None;
    let mut unformatted = Vec::new();
    for dir in dirs {
        let Some(meta) = MetaProperties::read(dir)? else {
            unformatted.push(dir.clone());
            continue;
        };
        let path = dir.join(FILE).display().to_string();
        if meta.node_id != node_id {
            return Err(MetaPropertiesError::NodeIdMismatch {
                path,
                expected: node_id,
                found: meta.node_id,
            });
        }
        match &cluster_id {
            Some(expected) if *expected != meta.cluster_id => {
                return Err(MetaPropertiesError::ClusterIdMismatch {
                    path,
                    expected: expected.clone(),
                    found: meta.cluster_id,
                })
            }
            Some(_) => {}
            None => cluster_id = Some(meta.cluster_id),
        }
    }
    if let Some(dir) = unformatted.first().filter(|_| !auto_format) {
        return Err(MetaPropertiesError::Unformatted {
            dir: dir.display().to_string(),
        });
    }
    let cluster_id = cluster_id.unwrap_or_else(random_uuid);
    format(&unformatted, &cluster_id, node_id, false)?;
    Ok(cluster_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_uuids_are_kafkas_22_character_base64() {
        let id = random_uuid();
        assert_eq!(id.len(), 22, "{id}");
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_ne!(id, random_uuid());
    }

    #[test]
    fn formatted_dirs_load_and_mismatches_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        assert!(matches!(
            load(&dirs, 1, false),
            Err(MetaPropertiesError::Unformatted { .. })
        ));
        format(&dirs, "cluster-A", 1, false).unwrap();
        assert_eq!(load(&dirs, 1, false).unwrap(), "cluster-A");
        assert!(matches!(
            load(&dirs, 2, false),
            Err(MetaPropertiesError::NodeIdMismatch { .. })
        ));
        assert!(matches!(
            format(&dirs, "cluster-A", 1, false),
            Err(MetaPropertiesError::AlreadyFormatted { .. })
        ));
        let other = root.path().join("c");
        format(std::slice::from_ref(&other), "cluster-B", 1, false).unwrap();
        let mixed = vec![dirs[0].clone(), other];
        assert!(matches!(
            load(&mixed, 1, false),
            Err(MetaPropertiesError::ClusterIdMismatch { .. })
        ));
    }

    #[test]
    fn a_node_formats_itself_once() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("logs")];
        let first = load(&dirs, 1, true).unwrap();
        assert_eq!(load(&dirs, 1, true).unwrap(), first);
        assert_eq!(load(&dirs, 1, false).unwrap(), first);
    }
}
