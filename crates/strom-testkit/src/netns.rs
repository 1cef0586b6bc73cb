//! A private network for a local cluster, so faults can cut the network and not only
//! kill processes: every node in its own network namespace with an address of
//! 198.18.0.0/15 (reserved for benchmarking) on a veth link to a bridge in a hub
//! namespace, plus a client namespace for the load generator. No namespace has a route
//! out. Isolating a node takes its link down at the hub; healing brings it back; cutting
//! the link between two nodes only (a partial partition) discards, in each of the two
//! namespaces, what is sent to the other; shaping caps a node's bandwidth. The
//! namespaces (and with them every link) are deleted when this is dropped.
//!
//! Needs CAP_NET_ADMIN (root); without it [`TestNetwork::create`] says so.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The client namespace's host number on the bridge.
const CLIENT: i32 = 254;

/// The namespaces of one cluster.
#[derive(Debug)]
pub struct TestNetwork {
    prefix: String,
    created: Vec<String>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn tc(args: &[&str]) -> Result<()> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .context("cannot run tc (iproute2)")?;
    if !out.status.success() {
        bail!(
            "tc {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl TestNetwork {
    /// Creates the hub, one namespace per node id and the client namespace.
    pub fn create(node_ids: &[i32]) -> Result<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("network namespaces need root (CAP_NET_ADMIN); run as root, or leave network faults out");
        }
        if node_ids.iter().any(|id| !(1..CLIENT).contains(id)) {
            bail!("node ids must be 1..{CLIENT} to get an address");
        }
        let mut net = Self {
            prefix: format!("strom{}", std::process::id()),
            created: Vec::new(),
        };
        let hub = net.hub();
        net.add_namespace(&hub)?;
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        for &id in node_ids.iter().chain([&CLIENT]) {
            let ns = net.namespace(id);
            net.add_namespace(&ns)?;
            let port = format!("h{id}");
            ip(&[
                "link", "add", &port, "netns", &hub, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ])?;
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", Self::address(id)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn add_namespace(&mut self, name: &str) -> Result<()> {
        ip(&["netns", "add", name])?;
        self.created.push(name.to_string());
        Ok(())
    }

    fn hub(&self) -> String {
        format!("{}h", self.prefix)
    }

    /// The namespace of node `id`.
    pub fn namespace(&self, id: i32) -> String {
        if id == CLIENT {
            format!("{}c", self.prefix)
        } else {
            format!("{}n{id}", self.prefix)
        }
    }

    /// The address of node `id`.
    pub fn address(id: i32) -> String {
        format!("198.18.0.{id}")
    }

    /// Cuts node `id` off from every other node and from the client.
    pub fn isolate(&self, id: i32) -> Result<()> {
        ip(&["-n", &self.hub(), "link", "set", &format!("h{id}"), "down"])
    }

    /// Undoes [`Self::isolate`].
    pub fn heal(&self, id: i32) -> Result<()> {
        ip(&["-n", &self.hub(), "link", "set", &format!("h{id}"), "up"])
    }

    /// Cuts node `a` off from each of `peers` only (a partial partition): each side
    /// discards what it sends the other (a blackhole route, so a connect fails at once
    /// and an established connection hears nothing more), and all still reach every
    /// other node and the client.
    pub fn cut(&self, a: i32, peers: &[i32]) -> Result<()> {
        self.blackholes("add", a, peers)
    }

    /// Undoes [`Self::cut`].
    pub fn mend(&self, a: i32, peers: &[i32]) -> Result<()> {
        self.blackholes("del", a, peers)
    }

    /// Adds or deletes the routes that discard what `a` and each of `peers` send each
    /// other.
    fn blackholes(&self, op: &str, a: i32, peers: &[i32]) -> Result<()> {
        for &b in peers {
            for (from, to) in [(a, b), (b, a)] {
                let to = format!("{}/32", Self::address(to));
                ip(&["-n", &self.namespace(from), "route", op, "blackhole", &to])?;
            }
        }
        Ok(())
    }

    /// Caps node `id`'s link at `mbit` Mbit/s in both directions (`tc tbf` on each end
    /// of its veth pair), as seed 001 capped each broker's network.
    pub fn shape(&self, id: i32, mbit: u32) -> Result<()> {
        let rate = format!("{mbit}mbit");
        for (ns, dev) in [
            (self.namespace(id), "eth0".to_string()),
            (self.hub(), format!("h{id}")),
        ] {
            tc(&[
                "-n", &ns, "qdisc", "replace", "dev", &dev, "root", "tbf", "rate", &rate, "burst",
                "64kb", "latency", "100ms",
            ])?;
        }
        Ok(())
    }

    /// Moves the calling thread into the client namespace; threads it starts afterwards
    /// (a librdkafka client's) are born there too.
    pub fn enter_client(&self) -> Result<()> {
        let path = format!("/var/run/netns/{}", self.namespace(CLIENT));
        let ns = File::open(&path).with_context(|| format!("cannot open {path}"))?;
        // SAFETY: setns on an open namespace descriptor only changes this thread's
        // network namespace.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!("setns into {path}: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        for ns in self.created.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
