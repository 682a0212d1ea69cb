//! NDPosPlugin: scan positions attached to frames as attributes, for NDFileHDF5's position
//! mode (PosNameDim*).
//!
//! The position list is areaDetector's XML:
//! `<pos_layout><dimensions><dimension name="x"/>…</dimensions><positions><position x="0"/>…
//! </positions></pos_layout>`. Writing Filename loads a file, or, when the text contains
//! `<pos_layout`, the XML itself; each load is appended to the list (FileValid_RBV = Yes), a
//! bad one appends nothing (FileValid_RBV = No, the reason in the log). Delete empties the
//! list; Reset goes back to its first position (Keep mode).
//!
//! While Running, each frame gets the next position: one Int32 attribute per dimension,
//! shown in Position_RBV as `[x=1,y=0]`. Discard mode pops it (Qty_RBV falls); Keep mode
//! advances Index_RBV, so the list can be replayed. Frame-ID tracking: the frame's ID
//! (uniqueId, or the attribute IDName) is compared with ExpectedID_RBV, which starts at IDStart
//! when Running is set and goes up by IDDifference per position: a larger ID means frames
//! went missing, and their positions are skipped (Missing counts them) so that this frame
//! still gets its own; a smaller ID is a duplicate (Duplicate counts it) and the frame is
//! not passed on. When the positions run out Running returns to Idle (its busy put
//! completes). Frames are not passed on while Idle, as ADCore.
//!
//! Deviations: in Keep mode Running returns to Idle as soon as the last position has been
//! used (ADCore waits for one more frame); a frame without the IDName attribute stops the
//! run and is counted as an error with the attribute's name.

use std::collections::VecDeque;
use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

use crate::attribute::attribute_value;

pub const POS_PARAMS: &[ParamDef] = &[
    ParamDef::string("Filename", "")
        .long_string()
        .doc("Position XML file, or the XML text itself; each write appends its positions"),
    ParamDef::enumeration("FileValid", &["No", "Yes"], 0)
        .read_only()
        .doc("Whether the last Filename write loaded"),
    ParamDef::enumeration("Running", &["Idle", "Running"], 0)
        .busy()
        .doc("Attach positions; completes when they run out"),
    ParamDef::enumeration("Reset", &["", ""], 0).doc("Back to the first position (Keep mode)"),
    ParamDef::enumeration("Delete", &["", ""], 0).doc("Empty the position list"),
    ParamDef::enumeration("Mode", &["Discard", "Keep"], 0)
        .doc("Discard used positions, or keep them (Index advances)"),
    ParamDef::int32("Qty", 0)
        .read_only()
        .doc("Positions in the list"),
    ParamDef::int32("Index", 0)
        .read_only()
        .doc("Index of the next position (Keep mode; 0 in Discard)"),
    ParamDef::string("Position", "")
        .read_only()
        .doc("The last position attached, e.g. [x=1,y=0]"),
    ParamDef::int32("Missing", 0).doc("Frames found missing (ID above ExpectedID)"),
    ParamDef::int32("Duplicate", 0).doc("Frames dropped as duplicates (ID below ExpectedID)"),
    ParamDef::int32("ExpectedID", 1)
        .read_only()
        .doc("ID the next frame should carry"),
    ParamDef::string("IDName", "").doc("Attribute holding the frame ID; empty: the uniqueId"),
    ParamDef::int32("IDStart", 1).doc("ExpectedID when Running is set"),
    ParamDef::int32("IDDifference", 1)
        .min(1.0)
        .doc("ID step from one frame to the next"),
];

/// One position: (dimension name, index), sorted by name.
pub type Position = Vec<(String, i32)>;

/// Parses areaDetector's position XML; errors name the element or attribute at fault.
pub fn parse_positions(xml: &str) -> Result<Vec<Position>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "pos_layout" {
        return Err(format!(
            "root element is <{}>, expected <pos_layout>",
            root.tag_name().name()
        ));
    }
    let child = |name: &str| root.children().find(|n| n.has_tag_name(name));
    let mut dims = Vec::new();
    for d in child("dimensions")
        .into_iter()
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("dimension")))
    {
        let name = d
            .attribute("name")
            .filter(|s| !s.is_empty())
            .ok_or("a <dimension> has no name")?;
        dims.push(name.to_string());
    }
    if dims.is_empty() {
        return Err("no <dimension name=...> in <dimensions>".into());
    }
    let mut out = Vec::new();
    for (k, p) in child("positions")
        .into_iter()
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("position")))
        .enumerate()
    {
        let mut pos = Vec::with_capacity(dims.len());
        for d in &dims {
            let text = p
                .attribute(d.as_str())
                .ok_or_else(|| format!("position {} has no '{d}'", k + 1))?;
            let v = text
                .trim()
                .parse::<i32>()
                .map_err(|_| format!("position {}: {d}=\"{text}\" is not an integer", k + 1))?;
            pos.push((d.clone(), v));
        }
        pos.sort();
        out.push(pos);
    }
    Ok(out)
}

/// Filename's text: inline XML or a file to read.
fn load(text: &str) -> Result<Vec<Position>, String> {
    if text.contains("<pos_layout") {
        return parse_positions(text);
    }
    if text.trim().is_empty() {
        return Err("Filename is empty".into());
    }
    let xml = std::fs::read_to_string(text).map_err(|e| format!("cannot read {text}: {e}"))?;
    parse_positions(&xml).map_err(|e| format!("{text}: {e}"))
}

#[derive(Debug)]
struct Ix {
    filename: usize,
    valid: usize,
    running: usize,
    reset: usize,
    delete: usize,
    mode: usize,
    qty: usize,
    index: usize,
    position: usize,
    missing: usize,
    duplicate: usize,
    expected: usize,
    id_name: usize,
    id_start: usize,
    id_diff: usize,
}

/// NDPosPlugin. Serial: positions follow the input order.
#[derive(Debug, Default)]
pub struct PosPlugin {
    ix: Resolved<Ix>,
    positions: Mutex<VecDeque<Position>>,
}

impl PosPlugin {
    pub fn new() -> PosPlugin {
        PosPlugin::default()
    }

    fn ix(&self, p: &ParamStore) -> Result<&Ix, PluginError> {
        self.ix.get_or_resolve(|| {
            let i = |n: &str| param_index(p, "NDPosPlugin", n);
            Ok(Ix {
                filename: i("Filename")?,
                valid: i("FileValid")?,
                running: i("Running")?,
                reset: i("Reset")?,
                delete: i("Delete")?,
                mode: i("Mode")?,
                qty: i("Qty")?,
                index: i("Index")?,
                position: i("Position")?,
                missing: i("Missing")?,
                duplicate: i("Duplicate")?,
                expected: i("ExpectedID")?,
                id_name: i("IDName")?,
                id_start: i("IDStart")?,
                id_diff: i("IDDifference")?,
            })
        })
    }

    /// Positions in the list (tests).
    pub fn positions(&self) -> Vec<Position> {
        self.positions.lock().iter().cloned().collect()
    }
}

fn position_text(pos: &Position) -> String {
    let parts: Vec<String> = pos.iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!("[{}]", parts.join(","))
}

impl Plugin for PosPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPosPlugin"
    }

    fn params(&self) -> &'static [ParamDef] {
        POS_PARAMS
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let Ok(ix) = self.ix(p) else {
            return;
        };
        let on = value.as_i64().unwrap_or(0) != 0;
        let mut list = self.positions.lock();
        if idx == ix.filename {
            match load(&p.get_str(ix.filename)) {
                Ok(new) => {
                    list.extend(new);
                    p.set_many(&[(ix.valid, 1.into()), (ix.qty, list.len().into())]);
                }
                Err(e) => {
                    tracing::warn!("NDPosPlugin: position list not loaded: {e}");
                    let _ = p.set(ix.valid, 0);
                }
            }
        } else if idx == ix.running && on {
            // As ADCore, an empty list is found out by the next frame (a list loaded before
            // it is used), which then sets Running back to Idle.
            let _ = p.set(ix.expected, p.get_i64(ix.id_start));
        } else if idx == ix.mode || (idx == ix.reset && on) {
            let mut w = vec![(ix.index, ParamValue::from(0))];
            if idx == ix.reset {
                w.push((ix.position, "".into()));
            }
            p.set_many(&w);
        } else if idx == ix.delete && on {
            list.clear();
            p.set_many(&[
                (ix.index, 0.into()),
                (ix.position, "".into()),
                (ix.qty, 0.into()),
            ]);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let p = ctx.params;
        let ix = self.ix(p)?;
        let mut list = self.positions.lock();
        if p.get_i64(ix.running) == 0 {
            return Ok(());
        }
        let keep = p.get_i64(ix.mode) == 1;
        let mut index = if keep {
            p.get_i64(ix.index).max(0) as usize
        } else {
            0
        };
        let stop = |p: &ParamStore| {
            let _ = p.set(ix.running, 0);
        };
        if index >= list.len() {
            stop(p);
            return Ok(());
        }
        let id_name = p.get_str(ix.id_name);
        let id = if id_name.is_empty() {
            input.unique_id as i64
        } else {
            match attribute_value(input, &id_name) {
                Some(v) => v as i64,
                None => {
                    stop(p);
                    return Err(PluginError::Other(format!(
                        "NDPosPlugin: frame {} has no numeric attribute '{id_name}' (IDName)",
                        input.unique_id
                    )));
                }
            }
        };
        let step = p.get_i64(ix.id_diff).max(1);
        let mut expected = p.get_i64(ix.expected);
        let mut writes = Vec::new();
        if expected < id {
            // Frames went missing: skip their positions.
            let mut missing = p.get_i64(ix.missing);
            while expected < id && index < list.len() {
                if keep {
                    index += 1;
                } else {
                    list.pop_front();
                }
                expected += step;
                missing += 1;
            }
            writes.push((ix.missing, ParamValue::from(missing)));
        } else if expected > id {
            let dup = p.get_i64(ix.duplicate) + 1;
            p.set_many(&[(ix.duplicate, ParamValue::from(dup))]);
            return Ok(());
        }
        let Some(pos) = list.get(index).cloned() else {
            writes.extend([
                (ix.expected, ParamValue::from(expected)),
                (ix.qty, list.len().into()),
                (ix.index, index.into()),
                (ix.running, 0.into()),
            ]);
            p.set_many(&writes);
            return Ok(());
        };
        let mut out = NDArray::clone(input);
        for (name, v) in &pos {
            let mut a = NDAttribute::new(name.clone(), "Position of NDArray", AttrValue::Int32(*v));
            a.source = "NDPosPlugin".into();
            out.set_attribute(a);
        }
        if keep {
            index += 1;
        } else {
            list.pop_front();
        }
        expected += step;
        let done = if keep {
            index >= list.len()
        } else {
            list.is_empty()
        };
        writes.extend([
            (ix.position, position_text(&pos).into()),
            (ix.expected, ParamValue::from(expected)),
            (ix.qty, list.len().into()),
            (ix.index, index.into()),
        ]);
        if done {
            writes.push((ix.running, 0.into()));
        }
        drop(list);
        p.set_many(&writes);
        ctx.emit(out);
        Ok(())
    }
}
