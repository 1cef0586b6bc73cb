//! `--html FILE`: one self-contained page with the run's plots as inline SVG.
//!
//! The SVG is drawn here rather than by a charting library loaded from a CDN, so the page
//! opens anywhere, offline, and can be attached to a ticket as a single file.
//!
//! The page opens with what a reader wants at a glance — a cluster bench's own curves
//! (strom's measured series beside the seed's published ones), throughput beside the
//! seeds' as bars, every run's latency curve on one chart, each run's CPU cost — and keeps
//! every figure in the tables and per-run sections below.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use crate::histogram::PercentilePoint;
use crate::report::{Chart, ComparisonRow, Report, RunReport};

/// An x-axis label at a data position.
type Tick = (f64, String);

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 45.0;
/// Height of one legend entry below a line chart.
const LEGEND_ROW: f64 = 16.0;
/// Height of one bar, and the space between two experiments, in a bar chart.
const BAR: f64 = 14.0;
const GROUP_GAP: f64 = 10.0;
/// Width of the bars' value axis.
const BAR_PLOT_WIDTH: f64 = 380.0;

/// Line and bar colours (matplotlib's tab10), so neighbouring series tell apart.
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
/// The seeds' bars: grey, as the reference beside strom's colours.
const SEED_COLOUR: &str = "#b0b0b0";
/// Reference lines (the seeds' curves): greys, dark then light, so two seeds tell apart.
const REFERENCE_COLOURS: [&str; 2] = ["#404040", "#a0a0a0"];

/// The throughput charts at the top: a title and the comparison metrics it gathers (the
/// consumer tool counts records as messages, so msg/s shares the records/s chart).
const THROUGHPUT_CHARTS: [(&str, &[&str]); 2] = [
    ("Throughput, records/s", &["records/s", "msg/s"]),
    ("Throughput, MB/s (MiB)", &["MB/s (MiB)"]),
];

pub fn write(report: &Report, path: &str) -> Result<()> {
    std::fs::write(path, render(report)).with_context(|| format!("cannot write {path}"))
}

/// The whole page.
pub fn render(report: &Report) -> String {
    let mut page = String::new();
    let title = escape(&report.command.join(" "));
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>strom perf report</title>\n<style>{STYLE}</style></head><body>\n<h1>strom perf report</h1>\n<p class=\"cmd\"><code>{title}</code></p>\n"
    );
    glance_section(&mut page, report);
    environment_section(&mut page, report);
    if !report.comparison.is_empty() {
        comparison_table(&mut page, &report.comparison);
    }
    for run in &report.runs {
        run_section(&mut page, run);
    }
    let json = serde_json::to_string(report)
        .unwrap_or_default()
        .replace("</", "<\\/");
    let _ = write!(
        page,
        "<script type=\"application/json\" id=\"strom-report\">{json}</script>\n</body></html>\n"
    );
    page
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}\
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}.plots{display:flex;flex-wrap:wrap;gap:1em}\
svg{background:#fafafa;border:1px solid #ddd}.cmd code{background:#f0f0f0;padding:2px 6px}\
details{margin:0.5em 0}";

/// The summary at the top: the bench's own charts, throughput bars, the overlaid latency
/// curves, CPU per run; each part only when the report has its figures.
fn glance_section(page: &mut String, report: &Report) {
    let mut charts: Vec<String> = report.charts.iter().map(report_chart).collect();
    charts.extend(
        THROUGHPUT_CHARTS
            .iter()
            .filter_map(|(title, metrics)| throughput_chart(title, metrics, &report.comparison)),
    );
    charts.extend(latency_overlay(&report.runs));
    let cpu = cpu_table(&report.runs);
    if charts.is_empty() && cpu.is_none() {
        return;
    }
    page.push_str("<h2>At a glance</h2>\n");
    if !charts.is_empty() {
        let _ = writeln!(page, "<div class=\"plots\">{}</div>", charts.concat());
    }
    if let Some(table) = cpu {
        page.push_str(&table);
    }
}

/// A bar chart of the comparison rows of `metrics`: one group per experiment, a bar for
/// strom — one per load generator when the rows name two or more — and one for the seed.
fn throughput_chart(title: &str, metrics: &[&str], rows: &[ComparisonRow]) -> Option<String> {
    let rows: Vec<&ComparisonRow> = rows
        .iter()
        .filter(|r| r.strom_value.is_some() && metrics.contains(&r.metric.as_str()))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let per_client = named_clients(rows.iter().copied()).len() >= 2;
    let key = |row: &ComparisonRow| {
        if per_client {
            row.client.clone()
        } else {
            None
        }
    };
    let mut keys: Vec<Option<String>> = Vec::new();
    let mut experiments: Vec<&str> = Vec::new();
    for row in &rows {
        if !keys.contains(&key(row)) {
            keys.push(key(row));
        }
        if !experiments.contains(&row.experiment.as_str()) {
            experiments.push(&row.experiment);
        }
    }
    let seed = keys.len();
    let groups: Vec<(String, Vec<Option<f64>>)> = experiments
        .iter()
        .map(|&experiment| {
            let mut values = vec![None; keys.len() + 1];
            for row in rows.iter().filter(|r| r.experiment == experiment) {
                let i = keys
                    .iter()
                    .position(|k| *k == key(row))
                    .expect("keys hold every row's");
                values[i] = row.strom_value;
                values[seed] = values[seed].or(row.seed_value);
            }
            (experiment.to_string(), values)
        })
        .collect();
    let mut series: Vec<(String, &str)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let name = k
                .as_ref()
                .map_or_else(|| "strom".to_string(), |c| format!("strom, {c}"));
            (name, PALETTE[i % PALETTE.len()])
        })
        .collect();
    series.push(("seed".to_string(), SEED_COLOUR));
    Some(bar_chart(title, &series, &groups))
}

/// The load generators the rows name, in order of appearance.
fn named_clients<'a>(rows: impl Iterator<Item = &'a ComparisonRow>) -> Vec<&'a str> {
    let mut clients = Vec::new();
    for client in rows.filter_map(|r| r.client.as_deref()) {
        if !clients.contains(&client) {
            clients.push(client);
        }
    }
    clients
}

/// Every run's latency percentile curve on one chart, on a log latency axis: a consumer's
/// record age and a producer's send latency can differ by orders of magnitude. `None`
/// with fewer than two curves, which the run's own section already shows.
fn latency_overlay(runs: &[RunReport]) -> Option<String> {
    let lines: Vec<Line> = runs
        .iter()
        .filter(|r| !r.latency_curve.is_empty())
        .map(|r| Line {
            name: &r.name,
            points: percentile_points(&r.latency_curve),
            kind: LineKind::Plain,
        })
        .collect();
    if lines.len() < 2 {
        return None;
    }
    let x_max = lines
        .iter()
        .flat_map(|l| &l.points)
        .map(|p| p.0)
        .fold(0.0, f64::max);
    Some(line_chart(
        "Latency by percentile, every run (each from its own basis)",
        ("percentile", "ms, log scale"),
        &lines,
        &percentile_ticks(x_max),
        YScale::Log,
    ))
}

/// Each run's CPU seconds, client and broker; `None` when no run was measured.
fn cpu_table(runs: &[RunReport]) -> Option<String> {
    let measured: Vec<_> = runs
        .iter()
        .filter_map(|r| r.cpu.map(|cpu| (&r.name, cpu)))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let mut table = String::from(
        "<p>CPU seconds (user + system) each run cost:</p><table><tr><th>run</th><th>client</th><th>broker</th></tr>\n",
    );
    for (name, cpu) in measured {
        let broker = cpu.broker_s.map_or_else(
            || "unknown (external cluster)".to_string(),
            |s| format!("{s:.2}"),
        );
        let _ = writeln!(
            table,
            "<tr><td>{}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td></tr>",
            escape(name),
            cpu.client_s,
            broker
        );
    }
    table.push_str("</table>\n");
    Some(table)
}

/// A [`Chart`] of the report as SVG: strom's series as lines with a dot at each point,
/// the seed's as dashed grey lines with squares.
fn report_chart(chart: &Chart) -> String {
    let lines: Vec<Line> = chart
        .series
        .iter()
        .map(|s| Line {
            name: &s.name,
            points: s.points.clone(),
            kind: if s.reference {
                LineKind::Reference
            } else {
                LineKind::Points
            },
        })
        .collect();
    let scale = if chart.log_y {
        YScale::Log
    } else {
        YScale::Linear
    };
    line_chart(
        &chart.title,
        (&chart.x_label, &chart.y_label),
        &lines,
        &[],
        scale,
    )
}

/// The machine, and the cluster of a cluster bench, then the bench's settings and
/// figures as JSON where it has them.
fn environment_section(page: &mut String, report: &Report) {
    let env = &report.environment;
    let mut rows = vec![
        ("CPU", env.cpu_model.clone()),
        ("cores", env.cores.to_string()),
        ("OS", env.os.clone()),
        ("strom", env.strom_version.clone()),
        ("librdkafka", env.librdkafka_version.clone()),
    ];
    if let Some(cluster) = &report.cluster {
        let controllers = if cluster.combined {
            "combined with the brokers"
        } else {
            "controller-only nodes"
        };
        rows.extend([
            ("brokers", cluster.brokers.to_string()),
            (
                "controllers",
                format!("{} ({controllers})", cluster.controllers),
            ),
            ("replication factor", cluster.replication_factor.to_string()),
            ("partitions", cluster.partitions.clone()),
        ]);
        rows.extend(cluster.links.clone().map(|links| ("links", links)));
    }
    page.push_str("<h2>Environment</h2>\n<table>");
    for (name, value) in rows {
        let _ = write!(page, "<tr><th>{name}</th><td>{}</td></tr>", escape(&value));
    }
    page.push_str("</table>\n");
    json_details(page, "settings", &report.settings);
    json_details(page, "figures", &report.figures);
}

/// `value` as pretty JSON in a folded block named `summary`; nothing when it is null.
fn json_details(page: &mut String, summary: &str, value: &serde_json::Value) {
    if value.is_null() {
        return;
    }
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    let _ = writeln!(
        page,
        "<details><summary>{summary}</summary><pre>{}</pre></details>",
        escape(&text)
    );
}

/// Every comparison row as printed; a load-generator column when the rows name several.
fn comparison_table(page: &mut String, rows: &[ComparisonRow]) {
    let with_client = named_clients(rows.iter()).len() >= 2;
    page.push_str("<h2>strom vs. the seed reports</h2>\n<table><tr><th>experiment</th>");
    if with_client {
        page.push_str("<th>client</th>");
    }
    page.push_str("<th>metric</th><th>strom</th><th>seed</th></tr>\n");
    for row in rows {
        let _ = write!(page, "<tr><td>{}</td>", escape(&row.experiment));
        if with_client {
            let _ = write!(
                page,
                "<td>{}</td>",
                escape(row.client.as_deref().unwrap_or("-"))
            );
        }
        let _ = writeln!(
            page,
            "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&row.metric),
            escape(&row.strom),
            escape(&row.seed)
        );
    }
    page.push_str("</table>\n");
}

fn run_section(page: &mut String, run: &RunReport) {
    let _ = writeln!(
        page,
        "<h2>{} <small>({})</small></h2>",
        escape(&run.name),
        escape(&run.tool)
    );
    page.push_str("<table>");
    if let Some(map) = run.kafka.as_object() {
        for (key, value) in map {
            let _ = write!(
                page,
                "<tr><th>{}</th><td class=\"num\">{}</td></tr>",
                escape(key),
                escape(&value.to_string())
            );
        }
    }
    page.push_str("</table>\n");
    if let Some(lat) = &run.latency {
        let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
        let _ = writeln!(
            page,
            "<p>Latency (HdrHistogram, from the {}), ms:</p><table><tr><th>avg</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr><tr><td class=\"num\">{:.3}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr></table>",
            escape(&run.latency_basis),
            lat.avg_us / 1000.0,
            ms(lat.p50_us),
            ms(lat.p90_us),
            ms(lat.p99_us),
            ms(lat.p999_us),
            ms(lat.p9999_us),
            ms(lat.max_us)
        );
    }
    page.push_str("<div class=\"plots\">");
    let throughput = Line {
        name: "",
        points: run
            .series
            .iter()
            .map(|p| (p.t_s, p.records_per_sec))
            .collect(),
        kind: LineKind::Plain,
    };
    page.push_str(&line_chart(
        "Throughput over time",
        ("seconds", "records/s"),
        &[throughput],
        &[],
        YScale::Linear,
    ));
    if !run.latency_curve.is_empty() {
        let points = percentile_points(&run.latency_curve);
        let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max);
        page.push_str(&line_chart(
            "Latency by percentile",
            ("percentile", "ms"),
            &[Line {
                name: "",
                points,
                kind: LineKind::Plain,
            }],
            &percentile_ticks(x_max),
            YScale::Linear,
        ));
    }
    page.push_str("</div>\n");
    json_details(page, "settings", &run.settings);
}

/// Maps percentiles onto HdrHistogram's log axis, x = log10(1 / (1 - p)); the max (100%)
/// goes a little right of the last finite percentile.
fn percentile_points(curve: &[PercentilePoint]) -> Vec<(f64, f64)> {
    let finite_max = curve
        .iter()
        .filter(|p| p.percentile < 100.0)
        .map(|p| log_position(p.percentile))
        .fold(0.0, f64::max);
    curve
        .iter()
        .map(|p| {
            let x = if p.percentile >= 100.0 {
                finite_max + 0.3
            } else {
                log_position(p.percentile)
            };
            (x, p.latency_us as f64 / 1000.0)
        })
        .collect()
}

/// The percentile labels of [`percentile_points`]' axis, up to `x_max`.
fn percentile_ticks(x_max: f64) -> Vec<Tick> {
    ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]
        .iter()
        .enumerate()
        .map(|(i, label)| (i as f64, label.to_string()))
        .filter(|(x, _)| *x <= x_max)
        .collect()
}

fn log_position(percentile: f64) -> f64 {
    (1.0 / (1.0 - percentile / 100.0)).log10()
}

/// One series of a line chart; a named one gets a legend entry.
struct Line<'a> {
    name: &'a str,
    points: Vec<(f64, f64)>,
    kind: LineKind,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LineKind {
    /// A bare line: a time series or a percentile curve, too dense for markers.
    Plain,
    /// Measured at a few points: a line with a dot at each.
    Points,
    /// Published figures to compare with: a dashed grey line with a square at each point.
    Reference,
}

/// The colour and dash of a line.
struct Stroke {
    colour: &'static str,
    dashed: bool,
}

impl Stroke {
    /// Each line's stroke: the measured series take the palette in turn (dashed once it
    /// repeats), the references the greys in turn, dashed.
    fn of(lines: &[Line]) -> Vec<Self> {
        let (mut measured, mut references) = (0, 0);
        lines
            .iter()
            .map(|line| {
                let (counter, colours) = if line.kind == LineKind::Reference {
                    (&mut references, &REFERENCE_COLOURS[..])
                } else {
                    (&mut measured, &PALETTE[..])
                };
                let i = *counter;
                *counter += 1;
                Self {
                    colour: colours[i % colours.len()],
                    dashed: line.kind == LineKind::Reference || i / colours.len() % 2 == 1,
                }
            })
            .collect()
    }

    fn attributes(&self) -> String {
        let dash = if self.dashed {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        format!("stroke=\"{}\"{dash}", self.colour)
    }

    /// The marker a line of `kind` has at a point, centred on (x, y).
    fn marker(&self, kind: LineKind, x: f64, y: f64) -> String {
        match kind {
            LineKind::Plain => String::new(),
            LineKind::Points => format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\"/>",
                self.colour
            ),
            LineKind::Reference => format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"#fff\" stroke=\"{}\"/>",
                x - 3.0,
                y - 3.0,
                self.colour
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum YScale {
    /// From 0 to a round number.
    Linear,
    /// Whole decades around the positive values.
    Log,
}

/// A y axis fitted to the values: maps a value to its height fraction, and labels gridlines.
struct YAxis {
    scale: YScale,
    /// The axis ends: values for a linear axis, decades (exponents) for a log one.
    low: f64,
    high: f64,
    /// The gridlines: round steps of a linear axis, each decade of a log one.
    ticks: Vec<(f64, String)>,
}

impl YAxis {
    fn fit(values: &[f64], scale: YScale) -> Self {
        let max = values.iter().copied().fold(0.0, f64::max);
        match scale {
            YScale::Linear => {
                let (high, ticks) = linear_ticks(max);
                Self {
                    scale,
                    low: 0.0,
                    high,
                    ticks: ticks.into_iter().map(|y| (y, axis_label(y))).collect(),
                }
            }
            YScale::Log => {
                let min_positive = values
                    .iter()
                    .copied()
                    .filter(|v| *v > 0.0)
                    .fold(f64::INFINITY, f64::min);
                // log10 of an exact power of ten may come out a hair off it.
                let low = if min_positive.is_finite() {
                    (min_positive.log10() + 1e-9).floor()
                } else {
                    0.0
                };
                let high = if max > 0.0 {
                    (max.log10() - 1e-9).ceil()
                } else {
                    0.0
                }
                .max(low + 1.0);
                Self {
                    scale,
                    low,
                    high,
                    ticks: (low as i32..=high as i32)
                        .map(|k| (10f64.powi(k), decade_label(k)))
                        .collect(),
                }
            }
        }
    }

    /// 0 at the bottom, 1 at the top; on a log axis, values below its first decade
    /// (zero included) sit at the bottom.
    fn fraction(&self, value: f64) -> f64 {
        match self.scale {
            YScale::Linear => value / self.high,
            YScale::Log => {
                let decade = value.max(10f64.powf(self.low)).log10();
                (decade - self.low) / (self.high - self.low)
            }
        }
    }
}

/// A linear axis from 0 for values up to `max`: its end and gridlines, a round step apart
/// (1, 2 or 5 × 10^k, at most four steps), so every label is a round number.
fn linear_ticks(max: f64) -> (f64, Vec<f64>) {
    let step = nice_ceiling(max / 4.0);
    let steps = (max / step - 1e-9).ceil().max(1.0) as u32;
    let ticks = (0..=steps).map(|i| step * f64::from(i)).collect();
    (step * f64::from(steps), ticks)
}

/// `10^k` as an axis label: `0.001`, `1`, `100`, `10k`.
fn decade_label(k: i32) -> String {
    let value = 10f64.powi(k);
    match k {
        k if k < 0 => {
            let decimals = k.unsigned_abs() as usize;
            format!("{value:.decimals$}")
        }
        0..=2 => format!("{value:.0}"),
        _ => short_number(value),
    }
}

/// An SVG line chart of one or more series (`labels`: x, y); `x_ticks` replaces the
/// numeric x labels (round steps from 0) when given. Named series get a legend below the
/// plot.
fn line_chart(
    title: &str,
    labels: (&str, &str),
    lines: &[Line],
    x_ticks: &[Tick],
    y_scale: YScale,
) -> String {
    let (x_label, y_label) = labels;
    let legend: Vec<(usize, &Line)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.name.is_empty())
        .collect();
    let legend_top = HEIGHT;
    let height =
        HEIGHT + legend.len() as f64 * LEGEND_ROW + if legend.is_empty() { 0.0 } else { 6.0 };
    let mut svg = svg_open(title, WIDTH, height);
    let points: Vec<(f64, f64)> = lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .collect();
    if points.is_empty() {
        svg.push_str("<text x=\"50%\" y=\"50%\" text-anchor=\"middle\">no data</text></svg>");
        return svg;
    }
    let data_x_max = points
        .iter()
        .map(|p| p.0)
        .fold(f64::MIN, f64::max)
        .max(1e-9);
    let (x_max, ticks) = if x_ticks.is_empty() {
        let (end, steps) = linear_ticks(data_x_max);
        (end, steps.into_iter().map(|x| (x, axis_label(x))).collect())
    } else {
        (data_x_max, x_ticks.to_vec())
    };
    let x_min = points.iter().map(|p| p.0).fold(f64::MAX, f64::min).min(0.0);
    let y_values: Vec<f64> = points.iter().map(|p| p.1).collect();
    let y_axis = YAxis::fit(&y_values, y_scale);
    let plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let sx = |x: f64| MARGIN_LEFT + (x - x_min) / (x_max - x_min).max(1e-9) * plot_w;
    let sy = |y: f64| MARGIN_TOP + plot_h - y_axis.fraction(y) * plot_h;
    for (y, label) in &y_axis.ticks {
        let (x2, py, lx, ly) = (
            WIDTH - MARGIN_RIGHT,
            sy(*y),
            MARGIN_LEFT - 5.0,
            sy(*y) + 4.0,
        );
        let _ = write!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{x2}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{lx}\" y=\"{ly:.1}\" text-anchor=\"end\" font-size=\"11\">{label}</text>"
        );
    }
    for (x, label) in ticks {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\">{}</text>",
            sx(x),
            HEIGHT - MARGIN_BOTTOM + 15.0,
            escape(&label)
        );
    }
    let strokes = Stroke::of(lines);
    for (line, stroke) in lines.iter().zip(&strokes) {
        let path: Vec<String> = line
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" {} stroke-width=\"2\" points=\"{}\"/>",
            stroke.attributes(),
            path.join(" ")
        );
        for &(x, y) in &line.points {
            svg.push_str(&stroke.marker(line.kind, sx(x), sy(y)));
        }
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text><text x=\"14\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 {})\">{}</text>",
        MARGIN_LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(x_label),
        MARGIN_TOP + plot_h / 2.0,
        MARGIN_TOP + plot_h / 2.0,
        escape(y_label)
    );
    for (row, (i, line)) in legend.iter().enumerate() {
        let y = legend_top + row as f64 * LEGEND_ROW + 8.0;
        let stroke = &strokes[*i];
        let _ = write!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" {} stroke-width=\"3\"/>{}<text x=\"{}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            MARGIN_LEFT + 24.0,
            stroke.attributes(),
            stroke.marker(line.kind, MARGIN_LEFT + 12.0, y),
            MARGIN_LEFT + 30.0,
            y + 4.0,
            escape(line.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A horizontal grouped bar chart: a band per group (label left), a bar per series with a
/// value (`None`: no bar), the value printed at the bar's end, a legend under the title.
/// Horizontal, so long experiment names stay readable.
fn bar_chart(
    title: &str,
    series: &[(String, &str)],
    groups: &[(String, Vec<Option<f64>>)],
) -> String {
    // 11px text is about 6.5px a character.
    let label_w = groups
        .iter()
        .map(|(label, _)| label.chars().count() as f64 * 6.5 + 12.0)
        .fold(80.0, f64::max)
        .min(320.0);
    let width = label_w + BAR_PLOT_WIDTH + 60.0;
    let plot_top = MARGIN_TOP + 24.0;
    let band = series.len() as f64 * BAR + GROUP_GAP;
    let plot_bottom = plot_top + groups.len() as f64 * band;
    let height = plot_bottom + 25.0;
    let mut svg = svg_open(title, width, height);
    let mut x = label_w;
    // A series without a single value (no seed figure for any experiment) gets no legend.
    let shown = series
        .iter()
        .enumerate()
        .filter(|(s, _)| groups.iter().any(|(_, values)| values[*s].is_some()));
    for (_, (name, colour)) in shown {
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            MARGIN_TOP + 2.0,
            x + 14.0,
            MARGIN_TOP + 11.0,
            escape(name)
        );
        x += name.chars().count() as f64 * 6.5 + 30.0;
    }
    let max = groups
        .iter()
        .flat_map(|(_, values)| values.iter().flatten())
        .copied()
        .fold(0.0, f64::max);
    let (x_max, ticks) = linear_ticks(max);
    let sx = |v: f64| label_w + v / x_max * BAR_PLOT_WIDTH;
    for v in ticks {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{plot_top:.1}\" y2=\"{plot_bottom:.1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" font-size=\"11\">{2}</text>",
            sx(v),
            plot_bottom + 15.0,
            axis_label(v)
        );
    }
    for (g, (label, values)) in groups.iter().enumerate() {
        let top = plot_top + g as f64 * band + GROUP_GAP / 2.0;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\">{}</text>",
            label_w - 6.0,
            top + series.len() as f64 * BAR / 2.0 + 4.0,
            escape(label)
        );
        for (s, ((name, colour), value)) in series.iter().zip(values).enumerate() {
            let Some(value) = value else { continue };
            let y = top + s as f64 * BAR;
            let _ = write!(
                svg,
                "<rect x=\"{label_w:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
                sx(*value) - label_w,
                BAR - 2.0,
                escape(name),
                short_number(*value),
                sx(*value) + 3.0,
                y + BAR - 4.0,
                short_number(*value)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// An `<svg>` start tag of the given size, with `title` as its heading and accessible name.
fn svg_open(title: &str, width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"{0}\"><text x=\"{1}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">{0}</text>",
        escape(title),
        width / 2.0,
    )
}

/// The next 1, 2 or 5 × 10^k at or above `value`, so gridlines fall on round numbers.
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&c| c >= value)
        .unwrap_or(10.0 * magnitude)
}

/// [`short_number`] without trailing zeros: gridlines fall on round numbers (`5`, `2.5`,
/// `1.5M`), which need no fixed decimals.
fn axis_label(value: f64) -> String {
    let text = short_number(value);
    let digits = text.trim_end_matches(char::is_alphabetic);
    if !digits.contains('.') {
        return text;
    }
    let suffix = &text[digits.len()..];
    format!(
        "{}{suffix}",
        digits.trim_end_matches('0').trim_end_matches('.')
    )
}

fn short_number(value: f64) -> String {
    match value.abs() {
        v if v >= 1e6 => format!("{:.1}M", value / 1e6),
        v if v >= 1e3 => format!("{:.0}k", value / 1e3),
        v if v >= 10.0 || v == 0.0 => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuUse;
    use crate::histogram::LatencyHistogram;
    use crate::report::{ChartSeries, ClusterShape};
    use crate::series::SeriesPoint;

    fn sample_run(name: &str, latency_scale: u64) -> RunReport {
        let mut histogram = LatencyHistogram::new();
        (1..=1000).for_each(|us| histogram.record(us * latency_scale));
        RunReport {
            name: name.to_string(),
            tool: "producer-perf-test".to_string(),
            settings: serde_json::json!({"acks": "all"}),
            kafka: serde_json::json!({"records_sent": 1000}),
            latency_basis: "intended send time".to_string(),
            latency: None,
            latency_curve: Vec::new(),
            series: vec![SeriesPoint {
                t_s: 1.0,
                records_per_sec: 1000.0,
                mib_per_sec: 0.1,
            }],
            cpu: None,
        }
        .with_histogram(&histogram)
    }

    fn sample_report() -> Report {
        let mut report = Report::new("bench", &[]);
        report.runs.push(sample_run("producer <default>", 10));
        report
    }

    fn figure(experiment: &str, metric: &str, strom: f64, seed: Option<f64>) -> ComparisonRow {
        ComparisonRow {
            experiment: experiment.to_string(),
            metric: metric.to_string(),
            strom: strom.to_string(),
            seed: seed.map_or_else(|| "-".to_string(), |v| v.to_string()),
            strom_value: Some(strom),
            seed_value: seed,
            client: Some("librdkafka".to_string()),
        }
    }

    /// The page without its embedded JSON, which keeps names as they are.
    fn html_part(page: &str) -> &str {
        &page[..page.find("<script").unwrap()]
    }

    /// The `<svg>` element whose accessible name starts with `title`.
    fn svg_titled<'a>(page: &'a str, title: &str) -> &'a str {
        let start = page
            .find(&format!("aria-label=\"{title}"))
            .unwrap_or_else(|| panic!("no chart {title}"));
        let start = page[..start].rfind("<svg").unwrap();
        let end = start + page[start..].find("</svg>").unwrap();
        &page[start..end]
    }

    #[test]
    fn page_is_self_contained_and_escaped() {
        let page = render(&sample_report());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<svg"));
        assert!(page.contains("Latency by percentile"));
        assert!(page.contains("producer &lt;default&gt;"));
        assert!(!html_part(&page).contains("<default>"));
        assert!(!page.contains("<script src"));
        assert!(!page.contains("<link"));
    }

    #[test]
    fn a_single_run_has_no_summary_to_show() {
        let page = render(&sample_report());
        assert!(!page.contains("At a glance"));
    }

    #[test]
    fn bar_chart_puts_strom_beside_the_seed_per_experiment() {
        let mut report = sample_report();
        report.comparison = vec![
            figure(
                "002 default <settings>",
                "records/s",
                812_345.0,
                Some(721_000.0),
            ),
            figure("002 default <settings>", "MB/s (MiB)", 77.5, Some(68.8)),
            figure("002 default <settings>", "p99", 3.0, Some(5.0)),
            figure(
                "000 consumer fetch 1048576",
                "msg/s",
                2_500_000.0,
                Some(1_100_000.0),
            ),
        ];
        let page = render(&report);
        let glance = page.find("At a glance").expect("a summary");
        assert!(glance < page.find("strom vs. the seed reports").unwrap());
        let chart = svg_titled(&page, "Throughput, records/s");
        assert!(chart.contains("002 default &lt;settings&gt;"));
        assert!(chart.contains("000 consumer fetch 1048576"));
        assert!(chart.contains(">strom<") && chart.contains(">seed<"));
        // Two legend swatches, then strom and seed for each of the two experiments.
        assert_eq!(chart.matches("<rect").count(), 2 + 4);
        assert!(chart.contains("812k") && chart.contains("2.5M"));
        let mb = svg_titled(&page, "Throughput, MB/s (MiB)");
        assert_eq!(mb.matches("<rect").count(), 2 + 2);
        assert!(!html_part(&page).contains("<settings>"));
        // Latency figures stay in the table, not in a throughput chart.
        assert!(!chart.contains(">3<"));
    }

    #[test]
    fn two_load_generators_get_a_bar_each() {
        let mut report = sample_report();
        let native = ComparisonRow {
            client: Some("native".to_string()),
            ..figure("002 tuned", "records/s", 1_500_000.0, Some(1_200_000.0))
        };
        report.comparison = vec![
            figure("002 tuned", "records/s", 900_000.0, Some(1_200_000.0)),
            native,
            figure("000 throttled", "records/s", 100_000.0, None),
        ];
        let page = render(&report);
        let chart = svg_titled(&page, "Throughput, records/s");
        assert!(chart.contains(">strom, librdkafka<"));
        assert!(chart.contains(">strom, native<"));
        // Three legend swatches; librdkafka, native and seed for one, librdkafka alone for
        // the other.
        assert_eq!(chart.matches("<rect").count(), 3 + 3 + 1);
        assert!(page.contains("<th>client</th>"));
        report
            .comparison
            .push(figure("000 throttled", "MB/s (MiB)", 9.5, None));
        let page = render(&report);
        let chart = svg_titled(&page, "Throughput, MB/s (MiB)");
        assert!(chart.contains(">strom<") && !chart.contains(">seed<"));
    }

    #[test]
    fn overlaid_latency_chart_has_a_line_and_legend_entry_per_run() {
        let mut report = sample_report();
        report
            .runs
            .push(sample_run("consumer, fetch size 1048576", 1000));
        report.runs.push(sample_run("producer, tuned", 1));
        let page = render(&report);
        let chart = svg_titled(&page, "Latency by percentile, every run");
        assert_eq!(chart.matches("<polyline").count(), 3);
        assert!(chart.contains("producer &lt;default&gt;"));
        assert!(chart.contains("consumer, fetch size 1048576"));
        // A log axis: 1 µs to 1 s are six decades apart.
        assert!(chart.contains(">0.001<") && chart.contains(">1k<"));
    }

    #[test]
    fn cpu_table_lists_each_measured_run() {
        let mut report = sample_report();
        report.runs[0].cpu = Some(CpuUse {
            client_s: 1.234,
            broker_s: Some(0.456),
        });
        let mut external = sample_run("producer, external", 10);
        external.cpu = Some(CpuUse {
            client_s: 2.0,
            broker_s: None,
        });
        report.runs.push(external);
        let page = render(&report);
        let table = &page[page.find("CPU seconds").expect("a CPU table")..];
        assert!(table.contains("<td>producer &lt;default&gt;</td><td class=\"num\">1.23</td><td class=\"num\">0.46</td>"));
        assert!(table.contains(
            "<td class=\"num\">2.00</td><td class=\"num\">unknown (external cluster)</td>"
        ));
    }

    fn series(name: &str, reference: bool, points: &[(f64, f64)]) -> ChartSeries {
        ChartSeries {
            name: name.to_string(),
            reference,
            points: points.to_vec(),
        }
    }

    #[test]
    fn report_charts_come_first_with_measured_and_reference_series() {
        let mut report = sample_report();
        report.comparison = vec![figure("002 tuned", "records/s", 900_000.0, None)];
        report.charts.push(Chart {
            title: "Controlled <shutdown>".to_string(),
            x_label: "partitions per broker".to_string(),
            y_label: "seconds".to_string(),
            log_y: false,
            series: vec![
                series("strom, 6000 ms", false, &[(60.0, 0.02), (120.0, 0.03)]),
                series("strom, 9000 ms", false, &[(60.0, 0.02), (120.0, 0.04)]),
                series("Kafka 1.0", true, &[(40.0, 4.0), (100.0, 4.0)]),
                series("Kafka 1.1", true, &[(40.0, 2.0), (100.0, 2.0)]),
            ],
        });
        let page = render(&report);
        let chart = svg_titled(&page, "Controlled &lt;shutdown&gt;");
        assert!(
            page.find("Controlled &lt;shutdown&gt;").unwrap()
                < page.find("Throughput, records/s").unwrap(),
            "the bench's charts open the page"
        );
        assert_eq!(chart.matches("<polyline").count(), 4);
        // A dot per measured point and in each of their legend entries, a square per
        // reference point and in each of theirs.
        assert_eq!(chart.matches("<circle").count(), 4 + 2);
        assert_eq!(chart.matches("<rect").count(), 4 + 2);
        assert_eq!(chart.matches("stroke-dasharray").count(), 2 * 2);
        for colour in [
            PALETTE[0],
            PALETTE[1],
            REFERENCE_COLOURS[0],
            REFERENCE_COLOURS[1],
        ] {
            assert!(chart.contains(colour), "{colour}");
        }
        assert!(chart.contains(">Kafka 1.1<") && chart.contains(">strom, 9000 ms<"));
        assert!(chart.contains(">partitions per broker<"));
        // Round steps on the x axis: 0, 50, 100, 150.
        assert!(chart.contains(">50<") && chart.contains(">150<"));
    }

    #[test]
    fn environment_shows_the_cluster_settings_and_figures() {
        let mut report = sample_report();
        report.cluster = Some(ClusterShape {
            brokers: 5,
            controllers: 3,
            combined: false,
            replication_factor: 3,
            partitions: "100 per topic".to_string(),
            links: Some("100 Mbit/s <capped>".to_string()),
        });
        report.settings = serde_json::json!({"max_topics": 2});
        report.figures = serde_json::json!({"steps": [{"topics": 1}]});
        let page = html_part(&render(&report)).to_string();
        let environment = &page[page.find("<h2>Environment").unwrap()..];
        for row in [
            "<th>brokers</th><td>5</td>",
            "<th>controllers</th><td>3 (controller-only nodes)</td>",
            "<th>replication factor</th><td>3</td>",
            "<th>partitions</th><td>100 per topic</td>",
            "<th>links</th><td>100 Mbit/s &lt;capped&gt;</td>",
        ] {
            assert!(environment.contains(row), "{row}");
        }
        assert!(
            environment.contains("<summary>settings</summary><pre>{\n  &quot;max_topics&quot;: 2")
        );
        assert!(environment.contains("<summary>figures</summary>"));
        let plain = html_part(&render(&sample_report())).to_string();
        assert!(!plain.contains("<th>brokers</th>") && !plain.contains("<summary>figures"));
    }

    #[test]
    fn log_axis_spans_whole_decades() {
        let axis = YAxis::fit(&[0.0, 0.004, 250.0], YScale::Log);
        assert_eq!((axis.low, axis.high), (-3.0, 3.0));
        assert_eq!(axis.fraction(0.0), 0.0);
        assert!((axis.fraction(1.0) - 0.5).abs() < 1e-12);
        let labels: Vec<&str> = axis.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0.001", "0.01", "0.1", "1", "10", "100", "1k"]);
    }

    #[test]
    fn linear_axes_step_in_round_numbers() {
        assert_eq!(
            linear_ticks(3_200_000.0),
            (4e6, vec![0.0, 1e6, 2e6, 3e6, 4e6])
        );
        assert_eq!(linear_ticks(120.0), (150.0, vec![0.0, 50.0, 100.0, 150.0]));
        assert_eq!(linear_ticks(1000.0), (1000.0, vec![0.0, 500.0, 1000.0]));
        assert_eq!(linear_ticks(0.0), (1.0, vec![0.0, 1.0]));
    }

    #[test]
    fn axis_labels_drop_trailing_zeros() {
        assert_eq!(axis_label(5.0), "5");
        assert_eq!(axis_label(0.25), "0.25");
        assert_eq!(axis_label(0.5), "0.5");
        assert_eq!(axis_label(1e6), "1M");
        assert_eq!(axis_label(1.5e6), "1.5M");
        assert_eq!(axis_label(500_000.0), "500k");
        assert_eq!(axis_label(0.0), "0");
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(120.0), 200.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
    }
}
