//! The comparison table `strom bench` prints: one row per figure, strom beside the seed.

use strom_tools::report::ComparisonRow;

/// Renders rows as an aligned plain-text table; a client column appears when the rows
/// come from more than one load generator (`--client both`).
pub fn render(rows: &[ComparisonRow]) -> String {
    let clients: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r.client.as_deref()).collect();
    let with_client = clients.len() > 1;
    let mut headers = vec!["experiment", "metric"];
    if with_client {
        headers.push("client");
    }
    headers.extend(["strom", "seed"]);
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            let mut c = vec![r.experiment.as_str(), r.metric.as_str()];
            if with_client {
                c.push(r.client.as_deref().unwrap_or(""));
            }
            c.extend([r.strom.as_str(), r.seed.as_str()]);
            c
        })
        .collect();
    let widths: Vec<usize> = (0..headers.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].len())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Text columns align left, the figures (the last two) right.
    let numeric_from = headers.len() - 2;
    let line = |c: &[&str]| {
        c.iter()
            .enumerate()
            .map(|(i, cell)| {
                if i >= numeric_from {
                    format!("{cell:>w$}", w = widths[i])
                } else {
                    format!("{cell:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let rule = "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1));
    let mut out = vec![line(&headers), rule];
    let mut previous = "";
    for c in &cells {
        let mut shown = c.clone();
        if c[0] == previous {
            shown[0] = "";
        }
        previous = c[0];
        out.push(line(&shown));
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

    #[test]
    fn names_the_client_when_two_ran() {
        let row = |client: &str| ComparisonRow {
            experiment: "a".into(),
            metric: "records/s".into(),
            strom: "1".into(),
            seed: "2".into(),
            client: Some(client.into()),
            ..ComparisonRow::default()
        };
        let one = render(&[row("native")]);
        assert!(!one.contains("client"));
        let both = render(&[row("librdkafka"), row("native")]);
        let lines: Vec<&str> = both.lines().collect();
        assert_eq!(lines[0], "experiment  metric     client      strom  seed");
        assert_eq!(lines[3], "            records/s  native          1     2");
    }
}
