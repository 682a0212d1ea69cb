//! `ndflow vds`: one HDF5 virtual dataset over the files of several writers (scale-out).
//!
//! Each writer of a scale-out set writes its own file with the frames it was given; which
//! frames those are depends on the distribution (round-robin that skips busy writers, or
//! anything else). The uniqueId dataset of every part says where each row belongs, so the
//! master maps frame `uid - first_uid` to its row, whatever the distribution: a missing
//! uniqueId is a gap that reads as the fill value (0) and is reported, never closed up by
//! shifting later frames. The per-frame NDAttributes datasets (uniqueId, timestamps, …) get
//! the same mapping, so a gap also reads as uniqueId 0.
//!
//! Mappings are arithmetic runs: consecutive rows of one part whose frames are equally spaced
//! in the master become one strided hyperslab, so round-robin over N writers costs one mapping
//! per part, not one per frame.
//!
//! Parts still being written with SWMR are opened read-only with SWMR read; the master maps the
//! rows whose uniqueId was already written (the writer flushes the uniqueId last). Frames
//! written later appear when the master is built again.
//!
//! Nothing is written unless every part is readable and agrees on frame shape and type: the
//! master is built under a temporary name next to OUTPUT and renamed at the end.

use std::collections::HashMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use hdf5_metno as h5;
use hdf5_metno::{File, OpenMode, SliceOrIndex};

use super::layout::{string_attr, ATTR_GROUP, DATA_PATH, LINK_PATH};

/// Where the frames and their uniqueIds are in each part (NDFileHDF5's default layout unless a
/// custom XML layout moved them).
#[derive(Debug, Clone)]
pub struct VdsOptions {
    /// The frame dataset, `[frames, …frame dims]`.
    pub data: String,
    /// The group of per-frame attribute datasets (1-D, one row per frame).
    pub attributes: String,
    /// The uniqueId dataset's name inside `attributes`.
    pub unique_id: String,
}

impl Default for VdsOptions {
    fn default() -> Self {
        VdsOptions {
            data: LINK_PATH.to_string(),
            attributes: ATTR_GROUP.to_string(),
            unique_id: "NDArrayUniqueId".to_string(),
        }
    }
}

/// What one part contributed.
#[derive(Debug, Clone)]
pub struct PartSummary {
    pub path: PathBuf,
    /// Rows mapped (rows with a uniqueId).
    pub frames: usize,
    pub first_uid: Option<i64>,
    pub last_uid: Option<i64>,
    /// Opened with SWMR read because a writer still holds it.
    pub swmr: bool,
}

/// A run of missing uniqueIds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub first_uid: i64,
    pub count: u64,
}

/// The master that was written.
#[derive(Debug, Clone)]
pub struct VdsReport {
    pub output: PathBuf,
    /// Frames in the virtual dataset (last_uid - first_uid + 1, gaps included).
    pub frames: u64,
    pub first_uid: i64,
    pub last_uid: i64,
    /// Frames with data (the sum over the parts).
    pub mapped: u64,
    pub gaps: Vec<Gap>,
    pub parts: Vec<PartSummary>,
    /// Hyperslab mappings of the frame dataset.
    pub mappings: usize,
    /// Per-frame attribute datasets mapped beside the frames.
    pub attributes: Vec<String>,
    /// Attribute datasets left out, with the reason.
    pub skipped_attributes: Vec<String>,
}

impl VdsReport {
    /// Frames missing from every part (the sum of the gaps).
    pub fn missing(&self) -> u64 {
        self.gaps.iter().map(|g| g.count).sum()
    }
}

/// Why no master was written.
#[derive(Debug)]
pub enum VdsError {
    NoParts,
    Unreadable {
        path: PathBuf,
        why: String,
    },
    MissingDataset {
        path: PathBuf,
        dataset: String,
    },
    Invalid {
        path: PathBuf,
        what: String,
    },
    Mismatch {
        path: PathBuf,
        what: String,
    },
    Duplicate {
        uid: i64,
        first: String,
        second: String,
    },
    NoFrames,
    Write {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for VdsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VdsError::NoParts => write!(f, "no part files given"),
            VdsError::Unreadable { path, why } => {
                write!(f, "{}: cannot open as HDF5: {why}", path.display())
            }
            VdsError::MissingDataset { path, dataset } => write!(
                f,
                "{}: has no dataset {dataset} (written by another layout? see --data / --unique-id)",
                path.display()
            ),
            VdsError::Invalid { path, what } | VdsError::Mismatch { path, what } => {
                write!(f, "{}: {what}", path.display())
            }
            VdsError::Duplicate { uid, first, second } => {
                write!(f, "uniqueId {uid} is in {first} and in {second}")
            }
            VdsError::NoFrames => write!(f, "no part holds a frame with a uniqueId"),
            VdsError::Write { path, why } => write!(f, "{}: {why}", path.display()),
        }
    }
}

impl std::error::Error for VdsError {}

/// One part, opened and checked.
struct Part {
    path: PathBuf,
    file: File,
    swmr: bool,
    /// `[rows, …frame dims]` of the frame dataset.
    shape: Vec<usize>,
    dtype: h5::Datatype,
    uids: Vec<i64>,
}

fn open_part(path: &Path, opts: &VdsOptions) -> Result<Part, VdsError> {
    let unreadable = |e: h5::Error| VdsError::Unreadable {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    if !path.is_file() {
        return Err(VdsError::Unreadable {
            path: path.to_path_buf(),
            why: "no such file".into(),
        });
    }
    // A file a SWMR writer still holds opens only with SWMR read; a closed one either way.
    let (file, swmr) = match File::open(path) {
        Ok(f) => (f, false),
        Err(first) => match File::open_as(path, OpenMode::ReadSWMR) {
            Ok(f) => (f, true),
            Err(_) => return Err(unreadable(first)),
        },
    };
    let missing = |dataset: &str| VdsError::MissingDataset {
        path: path.to_path_buf(),
        dataset: dataset.to_string(),
    };
    let data = file.dataset(&opts.data).map_err(|_| missing(&opts.data))?;
    let shape = data.shape();
    if shape.len() < 2 {
        return Err(VdsError::Invalid {
            path: path.to_path_buf(),
            what: format!(
                "{} has shape {shape:?}: expected [frames, …frame dims]",
                opts.data
            ),
        });
    }
    let dtype = data.dtype().map_err(unreadable)?;
    let uid_path = format!("{}/{}", opts.attributes, opts.unique_id);
    let uid_ds = file.dataset(&uid_path).map_err(|_| missing(&uid_path))?;
    if uid_ds.ndim() != 1 {
        return Err(VdsError::Invalid {
            path: path.to_path_buf(),
            what: format!(
                "{uid_path} has shape {:?}: expected one uniqueId per frame (files with extra \
                 dimensions cannot be stitched)",
                uid_ds.shape()
            ),
        });
    }
    let mut uids: Vec<i64> = uid_ds.read_raw::<i64>().map_err(unreadable)?;
    // Rows whose frame is not in the data yet (a writer between the two writes) wait.
    uids.truncate(shape[0]);
    Ok(Part {
        path: path.to_path_buf(),
        file,
        swmr,
        shape,
        dtype,
        uids,
    })
}

/// A run of rows `src..src+count` of one part going to master frames `dest, dest+stride, …`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    part: usize,
    src: usize,
    dest: u64,
    stride: u64,
    count: usize,
}

/// Cuts a part's destinations into arithmetic runs (greedy, in row order).
fn runs(part: usize, dest: &[u64]) -> Vec<Run> {
    let mut out = Vec::new();
    let mut r = 0;
    while r < dest.len() {
        let d0 = dest[r];
        let mut count = 1;
        let mut stride = 1;
        if r + 1 < dest.len() && dest[r + 1] > d0 {
            stride = dest[r + 1] - d0;
            count = 2;
            while r + count < dest.len() && dest[r + count] == d0 + count as u64 * stride {
                count += 1;
            }
        }
        out.push(Run {
            part,
            src: r,
            dest: d0,
            stride,
            count,
        });
        r += count;
    }
    out
}

/// Runs of missing values in sorted, distinct uniqueIds.
fn gaps(sorted: &[i64]) -> Vec<Gap> {
    sorted
        .windows(2)
        .filter(|w| w[1] - w[0] > 1)
        .map(|w| Gap {
            first_uid: w[0] + 1,
            count: (w[1] - w[0] - 1) as u64,
        })
        .collect()
}

/// The name a mapping records for `part`: relative to the master's directory when the part is
/// below it (HDF5 looks for relative sources next to the master, so the set can be moved as a
/// whole), else absolute.
fn source_name(master_dir: &Path, part: &Path) -> Result<String, VdsError> {
    let abs = part.canonicalize().map_err(|e| VdsError::Unreadable {
        path: part.to_path_buf(),
        why: e.to_string(),
    })?;
    let rel = abs.strip_prefix(master_dir).ok().filter(|r| {
        r.components().all(|c| matches!(c, Component::Normal(_))) && r.iter().next().is_some()
    });
    let chosen = rel.unwrap_or(&abs);
    chosen
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| VdsError::Invalid {
            path: part.to_path_buf(),
            what: "the path is not valid UTF-8".into(),
        })
}

fn slab(first: SliceOrIndex, rest: &[usize]) -> h5::Hyperslab {
    let mut s = vec![first];
    s.extend(rest.iter().map(|&n| SliceOrIndex::SliceCount {
        start: 0,
        step: 1,
        count: n,
        block: 1,
    }));
    h5::Hyperslab::from(s)
}

/// Builds the master file `output` over `parts`. See the module docs.
pub fn build_vds(
    output: &Path,
    parts: &[PathBuf],
    opts: &VdsOptions,
) -> Result<VdsReport, VdsError> {
    if parts.is_empty() {
        return Err(VdsError::NoParts);
    }
    let opened: Vec<Part> = parts
        .iter()
        .map(|p| open_part(p, opts))
        .collect::<Result<_, _>>()?;
    let first = &opened[0];
    for p in &opened[1..] {
        if p.shape[1..] != first.shape[1..] {
            return Err(VdsError::Mismatch {
                path: p.path.clone(),
                what: format!(
                    "frames are {:?}, but {} has {:?}",
                    &p.shape[1..],
                    first.path.display(),
                    &first.shape[1..]
                ),
            });
        }
        let same = match (p.dtype.to_descriptor(), first.dtype.to_descriptor()) {
            (Ok(a), Ok(b)) => a == b,
            _ => p.dtype == first.dtype,
        };
        if !same {
            return Err(VdsError::Mismatch {
                path: p.path.clone(),
                what: format!(
                    "frame type {} differs from {}'s {}",
                    describe(&p.dtype),
                    first.path.display(),
                    describe(&first.dtype)
                ),
            });
        }
    }
    // Every uniqueId once, across all parts.
    let mut seen: HashMap<i64, (usize, usize)> = HashMap::new();
    for (pi, p) in opened.iter().enumerate() {
        for (row, &uid) in p.uids.iter().enumerate() {
            if let Some(&(qi, qrow)) = seen.get(&uid) {
                return Err(VdsError::Duplicate {
                    uid,
                    first: format!("{} row {qrow}", opened[qi].path.display()),
                    second: format!("{} row {row}", p.path.display()),
                });
            }
            seen.insert(uid, (pi, row));
        }
    }
    let mut all: Vec<i64> = seen.keys().copied().collect();
    if all.is_empty() {
        return Err(VdsError::NoFrames);
    }
    all.sort_unstable();
    let (first_uid, last_uid) = (all[0], all[all.len() - 1]);
    let frames = (last_uid - first_uid) as u64 + 1;
    let gaps = gaps(&all);

    let mut all_runs = Vec::new();
    for (pi, p) in opened.iter().enumerate() {
        let dest: Vec<u64> = p.uids.iter().map(|&u| (u - first_uid) as u64).collect();
        all_runs.extend(runs(pi, &dest));
    }
    let (attributes, skipped_attributes) = attribute_datasets(&opened, opts);

    let master_dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()
        .map_err(|e| VdsError::Write {
            path: output.to_path_buf(),
            why: format!("its directory: {e}"),
        })?;
    let names: Vec<String> = opened
        .iter()
        .map(|p| source_name(&master_dir, &p.path))
        .collect::<Result<_, _>>()?;
    let file_name = output
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| VdsError::Write {
            path: output.to_path_buf(),
            why: "not a file name".into(),
        })?;
    let temp = master_dir.join(format!(".{file_name}.partial"));
    let plan = Plan {
        opened: &opened,
        names: &names,
        runs: &all_runs,
        frames: frames as usize,
        first_uid,
        missing: gaps.iter().map(|g| g.count).sum(),
        attributes: &attributes,
        opts,
    };
    let written = write_master(&temp, &plan).and_then(|()| {
        std::fs::rename(&temp, output).map_err(|e| h5::Error::from(e.to_string().as_str()))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(VdsError::Write {
            path: output.to_path_buf(),
            why: e.to_string(),
        });
    }
    let parts = opened
        .iter()
        .map(|p| PartSummary {
            path: p.path.clone(),
            frames: p.uids.len(),
            first_uid: p.uids.iter().min().copied(),
            last_uid: p.uids.iter().max().copied(),
            swmr: p.swmr,
        })
        .collect();
    Ok(VdsReport {
        output: output.to_path_buf(),
        frames,
        first_uid,
        last_uid,
        mapped: all.len() as u64,
        gaps,
        parts,
        mappings: all_runs.len(),
        attributes,
        skipped_attributes,
    })
}

fn describe(t: &h5::Datatype) -> String {
    match t.to_descriptor() {
        Ok(d) => format!("{d:?}"),
        Err(_) => "(unknown)".into(),
    }
}

/// The per-frame attribute datasets every part has, 1-D, with a row per mapped frame and the
/// same type; the others are listed with the reason they were left out.
fn attribute_datasets(parts: &[Part], opts: &VdsOptions) -> (Vec<String>, Vec<String>) {
    let names = match parts[0].file.group(&opts.attributes) {
        Ok(g) => g.member_names().unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let mut keep = Vec::new();
    let mut skipped = Vec::new();
    for name in names {
        let path = format!("{}/{name}", opts.attributes);
        let mut first_type: Option<h5::Datatype> = None;
        let mut why = None;
        for p in parts {
            let Ok(ds) = p.file.dataset(&path) else {
                why = Some(format!("not in {}", p.path.display()));
                break;
            };
            if ds.ndim() != 1 || ds.shape()[0] < p.uids.len() {
                why = Some(format!("not one value per frame in {}", p.path.display()));
                break;
            }
            match (ds.dtype(), &first_type) {
                (Ok(t), None) => first_type = Some(t),
                (Ok(t), Some(f)) if &t == f => {}
                _ => {
                    why = Some(format!("another type in {}", p.path.display()));
                    break;
                }
            }
        }
        match why {
            None => keep.push(name),
            Some(w) => skipped.push(format!("{name}: {w}")),
        }
    }
    // The uniqueId first: it is the one readers look for gaps in.
    keep.sort_by_key(|n| *n != opts.unique_id);
    (keep, skipped)
}

struct Plan<'a> {
    opened: &'a [Part],
    names: &'a [String],
    runs: &'a [Run],
    frames: usize,
    first_uid: i64,
    missing: u64,
    attributes: &'a [String],
    opts: &'a VdsOptions,
}

/// One virtual dataset over `source` (a dataset path in every part) with per-frame shape `rest`.
fn virtual_dataset(
    group: &h5::Group,
    name: &str,
    plan: &Plan<'_>,
    source: &str,
    dtype: &h5::Datatype,
    rest: &[usize],
) -> h5::Result<h5::Dataset> {
    let mut shape = vec![plan.frames];
    shape.extend_from_slice(rest);
    let mut b = group
        .new_dataset_builder()
        .empty_as(dtype)
        .shape(shape.clone());
    for run in plan.runs {
        let part = &plan.opened[run.part];
        let src_ds = part.file.dataset(source)?;
        let src_shape = src_ds.shape();
        let src = slab(
            SliceOrIndex::SliceCount {
                start: run.src,
                step: 1,
                count: run.count,
                block: 1,
            },
            rest,
        );
        let dst = slab(
            SliceOrIndex::SliceCount {
                start: run.dest as usize,
                step: run.stride as usize,
                count: run.count,
                block: 1,
            },
            rest,
        );
        b = b.virtual_map(
            &plan.names[run.part],
            source,
            src_shape,
            src,
            shape.clone(),
            dst,
        );
    }
    b.create(name)
}

fn write_master(path: &Path, plan: &Plan<'_>) -> h5::Result<()> {
    let file = File::create(path)?;
    string_attr(&file, "default", "entry")?;
    let group = |parent: &h5::Group, name: &str, class: &str| -> h5::Result<h5::Group> {
        let g = parent.create_group(name)?;
        string_attr(&g, "NX_class", class)?;
        Ok(g)
    };
    let entry = group(&file, "entry", "NXentry")?;
    string_attr(&entry, "default", "data")?;
    let instrument = group(&entry, "instrument", "NXinstrument")?;
    let detector = group(&instrument, "detector", "NXdetector")?;
    let first = &plan.opened[0];
    let rest = &first.shape[1..];
    let data = virtual_dataset(&detector, "data", plan, &plan.opts.data, &first.dtype, rest)?;
    data.new_attr::<i32>().create("signal")?.write_scalar(&1)?;
    data.new_attr::<i64>()
        .create("first_unique_id")?
        .write_scalar(&plan.first_uid)?;
    data.new_attr::<i64>()
        .create("missing_frames")?
        .write_scalar(&(plan.missing as i64))?;
    let parts: Vec<&str> = plan.names.iter().map(String::as_str).collect();
    string_attr(&data, "parts", &parts.join("\n"))?;
    if !plan.attributes.is_empty() {
        // Created with its parents, wherever the parts keep their attributes.
        let rel = plan.opts.attributes.trim_start_matches('/');
        let attrs = if plan.opts.attributes == ATTR_GROUP {
            group(&instrument, "NDAttributes", "NXcollection")?
        } else {
            file.create_group(rel)?
        };
        for name in plan.attributes {
            let source = format!("{}/{name}", plan.opts.attributes);
            let dtype = first.file.dataset(&source)?.dtype()?;
            virtual_dataset(&attrs, name, plan, &source, &dtype, &[])?;
        }
    }
    let nxdata = group(&entry, "data", "NXdata")?;
    string_attr(&nxdata, "signal", "data")?;
    nxdata.link_hard(DATA_PATH, "data")?;
    file.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_is_one_run_per_part() {
        // Part 1 of 3 round-robin writers: frames 1, 4, 7, 10.
        let r = runs(1, &[1, 4, 7, 10]);
        assert_eq!(
            r,
            vec![Run {
                part: 1,
                src: 0,
                dest: 1,
                stride: 3,
                count: 4
            }]
        );
    }

    #[test]
    fn irregular_rows_split_into_runs() {
        let r = runs(0, &[0, 1, 2, 5, 8, 9, 3]);
        let got: Vec<(usize, u64, u64, usize)> = r
            .iter()
            .map(|r| (r.src, r.dest, r.stride, r.count))
            .collect();
        assert_eq!(
            got,
            vec![(0, 0, 1, 3), (3, 5, 3, 2), (5, 9, 1, 1), (6, 3, 1, 1)]
        );
        // Every row is in exactly one run.
        assert_eq!(r.iter().map(|r| r.count).sum::<usize>(), 7);
    }

    #[test]
    fn gaps_are_the_missing_uids() {
        assert_eq!(
            gaps(&[3, 4, 6, 10]),
            vec![
                Gap {
                    first_uid: 5,
                    count: 1
                },
                Gap {
                    first_uid: 7,
                    count: 3
                }
            ]
        );
        assert!(gaps(&[1, 2, 3]).is_empty());
    }
}
