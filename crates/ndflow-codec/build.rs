//! Builds c-blosc for `ndflow_codec::blosc` from the sources bundled in the `blosc-src` crate.
//!
//! Why not link blosc-src's own library: its build script turns on the AVX2 shuffle only when
//! the whole crate graph is compiled for AVX2 (`-C target-cpu=x86-64-v3`), and it enables the
//! LZ4/Zlib/Zstd codecs only through cargo features. c-blosc itself is designed to be built
//! like its CMake build does it: `SHUFFLE_SSE2_ENABLED` + `SHUFFLE_AVX2_ENABLED` everywhere,
//! `-mavx2` only on `shuffle-avx2.c` / `bitshuffle-avx2.c`, and `shuffle.c` picks the
//! implementation from CPUID at run time. That is what this script does, so the binary still
//! runs on any x86-64 CPU while AVX2 machines get the fast shuffle.
//!
//! Codecs: BloscLZ always; LZ4/LZ4HC from `lz4-sys` (a direct dependency, `DEP_LZ4_INCLUDE`);
//! Zlib and Zstd switch on by themselves when `libz-sys` / `zstd-sys` are direct dependencies
//! (their build scripts export `DEP_Z_INCLUDE` / `DEP_ZSTD_INCLUDE`; zstd-sys links the system's
//! libzstd). Snappy is never built
//! (python-blosc and c-blosc's CMake default leave it out too).
//!
//! Our objects define the same symbols as blosc-src's `libblosc.a`; ours are found first
//! because this crate precedes its dependencies on the link line, so blosc-src's archive
//! members are never pulled in (blosc-src stays a dependency as the carrier of the pinned
//! sources and of the FFI declarations). The same holds if another crate of the final binary
//! calls c-blosc through blosc-src: the symbols are already defined by our objects.
//!
//! Environment: `NDFLOW_BLOSC_SRC` = a c-blosc `blosc/` directory to build instead;
//! `NDFLOW_BLOSC_SIMD=sse2|none` leaves out the AVX2 (or every SIMD) shuffle, for A/B timing
//! and for testing the other dispatch targets on an AVX2 machine.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NDFLOW_BLOSC_SRC");
    println!("cargo::rustc-check-cfg=cfg(ndflow_cblosc)");
    println!("cargo::rustc-check-cfg=cfg(ndflow_cblosc_sse2)");
    println!("cargo::rustc-check-cfg=cfg(ndflow_cblosc_avx2)");
    println!("cargo::rustc-check-cfg=cfg(ndflow_cblosc_zlib)");
    println!("cargo::rustc-check-cfg=cfg(ndflow_cblosc_zstd)");

    let src = match find_blosc_sources() {
        Ok(src) => src,
        Err(e) => panic!(
            "ndflow-codec: cannot locate the c-blosc sources of the blosc-src dependency ({e}); \
             run `cargo fetch`, or set NDFLOW_BLOSC_SRC to a c-blosc `blosc/` source directory"
        ),
    };
    println!("cargo:rerun-if-changed={}", src.display());

    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let msvc = env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("msvc");
    let x86 = target_arch == "x86_64" || target_arch == "x86";
    // NDFLOW_BLOSC_SIMD=sse2|none builds without the AVX2 (or any SIMD) shuffle, for A/B
    // measurements and for testing the other dispatch targets on an AVX2 machine.
    println!("cargo:rerun-if-env-changed=NDFLOW_BLOSC_SIMD");
    let simd = env::var("NDFLOW_BLOSC_SIMD").unwrap_or_default();
    let sse2 = x86 && simd != "none";
    let avx2 = sse2 && simd != "sse2";

    let mut main = cc::Build::new();
    main.include(&src).opt_level(3).warnings(false);
    if sse2 {
        main.define("SHUFFLE_SSE2_ENABLED", "1");
        if !msvc && target_arch == "x86" {
            main.flag("-msse2");
        }
        println!("cargo:rustc-cfg=ndflow_cblosc_sse2");
    }
    if avx2 {
        main.define("SHUFFLE_AVX2_ENABLED", "1");
    }
    if let Some(inc) = env::var_os("DEP_LZ4_INCLUDE") {
        main.include(inc).define("HAVE_LZ4", None);
    }
    if let Some(inc) = env::var_os("DEP_Z_INCLUDE") {
        main.include(inc).define("HAVE_ZLIB", None);
        println!("cargo:rustc-cfg=ndflow_cblosc_zlib");
    }
    if let Some(inc) = env::var_os("DEP_ZSTD_INCLUDE") {
        // Empty when zstd-sys found the system's library (its headers are on the default
        // path); one or more paths joined by ';' otherwise.
        for dir in inc.to_string_lossy().split(';').filter(|d| !d.is_empty()) {
            main.include(dir);
        }
        main.define("HAVE_ZSTD", None);
        println!("cargo:rustc-cfg=ndflow_cblosc_zstd");
    }

    let avx2_files = ["shuffle-avx2.c", "bitshuffle-avx2.c"];
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&src) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "c"))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !avx2_files.contains(&name)
            })
            .collect(),
        Err(e) => panic!("ndflow-codec: cannot read {}: {e}", src.display()),
    };
    files.sort();

    if avx2 {
        // Only these two files may contain AVX2 instructions; shuffle.c calls them only after
        // CPUID (and XGETBV) said the CPU and OS support AVX2.
        let mut avx2_build = main.clone();
        avx2_build.flag(if msvc { "/arch:AVX2" } else { "-mavx2" });
        for f in avx2_files {
            avx2_build.file(src.join(f));
        }
        main.objects(avx2_build.compile_intermediates());
        println!("cargo:rustc-cfg=ndflow_cblosc_avx2");
    }
    main.files(&files);
    main.compile("ndflow_cblosc");
    println!("cargo:rustc-cfg=ndflow_cblosc");
}

/// The `c-blosc/blosc` directory of the blosc-src package this crate depends on.
/// `NDFLOW_BLOSC_SRC` overrides. Otherwise `cargo metadata --frozen` says where cargo
/// unpacked the package (registry, vendor directory or git checkout alike); `--frozen` keeps
/// it off the network and off Cargo.lock, so it can neither hang on cargo's download lock
/// nor race the outer build. If it fails (e.g. another workspace member gained a dependency
/// that a `-p ndflow-codec` build did not download), the registry directory for the version
/// recorded in Cargo.lock is used.
fn find_blosc_sources() -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("NDFLOW_BLOSC_SRC") {
        return Ok(PathBuf::from(dir));
    }
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("no CARGO_MANIFEST_DIR")?);
    match from_cargo_metadata(&manifest_dir) {
        Ok(dir) => Ok(dir),
        Err(meta_err) => from_registry(&manifest_dir)
            .ok_or_else(|| format!("{meta_err}; not in the cargo registry either")),
    }
}

fn from_cargo_metadata(manifest_dir: &Path) -> Result<PathBuf, String> {
    let cargo = env::var_os("CARGO").ok_or("CARGO not set")?;
    let target = env::var("TARGET").map_err(|e| format!("TARGET: {e}"))?;
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--frozen",
            "--filter-platform",
        ])
        .arg(&target)
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    if let Some(root) = meta.get("workspace_root").and_then(|v| v.as_str()) {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(root).join("Cargo.lock").display()
        );
    }
    blosc_src_dir(&meta).ok_or_else(|| "blosc-src not found in cargo metadata".to_string())
}

/// `$CARGO_HOME/registry/src/*/blosc-src-<version>/c-blosc/blosc` for the version in the
/// nearest Cargo.lock above this crate.
fn from_registry(manifest_dir: &Path) -> Option<PathBuf> {
    let lock = manifest_dir
        .ancestors()
        .map(|d| d.join("Cargo.lock"))
        .find(|p| p.is_file())?;
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).ok()?;
    let version = text
        .split("[[package]]")
        .find(|pkg| pkg.contains("name = \"blosc-src\""))?
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = \""))?
        .trim_end_matches('"')
        .to_string();
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let registries = std::fs::read_dir(home.join("registry").join("src")).ok()?;
    registries
        .filter_map(|r| r.ok())
        .map(|r| {
            r.path()
                .join(format!("blosc-src-{version}"))
                .join("c-blosc")
                .join("blosc")
        })
        .find(|d| d.join("blosc.c").is_file())
}

/// The resolved blosc-src: the package this crate's resolve node lists as `blosc_src`.
fn blosc_src_dir(meta: &serde_json::Value) -> Option<PathBuf> {
    let me = meta
        .get("resolve")?
        .get("nodes")?
        .as_array()?
        .iter()
        .find(|n| {
            n.get("id")
                .and_then(|id| id.as_str())
                .is_some_and(|id| id.contains("ndflow-codec"))
        })?;
    let dep_id = me
        .get("deps")?
        .as_array()?
        .iter()
        .find(|d| d.get("name").and_then(|n| n.as_str()) == Some("blosc_src"))?
        .get("pkg")?
        .as_str()?;
    let pkg = meta
        .get("packages")?
        .as_array()?
        .iter()
        .find(|p| p.get("id").and_then(|id| id.as_str()) == Some(dep_id))?;
    let pkg_manifest = PathBuf::from(pkg.get("manifest_path")?.as_str()?);
    let dir = pkg_manifest.parent()?.join("c-blosc").join("blosc");
    dir.join("blosc.c").is_file().then_some(dir)
}
