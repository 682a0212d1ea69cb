//! Config file errors name the file, line, port and key; a valid file builds and runs.

use ndflow::config::Config;
use ndflow_runtime::Graph;

fn build_err(text: &str) -> String {
    let cfg = match Config::parse(text, "t.toml") {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    let g = Graph::new(1);
    match cfg.build(&g, &ndflow::pva::ImagePvs::default()) {
        Ok(()) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const GOOD: &str = r#"prefix = "T:"
[[port]]
name = "SIM1"
type = "sim"
MaxSizeX = 64
MaxSizeY = 32
DataType = "UInt16"

[[port]]
name = "ROI1"
type = "roi"
NDArrayPort = "SIM1"
SizeX = 16
"#;

#[test]
fn unknown_key_names_file_line_port_and_key() {
    let text = format!("{GOOD}Bogus = 3\n");
    let e = build_err(&text);
    assert_eq!(
        e,
        "t.toml:14: port 'ROI1': key 'Bogus': unknown parameter 'Bogus'"
    );
}

#[test]
fn bad_enum_value_lists_choices() {
    let text = GOOD.replace("DataType = \"UInt16\"", "DataType = \"UInt12\"");
    let e = build_err(&text);
    assert!(
        e.starts_with("t.toml:7: port 'SIM1': key 'DataType': "),
        "{e}"
    );
    assert!(e.contains("UInt12") && e.contains("UInt16"), "{e}");
}

#[test]
fn enum_by_index_and_string_both_work() {
    for v in ["\"UInt16\"", "3"] {
        let text = GOOD.replace("\"UInt16\"", v);
        let cfg = Config::parse(&text, "t.toml").unwrap();
        let g = Graph::new(1);
        cfg.build(&g, &ndflow::pva::ImagePvs::default()).unwrap();
        assert_eq!(g.summary()["ports"]["SIM1"]["DataType"], "UInt16");
    }
}

#[test]
fn dangling_ndarrayport_is_an_error() {
    let text = GOOD.replace("NDArrayPort = \"SIM1\"", "NDArrayPort = \"SIM9\"");
    let e = build_err(&text);
    assert!(
        e.starts_with("t.toml:12: port 'ROI1': key 'NDArrayPort': "),
        "{e}"
    );
    assert!(e.contains("no port named 'SIM9'"), "{e}");
}

#[test]
fn read_only_parameter_is_refused() {
    let text = format!("{GOOD}ArrayCounter_RBV = 3\n");
    assert!(build_err(&text).contains("unknown parameter 'ArrayCounter_RBV'"));
    let text = format!("{GOOD}MaxThreads = 3\n");
    assert!(build_err(&text).contains("key 'MaxThreads': parameter 'MaxThreads' is read-only"));
}

#[test]
fn out_of_range_value() {
    let text = format!("{GOOD}QueueSize = 0\n");
    let e = build_err(&text);
    assert!(
        e.contains("key 'QueueSize'") && e.contains("out of range"),
        "{e}"
    );
}

#[test]
fn unknown_type_and_missing_name() {
    let e = build_err("[[port]]\nname = \"X\"\ntype = \"camera\"\n");
    assert!(
        e.starts_with("t.toml:3: port 'X': key 'type': unknown port type 'camera'"),
        "{e}"
    );
    let e = build_err("[[port]]\ntype = \"roi\"\n");
    assert!(e.contains("key 'name'"), "{e}");
}

#[test]
fn duplicate_port_and_syntax_error() {
    let e = build_err(&format!(
        "{GOOD}\n[[port]]\nname = \"ROI1\"\ntype = \"roi\"\n"
    ));
    assert!(
        e.contains("port 'ROI1': key 'name': duplicate port name"),
        "{e}"
    );
    let e = build_err("prefix = \"a\"\n[[port]\n");
    assert!(e.starts_with("t.toml:2: "), "{e}");
    let e = build_err("prefix = 3\n");
    assert!(e.starts_with("t.toml:1: key 'prefix'"), "{e}");
}

#[test]
fn bundled_examples_parse_and_build() {
    for (name, text) in [
        (
            "rivers2013.toml",
            include_str!("../../../examples/rivers2013.toml"),
        ),
        ("demo.toml", include_str!("../../../examples/demo.toml")),
        (
            "pva_ioc.toml",
            include_str!("../../../examples/pva_ioc.toml"),
        ),
        (
            "scatter_gather.toml",
            include_str!("../../../examples/scatter_gather.toml"),
        ),
    ] {
        let cfg = Config::parse(text, name).unwrap();
        let mut cfg = cfg.clone();
        for p in &mut cfg.ports {
            p.settings.retain(|s| s.key != "Acquire");
        }
        let g = std::sync::Arc::new(Graph::new(1));
        let pvs = ndflow::pva::ImagePvs::default();
        cfg.build(&g, &pvs).unwrap_or_else(|e| panic!("{e}"));
        // Every parameter becomes a PV; no two may share a name.
        let dir = ndflow::pvdir::PvDirectory::build(
            &g,
            &cfg.prefix,
            &cfg.port_prefixes(),
            cfg.access.clone(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let pvs = ndflow::pva::PvaProvider::new(&dir, std::sync::Arc::new(pvs))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(pvs.len() > 500, "{name}: only {} PVs", pvs.len());
        g.shutdown();
    }
}

#[test]
fn port_prefix_defaults_to_name_and_colon() {
    let cfg = Config::parse(GOOD, "t.toml").unwrap();
    let prefixes = cfg.port_prefixes();
    assert_eq!(prefixes["SIM1"], "SIM1:");
    assert_eq!(prefixes["ROI1"], "ROI1:");
    let g = std::sync::Arc::new(Graph::new(1));
    let pvs = ndflow::pva::ImagePvs::default();
    cfg.build(&g, &pvs).unwrap();
    let dir =
        ndflow::pvdir::PvDirectory::build(&g, &cfg.prefix, &prefixes, Default::default()).unwrap();
    let names = dir.names();
    assert!(names.contains(&"T:SIM1:SizeX_RBV".to_string()));
    assert!(names.contains(&"T:ROI1:SizeX".to_string()));
    g.shutdown();
}

#[test]
fn listen_key_takes_local_all_or_addresses() {
    use ndflow_net::Listen;
    let parse = |v: &str| Config::parse(&format!("listen = {v}\n{GOOD}"), "t.toml");
    assert_eq!(parse("\"local\"").unwrap().listen, Some(Listen::Local));
    assert_eq!(parse("\"all\"").unwrap().listen, Some(Listen::all()));
    assert_eq!(
        parse("\"10.1.2.3\"").unwrap().listen,
        Some(Listen::Interfaces(vec!["10.1.2.3".parse().unwrap()]))
    );
    assert_eq!(Config::parse(GOOD, "t.toml").unwrap().listen, None);
    let e = parse("\"eth0\"").unwrap_err().to_string();
    assert!(
        e.starts_with("t.toml:1: key 'listen': ") && e.contains("\"eth0\" is not an IP address"),
        "{e}"
    );
    let e = parse("1").unwrap_err().to_string();
    assert!(e.contains("key 'listen': must be a string"), "{e}");
}
