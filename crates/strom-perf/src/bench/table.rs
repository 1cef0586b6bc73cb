//! The comparison table `strom bench` prints: one row per figure, strom beside the seed.

use crate::report::ComparisonRow;

/// Renders rows as an aligned plain-text table.
pub fn render(rows: &[ComparisonRow]) -> String {
    let headers = ["experiment", "metric", "strom", "seed"];
    let cells: Vec<[&str; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.experiment.as_str(),
                r.metric.as_str(),
                r.strom.as_str(),
                r.seed.as_str(),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].len())
            .chain([headers[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let line = |c: [&str; 4]| {
        format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        )
    };
    let mut out = vec![line(headers), "-".repeat(widths.iter().sum::<usize>() + 6)];
    let mut previous = "";
    for c in &cells {
        let experiment = if c[0] == previous { "" } else { c[0] };
        previous = c[0];
        out.push(line([experiment, c[1], c[2], c[3]]));
    }
    out.join("\n")
}

/// `1234567.8` → `1,234,568`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1_234_567.8), "1,234,568");
    }

    #[test]
    fn aligns_columns_and_blanks_repeated_experiments() {
        let row = |e: &str, m: &str| ComparisonRow {
            experiment: e.into(),
            metric: m.into(),
            strom: "1".into(),
            seed: "22".into(),
            ..ComparisonRow::default()
        };
        let text = render(&[row("a", "records/s"), row("a", "p99"), row("b", "x")]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "experiment  metric     strom  seed");
        assert_eq!(lines[2], "a           records/s      1    22");
        assert_eq!(lines[3], "            p99            1    22");
        assert!(lines[4].starts_with("b "));
    }
}
