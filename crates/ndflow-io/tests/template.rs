//! FileTemplate formatting and CreateDirectory rules.

use crate::common;
use ndflow_io::file::{create_directory, format_file_name, normalize_dir};

#[test]
fn areadetector_templates() {
    let f = |t: &str, n: i64| format_file_name(t, "/data/", "img", n).unwrap();
    assert_eq!(f("%s%s_%3.3d.tif", 7), "/data/img_007.tif");
    assert_eq!(f("%s%s_%3.3d.tif", 1234), "/data/img_1234.tif");
    assert_eq!(f("%s%s_%4.4d.h5", 42), "/data/img_0042.h5");
    assert_eq!(f("%s%s%d.tif", 5), "/data/img5.tif");
    assert_eq!(f("%s%s_%06d.tif", 5), "/data/img_000005.tif");
    assert_eq!(f("%s%s_%5d.tif", 5), "/data/img_    5.tif");
    assert_eq!(f("%s%s_%-5d|", 5), "/data/img_5    |");
    assert_eq!(f("%s%s_%3.3d", -5), "/data/img_-005");
    assert_eq!(f("%s%s.tif", 5), "/data/img.tif");
    assert_eq!(f("%s%s_100%%_%d", 1), "/data/img_100%_1");
    assert_eq!(f("%s%.2s_%i", 3), "/data/im_3");
    assert_eq!(f("%s%s_%+d", 3), "/data/img_+3");
}

#[test]
fn bad_templates_are_refused() {
    for t in [
        "%s%s_%f.tif",
        "%s%s_%x",
        "%s%s_%d%d",
        "%d%s%s",
        "%s%d",
        "%s%s_%*d",
        "%s%s_%",
        "%s%s_%3.3s",
    ] {
        let e = format_file_name(t, "/d/", "n", 1).unwrap_err();
        assert!(e.contains(t), "{t}: {e}");
    }
}

#[test]
fn normalizes_path() {
    assert_eq!(normalize_dir("/a/b"), "/a/b/");
    assert_eq!(normalize_dir("/a/b/"), "/a/b/");
    assert_eq!(normalize_dir(""), "");
}

#[test]
fn create_directory_rules() {
    let tmp = common::TempDir::new("mkdir");
    let base = tmp.path();
    // 0: nothing is created.
    assert!(!create_directory(&base.join("x/y"), 0).unwrap());
    assert!(!base.join("x").exists());
    // -1: only the last level may be created.
    assert!(create_directory(&base.join("x/y"), -1).is_err());
    assert!(!base.join("x").exists());
    assert!(create_directory(&base.join("x"), -1).unwrap());
    assert!(create_directory(&base.join("x/y"), -1).unwrap());
    // -3: up to three levels.
    assert!(create_directory(&base.join("a/b/c"), -3).unwrap());
    assert!(base.join("a/b/c").is_dir());
    // +N: the first N levels must exist.
    let depth = base.components().count() as i64 - 1; // levels of `base` below the root
    assert!(create_directory(&base.join("p/q"), depth + 1).is_err());
    assert!(!base.join("p").exists());
    assert!(create_directory(&base.join("p/q"), depth).unwrap());
    assert!(base.join("p/q").is_dir());
    // Existing directories are fine whatever the rule.
    assert!(create_directory(&base.join("p/q"), 0).unwrap());
}
