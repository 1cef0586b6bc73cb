//! Where a run sends its traffic: the cluster the user named, or an embedded broker.

use anyhow::Result;

use strom_testkit::embedded::EmbeddedBroker;

/// The target cluster for one tool invocation; holds the embedded broker alive while used.
pub enum Cluster {
    External(String),
    Embedded(EmbeddedBroker),
}

impl Cluster {
    /// Uses `bootstrap` when given, otherwise starts an embedded broker (and says so on stderr,
    /// so stdout keeps exactly Kafka's lines).
    pub fn connect(bootstrap: Option<&str>) -> Result<Self> {
        match bootstrap {
            Some(servers) => Ok(Cluster::External(servers.to_string())),
            None => {
                let broker = EmbeddedBroker::start()?;
                eprintln!(
                    "No bootstrap server given: started an embedded strom broker on {} (data in {}).",
                    broker.bootstrap(),
                    broker.data_dir().display()
                );
                Ok(Cluster::Embedded(broker))
            }
        }
    }

    pub fn bootstrap(&self) -> &str {
        match self {
            Cluster::External(servers) => servers,
            Cluster::Embedded(broker) => broker.bootstrap(),
        }
    }

    pub fn is_embedded(&self) -> bool {
        matches!(self, Cluster::Embedded(_))
    }

    /// The broker processes whose CPU time a run can read: the embedded broker's; `None`
    /// for an external cluster, whose processes are not ours to see.
    pub fn broker_pids(&self) -> Option<Vec<u32>> {
        match self {
            Cluster::External(_) => None,
            Cluster::Embedded(broker) => Some(vec![broker.pid()]),
        }
    }
}
