//! docs/configuration.md, generated from the config tables: the broker's
//! ([`crate::broker_configs`]), the KRaft keys ([`crate::kraft_config::KEYS`]) and the
//! topics' ([`crate::topic_config`]). `tests/configuration_docs.rs` fails when the file
//! differs from what the tables say, and rewrites it when `STROM_WRITE_DOCS=1` is set.

use std::fmt::Write;

use crate::broker_configs::BROKER_CONFIGS;
use crate::kraft_config;
use crate::topic_config::TOPIC_CONFIGS;

/// The whole of docs/configuration.md.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         Generated from the config tables in `crates/strom-broker/src` \
         (`broker_configs.rs`, `kraft_config.rs`, `topic_config.rs`); \
         `STROM_WRITE_DOCS=1 cargo test --release --test configuration_docs` rewrites it.\n\n\
         A key in none of these tables that Kafka knows is accepted with a warning that it \
         has no effect; any other key stops `strom server` with an error naming it.\n",
    );
    broker_section(&mut out);
    kraft_section(&mut out);
    topic_section(&mut out);
    out
}

fn broker_section(out: &mut String) {
    out.push_str(
        "\n## Broker configs (`server.properties`)\n\n\
         Dynamic: `kafka-configs --entity-type brokers --alter` changes it at runtime, for \
         one broker or for all.\n\n\
         | key | type | default | valid values | importance | dynamic | description |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for def in BROKER_CONFIGS {
        row(
            out,
            &[
                &format!("`{}`", def.name),
                def.config_type.name(),
                &shown(def.default),
                &def.validator.valid_values(),
                def.importance.name(),
                if def.dynamic { "yes" } else { "no" },
                def.doc,
            ],
        );
    }
}

fn kraft_section(out: &mut String) {
    out.push_str(
        "\n## KRaft keys\n\n\
         The roles, the quorum and the listeners, as Kafka 4 names them; what each does is \
         in [cluster.md](cluster.md). A node without `process.roles` is a one-voter combined \
         node that formats its own directory.\n\n",
    );
    let mut keys: Vec<&str> = kraft_config::KEYS.to_vec();
    keys.sort_unstable();
    for key in keys {
        let _ = writeln!(out, "* `{key}`");
    }
}

fn topic_section(out: &mut String) {
    out.push_str(
        "\n## Topic configs\n\n\
         Set per topic (`kafka-topics --config`, `kafka-configs --entity-type topics`); a \
         topic without the key takes its broker synonym's value. Honoured: no means accepted, \
         checked and reported, with a warning that its feature is not built yet.\n\n\
         | key | type | default | valid values | broker synonym | honoured | description |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for def in TOPIC_CONFIGS {
        row(
            out,
            &[
                &format!("`{}`", def.name),
                def.config_type.name(),
                &shown(&def.built_in_default()),
                &def.validator.valid_values(),
                &def.broker_synonym
                    .map_or_else(String::new, |k| format!("`{k}`")),
                if def.apply.is_some() { "yes" } else { "no" },
                def.doc,
            ],
        );
    }
}

/// A default as the table shows it: empty is "none".
fn shown(default: &str) -> String {
    if default.is_empty() {
        "none".to_string()
    } else {
        format!("`{default}`")
    }
}

fn row(out: &mut String, cells: &[&str]) {
    let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}
