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
         cargo run -p ndflow -- params --markdown > docs/config-reference.md"
    );
}
