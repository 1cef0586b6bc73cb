//! What a run leaves behind for `--json` and `--html`: every figure, the settings, the
//! environment and the time series, in one structure both writers share.

use serde::Serialize;
use serde_json::Value;

use crate::cpu::CpuUse;
use crate::environment::Environment;
use crate::histogram::{LatencyHistogram, LatencySummary, PercentilePoint};
use crate::series::SeriesPoint;

/// One measured run (a bench is several).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Short name shown in tables and plot titles.
    pub name: String,
    pub tool: String,
    pub settings: Value,
    /// The figures Kafka's tool prints, under Kafka's names.
    pub kafka: Value,
    /// What the HdrHistogram latency is measured from.
    pub latency_basis: String,
    pub latency: Option<LatencySummary>,
    pub latency_curve: Vec<PercentilePoint>,
    pub series: Vec<SeriesPoint>,
    /// What the run cost in CPU, when it was measured.
    pub cpu: Option<CpuUse>,
}

impl RunReport {
    pub fn with_histogram(mut self, histogram: &LatencyHistogram) -> Self {
        if !histogram.is_empty() {
            self.latency = Some(histogram.summary());
            self.latency_curve = histogram.percentile_curve();
        }
        self
    }

    pub fn with_cpu(mut self, cpu: CpuUse) -> Self {
        self.cpu = Some(cpu);
        self
    }
}

/// A comparison row of `strom bench`: strom's figure beside the seed's published one.
///
/// `strom` and `seed` are the figures as printed; the numeric values, where a figure is
/// one number, are what the HTML report charts. Rows of one experiment and metric measured
/// with different load generators (`client`) are drawn side by side.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ComparisonRow {
    pub experiment: String,
    pub metric: String,
    pub strom: String,
    pub seed: String,
    pub strom_value: Option<f64>,
    pub seed_value: Option<f64>,
    /// The load generator that measured `strom`: "librdkafka" or "native".
    pub client: Option<String>,
}

/// The cluster a cluster bench ran on: its figures mean little without its shape.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterShape {
    pub brokers: usize,
    /// The controller quorum's voters.
    pub controllers: usize,
    /// Whether the controllers are the brokers themselves (combined nodes) rather than
    /// processes of their own.
    pub combined: bool,
    pub replication_factor: i16,
    /// The measured topics' partitions, as the bench lays them out ("3", "100 per topic").
    pub partitions: String,
    /// The links between the nodes, where they shape the figures (seed 001's caps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<String>,
}

impl ClusterShape {
    /// `nodes` combined nodes, each a broker and a voter of the controller quorum.
    pub fn combined(nodes: usize, replication_factor: i16, partitions: String) -> Self {
        Self {
            brokers: nodes,
            controllers: nodes,
            combined: true,
            replication_factor,
            partitions,
            links: None,
        }
    }
}

/// A chart of a bench's own curves (`strom bench controller`'s measures against
/// partitions per broker): named series on shared axes, strom's measured beside the
/// seed's published ones.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// A logarithmic y axis, for series orders of magnitude apart.
    pub log_y: bool,
    pub series: Vec<ChartSeries>,
}

/// One named series of a [`Chart`].
#[derive(Debug, Clone, Serialize)]
pub struct ChartSeries {
    pub name: String,
    /// Published figures (a seed's), drawn as references beside the measured series.
    pub reference: bool,
    /// (x, y), in x order.
    pub points: Vec<(f64, f64)>,
}

/// The whole document written by `--json` and rendered by `--html`.
///
/// The cluster benches, whose figures are no perf-tool runs, keep them in `figures` in
/// their own shape, with their flags in `settings`, their cluster in `cluster` and their
/// curves in `charts`; each of these is left out of the JSON when unused.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format: &'static str,
    pub command: Vec<String>,
    pub started_at_unix_ms: u128,
    pub environment: Environment,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub settings: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterShape>,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub figures: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub charts: Vec<Chart>,
    pub runs: Vec<RunReport>,
    pub comparison: Vec<ComparisonRow>,
}

impl Report {
    pub fn new(command: &str, args: &[String]) -> Self {
        let mut full = vec![format!("strom {command}")];
        full.extend(args.iter().cloned());
        Self {
            format: "strom-perf-report/1",
            command: full,
            started_at_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            environment: Environment::detect(),
            settings: Value::Null,
            cluster: None,
            figures: Value::Null,
            charts: Vec::new(),
            runs: Vec::new(),
            comparison: Vec::new(),
        }
    }

    /// The report of a cluster bench: its flags, defaults included, as `settings`, and
    /// its cluster.
    pub fn for_cluster(
        command: &str,
        argv: &[String],
        settings: &impl Serialize,
        cluster: ClusterShape,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            settings: serde_json::to_value(settings)?,
            cluster: Some(cluster),
            ..Self::new(command, argv)
        })
    }

    /// Writes the report of a single-run tool (`--json` / `--html`), if any was asked for:
    /// the run is built only then, since detecting the environment reads `/proc`.
    pub fn write_single_run(
        tool: &str,
        argv: &[String],
        json: Option<&str>,
        html: Option<&str>,
        run: impl FnOnce() -> RunReport,
    ) -> anyhow::Result<()> {
        if json.is_none() && html.is_none() {
            return Ok(());
        }
        let mut report = Self::new(tool, argv);
        report.runs.push(run());
        report.write(json, html)
    }

    /// Writes the reports the user asked for; errors name the file.
    pub fn write(&self, json: Option<&str>, html: Option<&str>) -> anyhow::Result<()> {
        if let Some(path) = json {
            crate::report_json::write(self, path)?;
        }
        if let Some(path) = html {
            crate::report_html::write(self, path)?;
        }
        Ok(())
    }
}
