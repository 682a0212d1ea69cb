//! Shared by the plugin tests: the record check against areaDetector's templates.

use ndflow_core::{ParamDef, ParamKind, ParamStore};

/// Every record of `template` (the repository's copy of the name contract,
/// python/tests/data/ad_records.json) is served under each of `prefixes` by a port with
/// these parameter tables, with no name declared twice; with `menus`, every menu holds
/// areaDetector's strings in its order.
pub fn check_records(
    template: &str,
    tables: &[&'static [ParamDef]],
    prefixes: &[&str],
    menus: bool,
) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/tests/data/ad_records.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(ParamStore::duplicate_names(tables).is_empty());
    let store = ParamStore::new(tables);
    let served: Vec<(String, &ParamDef)> = store
        .defs()
        .iter()
        .flat_map(|d| d.pv_names().into_iter().map(move |n| (n, *d)))
        .collect();
    let records = json[template].as_array().unwrap();
    assert!(!records.is_empty());
    for r in records {
        let name = r["name"].as_str().unwrap();
        for p in prefixes {
            let full = format!("{p}{name}");
            let Some((_, def)) = served.iter().find(|(n, _)| *n == full) else {
                panic!("{template}: record {full} not served");
            };
            if let Some(choices) = r["choices"].as_array().filter(|_| menus) {
                let ParamKind::Enum(ours) = def.kind else {
                    panic!("{full} is not an enum");
                };
                let theirs: Vec<&str> = choices.iter().map(|c| c.as_str().unwrap()).collect();
                assert_eq!(&ours[..theirs.len()], &theirs[..], "{full} menu");
            }
        }
    }
}
