//! NDAttributes files: an XML list of attributes that a port attaches to every
//! frame — a driver to the frames it produces, a plugin to each frame before it processes it
//! (so a file writer's own list ends up in its files).
//!
//! ```xml
//! <Attributes>
//!   <Attribute name="Exposure" type="PARAM"    source="ACQ_TIME" datatype="DOUBLE" description="..."/>
//!   <Attribute name="Ring"     type="EPICS_PV" source="SR:Current" dbrtype="DBR_DOUBLE"/>
//!   <Attribute name="Sample"   type="CONST"    source="$(SAMPLE)" datatype="STRING"/>
//! </Attributes>
//! ```
//! `NDAttributesFile` holds a path or the XML text itself; `NDAttributesMacros` (`A=1,B=x`)
//! fills `$(A)` / `${A}`. PARAM sources are this port's parameters, by ndflow name
//! (`AcquireTime`) or areaDetector drvInfo string (`ACQ_TIME`). EPICS_PV values come from a
//! [`PvReader`] (the IOC installs one that reads its own PVs in process and others over
//! pvAccess or Channel Access) and stay undefined until connected.
//! PARAM's optional `addr="N"` reads the parameter of address N (areaDetector's asyn address,
//! counted from 0), ndflow's `N+1:` record (ROIStat's `1:Total` is address 0); without `addr`,
//! or where address 0 has no `1:` record, the port's own parameter.
//! FUNCT attributes call compiled C functions in areaDetector; ndflow offers a fixed set of
//! built-in functions instead, chosen by `source` ([`crate::attr_funct::FUNCTIONS`]: wall
//! time, epoch seconds, host name, process id, uniqueId, a constant, an expression over other
//! attributes). An entry naming another function is skipped with a warning
//! ([`AttributeList::warnings`]) and the rest of the file loads.

use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, NDAttribute, ParamKind, ParamStore, ParamValue, SourceType};
use parking_lot::{Mutex, RwLock};

use crate::attr_funct::{Funct, FunctError, FUNCTIONS};
use crate::port_params::ArrayBaseParams;

/// The latest value of a watched PV, written by the reader's monitor.
pub type PvCell = Arc<Mutex<AttrValue>>;

/// A value computed as each frame is stamped (a PV of this process, read from its parameter).
pub type PvRead = Arc<dyn Fn() -> AttrValue + Send + Sync>;

/// Where an EPICS_PV attribute's value comes from.
#[derive(Clone)]
pub enum PvSource {
    /// A cell that a monitor keeps current.
    Cell(PvCell),
    /// Read when the attribute is attached; must be cheap and never block for long.
    Live(PvRead),
}

/// Supplies EPICS_PV attribute values: `watch` starts monitoring `pv` and returns the cell the
/// monitor keeps current. Monitoring may stop once the caller drops every clone of the cell.
pub trait PvReader: Send + Sync {
    fn watch(&self, pv: &str, dbrtype: &str) -> PvCell;

    /// The source of an attribute naming `pv`; an error (which names the PV) refuses the file
    /// (`NDAttributesStatus`). By default [`PvReader::watch`]'s cell.
    fn source(&self, pv: &str, dbrtype: &str) -> Result<PvSource, String> {
        Ok(PvSource::Cell(self.watch(pv, dbrtype)))
    }
}

/// Why a file could not be used; the index is `NDAttributesStatus`'s menu position.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    NotFound(String),
    Xml(String),
    Macro(String),
}

impl LoadError {
    pub fn status_index(&self) -> i64 {
        match self {
            LoadError::NotFound(_) => 1,
            LoadError::Xml(_) => 2,
            LoadError::Macro(_) => 3,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            LoadError::NotFound(m) | LoadError::Xml(m) | LoadError::Macro(m) => m,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Want {
    Int,
    Double,
    String,
    /// No `datatype` given: the parameter's own kind.
    Native,
}

enum Source {
    Param { idx: usize, want: Want },
    Const(AttrValue),
    Pv(PvSource),
    Funct(Funct, Want),
}

struct Spec {
    name: String,
    description: String,
    source_type: SourceType,
    source: String,
    from: Source,
}

/// A loaded list, ready to attach.
pub struct AttributeList {
    specs: Vec<Spec>,
    warnings: Vec<String>,
}

impl AttributeList {
    /// Parses `text` (after macro substitution) against `params` (PARAM sources) and `pvs`.
    pub fn parse(
        text: &str,
        macros: &str,
        params: &ParamStore,
        pvs: Option<&dyn PvReader>,
    ) -> Result<AttributeList, LoadError> {
        let text = substitute(text, &parse_macros(macros)?)?;
        let doc = roxmltree::Document::parse(&text)
            .map_err(|e| LoadError::Xml(format!("XML syntax error: {e}")))?;
        let root = doc.root_element();
        if root.tag_name().name() != "Attributes" {
            return Err(LoadError::Xml(format!(
                "the root element is <{}>, not <Attributes>",
                root.tag_name().name()
            )));
        }
        let mut specs = Vec::new();
        let mut warnings = Vec::new();
        for (n, node) in root
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "Attribute")
            .enumerate()
        {
            let at = |k: &str| node.attribute(k).unwrap_or("");
            let name = at("name");
            let bad =
                |what: String| LoadError::Xml(format!("Attribute #{} '{name}': {what}", n + 1));
            if name.is_empty() {
                return Err(bad("no name".into()));
            }
            let source = at("source").to_string();
            let want = match at("datatype").to_ascii_uppercase().as_str() {
                "" => Want::Native,
                "INT" => Want::Int,
                "DOUBLE" => Want::Double,
                "STRING" => Want::String,
                other => {
                    return Err(bad(format!(
                        "datatype '{other}' is not INT, DOUBLE or STRING"
                    )))
                }
            };
            let (source_type, from) = match at("type").to_ascii_uppercase().as_str() {
                "PARAM" => {
                    let idx = param_index(params, &source, node.attribute("addr")).map_err(bad)?;
                    (SourceType::Param, Source::Param { idx, want })
                }
                "CONST" => (SourceType::Const, Source::Const(constant(&source, want))),
                "EPICS_PV" => {
                    if source.is_empty() {
                        return Err(bad("EPICS_PV needs a source PV name".into()));
                    }
                    let from = match pvs {
                        Some(r) => r.source(&source, at("dbrtype")).map_err(bad)?,
                        None => PvSource::Cell(Arc::new(Mutex::new(AttrValue::Undefined))),
                    };
                    (SourceType::EpicsPv, Source::Pv(from))
                }
                "FUNCT" | "FUNCTION" => match Funct::parse(&source, at("param")) {
                    Ok(f) => (SourceType::Function, Source::Funct(f, want)),
                    Err(FunctError::Bad(why)) => return Err(bad(why)),
                    Err(FunctError::Unknown) => {
                        warnings.push(format!(
                            "Attribute #{} '{name}': FUNCT '{source}' is not a built-in function \
                             ({}); skipped",
                            n + 1,
                            FUNCTIONS
                                .iter()
                                .map(|(f, _)| *f)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                        continue;
                    }
                },
                other => {
                    return Err(bad(format!(
                        "type '{other}' is not PARAM, EPICS_PV, CONST or FUNCT"
                    )))
                }
            };
            specs.push(Spec {
                name: name.to_string(),
                description: at("description").to_string(),
                source_type,
                source,
                from,
            });
        }
        Ok(AttributeList { specs, warnings })
    }

    /// What was skipped while loading (FUNCT entries naming an unknown function), one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Adds (or replaces, by name) every attribute on `frame` with its current value.
    pub fn apply(&self, frame: &mut NDArray, params: &ParamStore) {
        for s in &self.specs {
            let value = match &s.from {
                Source::Const(v) => v.clone(),
                Source::Pv(PvSource::Cell(cell)) => cell.lock().clone(),
                Source::Pv(PvSource::Live(read)) => read(),
                Source::Param { idx, want } => param_value(params, *idx, *want),
                Source::Funct(f, want) => f.value(frame, *want),
            };
            let attr = NDAttribute {
                name: s.name.clone(),
                description: s.description.clone(),
                source_type: s.source_type,
                source: s.source.clone(),
                value,
            };
            match frame.attributes.iter_mut().find(|a| a.name == s.name) {
                Some(a) => *a = attr,
                None => frame.attributes.push(attr),
            }
        }
    }
}

/// A port's attribute list and its `NDAttributesFile`/`NDAttributesMacros` handling.
#[derive(Default)]
pub struct PortAttributes {
    list: RwLock<Option<Arc<AttributeList>>>,
}

impl PortAttributes {
    /// Re-reads the file when one of its two parameters was written. Sets NDAttributesStatus
    /// (and logs the reason, naming the file and the bad entry).
    pub fn on_put(
        &self,
        idx: usize,
        a: &ArrayBaseParams,
        params: &ParamStore,
        pvs: Option<&dyn PvReader>,
    ) {
        if !a.nd_attributes_file.is(idx) && !a.nd_attributes_macros.is(idx) {
            return;
        }
        let (file, macros) = (
            a.nd_attributes_file.get(params),
            a.nd_attributes_macros.get(params),
        );
        let loaded = if file.trim().is_empty() {
            Ok(None)
        } else {
            read_source(&file)
                .and_then(|text| AttributeList::parse(&text, &macros, params, pvs))
                .map(|l| {
                    for w in l.warnings() {
                        tracing::warn!("NDAttributesFile '{}': {w}", short(&file));
                    }
                    Some(Arc::new(l))
                })
        };
        let status = match loaded {
            Ok(list) => {
                *self.list.write() = list;
                0
            }
            Err(e) => {
                tracing::warn!("NDAttributesFile '{}': {}", short(&file), e.message());
                *self.list.write() = None;
                e.status_index()
            }
        };
        a.nd_attributes_status.set(params, status);
    }

    /// The current list, if any (cheap: one read lock and an Arc clone).
    pub fn current(&self) -> Option<Arc<AttributeList>> {
        self.list.read().clone()
    }

    /// Attaches the list to a frame being published.
    pub fn apply(&self, frame: &mut NDArray, params: &ParamStore) {
        if let Some(l) = self.current() {
            l.apply(frame, params);
        }
    }

    /// The frame with the list attached: the same Arc when there is no list, else a copy of
    /// the metadata sharing the pixels (published frames are immutable).
    pub fn attach(&self, frame: &Arc<NDArray>, params: &ParamStore) -> Arc<NDArray> {
        match self.current() {
            Some(l) if !l.is_empty() => {
                let mut f = NDArray::clone(frame);
                l.apply(&mut f, params);
                Arc::new(f)
            }
            _ => Arc::clone(frame),
        }
    }
}

fn short(s: &str) -> String {
    let s = s.trim();
    if s.starts_with('<') {
        "<inline XML>".into()
    } else {
        s.to_string()
    }
}

/// The parameter holds either a path or the XML itself (areaDetector accepts both).
fn read_source(file: &str) -> Result<String, LoadError> {
    let t = file.trim();
    if t.starts_with('<') {
        return Ok(t.to_string());
    }
    std::fs::read_to_string(t).map_err(|e| LoadError::NotFound(format!("cannot read '{t}': {e}")))
}

fn parse_macros(macros: &str) -> Result<Vec<(String, String)>, LoadError> {
    let mut out = Vec::new();
    for item in macros.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| LoadError::Macro(format!("macro '{item}' is not NAME=value")))?;
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// `$(NAME)` and `${NAME}`; an undefined name is an error that names it.
fn substitute(text: &str, macros: &[(String, String)]) -> Result<String, LoadError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(p) = rest.find('$') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let close = match after.chars().next() {
            Some('(') => ')',
            Some('{') => '}',
            _ => {
                out.push('$');
                rest = after;
                continue;
            }
        };
        let end = after
            .find(close)
            .ok_or_else(|| LoadError::Macro("unterminated macro reference".into()))?;
        let name = &after[1..end];
        let value = macros
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| LoadError::Macro(format!("macro '{name}' is not defined")))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A PARAM source's index: the ndflow name or drvInfo string, at address `addr` when given.
fn param_index(params: &ParamStore, source: &str, addr: Option<&str>) -> Result<usize, String> {
    let find = |name: &str| {
        params
            .index(name)
            .or_else(|| drv_info(name).and_then(|p| params.index(p)))
    };
    let Some(addr) = addr.map(str::trim).filter(|a| !a.is_empty()) else {
        return find(source).ok_or_else(|| format!("no parameter '{source}' on this port"));
    };
    let n: usize = addr
        .parse()
        .map_err(|_| format!("addr '{addr}' is not an address (0, 1, ...)"))?;
    let addressed = |name: &str| params.index(&format!("{}:{name}", n + 1));
    addressed(source)
        .or_else(|| drv_info(source).and_then(addressed))
        .or_else(|| if n == 0 { find(source) } else { None })
        .ok_or_else(|| {
            format!(
                "no parameter '{source}' at addr {n} on this port (its record would be '{}:{source}')",
                n + 1
            )
        })
}

fn constant(source: &str, want: Want) -> AttrValue {
    let s = source.trim();
    match want {
        Want::Int => s
            .parse::<i64>()
            .ok()
            .and_then(|v| i32::try_from(v).ok())
            .map_or(AttrValue::Undefined, AttrValue::Int32),
        Want::Double => s.parse().map_or(AttrValue::Undefined, AttrValue::Float64),
        Want::String | Want::Native => AttrValue::String(source.to_string()),
    }
}

fn param_value(params: &ParamStore, idx: usize, want: Want) -> AttrValue {
    let Some(v) = params.get(idx) else {
        return AttrValue::Undefined;
    };
    let kind = params.def(idx).map(|d| d.kind);
    let want = match (want, kind) {
        (Want::Native, Some(ParamKind::Float64)) => Want::Double,
        (Want::Native, Some(ParamKind::String)) => Want::String,
        (Want::Native, _) => Want::Int,
        (w, _) => w,
    };
    match (want, &v) {
        (Want::String, ParamValue::Str(s)) => AttrValue::String(s.clone()),
        (Want::String, other) => AttrValue::String(other.to_string()),
        (Want::Double, _) => v.as_f64().map_or(AttrValue::Undefined, AttrValue::Float64),
        _ => v
            .as_i64()
            .and_then(|i| i32::try_from(i).ok())
            .map_or(AttrValue::Undefined, AttrValue::Int32),
    }
}

/// areaDetector's drvInfo strings (ADDriver.h, asynNDArrayDriver.h) for the parameters every
/// driver and plugin has, so existing attribute files work unchanged.
fn drv_info(s: &str) -> Option<&'static str> {
    Some(match s {
        "MANUFACTURER" => "Manufacturer",
        "MODEL" => "Model",
        "SERIAL_NUMBER" => "SerialNumber",
        "SDK_VERSION" => "SDKVersion",
        "FIRMWARE_VERSION" => "FirmwareVersion",
        "DRIVER_VERSION" => "DriverVersion",
        "PORT_NAME_SELF" => "PortName",
        "GAIN" => "Gain",
        "BIN_X" => "BinX",
        "BIN_Y" => "BinY",
        "MIN_X" => "MinX",
        "MIN_Y" => "MinY",
        "SIZE_X" => "SizeX",
        "SIZE_Y" => "SizeY",
        "MAX_SIZE_X" => "MaxSizeX",
        "MAX_SIZE_Y" => "MaxSizeY",
        "REVERSE_X" => "ReverseX",
        "REVERSE_Y" => "ReverseY",
        "FRAME_TYPE" => "FrameType",
        "IMAGE_MODE" => "ImageMode",
        "TRIGGER_MODE" => "TriggerMode",
        "NEXPOSURES" => "NumExposures",
        "NIMAGES" => "NumImages",
        "ACQ_TIME" => "AcquireTime",
        "ACQ_PERIOD" => "AcquirePeriod",
        "STATUS" => "DetectorState",
        "ACQUIRE" => "Acquire",
        "SHUTTER_MODE" => "ShutterMode",
        "SHUTTER_CONTROL" => "ShutterControl",
        "SHUTTER_STATUS" => "ShutterStatus",
        "TEMPERATURE" => "Temperature",
        "TEMPERATURE_ACTUAL" => "TemperatureActual",
        "NIMAGES_COUNTER" => "NumImagesCounter",
        "NEXPOSURES_COUNTER" => "NumExposuresCounter",
        "TIME_REMAINING" => "TimeRemaining",
        "STATUS_MESSAGE" => "StatusMessage",
        "ARRAY_COUNTER" => "ArrayCounter",
        "ARRAY_SIZE_X" => "ArraySizeX",
        "ARRAY_SIZE_Y" => "ArraySizeY",
        "ARRAY_SIZE_Z" => "ArraySizeZ",
        "ARRAY_SIZE" => "ArraySize",
        "DATA_TYPE" => "DataType",
        "COLOR_MODE" => "ColorMode",
        "UNIQUE_ID" => "UniqueId",
        "TIME_STAMP" => "TimeStamp",
        "EPICS_TS_SEC" => "EpicsTSSec",
        "EPICS_TS_NSEC" => "EpicsTSNsec",
        "FILE_PATH" => "FilePath",
        "FILE_NAME" => "FileName",
        "FILE_NUMBER" => "FileNumber",
        "FILE_TEMPLATE" => "FileTemplate",
        "FULL_FILE_NAME" => "FullFileName",
        "NUM_CAPTURE" => "NumCapture",
        "NUM_CAPTURED" => "NumCaptured",
        _ => return None,
    })
}
