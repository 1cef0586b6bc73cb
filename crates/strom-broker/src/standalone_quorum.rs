//! The voter set of a controller formatted with `strom storage format --standalone`, as
//! Kafka 4's quickstart formats its one node (KIP-853's standalone bootstrap): the node
//! itself on its controller listener, written into `quorum-voters` in the metadata
//! directory, so that `controller.quorum.bootstrap.servers` alone names the quorum in
//! `server.properties`. strom's quorums are otherwise static (`controller.quorum.voters`);
//! voters cannot be added to this one later.

use std::path::Path;

use crate::config::ConfigError;
use crate::kraft_config::{parse_voters, Voter};

/// The file in the metadata directory that holds the voter set.
const FILE: &str = "quorum-voters";
const KEY: &str = "controller.quorum.voters";

/// Writes the one-voter set of a standalone controller into `metadata_dir`.
pub fn write(metadata_dir: &Path, voter: &Voter) -> std::io::Result<()> {
    std::fs::write(
        metadata_dir.join(FILE),
        format!("{KEY}={}@{}:{}\n", voter.id, voter.host, voter.port),
    )
}

/// The voter set a standalone format wrote into `metadata_dir`, if it did.
pub fn read(metadata_dir: &Path) -> Result<Option<Vec<Voter>>, ConfigError> {
    let path = metadata_dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ConfigError::invalid(
                "controller.quorum.bootstrap.servers",
                "",
                format!("cannot read the voter set in {}: {e}", path.display()),
            ))
        }
    };
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(KEY)?.trim_start().strip_prefix('='))
        .unwrap_or("")
        .trim();
    parse_voters(value).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_voter_set_written_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let voter = Voter {
            id: 1,
            host: "localhost".into(),
            port: 9093,
        };
        write(dir.path(), &voter).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(vec![voter]));
    }
}
