//! docs/configuration.md is what the config tables say: a key added, removed or changed
//! in a table without regenerating the file fails here. `STROM_WRITE_DOCS=1` rewrites it.

use std::path::Path;

#[test]
fn configuration_md_is_generated_from_the_tables() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let generated = strom_broker::config_docs::markdown();
    if std::env::var_os("STROM_WRITE_DOCS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/configuration.md");
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/configuration.md is stale: run `STROM_WRITE_DOCS=1 cargo test --release --test configuration_docs`"
    );
}
