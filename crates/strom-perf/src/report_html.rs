//! `--html FILE`: one self-contained page with the run's plots as inline SVG.
//!
//! The SVG is drawn here rather than by a charting library loaded from a CDN, so the page
//! opens anywhere, offline, and can be attached to a ticket as a single file.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use crate::histogram::PercentilePoint;
use crate::report::{Report, RunReport};

/// An x-axis label at a data position.
type Tick = (f64, String);

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 30.0;
const MARGIN_BOTTOM: f64 = 45.0;

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
    environment_section(&mut page, report);
    if !report.comparison.is_empty() {
        page.push_str("<h2>strom vs. the seed reports</h2>\n<table><tr><th>experiment</th><th>metric</th><th>strom</th><th>seed</th></tr>\n");
        for row in &report.comparison {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                escape(&row.experiment),
                escape(&row.metric),
                escape(&row.strom),
                escape(&row.seed)
            );
        }
        page.push_str("</table>\n");
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

fn environment_section(page: &mut String, report: &Report) {
    let env = &report.environment;
    let _ = write!(
        page,
        "<h2>Environment</h2>\n<table><tr><th>CPU</th><td>{}</td></tr><tr><th>cores</th><td>{}</td></tr><tr><th>OS</th><td>{}</td></tr><tr><th>strom</th><td>{}</td></tr><tr><th>librdkafka</th><td>{}</td></tr></table>\n",
        escape(&env.cpu_model),
        env.cores,
        escape(&env.os),
        escape(&env.strom_version),
        escape(&env.librdkafka_version)
    );
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
    let throughput: Vec<(f64, f64)> = run
        .series
        .iter()
        .map(|p| (p.t_s, p.records_per_sec))
        .collect();
    page.push_str(&line_chart(
        "Throughput over time",
        "seconds",
        "records/s",
        &throughput,
        &[],
    ));
    if !run.latency_curve.is_empty() {
        let (points, ticks) = percentile_axis(&run.latency_curve);
        page.push_str(&line_chart(
            "Latency by percentile",
            "percentile",
            "ms",
            &points,
            &ticks,
        ));
    }
    page.push_str("</div>\n");
    let settings = serde_json::to_string_pretty(&run.settings).unwrap_or_default();
    let _ = writeln!(
        page,
        "<details><summary>settings</summary><pre>{}</pre></details>",
        escape(&settings)
    );
}

/// Maps percentiles onto HdrHistogram's log axis, x = log10(1 / (1 - p)), with labels.
fn percentile_axis(curve: &[PercentilePoint]) -> (Vec<(f64, f64)>, Vec<Tick>) {
    let finite_max = curve
        .iter()
        .filter(|p| p.percentile < 100.0)
        .map(|p| log_position(p.percentile))
        .fold(0.0, f64::max);
    let points = curve
        .iter()
        .map(|p| {
            let x = if p.percentile >= 100.0 {
                finite_max + 0.3
            } else {
                log_position(p.percentile)
            };
            (x, p.latency_us as f64 / 1000.0)
        })
        .collect();
    let ticks = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]
        .iter()
        .enumerate()
        .map(|(i, label)| (i as f64, label.to_string()))
        .filter(|(x, _)| *x <= finite_max + 0.3)
        .collect();
    (points, ticks)
}

fn log_position(percentile: f64) -> f64 {
    (1.0 / (1.0 - percentile / 100.0)).log10()
}

/// An SVG line chart; `x_ticks` replaces the numeric x labels when given.
fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[(f64, f64)],
    x_ticks: &[(f64, String)],
) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{}\"><text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">{}</text>",
        escape(title),
        WIDTH / 2.0,
        escape(title)
    );
    if points.is_empty() {
        svg.push_str("<text x=\"50%\" y=\"50%\" text-anchor=\"middle\">no data</text></svg>");
        return svg;
    }
    let x_max = points
        .iter()
        .map(|p| p.0)
        .fold(f64::MIN, f64::max)
        .max(1e-9);
    let x_min = points.iter().map(|p| p.0).fold(f64::MAX, f64::min).min(0.0);
    let y_max = nice_ceiling(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let sx = |x: f64| MARGIN_LEFT + (x - x_min) / (x_max - x_min).max(1e-9) * plot_w;
    let sy = |y: f64| MARGIN_TOP + plot_h - y / y_max * plot_h;
    for i in 0..=4 {
        let y = y_max * i as f64 / 4.0;
        let (x2, py, lx, ly) = (WIDTH - MARGIN_RIGHT, sy(y), MARGIN_LEFT - 5.0, sy(y) + 4.0);
        let label = short_number(y);
        let _ = write!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{x2}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/><text x=\"{lx}\" y=\"{ly:.1}\" text-anchor=\"end\" font-size=\"11\">{label}</text>"
        );
    }
    let ticks: Vec<(f64, String)> = if x_ticks.is_empty() {
        (0..=5)
            .map(|i| x_min + (x_max - x_min) * i as f64 / 5.0)
            .map(|x| (x, short_number(x)))
            .collect()
    } else {
        x_ticks.to_vec()
    };
    for (x, label) in ticks {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\">{}</text>",
            sx(x),
            HEIGHT - MARGIN_BOTTOM + 15.0,
            escape(&label)
        );
    }
    let path: Vec<String> = points
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
        .collect();
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\">{}</text><text x=\"14\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 {})\">{}</text></svg>",
        path.join(" "),
        MARGIN_LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(x_label),
        MARGIN_TOP + plot_h / 2.0,
        MARGIN_TOP + plot_h / 2.0,
        escape(y_label)
    );
    svg
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
    use crate::histogram::LatencyHistogram;
    use crate::series::SeriesPoint;

    fn sample_report() -> Report {
        let mut histogram = LatencyHistogram::new();
        (1..=1000).for_each(|us| histogram.record(us * 10));
        let run = RunReport {
            name: "producer <default>".to_string(),
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
        }
        .with_histogram(&histogram);
        let mut report = Report::new("bench", &[]);
        report.runs.push(run);
        report
    }

    #[test]
    fn page_is_self_contained_and_escaped() {
        let page = render(&sample_report());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<svg"));
        assert!(page.contains("Latency by percentile"));
        assert!(page.contains("producer &lt;default&gt;"));
        assert!(!page.contains("<script src"));
        assert!(!page.contains("<link"));
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(120.0), 200.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
    }
}
