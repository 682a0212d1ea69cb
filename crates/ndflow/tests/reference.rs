//! docs/config-reference.md is generated from the parameter declarations; keep it in sync.

#[test]
fn committed_reference_matches_the_declarations() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/config-reference.md"
    );
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = ndflow::reference::full_markdown();
    assert!(
        committed == generated,
        "docs/config-reference.md is out of date: run\n  \
         cargo run -p ndflow-cli -- params --markdown > docs/config-reference.md"
    );
}

/// README.md's table of port types is generated from the registry too.
#[test]
fn readme_type_list_matches_the_registry() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).unwrap();
    let want =
        ndflow::reference::readme_with_types(&text).expect("README has the port-type markers");
    if text != want {
        if std::env::var_os("NDFLOW_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
            return;
        }
        panic!("README.md's port types are out of date: run\n  NDFLOW_BLESS=1 cargo test --release -p ndflow --test integration reference::");
    }
    for t in ndflow::registry::TYPES {
        assert!(
            text.contains(&format!("| `{}` |", t.name)),
            "{} missing",
            t.name
        );
    }
}
