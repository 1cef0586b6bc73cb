//! The machine a run happened on, for reports: numbers mean little without it.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub cpu_model: String,
    pub cores: usize,
    pub os: String,
    pub strom_version: String,
    pub librdkafka_version: String,
    pub hostname: String,
}

impl Environment {
    pub fn detect() -> Self {
        Self {
            cpu_model: cpu_model().unwrap_or_else(|| "unknown".to_string()),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            strom_version: env!("CARGO_PKG_VERSION").to_string(),
            librdkafka_version: rdkafka::util::get_rdkafka_version().1,
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn detects_something_for_every_field() {
        let env = super::Environment::detect();
        assert!(env.cores >= 1);
        assert!(!env.librdkafka_version.is_empty());
        assert!(!env.cpu_model.is_empty());
    }
}
