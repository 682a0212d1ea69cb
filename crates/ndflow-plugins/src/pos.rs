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

use ndflow_core::alarm::sev::{MAJOR, NO};
use std::collections::VecDeque;
use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamDef, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

use crate::attribute::attribute_value;
use ndflow_runtime::{Built, PortType};

ndflow_core::params! {
    pub const POS_PARAMS, pub struct PosParams {
        filename: string("Filename", "")
            .long_string()
            .doc("Position XML file, or the XML text itself; each write appends its positions"),
        file_valid: enumeration("FileValid", &["No", "Yes"], 0)
            .alarm_states(&[MAJOR, NO])
            .read_only()
            .doc("Whether the last Filename write loaded"),
        running: enumeration("Running", &["Idle", "Running"], 0)
            .busy()
            .doc("Attach positions; completes when they run out"),
        reset: enumeration("Reset", &["", ""], 0).doc("Back to the first position (Keep mode)"),
        delete: enumeration("Delete", &["", ""], 0).doc("Empty the position list"),
        mode: enumeration("Mode", &["Discard", "Keep"], 0)
            .doc("Discard used positions, or keep them (Index advances)"),
        qty: int32("Qty", 0)
            .read_only()
            .doc("Positions in the list"),
        index: int32("Index", 0)
            .read_only()
            .doc("Index of the next position (Keep mode; 0 in Discard)"),
        position: string("Position", "")
            .read_only()
            .doc("The last position attached, e.g. [x=1,y=0]"),
        missing: int32("Missing", 0).doc("Frames found missing (ID above ExpectedID)"),
        duplicate: int32("Duplicate", 0).doc("Frames dropped as duplicates (ID below ExpectedID)"),
        expected_id: int32("ExpectedID", 1)
            .read_only()
            .doc("ID the next frame should carry"),
        id_name: string("IDName", "").doc("Attribute holding the frame ID; empty: the uniqueId"),
        id_start: int32("IDStart", 1).doc("ExpectedID when Running is set"),
        id_difference: int32("IDDifference", 1)
            .min(1.0)
            .doc("ID step from one frame to the next"),
    }
}

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

/// NDPosPlugin. Serial: positions follow the input order.
#[derive(Debug)]
pub struct PosPlugin {
    p: PosParams,
    positions: Mutex<VecDeque<Position>>,
}

impl Default for PosPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl PosPlugin {
    pub fn new() -> PosPlugin {
        PosPlugin {
            p: bind(&plugin_layout(POS_PARAMS), PosParams::bind),
            positions: Mutex::default(),
        }
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

    fn param_changed(&self, params: &ParamStore, idx: usize, value: &ParamValue) {
        let p = &self.p;
        let on = value.as_i64().unwrap_or(0) != 0;
        let mut list = self.positions.lock();
        if p.filename.is(idx) {
            match load(&p.filename.get(params)) {
                Ok(new) => {
                    list.extend(new);
                    params.set_many(&[p.file_valid.value(1), p.qty.value(list.len() as i64)]);
                }
                Err(e) => {
                    tracing::warn!("NDPosPlugin: position list not loaded: {e}");
                    p.file_valid.set(params, 0);
                }
            }
        } else if p.running.is(idx) && on {
            // As ADCore, an empty list is found out by the next frame (a list loaded before
            // it is used), which then sets Running back to Idle.
            p.expected_id.set(params, p.id_start.get(params));
        } else if p.mode.is(idx) || (p.reset.is(idx) && on) {
            let mut w = vec![p.index.value(0)];
            if p.reset.is(idx) {
                w.push(p.position.value(String::new()));
            }
            params.set_many(&w);
        } else if p.delete.is(idx) && on {
            list.clear();
            params.set_many(&[
                p.index.value(0),
                p.position.value(String::new()),
                p.qty.value(0),
            ]);
        }
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let (params, p) = (ctx.params, &self.p);
        let mut list = self.positions.lock();
        if p.running.get(params) == 0 {
            return Ok(());
        }
        let keep = p.mode.get(params) == 1;
        let mut index = if keep {
            p.index.get(params).max(0) as usize
        } else {
            0
        };
        let stop = || p.running.set(params, 0);
        if index >= list.len() {
            stop();
            return Ok(());
        }
        let id_name = p.id_name.get(params);
        let id = if id_name.is_empty() {
            input.unique_id as i64
        } else {
            match attribute_value(input, &id_name) {
                Some(v) => v as i64,
                None => {
                    stop();
                    return Err(PluginError::Other(format!(
                        "NDPosPlugin: frame {} has no numeric attribute '{id_name}' (IDName)",
                        input.unique_id
                    )));
                }
            }
        };
        let step = p.id_difference.get(params).max(1);
        let mut expected = p.expected_id.get(params);
        let mut writes = Vec::new();
        if expected < id {
            // Frames went missing: skip their positions.
            let mut missing = p.missing.get(params);
            while expected < id && index < list.len() {
                if keep {
                    index += 1;
                } else {
                    list.pop_front();
                }
                expected += step;
                missing += 1;
            }
            writes.push(p.missing.value(missing));
        } else if expected > id {
            let dup = p.duplicate.get(params) + 1;
            p.duplicate.set(params, dup);
            return Ok(());
        }
        let Some(pos) = list.get(index).cloned() else {
            writes.extend([
                p.expected_id.value(expected),
                p.qty.value(list.len() as i64),
                p.index.value(index as i64),
                p.running.value(0),
            ]);
            params.set_many(&writes);
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
            p.position.value(position_text(&pos)),
            p.expected_id.value(expected),
            p.qty.value(list.len() as i64),
            p.index.value(index as i64),
        ]);
        if done {
            writes.push(p.running.value(0));
        }
        drop(list);
        params.set_many(&writes);
        ctx.emit(out);
        Ok(())
    }
}

/// The port type `type = "pos"`.
pub const PORT: PortType = PortType::plugin(
    "pos",
    "NDPosPlugin",
    "Scan positions from an XML list as frame attributes; missing/duplicate frame IDs",
    |_| Ok(Built::Plugin(std::sync::Arc::new(PosPlugin::new()))),
);
