//! NDPluginAttrPlot: the numeric NDAttributes of each frame cached over an acquisition, and
//! the selected ones exposed as waveforms for live plots.
//!
//! As ADCore (NDPluginAttrPlot.cpp): on the first frame of an acquisition the plugin takes the
//! numeric attributes of the frame (strings and undefined values are skipped), the first
//! `MaxAttributes` in the frame's order, sorted by name, and shows them in `Attr0`,
//! `Attr1`, …; each then gets a ring buffer of `CacheSize` points (the oldest point drops
//! out when it is full), and so does the frame's uniqueId. Every frame adds one point to each
//! (NaN where the frame lacks the attribute or it is not a number) and `NPts` says how many
//! points are cached. A uniqueId not above the previous one (a new acquisition) or a write to
//! `Reset` clears the cache and takes the names again from the next frame; selections of an
//! attribute that is still there are kept.
//!
//! Nine waveforms show the cache, as ADCore's screens and builder load them: `X:Data`
//! (address 0), `Y1:Data0`..`Y1:Data3` (1..4) and `Y2:Data0`..`Y2:Data3` (5..8), each
//! with `DataSelect` (the index of an `AttrN`, -1 the uniqueId, -2 nothing: NaN),
//! `DataSelect_RBV` and `DataLabel` (the attribute's name, `UID` or `None`). A selection
//! past the attributes taken is refused (the previous one is restored). A waveform has
//! `CacheSize` points: the cached ones, oldest first, padded with the last one (so EDM plots
//! draw no stray line), or none while the cache is empty. Waveforms are published once a
//! second while new points come in (ADCore's 1 Hz exposure task), and at once after a
//! selection or Reset.
//!
//! Deviations: the attribute count is `MaxAttributes` exactly (ADCore's loop takes one more);
//! waveforms are not republished while nothing changes. Frames pass on unchanged (shared).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ndflow_core::handle::{join, Array, Float, Param, ParamLayout, Str};
use ndflow_core::{DataType, NDArray, ParamDef, ParamError, ParamStore, ParamValue};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, ConstructorKey, Plugin, PluginError, PortType, ProcessContext};
use parking_lot::Mutex;

use crate::timeseries::{f64_values, first_addresses};

/// The most attributes a port can track (`MaxAttributes`), and the default.
pub const MAX_ATTRIBUTES: usize = 256;
pub const DEFAULT_ATTRIBUTES: usize = 64;
/// The most points per ring buffer (`CacheSize`), and the default.
pub const MAX_CACHE: usize = 100_000;
pub const DEFAULT_CACHE: usize = 1000;
/// DataSelect: the uniqueId, and nothing (ADCore's ND_ATTRPLOT_UID_INDEX / NONE_INDEX).
pub const UID_INDEX: i64 = -1;
pub const NONE_INDEX: i64 = -2;
/// DataLabel of those two.
pub const UID_LABEL: &str = "UID";
pub const NONE_LABEL: &str = "None";
/// How often new points are published (ADCore's ND_ATTRPLOT_DATA_EXPOSURE_PERIOD).
pub const EXPOSE_PERIOD: Duration = Duration::from_secs(1);

ndflow_core::params! {
    /// NDAttrPlot.template's records.
    pub const ATTRPLOT_PORT_PARAMS, pub struct AttrPlotParams {
        npts: float64("NPts", 0.0).read_only_plain().doc("Number of cached points"),
        reset: float64("Reset", 0.0)
            .doc("A write clears the cache; the next frame's attributes are taken anew"),
    }
}

/// One NDAttrPlotData.template instance: `AXIS:DataIND`, `AXIS:DataLabelIND`,
/// `AXIS:DataSelectIND`.
macro_rules! data_block {
    ($axis:literal, $ind:literal) => {
        [
            ParamDef::array(concat!($axis, ":Data", $ind), DataType::Float64)
                .doc("The selected attribute's cached points, oldest first, padded with the last"),
            ParamDef::string(concat!($axis, ":DataLabel", $ind), NONE_LABEL)
                .read_only_plain()
                .doc("Name of the selected attribute (UID, None)"),
            ParamDef::float64(concat!($axis, ":DataSelect", $ind), NONE_INDEX as f64)
                .range(NONE_INDEX as f64, (MAX_ATTRIBUTES - 1) as f64)
                .doc("Index of the AttrN shown (-1 uniqueId, -2 none)"),
        ]
    };
}

/// Records per data block.
const BLOCK_LEN: usize = 3;
/// The data blocks: X, then Y1 0..3 and Y2 0..3 (asyn addresses 0..8).
pub const DATA_BLOCKS: usize = 9;

const BLOCKS: [[ParamDef; BLOCK_LEN]; DATA_BLOCKS] = [
    data_block!("X", ""),
    data_block!("Y1", "0"),
    data_block!("Y1", "1"),
    data_block!("Y1", "2"),
    data_block!("Y1", "3"),
    data_block!("Y2", "0"),
    data_block!("Y2", "1"),
    data_block!("Y2", "2"),
    data_block!("Y2", "3"),
];

/// NDAttrPlotData.template's records for the nine data blocks.
pub const ATTRPLOT_DATA_PARAMS: &[ParamDef] = BLOCKS.as_flattened();

/// NDAttrPlotAttr.template's `AttrN` records, N = 0..MAX_ATTRIBUTES-1.
macro_rules! attr_names {
    ($($n:literal),* $(,)?) => {
        [$(
            ParamDef::string(concat!("Attr", $n), "")
                .read_only_plain()
                .doc("Name of a tracked attribute (its index is the DataSelect value)")
        ),*]
    };
}

/// The `AttrN` records.
pub const ATTRPLOT_ATTR_PARAMS: &[ParamDef] = &attr_names!(
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49,
    50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73,
    74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97,
    98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116,
    117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135,
    136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154,
    155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173,
    174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192,
    193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211,
    212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230,
    231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249,
    250, 251, 252, 253, 254, 255
);

const _: () = assert!(ATTRPLOT_ATTR_PARAMS.len() == MAX_ATTRIBUTES);

/// Every record: the port's, the data blocks', then `Attr0`.. (a port serves the first
/// `MaxAttributes` of those).
pub const ATTRPLOT_PARAMS: &[ParamDef] = &join::<
    { ATTRPLOT_PORT_PARAMS.len() + ATTRPLOT_DATA_PARAMS.len() + ATTRPLOT_ATTR_PARAMS.len() },
>(&[
    ATTRPLOT_PORT_PARAMS,
    ATTRPLOT_DATA_PARAMS,
    ATTRPLOT_ATTR_PARAMS,
]);

/// The handles of one data block.
#[derive(Debug, Clone, Copy)]
pub struct BlockParams {
    pub data: Param<Array>,
    pub label: Param<Str>,
    pub select: Param<Float>,
}

fn bind_blocks(layout: &ParamLayout) -> Result<Vec<BlockParams>, ParamError> {
    BLOCKS
        .iter()
        .map(|b| {
            Ok(BlockParams {
                data: layout.bind(b.first())?,
                label: layout.bind(b.get(1))?,
                select: layout.bind(b.get(2))?,
            })
        })
        .collect()
}

fn bind_attrs(layout: &ParamLayout, n: usize) -> Result<Vec<Param<Str>>, ParamError> {
    ATTRPLOT_ATTR_PARAMS
        .iter()
        .take(n)
        .map(|d| layout.bind(Some(d)))
        .collect()
}

/// A ring of the latest `capacity` points.
#[derive(Debug, Clone)]
pub struct Ring {
    points: VecDeque<f64>,
    capacity: usize,
}

impl Ring {
    pub fn new(capacity: usize) -> Ring {
        Ring {
            points: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }
    pub fn push(&mut self, v: f64) {
        if self.points.len() == self.capacity {
            self.points.pop_front();
        }
        self.points.push_back(v);
    }
    pub fn len(&self) -> usize {
        self.points.len()
    }
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
    pub fn last(&self) -> Option<f64> {
        self.points.back().copied()
    }
    pub fn clear(&mut self) {
        self.points.clear();
    }
    /// The points oldest first, padded to `capacity` with the last one (ADCore's
    /// callback_data); empty when there are none.
    pub fn padded(&self) -> Vec<f64> {
        let Some(last) = self.last() else {
            return Vec::new();
        };
        let mut v: Vec<f64> = self.points.iter().copied().collect();
        v.resize(self.capacity, last);
        v
    }
}

/// The cache: tracked names, one ring per name, the uniqueIds, the selections.
#[derive(Debug)]
pub struct Cache {
    max_attributes: usize,
    capacity: usize,
    names: Vec<String>,
    data: Vec<Ring>,
    uids: Ring,
    /// The names are taken from the next frame (ADCore's InitState).
    init: bool,
    selections: Vec<i64>,
    /// Points added since the waveforms were last published.
    dirty: bool,
}

impl Cache {
    pub fn new(max_attributes: usize, capacity: usize) -> Cache {
        Cache {
            max_attributes,
            capacity,
            names: Vec::new(),
            data: Vec::new(),
            uids: Ring::new(capacity),
            init: true,
            selections: vec![NONE_INDEX; DATA_BLOCKS],
            dirty: false,
        }
    }

    /// The tracked attribute names (`Attr0`, `Attr1`, …).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Points cached (`NPts`).
    pub fn n_points(&self) -> usize {
        self.uids.len()
    }

    /// Clears every ring; the next frame's attributes are taken anew.
    pub fn reset(&mut self) {
        self.init = true;
        self.uids.clear();
        for r in &mut self.data {
            r.clear();
        }
        self.dirty = true;
    }

    /// Adds one frame: resets on a uniqueId not above the last, takes the names on the first
    /// frame after a reset. Returns whether the names were (re)taken.
    pub fn add(&mut self, frame: &NDArray) -> bool {
        let uid = frame.unique_id;
        if self.uids.last().is_some_and(|last| f64::from(uid) <= last) {
            self.reset();
        }
        let taken = std::mem::take(&mut self.init);
        if taken {
            self.take_names(frame);
        }
        self.uids.push(f64::from(uid));
        for (name, ring) in self.names.iter().zip(&mut self.data) {
            let v = frame
                .attribute(name)
                .and_then(|a| a.value.as_f64())
                .unwrap_or(f64::NAN);
            ring.push(v);
        }
        self.dirty = true;
        taken
    }

    /// The first `max_attributes` numeric attributes of `frame`, sorted; selections follow
    /// their attribute by name (or become none).
    fn take_names(&mut self, frame: &NDArray) {
        let selected: Vec<Option<String>> = self
            .selections
            .iter()
            .map(|&s| match s {
                UID_INDEX => Some(UID_LABEL.to_string()),
                s => usize::try_from(s)
                    .ok()
                    .and_then(|i| self.names.get(i).cloned()),
            })
            .collect();
        let mut names: Vec<String> = Vec::new();
        for a in &frame.attributes {
            if names.len() == self.max_attributes {
                break;
            }
            if a.value.data_type().is_some() && !names.contains(&a.name) {
                names.push(a.name.clone());
            }
        }
        names.sort();
        self.data = vec![Ring::new(self.capacity); names.len()];
        self.names = names;
        for (sel, old) in self.selections.iter_mut().zip(selected) {
            *sel = match old.as_deref() {
                Some(UID_LABEL) => UID_INDEX,
                Some(n) => self
                    .names
                    .iter()
                    .position(|x| x == n)
                    .map_or(NONE_INDEX, |i| i as i64),
                None => NONE_INDEX,
            };
        }
    }

    /// Selects what block `block` shows; refused (false) past the names taken, as ADCore.
    pub fn select(&mut self, block: usize, value: i64) -> bool {
        let Some(sel) = self.selections.get_mut(block) else {
            return false;
        };
        if value > 0 && value as usize >= self.names.len() {
            return false;
        }
        *sel = value;
        true
    }

    /// Block `block`'s selection as shown: an index of a name, UID, or none.
    pub fn selection(&self, block: usize) -> (i64, &str) {
        match self.selections.get(block).copied() {
            Some(UID_INDEX) => (UID_INDEX, UID_LABEL),
            Some(s) => match usize::try_from(s).ok().and_then(|i| self.names.get(i)) {
                Some(n) => (s, n.as_str()),
                None => (NONE_INDEX, NONE_LABEL),
            },
            None => (NONE_INDEX, NONE_LABEL),
        }
    }

    /// Block `block`'s waveform: the selected ring padded to the cache size; NaN for none.
    pub fn waveform(&self, block: usize) -> Vec<f64> {
        match self.selection(block).0 {
            UID_INDEX => self.uids.padded(),
            NONE_INDEX => vec![
                f64::NAN;
                if self.uids.is_empty() {
                    0
                } else {
                    self.capacity
                }
            ],
            i => self
                .data
                .get(i as usize)
                .map_or_else(Vec::new, Ring::padded),
        }
    }
}

struct Shared {
    p: AttrPlotParams,
    blocks: Vec<BlockParams>,
    attrs: Vec<Param<Str>>,
    cache: Mutex<Cache>,
}

impl Shared {
    /// `AttrN` records.
    fn names(&self, c: &Cache) -> Vec<(usize, ParamValue)> {
        self.attrs
            .iter()
            .enumerate()
            .map(|(i, h)| h.value(c.names().get(i).cloned().unwrap_or_default()))
            .collect()
    }

    /// DataSelect and DataLabel of every block.
    fn selections(&self, c: &Cache) -> Vec<(usize, ParamValue)> {
        let mut w = Vec::with_capacity(2 * DATA_BLOCKS);
        for (i, b) in self.blocks.iter().enumerate() {
            let (sel, label) = c.selection(i);
            w.push(b.select.value(sel as f64));
            w.push(b.label.value(label.to_string()));
        }
        w
    }

    /// Every block's waveform.
    fn data(&self, c: &mut Cache) -> Vec<(usize, ParamValue)> {
        c.dirty = false;
        self.blocks
            .iter()
            .enumerate()
            .map(|(i, b)| b.data.value(f64_values(&c.waveform(i))))
            .collect()
    }

    /// The exposure task's round: publishes the waveforms when points came in.
    fn expose(&self, p: &ParamStore) {
        let mut c = self.cache.lock();
        if !c.dirty {
            return;
        }
        let w = self.data(&mut c);
        drop(c);
        p.set_many(&w);
    }
}

/// NDPluginAttrPlot. Serial: the cache follows the input order.
pub struct AttrPlotPlugin {
    own: &'static [ParamDef],
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AttrPlotPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttrPlotPlugin")
            .field("attributes", &self.shared.attrs.len())
            .finish()
    }
}

impl Default for AttrPlotPlugin {
    fn default() -> Self {
        Self::new(DEFAULT_ATTRIBUTES, DEFAULT_CACHE)
    }
}

impl AttrPlotPlugin {
    /// A port tracking up to `max_attributes` attributes (1..=256) of `cache_size` points
    /// each (1..=100000); both clamped.
    pub fn new(max_attributes: usize, cache_size: usize) -> Self {
        let n = max_attributes.clamp(1, MAX_ATTRIBUTES);
        let own = first_addresses(
            ATTRPLOT_PARAMS,
            ATTRPLOT_PORT_PARAMS.len() + ATTRPLOT_DATA_PARAMS.len(),
            1,
            n,
        );
        let layout = plugin_layout(own);
        let attrs = match bind_attrs(&layout, n) {
            Ok(a) => a,
            Err(e) => panic!("parameter declarations disagree: {e}"),
        };
        AttrPlotPlugin {
            own,
            shared: Arc::new(Shared {
                p: bind(&layout, AttrPlotParams::bind),
                blocks: bind(&layout, bind_blocks),
                attrs,
                cache: Mutex::new(Cache::new(n, cache_size.clamp(1, MAX_CACHE))),
            }),
        }
    }

    /// Publishes the waveforms if points came in since the last time (what the exposure
    /// task does every [`EXPOSE_PERIOD`]).
    pub fn expose(&self, p: &ParamStore) {
        self.shared.expose(p);
    }
}

impl Plugin for AttrPlotPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginAttrPlot"
    }

    fn params(&self) -> &'static [ParamDef] {
        self.own
    }

    fn accepts_compressed(&self) -> bool {
        true
    }

    /// Starts the exposure task: it ends once the port or the plugin is gone.
    fn attached(&self, params: &Arc<ParamStore>) {
        let shared: Weak<Shared> = Arc::downgrade(&self.shared);
        let store: Weak<ParamStore> = Arc::downgrade(params);
        let spawned = std::thread::Builder::new()
            .name("attrplot-expose".into())
            .spawn(move || loop {
                std::thread::sleep(EXPOSE_PERIOD);
                let (Some(sh), Some(p)) = (shared.upgrade(), store.upgrade()) else {
                    break;
                };
                sh.expose(&p);
            });
        if let Err(e) = spawned {
            tracing::warn!(
                "NDPluginAttrPlot: no exposure thread ({e}); waveforms follow writes only"
            );
        }
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        let sh = &self.shared;
        let mut c = sh.cache.lock();
        let mut w = Vec::new();
        if sh.p.reset.is(idx) {
            c.reset();
            w.push(sh.p.npts.value(0.0));
        } else if let Some(block) = sh.blocks.iter().position(|b| b.select.is(idx)) {
            let v = value.as_f64().unwrap_or(NONE_INDEX as f64) as i64;
            if !c.select(block, v) {
                tracing::warn!(
                    "NDPluginAttrPlot: DataSelect {v} refused: {} attributes are tracked",
                    c.names().len()
                );
            }
            w.extend(sh.selections(&c));
        } else {
            return;
        }
        w.extend(sh.data(&mut c));
        drop(c);
        p.set_many(&w);
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let sh = &self.shared;
        let mut c = sh.cache.lock();
        let mut w = Vec::new();
        if c.add(input) {
            w.extend(sh.names(&c));
            w.extend(sh.selections(&c));
        }
        w.push(sh.p.npts.value(c.n_points() as f64));
        drop(c);
        ctx.params.set_many(&w);
        ctx.emit(Arc::clone(input));
        Ok(())
    }
}

/// The port type `type = "attrplot"`.
pub const PORT: PortType = PortType::plugin(
    "attrplot",
    "NDPluginAttrPlot",
    "Numeric frame attributes cached over an acquisition; 9 selected ones (X, Y1 0..3, Y2 0..3) as waveforms",
    |a| {
        let n = a.int("MaxAttributes", 1..=MAX_ATTRIBUTES as i64, DEFAULT_ATTRIBUTES as i64)?;
        let cache = a.int("CacheSize", 1..=MAX_CACHE as i64, DEFAULT_CACHE as i64)?;
        Ok(Built::Plugin(Arc::new(AttrPlotPlugin::new(
            n as usize,
            cache as usize,
        ))))
    },
)
.keys(&[
    ConstructorKey {
        name: "MaxAttributes",
        doc: "Attributes tracked (Attr0..), 1..256 (default 64), fixed for the port's life",
    },
    ConstructorKey {
        name: "CacheSize",
        doc: "Points kept per attribute and waveform length, 1..100000 (default 1000), fixed",
    },
]);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::{AttrValue, NDAttribute, Pool};
    use ndflow_runtime::PluginHarness;

    fn frame(uid: i32, attrs: &[(&str, AttrValue)]) -> NDArray {
        let mut f = NDArray::from_pixels::<u8>(&Pool::unlimited(), &[1], &[0]).unwrap();
        f.unique_id = uid;
        for (n, v) in attrs {
            f.set_attribute(NDAttribute::new(*n, "", v.clone()));
        }
        f
    }

    fn numeric(uid: i32) -> NDArray {
        let u = uid as f64;
        frame(
            uid,
            &[
                ("Temp", AttrValue::Float64(20.0 + u)),
                ("Count", AttrValue::Int32(uid * 10)),
                ("Sample", AttrValue::String("lysozyme".into())),
                ("Absent", AttrValue::Undefined),
                ("Byte", AttrValue::UInt8(7)),
            ],
        )
    }

    fn wave(h: &PluginHarness<AttrPlotPlugin>, name: &str) -> Vec<f64> {
        match h.get(name) {
            ParamValue::Array(a) => a
                .bytes()
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
                .collect(),
            other => panic!("{name}: {other:?}"),
        }
    }

    fn text(h: &PluginHarness<AttrPlotPlugin>, name: &str) -> String {
        match h.get(name) {
            ParamValue::Str(s) => s,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn a_ring_keeps_the_latest_points_and_pads_with_the_last() {
        let mut r = Ring::new(4);
        assert!(r.padded().is_empty());
        for v in [1.0, 2.0] {
            r.push(v);
        }
        assert_eq!(r.padded(), [1.0, 2.0, 2.0, 2.0]);
        for v in [3.0, 4.0, 5.0] {
            r.push(v);
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.padded(), [2.0, 3.0, 4.0, 5.0]);
        r.clear();
        assert!(r.is_empty());
    }

    #[test]
    fn the_cache_takes_the_numeric_attributes_sorted_and_caps_them() {
        let mut c = Cache::new(8, 5);
        assert!(c.add(&numeric(1)));
        assert_eq!(c.names(), ["Byte", "Count", "Temp"]);
        assert!(!c.add(&numeric(2)), "names are taken once per acquisition");
        assert_eq!(c.n_points(), 2);
        // First come first served: only two of the three numeric attributes, then sorted.
        let mut two = Cache::new(2, 5);
        two.add(&numeric(1));
        assert_eq!(two.names(), ["Count", "Temp"]);
    }

    #[test]
    fn selections_show_an_attribute_the_uid_or_nothing() {
        let mut c = Cache::new(8, 4);
        for uid in 1..=3 {
            c.add(&numeric(uid));
        }
        assert_eq!(c.selection(0), (NONE_INDEX, NONE_LABEL));
        assert!(c.waveform(0).iter().all(|v| v.is_nan()));
        assert_eq!(c.waveform(0).len(), 4);
        assert!(c.select(0, UID_INDEX));
        assert_eq!(c.selection(0), (UID_INDEX, UID_LABEL));
        assert_eq!(c.waveform(0), [1.0, 2.0, 3.0, 3.0]);
        assert!(c.select(1, 2));
        assert_eq!(c.selection(1), (2, "Temp"));
        assert_eq!(c.waveform(1), [21.0, 22.0, 23.0, 23.0]);
        assert!(!c.select(1, 3), "past the names: refused");
        assert_eq!(c.selection(1), (2, "Temp"), "unchanged");
        assert!(!c.select(DATA_BLOCKS, 0), "no such block");
        // A frame without an attribute caches NaN for it.
        c.add(&frame(4, &[("Temp", AttrValue::Float64(1.5))]));
        assert_eq!(c.waveform(1), [21.0, 22.0, 23.0, 1.5]);
        c.select(2, 1);
        assert!(c.waveform(2)[3].is_nan());
    }

    #[test]
    fn a_lower_unique_id_or_reset_clears_the_cache_and_keeps_selections_by_name() {
        let mut c = Cache::new(8, 10);
        for uid in 1..=3 {
            c.add(&numeric(uid));
        }
        c.select(0, UID_INDEX);
        c.select(1, 2); // Temp
        c.select(2, 0); // Byte
                        // A new acquisition: uniqueId back to 1, and Byte is gone, New came.
        let f = frame(
            1,
            &[
                ("Temp", AttrValue::Float64(5.0)),
                ("New", AttrValue::Int16(-1)),
            ],
        );
        assert!(c.add(&f), "names taken anew");
        assert_eq!(c.names(), ["New", "Temp"]);
        assert_eq!(c.n_points(), 1);
        assert_eq!(c.selection(0), (UID_INDEX, UID_LABEL));
        assert_eq!(c.selection(1), (1, "Temp"), "Temp kept, at its new index");
        assert_eq!(c.selection(2), (NONE_INDEX, NONE_LABEL), "Byte is gone");
        assert_eq!(c.waveform(1)[0], 5.0);
        c.reset();
        assert_eq!(c.n_points(), 0);
        assert!(c.waveform(0).is_empty(), "nothing cached: empty waveforms");
        assert!(c.add(&numeric(9)));
        assert_eq!(c.n_points(), 1);
    }

    #[test]
    fn the_plugin_serves_names_labels_waveforms_and_resets() {
        let h = PluginHarness::new(AttrPlotPlugin::new(4, 6));
        assert_eq!(h.plugin.params().len(), 2 + 27 + 4, "Attr0..Attr3 only");
        assert_eq!(text(&h, "X:DataLabel"), "None");
        assert_eq!(h.get_f64("Y2:DataSelect3"), -2.0);
        for uid in 1..=3 {
            let out = h.process(numeric(uid)).unwrap();
            assert_eq!(out.len(), 1, "frames pass on");
        }
        assert_eq!(h.get_f64("NPts"), 3.0);
        let names: Vec<String> = (0..4).map(|i| text(&h, &format!("Attr{i}"))).collect();
        assert_eq!(names, ["Byte", "Count", "Temp", ""]);
        h.put("X:DataSelect", -1.0).unwrap();
        h.put("Y1:DataSelect0", 2.0).unwrap();
        h.put("Y2:DataSelect3", 1.0).unwrap();
        assert_eq!(text(&h, "X:DataLabel"), "UID");
        assert_eq!(text(&h, "Y1:DataLabel0"), "Temp");
        assert_eq!(text(&h, "Y2:DataLabel3"), "Count");
        // A selection writes the waveforms at once.
        assert_eq!(wave(&h, "X:Data"), [1.0, 2.0, 3.0, 3.0, 3.0, 3.0]);
        assert_eq!(wave(&h, "Y1:Data0"), [21.0, 22.0, 23.0, 23.0, 23.0, 23.0]);
        assert_eq!(wave(&h, "Y2:Data3"), [10.0, 20.0, 30.0, 30.0, 30.0, 30.0]);
        // Past the names: refused, the previous selection stays.
        h.put("Y1:DataSelect0", 3.0).unwrap();
        assert_eq!(h.get_f64("Y1:DataSelect0"), 2.0);
        assert_eq!(text(&h, "Y1:DataLabel0"), "Temp");
        // New points reach the waveforms with the exposure task's round.
        h.process(numeric(4)).unwrap();
        assert_eq!(wave(&h, "X:Data")[3], 3.0, "not yet exposed");
        h.plugin.expose(&h.params);
        assert_eq!(wave(&h, "X:Data"), [1.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
        // Reset clears the cache.
        h.put("Reset", 1.0).unwrap();
        assert_eq!(h.get_f64("NPts"), 0.0);
        assert!(wave(&h, "X:Data").is_empty());
        h.process(numeric(10)).unwrap();
        h.plugin.expose(&h.params);
        assert_eq!(h.get_f64("NPts"), 1.0);
        assert_eq!(wave(&h, "Y1:Data0"), [30.0; 6]);
    }

    #[test]
    fn every_record_name_is_adcore_s() {
        let names: Vec<&str> = ATTRPLOT_PARAMS.iter().map(|d| d.name).collect();
        for n in [
            "NPts",
            "Reset",
            "X:Data",
            "X:DataLabel",
            "X:DataSelect",
            "Y1:Data0",
            "Y1:DataLabel3",
            "Y2:DataSelect3",
            "Attr0",
            "Attr255",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        assert_eq!(names.len(), 2 + 27 + MAX_ATTRIBUTES);
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "no name twice");
    }
}
