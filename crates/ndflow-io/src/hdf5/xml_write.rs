//! Building a file from an XML [`Layout`]: groups, constant datasets, HDF5 attributes
//! (OnFileOpen now, OnFileClose from the last frame), hardlinks. Detector datasets are made
//! by the caller's `make_detector` (same type, chunks and filters as the default layout);
//! NDAttribute datasets by [`AttributeColumns`](super::attributes::AttributeColumns).

use hdf5_metno as h5;
use hdf5_metno::types::VarLenUnicode;
use ndflow_core::{AttrValue, NDAttribute};

use super::layout::string_attr;
use super::xml_layout::{walk, Attr, Constant, DatasetSource, Group, Item, Layout, Source, When};

/// The objects made from a layout that the writer needs later.
pub(crate) struct Built {
    /// Detector datasets (name, dataset), the default first.
    pub detectors: Vec<(String, h5::Dataset)>,
}

fn group_at(file: &h5::File, path: &str) -> h5::Result<h5::Group> {
    if path.is_empty() || path == "/" {
        file.group("/")
    } else {
        file.group(path)
    }
}

/// The group holding `path` ("/a/b/c" → "/a/b") and the last name.
pub(crate) fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some(("", name)) => ("/", name),
        Some((g, name)) => (g, name),
        None => ("/", path),
    }
}

/// Creates groups, constant datasets, detector datasets and OnFileOpen attributes of groups.
/// Dataset attributes and hardlinks come later ([`finish_open`]) when every dataset exists.
pub(crate) fn build(
    file: &h5::File,
    layout: &Layout,
    first: &[NDAttribute],
    make_detector: &dyn Fn(&h5::Group, &str) -> h5::Result<h5::Dataset>,
) -> h5::Result<Built> {
    let mut built = Built {
        detectors: Vec::new(),
    };
    let root = file.group("/")?;
    build_group(&root, &layout.root, first, make_detector, &mut built)?;
    // The default detector dataset first (detector_paths puts it there).
    let order = layout.detector_paths();
    let name_of = |p: &String| split(p).1.to_string();
    built.detectors.sort_by_key(|(n, _)| {
        order
            .iter()
            .position(|p| name_of(p) == *n)
            .unwrap_or(usize::MAX)
    });
    Ok(built)
}

fn build_group(
    g: &h5::Group,
    spec: &Group,
    first: &[NDAttribute],
    make_detector: &dyn Fn(&h5::Group, &str) -> h5::Result<h5::Dataset>,
    built: &mut Built,
) -> h5::Result<()> {
    write_attrs(g, &spec.attrs, When::OnFileOpen, first)?;
    for item in &spec.items {
        match item {
            Item::Group(c) => {
                let child = g.create_group(&c.name)?;
                build_group(&child, c, first, make_detector, built)?;
            }
            Item::Dataset(d) => match &d.source {
                DatasetSource::Detector { .. } => {
                    let ds = make_detector(g, &d.name)?;
                    built.detectors.push((d.name.clone(), ds));
                }
                DatasetSource::Constant(c) => constant_dataset(g, &d.name, c)?,
                // Made by the attribute columns and the performance writer.
                DatasetSource::NdAttribute(_) | DatasetSource::Performance => {}
            },
            Item::Hardlink { .. } => {}
        }
    }
    Ok(())
}

fn constant_dataset(g: &h5::Group, name: &str, c: &Constant) -> h5::Result<()> {
    match c {
        Constant::Int(v) if v.len() == 1 => {
            g.new_dataset::<i32>().create(name)?.write_scalar(&v[0])
        }
        Constant::Float(v) if v.len() == 1 => {
            g.new_dataset::<f64>().create(name)?.write_scalar(&v[0])
        }
        Constant::Int(v) => g.new_dataset_builder().with_data(v).create(name).map(drop),
        Constant::Float(v) => g.new_dataset_builder().with_data(v).create(name).map(drop),
        Constant::Str(s) => {
            let text: String = s.chars().filter(|&c| c != '\0').collect();
            let v: VarLenUnicode = text
                .parse()
                .map_err(|e| h5::Error::from(format!("constant {name}: {e}")))?;
            g.new_dataset::<VarLenUnicode>()
                .create(name)?
                .write_scalar(&v)
        }
    }
}

/// Writes the attributes of `when` on `loc`; an NDAttribute the frame lacks is skipped.
fn write_attrs(
    loc: &h5::Location,
    attrs: &[Attr],
    when: When,
    frame: &[NDAttribute],
) -> h5::Result<()> {
    for a in attrs.iter().filter(|a| a.when == when) {
        // An OnFileClose value replaces an earlier one of the same name.
        if loc.attr(&a.name).is_ok() {
            loc.delete_attr(&a.name)?;
        }
        match &a.source {
            Source::Constant(Constant::Str(s)) => string_attr(loc, &a.name, s)?,
            Source::Constant(Constant::Int(v)) => scalar_attr(loc, &a.name, v.first().copied())?,
            Source::Constant(Constant::Float(v)) => scalar_attr(loc, &a.name, v.first().copied())?,
            Source::NdAttribute(n) => match frame.iter().find(|x| x.name == *n).map(|x| &x.value) {
                Some(AttrValue::String(s)) => string_attr(loc, &a.name, s)?,
                Some(AttrValue::Float32(x)) => scalar_attr(loc, &a.name, Some(*x))?,
                Some(AttrValue::Float64(x)) => scalar_attr(loc, &a.name, Some(*x))?,
                Some(AttrValue::UInt64(x)) => scalar_attr(loc, &a.name, Some(*x))?,
                Some(AttrValue::Undefined) | None => {}
                Some(v) => scalar_attr(loc, &a.name, v.as_f64().map(|x| x as i64))?,
            },
        }
    }
    Ok(())
}

fn scalar_attr<T: h5::H5Type>(loc: &h5::Location, name: &str, v: Option<T>) -> h5::Result<()> {
    match v {
        Some(v) => loc.new_attr::<T>().create(name)?.write_scalar(&v),
        None => Ok(()),
    }
}

/// Every dataset and group attribute of `when`, found by path.
fn attrs_at(file: &h5::File, layout: &Layout, when: When, frame: &[NDAttribute]) -> h5::Result<()> {
    let mut todo: Vec<(String, bool, Vec<Attr>)> =
        vec![("/".into(), false, layout.root.attrs.clone())];
    walk(&layout.root, "", &mut |path, item| match item {
        Item::Group(g) if when == When::OnFileClose => {
            todo.push((path.to_string(), false, g.attrs.clone()))
        }
        Item::Dataset(d) if !d.attrs.is_empty() => {
            todo.push((path.to_string(), true, d.attrs.clone()))
        }
        _ => {}
    });
    for (path, is_dataset, attrs) in todo {
        if !attrs.iter().any(|a| a.when == when) {
            continue;
        }
        if is_dataset {
            // A dataset the writer did not make (StoreAttr = No) has nowhere to hold them.
            if let Ok(ds) = file.dataset(&path) {
                write_attrs(&ds, &attrs, when, frame)?;
            }
        } else if when == When::OnFileClose {
            let g = group_at(file, &path)?;
            write_attrs(&g, &attrs, when, frame)?;
        }
    }
    Ok(())
}

/// After every dataset exists: OnFileOpen dataset attributes, then the hardlinks.
pub(crate) fn finish_open(
    file: &h5::File,
    layout: &Layout,
    first: &[NDAttribute],
) -> h5::Result<()> {
    attrs_at(file, layout, When::OnFileOpen, first)?;
    let mut links = Vec::new();
    walk(&layout.root, "", &mut |path, item| {
        if let Item::Hardlink { target, .. } = item {
            links.push((path.to_string(), target.clone()));
        }
    });
    for (path, target) in links {
        let (parent, name) = split(&path);
        // A target the writer did not make (an NDAttribute dataset with StoreAttr = No)
        // is reported, not skipped: the layout promised it.
        group_at(file, parent)?
            .link_hard(&target, name)
            .map_err(|e| h5::Error::from(format!("hardlink {path} -> {target}: {e}")))?;
    }
    Ok(())
}

/// At close: OnFileClose attributes from the last frame's NDAttributes.
pub(crate) fn finish_close(
    file: &h5::File,
    layout: &Layout,
    last: &[NDAttribute],
) -> h5::Result<()> {
    attrs_at(file, layout, When::OnFileClose, last)
}

/// Whether anything is written at close from the last frame.
pub(crate) fn has_close_attrs(layout: &Layout) -> bool {
    let mut any = layout
        .root
        .attrs
        .iter()
        .any(|a| a.when == When::OnFileClose);
    walk(&layout.root, "", &mut |_, item| {
        let attrs = match item {
            Item::Group(g) => &g.attrs,
            Item::Dataset(d) => &d.attrs,
            Item::Hardlink { .. } => return,
        };
        any |= attrs.iter().any(|a| a.when == When::OnFileClose);
    });
    any
}
