//! The bodies of ndflow's fuzz targets: one function per target, each taking the fuzzer's
//! bytes and feeding them to a real decoder — every decoder that reads bytes from the network
//! or from a file. None may panic, whatever the input; errors are the expected outcome for
//! most inputs and are ignored.
//!
//! Two drivers call these functions:
//! * `fuzz/` (cargo-fuzz, libFuzzer, nightly): one `fuzz_targets/<name>.rs` per function,
//!   coverage-guided, run long by `scripts/fuzz.sh`;
//! * `tests/smoke.rs` (stable, part of `cargo test`): every function over its seed corpus
//!   (`fuzz/corpus/<name>/`) plus a fixed number of seeded random mutations.
//!
//! [`TARGETS`] lists them by name; the name is also the fuzz target's and the corpus folder's.
//!
//! Memory stays bounded for every input: output buffers whose size the input declares are
//! capped at [`MAX_OUT`], and frame pools at [`MAX_POOL`].

pub mod ca;
pub mod codec;
pub mod files;
pub mod pva;

/// Largest output buffer a target allocates from a size the input declares.
pub const MAX_OUT: usize = 4 << 20;
/// Memory cap of the frame pools the file and stream decoders allocate from.
pub const MAX_POOL: usize = 16 << 20;

/// A fuzz target: its name (cargo-fuzz target and corpus folder) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, network-facing first.
pub const TARGETS: &[Target] = &[
    ("pva_server", pva::server),
    ("pva_server_cmd", pva::server_cmd),
    ("pva_datagram", pva::datagram),
    ("pva_client", pva::client),
    ("pva_wire", pva::wire),
    ("ca_server", ca::server),
    ("ca_server_cmd", ca::server_cmd),
    ("ca_datagram", ca::datagram),
    ("ca_client", ca::client),
    ("ca_dbr", ca::dbr),
    ("eiger_stream", files::eiger_stream),
    ("codec_lz4", codec::lz4),
    ("codec_bslz4", codec::bslz4),
    ("codec_blosc", codec::blosc),
    ("codec_zlib", codec::zlib),
    ("codec_jpeg", codec::jpeg),
    ("codec_bitshuffle", codec::bitshuffle),
    ("tiff_read", files::tiff_read),
    ("hdf5_layout", files::hdf5_layout),
    ("ndattr_xml", files::ndattr_xml),
    ("config_toml", files::config_toml),
    ("genicam_xml", files::genicam_xml),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Splits `data` into records `[tag: u8][len: u16 BE][len bytes]` (the last record takes what
/// is left when fewer bytes remain): the input format of the targets that choose a command per
/// message, so that every mutation still reaches a command handler with a well-formed frame.
pub fn records(mut data: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = data.split_first() {
        let (len, rest) = match rest {
            [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])), rest),
            _ => (0, &[][..]),
        };
        let (body, rest) = rest.split_at(len.min(rest.len()));
        out.push((tag, body));
        data = rest;
    }
    out
}

/// Encodes records for [`records`] (the corpus generator's side).
pub fn encode_record(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
    out.push(tag);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body[..usize::from(len)]);
}

/// `n` read big-endian from the first bytes of `b` (missing bytes are zero).
fn be(b: &[u8], n: usize) -> u64 {
    (0..n).fold(0, |acc, i| {
        (acc << 8) | u64::from(b.get(i).copied().unwrap_or(0))
    })
}
