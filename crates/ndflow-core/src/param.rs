//! Parameters, declared once.
//!
//! Each port type lists its parameters in one `const` table of [`ParamDef`]s: name (the PV
//! suffix and config key, areaDetector's spelling), kind (with enum choices), access, default,
//! limits and a one-line description. A [`ParamStore`] holds the values of one port, validates
//! every external write against the declaration and refuses it with an error naming the
//! parameter and the value, in which case nothing changes. Listeners are told of every change
//! (PV monitors, wiring).
//!
//! Access decides the PV names, as areaDetector's records do: a writable `Name` is the PV
//! `Name` with readback `Name_RBV`; a read-only one is only `Name_RBV` ([`Access::ReadOnly`])
//! or only `Name` ([`Access::ReadOnlyPlain`], e.g. `QueueFree`, `PoolUsedMem`); a writable one
//! without readback is only `Name` ([`Access::WritePlain`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use thiserror::Error;

use crate::alarm::{AlarmRule, Levels, Severity};
use crate::handle::ParamLayout;
use crate::{Buffer, DataType};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
    ReadOnlyPlain,
    /// Read-only, served under both `Name` and `Name_RBV` (NDArrayBase's `ArraySize0` and
    /// `ArraySize0_RBV` are two longin records).
    ReadOnlyBoth,
    /// Writable, served only as `Name` with no readback (ADGenICam's command records,
    /// `GC_AcquisitionStart`: a longout that executes the feature when written).
    WritePlain,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    Int32,
    Int64,
    Float64,
    String,
    Enum(&'static [&'static str]),
    /// A 1-D array of the given element type (waveforms, e.g. StdArrays `ArrayData`).
    Array(DataType),
}

impl ParamKind {
    pub fn name(&self) -> &'static str {
        match self {
            ParamKind::Int32 => "int32",
            ParamKind::Int64 => "int64",
            ParamKind::Float64 => "float64",
            ParamKind::String => "string",
            ParamKind::Enum(_) => "enum",
            ParamKind::Array(_) => "array",
        }
    }
}

/// What kind of areaDetector record a parameter is served as, where its kind alone does not
/// say: a string longer than 40 characters is a `waveform` of CHAR (FilePath, FileName, …) in
/// ADCore's templates, and a command whose put completes only when the operation has ended
/// (Capture, WriteFile) is a `busy` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordHint {
    /// The natural record of the kind (ao/ai, longout/longin, bo/bi, mbbo/mbbi, stringout/in).
    Auto,
    /// A char waveform holding a NUL-terminated string.
    LongString,
    /// A busy record: a non-zero write completes when the value returns to 0.
    Busy,
    /// An mbbo/mbbi record whatever the number of choices (areaDetector declares menus that
    /// may grow as mbb records even with two entries; bo/bi is the default for two).
    Mbb,
    /// A bo record whose put completes as a busy record's does (ADBase's Acquire: a put
    /// callback returns when the acquisition has ended).
    BoCompletes,
    /// One of a template's helper records (`calc`, `calcout`, `seq`, `sseq`, `dfanout`,
    /// `fanout`, `subArray`, `asyn`), served as that record type: its value computed from
    /// other parameters ([`Derive`]) or its processing (a put, `.PROC`) acted on by the port.
    Helper(&'static str),
    /// The natural record for the setpoint, a helper record for the readback (NDPluginBase's
    /// MaxArrayRate is an ao, MaxArrayRate_RBV a calc).
    HelperReadback(&'static str),
}

/// How a parameter's value follows others of its port: what a template's calc, dfanout and
/// subArray records compute. The store keeps it up to date on every change of a source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Derive {
    /// Set by its port (the usual case).
    None,
    /// The value of another parameter (a longin or dfanout that reads it).
    Copy(&'static str),
    /// `factor` × another parameter (calcout `A*0.25`).
    Scale(&'static str, f64),
    /// One parameter minus another (calc `A-B`).
    Difference(&'static str, &'static str),
    /// 1/x, 0 when x is 0 (calc `A=0?0:1.0/A`).
    Reciprocal(&'static str),
    /// Element `i` of an array parameter, 0 past its end (a subArray with INDX `i`).
    Element(&'static str, usize),
}

impl Derive {
    /// The parameters it reads.
    pub fn sources(&self) -> [Option<&'static str>; 2] {
        match *self {
            Derive::None => [None, None],
            Derive::Copy(a)
            | Derive::Scale(a, _)
            | Derive::Reciprocal(a)
            | Derive::Element(a, _) => [Some(a), None],
            Derive::Difference(a, b) => [Some(a), Some(b)],
        }
    }
}

impl RecordHint {
    /// Whether a non-zero put completes only when the value is back to 0.
    pub fn completes_when_done(self) -> bool {
        matches!(self, RecordHint::Busy | RecordHint::BoCompletes)
    }
}

/// The compile-time default of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    Int(i64),
    Float(f64),
    Str(&'static str),
    EmptyArray,
}

/// One declaration. Build with the `const fn` constructors:
/// `ParamDef::int32("SizeX", 1024).min(1.0).doc("Region size in X")`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamDef {
    pub name: &'static str,
    pub kind: ParamKind,
    pub access: Access,
    pub default: DefaultValue,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub desc: &'static str,
    pub record: RecordHint,
    /// The readback's menu where it differs from the setpoint's (ADBase: `Acquire` is
    /// Done/Acquire, `Acquire_RBV` Done/Acquiring). Same length as the setpoint's.
    pub readback_choices: Option<&'static [&'static str]>,
    /// The value each menu entry stands for, where it is not the entry's position (an mbbo's
    /// ZRVL, ONVL, …: ADSimDetector's ColorMode menu Mono/RGB1/RGB2/RGB3 is 0/2/3/4). The
    /// store holds that value; protocols and config files speak the menu position.
    pub menu_values: Option<&'static [i64]>,
    /// Replaces an earlier table's declaration of the same name (a later template overriding
    /// an earlier one's record, as simDetector.template does NDArrayBase's ColorMode).
    pub overrides: bool,
    /// When its records alarm ([`crate::alarm`]).
    pub alarm: AlarmRule,
    /// Another parameter of the same port whose value is this one's records' high display
    /// and drive limit (HOPR; an areaDetector template's dfanout writing `MinX.HOPR` from the
    /// input size), so that sliders span the input. `None`: the declared `max`, if any.
    pub high_limit_from: Option<&'static str>,
    /// Computed from other parameters of the port ([`Derive`]).
    pub derive: Derive,
    /// Whether its record has a link field that names another PV ([`LinkKind`]).
    pub link: LinkKind,
}

/// The link a parameter's record has, as areaDetector's templates give it one. The PV it
/// names is set at run time (the `.DOL`, `.INP`, `.OUT` field).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkKind {
    None,
    /// The setpoint's `.DOL`/`.OMSL`: it takes the named PV's value on each change while
    /// `.OMSL` is `closed_loop` (an Overlay's `PositionXLink`).
    Input,
    /// The readback's `.INP`, an mbbi reading a raw value: `.ZRVL`/`.ONVL` say which raw
    /// values are states 0 and 1 (ADBase's `ShutterStatusEPICS_RBV`).
    RawInput,
    /// A calcout's `.OUT`/`.OCAL`: writes OCAL to the named PV when its value moves to
    /// non-zero (`to_nonzero`) or to zero (ADBase's `ShutterOpenEPICS`/`ShutterCloseEPICS`).
    Output {
        to_nonzero: bool,
        ocal: f64,
    },
}

impl ParamDef {
    const fn base(name: &'static str, kind: ParamKind, default: DefaultValue) -> ParamDef {
        ParamDef {
            name,
            kind,
            access: Access::ReadWrite,
            default,
            min: None,
            max: None,
            desc: "",
            record: RecordHint::Auto,
            readback_choices: None,
            menu_values: None,
            overrides: false,
            alarm: AlarmRule::None,
            high_limit_from: None,
            derive: Derive::None,
            link: LinkKind::None,
        }
    }
    pub const fn int32(name: &'static str, default: i32) -> ParamDef {
        Self::base(name, ParamKind::Int32, DefaultValue::Int(default as i64))
    }
    pub const fn int64(name: &'static str, default: i64) -> ParamDef {
        Self::base(name, ParamKind::Int64, DefaultValue::Int(default))
    }
    pub const fn float64(name: &'static str, default: f64) -> ParamDef {
        Self::base(name, ParamKind::Float64, DefaultValue::Float(default))
    }
    pub const fn string(name: &'static str, default: &'static str) -> ParamDef {
        Self::base(name, ParamKind::String, DefaultValue::Str(default))
    }
    pub const fn enumeration(
        name: &'static str,
        choices: &'static [&'static str],
        default: i32,
    ) -> ParamDef {
        Self::base(
            name,
            ParamKind::Enum(choices),
            DefaultValue::Int(default as i64),
        )
    }
    /// No/Yes enum (areaDetector's bo records), default 0 = No.
    pub const fn yes_no(name: &'static str, default: i32) -> ParamDef {
        Self::enumeration(name, &["No", "Yes"], default)
    }
    /// Disable/Enable enum, default as given.
    pub const fn enable(name: &'static str, default: i32) -> ParamDef {
        Self::enumeration(name, &["Disable", "Enable"], default)
    }
    pub const fn array(name: &'static str, element: DataType) -> ParamDef {
        Self::base(name, ParamKind::Array(element), DefaultValue::EmptyArray).read_only_plain()
    }
    pub const fn read_only(mut self) -> ParamDef {
        self.access = Access::ReadOnly;
        self
    }
    pub const fn read_only_plain(mut self) -> ParamDef {
        self.access = Access::ReadOnlyPlain;
        self
    }
    pub const fn read_only_both(mut self) -> ParamDef {
        self.access = Access::ReadOnlyBoth;
        self
    }
    pub const fn write_plain(mut self) -> ParamDef {
        self.access = Access::WritePlain;
        self
    }
    /// The readback's menu strings, where areaDetector's readback record has its own.
    pub const fn readback_choices(mut self, choices: &'static [&'static str]) -> ParamDef {
        self.readback_choices = Some(choices);
        self
    }
    /// The values the menu entries stand for (see [`ParamDef::menu_values`]).
    pub const fn menu_values(mut self, values: &'static [i64]) -> ParamDef {
        self.menu_values = Some(values);
        self
    }
    /// The severity of each menu entry on the readback (a bi's ZSV/OSV, an mbbi's ZRSV…).
    pub const fn alarm_states(mut self, severities: &'static [Severity]) -> ParamDef {
        self.alarm = AlarmRule::States {
            severities,
            outputs: false,
        };
        self
    }
    /// [`Self::alarm_states`] on the setpoint record too (a bo's ZSV/OSV).
    pub const fn alarm_states_both(mut self, severities: &'static [Severity]) -> ParamDef {
        self.alarm = AlarmRule::States {
            severities,
            outputs: true,
        };
        self
    }
    /// Level alarms whose limits are fractions of another parameter of the port.
    pub const fn alarm_levels(mut self, levels: Levels) -> ParamDef {
        self.alarm = AlarmRule::Levels(levels);
        self
    }
    /// Any non-zero value alarms with `severity` (counts of lost frames).
    pub const fn alarm_non_zero(mut self, severity: Severity) -> ParamDef {
        self.alarm = AlarmRule::NonZero(severity);
        self
    }
    /// This declaration replaces an earlier table's of the same name.
    /// Its records' high limit (HOPR, and the drive limit clients take from it) is the value of
    /// the parameter `source` of the same port, followed as it changes.
    pub const fn high_limit_from(mut self, source: &'static str) -> ParamDef {
        self.high_limit_from = Some(source);
        self
    }
    /// Its value is computed from other parameters of the port, kept up to date by the store.
    pub const fn derived(mut self, derive: Derive) -> ParamDef {
        self.derive = derive;
        self
    }
    /// Served as a template's helper record of type `record` (`calc`, `seq`, …).
    pub const fn helper(mut self, record: &'static str) -> ParamDef {
        self.record = RecordHint::Helper(record);
        self
    }
    /// Its readback (`Name_RBV`) is served as a helper record of type `record`.
    pub const fn helper_readback(mut self, record: &'static str) -> ParamDef {
        self.record = RecordHint::HelperReadback(record);
        self
    }
    pub const fn overrides(mut self) -> ParamDef {
        self.overrides = true;
        self
    }
    /// The menu position of a stored enum value (the value itself without `menu_values`);
    /// `None` for a value no entry stands for.
    pub fn menu_index(&self, value: i64) -> Option<i64> {
        match self.menu_values {
            Some(v) => v.iter().position(|x| *x == value).map(|p| p as i64),
            None => Some(value),
        }
    }
    /// The stored value of menu entry `index`.
    fn menu_value(&self, index: usize) -> i64 {
        self.menu_values
            .and_then(|v| v.get(index).copied())
            .unwrap_or(index as i64)
    }
    /// The menu of the setpoint (`readback = false`) or readback PV; `None` for non-enums.
    pub fn choices(&self, readback: bool) -> Option<&'static [&'static str]> {
        match self.kind {
            ParamKind::Enum(c) if readback => Some(self.readback_choices.unwrap_or(c)),
            ParamKind::Enum(c) => Some(c),
            _ => None,
        }
    }
    pub const fn min(mut self, min: f64) -> ParamDef {
        self.min = Some(min);
        self
    }
    pub const fn max(mut self, max: f64) -> ParamDef {
        self.max = Some(max);
        self
    }
    pub const fn range(self, min: f64, max: f64) -> ParamDef {
        self.min(min).max(max)
    }
    /// Served as a char waveform (a string that may exceed 40 characters).
    pub const fn long_string(mut self) -> ParamDef {
        self.record = RecordHint::LongString;
        self
    }
    /// A link record with `.DOL`/`.OMSL` ([`LinkKind::Input`]).
    pub const fn input_link(mut self) -> ParamDef {
        self.link = LinkKind::Input;
        self
    }
    /// Its readback reads a raw value through `.INP` ([`LinkKind::RawInput`]).
    pub const fn raw_input_link(mut self) -> ParamDef {
        self.link = LinkKind::RawInput;
        self
    }
    /// A calcout writing `ocal` through `.OUT` on a transition ([`LinkKind::Output`]).
    pub const fn output_link(mut self, to_nonzero: bool, ocal: f64) -> ParamDef {
        self.link = LinkKind::Output { to_nonzero, ocal };
        self
    }
    /// Served as mbbo/mbbi even with two choices ([`RecordHint::Mbb`]).
    pub const fn mbb(mut self) -> ParamDef {
        self.record = RecordHint::Mbb;
        self
    }
    /// A busy record: a put of a non-zero value completes when the value is back to 0.
    pub const fn busy(mut self) -> ParamDef {
        self.record = RecordHint::Busy;
        self
    }
    /// Like [`Self::busy`] but served as a bo record (ADBase's Acquire).
    pub const fn completes_when_done(mut self) -> ParamDef {
        self.record = RecordHint::BoCompletes;
        self
    }
    pub const fn doc(mut self, desc: &'static str) -> ParamDef {
        self.desc = desc;
        self
    }

    pub fn writable(&self) -> bool {
        matches!(self.access, Access::ReadWrite | Access::WritePlain)
    }

    /// The PV suffixes this parameter is served under.
    pub fn pv_names(&self) -> Vec<String> {
        match self.access {
            Access::ReadWrite => vec![self.name.to_string(), format!("{}_RBV", self.name)],
            Access::ReadOnly => vec![format!("{}_RBV", self.name)],
            Access::ReadOnlyPlain | Access::WritePlain => vec![self.name.to_string()],
            Access::ReadOnlyBoth => vec![self.name.to_string(), format!("{}_RBV", self.name)],
        }
    }

    pub fn default_value(&self) -> ParamValue {
        match self.default {
            DefaultValue::Int(i) => ParamValue::Int(i),
            DefaultValue::Float(f) => ParamValue::Float(f),
            DefaultValue::Str(s) => ParamValue::Str(s.to_string()),
            DefaultValue::EmptyArray => ParamValue::Array(ArrayValue::empty(match self.kind {
                ParamKind::Array(dt) => dt,
                _ => DataType::Float64,
            })),
        }
    }

    /// Checks and converts a value for this parameter (ignores access).
    pub fn coerce(&self, value: ParamValue) -> Result<ParamValue, ParamError> {
        let bad = |reason: String| ParamError::BadValue {
            name: self.name.to_string(),
            value: value.to_string(),
            reason,
        };
        let v = match (&self.kind, &value) {
            (ParamKind::Int32 | ParamKind::Int64, ParamValue::Int(i)) => ParamValue::Int(*i),
            (ParamKind::Int32 | ParamKind::Int64, ParamValue::Float(f)) => {
                if f.fract() != 0.0 || !f.is_finite() {
                    return Err(bad("expected an integer".into()));
                }
                ParamValue::Int(*f as i64)
            }
            (ParamKind::Int32 | ParamKind::Int64, ParamValue::Str(s)) => ParamValue::Int(
                s.trim()
                    .parse::<i64>()
                    .map_err(|_| bad("expected an integer".into()))?,
            ),
            (ParamKind::Float64, ParamValue::Int(i)) => ParamValue::Float(*i as f64),
            (ParamKind::Float64, ParamValue::Float(f)) => ParamValue::Float(*f),
            (ParamKind::Float64, ParamValue::Str(s)) => ParamValue::Float(
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| bad("expected a number".into()))?,
            ),
            (ParamKind::String, ParamValue::Str(s)) => ParamValue::Str(s.clone()),
            (ParamKind::String, ParamValue::Int(_) | ParamValue::Float(_)) => {
                ParamValue::Str(value.to_string())
            }
            (ParamKind::Enum(choices), ParamValue::Int(i)) => {
                if *i < 0 || *i as usize >= choices.len() {
                    return Err(ParamError::BadEnum {
                        name: self.name.to_string(),
                        value: i.to_string(),
                        choices: choices.join(", "),
                    });
                }
                ParamValue::Int(self.menu_value(*i as usize))
            }
            (ParamKind::Enum(choices), ParamValue::Str(s)) => {
                let idx = choices.iter().position(|c| c == s).or_else(|| {
                    s.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|i| *i < choices.len())
                });
                match idx {
                    Some(i) => ParamValue::Int(self.menu_value(i)),
                    None => {
                        return Err(ParamError::BadEnum {
                            name: self.name.to_string(),
                            value: s.clone(),
                            choices: choices.join(", "),
                        })
                    }
                }
            }
            (ParamKind::Array(_), ParamValue::Array(a)) => ParamValue::Array(a.clone()),
            _ => return Err(bad(format!("expected {}", self.kind.name()))),
        };
        if let ParamValue::Int(i) = v {
            if self.kind == ParamKind::Int32 && i32::try_from(i).is_err() {
                return Err(bad("out of the int32 range".into()));
            }
        }
        if let Some(x) = v.as_f64() {
            let below = self.min.is_some_and(|m| x < m);
            let above = self.max.is_some_and(|m| x > m);
            if (below || above) && !matches!(self.kind, ParamKind::Enum(_)) {
                return Err(ParamError::OutOfRange {
                    name: self.name.to_string(),
                    value: value.to_string(),
                    min: self.min.map_or("-inf".into(), |m| m.to_string()),
                    max: self.max.map_or("inf".into(), |m| m.to_string()),
                });
            }
        }
        Ok(v)
    }

    /// The value as JSON, enums as their string.
    pub fn to_json(&self, v: &ParamValue) -> serde_json::Value {
        match (&self.kind, v) {
            (ParamKind::Enum(choices), ParamValue::Int(i)) => self
                .menu_index(*i)
                .and_then(|m| choices.get(m as usize))
                .map_or(serde_json::Value::from(*i), |s| serde_json::Value::from(*s)),
            (_, ParamValue::Int(i)) => (*i).into(),
            (_, ParamValue::Float(f)) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            (_, ParamValue::Str(s)) => s.clone().into(),
            (_, ParamValue::Array(a)) => serde_json::json!({
                "type": a.data_type.name(),
                "length": a.len(),
            }),
        }
    }
}

/// A 1-D array value sharing a pooled buffer (no copy when a frame is already the right type).
#[derive(Debug, Clone)]
pub struct ArrayValue {
    pub data_type: DataType,
    pub buffer: Buffer,
    /// Number of elements.
    pub len: usize,
}

impl ArrayValue {
    pub fn empty(data_type: DataType) -> ArrayValue {
        ArrayValue {
            data_type,
            buffer: Buffer::from_bytes(&[]),
            len: 0,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> &[u8] {
        let n = (self.len * self.data_type.size()).min(self.buffer.len());
        &self.buffer[..n]
    }
    /// Element `i` as a number; `None` past the end.
    pub fn element_f64(&self, i: usize) -> Option<f64> {
        let size = self.data_type.size();
        let b = self.bytes().get(i * size..(i + 1) * size)?;
        Some(crate::with_pixel_type!(self.data_type, T => {
            crate::Pixel::to_f64(bytemuck::pod_read_unaligned::<T>(b))
        }))
    }
}

/// Identity, not contents: comparing a frame's pixels on every update would cost a full pass,
/// and two frames with equal pixels are still two updates for monitors.
impl PartialEq for ArrayValue {
    fn eq(&self, o: &ArrayValue) -> bool {
        self.data_type == o.data_type && self.len == o.len && self.buffer.ptr_eq(&o.buffer)
    }
}

/// A parameter value. Enums are `Int` (the index).
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Int(i64),
    Float(f64),
    Str(String),
    Array(ArrayValue),
}

impl ParamValue {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(i) => Some(*i as f64),
            ParamValue::Float(f) => Some(*f),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ParamValue::Int(i) => Some(*i),
            ParamValue::Float(f) => Some(*f as i64),
            _ => None,
        }
    }
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Str(s) => write!(f, "\"{s}\""),
            ParamValue::Array(a) => write!(f, "[{} x {}]", a.len, a.data_type),
        }
    }
}

impl From<i64> for ParamValue {
    fn from(v: i64) -> Self {
        ParamValue::Int(v)
    }
}
impl From<i32> for ParamValue {
    fn from(v: i32) -> Self {
        ParamValue::Int(v as i64)
    }
}
impl From<usize> for ParamValue {
    fn from(v: usize) -> Self {
        ParamValue::Int(v as i64)
    }
}
impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}
impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Str(v.to_string())
    }
}
impl From<String> for ParamValue {
    fn from(v: String) -> Self {
        ParamValue::Str(v)
    }
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ParamError {
    #[error("unknown parameter '{name}'")]
    Unknown { name: String },
    #[error("parameter '{name}' is read-only")]
    ReadOnly { name: String },
    #[error("bad value {value} for '{name}': {reason}")]
    BadValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("value {value} for '{name}' is out of range [{min}, {max}]")]
    OutOfRange {
        name: String,
        value: String,
        min: String,
        max: String,
    },
    #[error("bad value {value} for enum '{name}': choices are {choices} (or their index)")]
    BadEnum {
        name: String,
        value: String,
        choices: String,
    },
    #[error("refused write of {value} to '{name}': {reason}")]
    Refused {
        name: String,
        value: String,
        reason: String,
    },
}

type Listener = Arc<dyn Fn(usize, &ParamValue) + Send + Sync>;

/// The values of one port's parameters.
pub struct ParamStore {
    layout: ParamLayout,
    /// Per parameter: the derived parameters that read it ([`Derive`]).
    followers: Vec<Vec<usize>>,
    /// Per parameter: the positions of the sources its [`Derive`] reads, resolved once (a
    /// source such as Dimensions changes with every frame).
    sources: Vec<[Option<usize>; 2]>,
    values: RwLock<Vec<ParamValue>>,
    version: AtomicU64,
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for ParamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamStore")
            .field("params", &self.layout.defs().len())
            .finish()
    }
}

impl ParamStore {
    /// A store over the concatenation of `tables`; a later table may not repeat a name
    /// (the first declaration wins; `duplicate_names` reports repeats for tests) unless its
    /// declaration says it [`ParamDef::overrides`] the earlier one.
    pub fn new(tables: &[&'static [ParamDef]]) -> ParamStore {
        ParamStore::from_layout(ParamLayout::new(tables))
    }

    /// A store over `layout`, every value at its default.
    pub fn from_layout(layout: ParamLayout) -> ParamStore {
        let values = layout.defs().iter().map(|d| d.default_value()).collect();
        let mut followers = vec![Vec::new(); layout.defs().len()];
        let sources: Vec<[Option<usize>; 2]> = layout
            .defs()
            .iter()
            .map(|d| d.derive.sources().map(|n| n.and_then(|n| layout.index(n))))
            .collect();
        for (i, src) in sources.iter().enumerate() {
            for s in src.iter().flatten() {
                if let Some(f) = followers.get_mut(*s) {
                    f.push(i);
                }
            }
        }
        let store = ParamStore {
            layout,
            followers,
            sources,
            values: RwLock::new(values),
            version: AtomicU64::new(0),
            listeners: Mutex::new(Vec::new()),
        };
        let derived: Vec<usize> = (0..store.defs().len())
            .filter(|&i| store.defs()[i].derive != Derive::None)
            .collect();
        for i in derived {
            store.recompute(i);
        }
        store
    }

    /// Recomputes the derived parameter `idx` from its sources.
    fn recompute(&self, idx: usize) {
        let (Some(def), Some(&[a, b])) = (self.def(idx), self.sources.get(idx)) else {
            return;
        };
        let x = {
            let values = self.values.read();
            let num = |i: Option<usize>| i.and_then(|i| values.get(i)?.as_f64()).unwrap_or(0.0);
            match def.derive {
                Derive::None => return,
                Derive::Copy(_) => num(a),
                Derive::Scale(_, k) => k * num(a),
                Derive::Difference(..) => num(a) - num(b),
                Derive::Reciprocal(_) => match num(a) {
                    0.0 => 0.0,
                    v => 1.0 / v,
                },
                Derive::Element(_, i) => match a.and_then(|a| values.get(a)) {
                    Some(ParamValue::Array(arr)) => arr.element_f64(i).unwrap_or(0.0),
                    _ => 0.0,
                },
            }
        };
        let v = match def.kind {
            ParamKind::Float64 => ParamValue::Float(x),
            _ => ParamValue::Int(x.round() as i64),
        };
        if let Ok(v) = coerce_internal(def, v) {
            self.store(idx, v, false);
        }
    }

    /// Brings the parameters derived from `changed` up to date.
    fn follow(&self, changed: impl IntoIterator<Item = usize>) {
        for idx in changed {
            for &f in self.followers.get(idx).map_or(&[][..], Vec::as_slice) {
                self.recompute(f);
            }
        }
    }

    /// The positions of this store's parameters (what typed handles are bound to).
    pub fn layout(&self) -> &ParamLayout {
        &self.layout
    }

    /// Names declared more than once across `tables` (should be empty).
    pub fn duplicate_names(tables: &[&'static [ParamDef]]) -> Vec<&'static str> {
        let mut seen = std::collections::HashSet::new();
        tables
            .iter()
            .flat_map(|t| t.iter())
            .filter(|d| !seen.insert(d.name) && !d.overrides)
            .map(|d| d.name)
            .collect()
    }

    pub fn defs(&self) -> &[&'static ParamDef] {
        self.layout.defs()
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.layout.index(name)
    }

    /// Index of a declared parameter, or `ParamError::Unknown`.
    pub fn require(&self, name: &str) -> Result<usize, ParamError> {
        self.index(name).ok_or_else(|| ParamError::Unknown {
            name: name.to_string(),
        })
    }

    pub fn def(&self, idx: usize) -> Option<&'static ParamDef> {
        self.layout.defs().get(idx).copied()
    }

    /// Incremented on every change; plugins re-read their settings when it moves.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn get(&self, idx: usize) -> Option<ParamValue> {
        self.values.read().get(idx).cloned()
    }

    pub fn get_f64(&self, idx: usize) -> f64 {
        self.values
            .read()
            .get(idx)
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    }

    pub fn get_i64(&self, idx: usize) -> i64 {
        self.values
            .read()
            .get(idx)
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
    }

    pub fn get_str(&self, idx: usize) -> String {
        match self.values.read().get(idx) {
            Some(ParamValue::Str(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    }

    pub fn get_by_name(&self, name: &str) -> Result<ParamValue, ParamError> {
        let idx = self.require(name)?;
        Ok(self.values.read()[idx].clone())
    }

    /// Runs `f` over all values under one read lock (settings snapshots).
    pub fn with_values<R>(&self, f: impl FnOnce(&[ParamValue]) -> R) -> R {
        f(&self.values.read())
    }

    /// An external write (PV put, config key, API): validated, refused if read-only.
    /// Returns the value stored.
    pub fn put(&self, name: &str, value: ParamValue) -> Result<ParamValue, ParamError> {
        let idx = self.require(name)?;
        let def = self.layout.defs()[idx];
        if !def.writable() {
            return Err(ParamError::ReadOnly {
                name: name.to_string(),
            });
        }
        let v = def.coerce(value)?;
        self.store(idx, v.clone(), true);
        Ok(v)
    }

    /// An internal write (driver/plugin results, readbacks): type-checked, access ignored.
    /// Listeners are told only when the value changes.
    pub fn set(&self, idx: usize, value: impl Into<ParamValue>) -> Result<(), ParamError> {
        let def = self
            .layout
            .defs()
            .get(idx)
            .ok_or_else(|| ParamError::Unknown {
                name: format!("#{idx}"),
            })?;
        let v = coerce_internal(def, value.into())?;
        self.store(idx, v, false);
        Ok(())
    }

    /// An internal write of a value already of the declaration's type (typed handles).
    pub(crate) fn write_typed(&self, idx: usize, v: ParamValue) {
        if idx < self.layout.defs().len() {
            self.store(idx, v, false);
        }
    }

    /// Internal write by name.
    pub fn set_by_name(&self, name: &str, value: impl Into<ParamValue>) -> Result<(), ParamError> {
        let idx = self.require(name)?;
        self.set(idx, value)
    }

    /// Several internal writes under one lock (a plugin's results for one frame).
    pub fn set_many(&self, writes: &[(usize, ParamValue)]) {
        let mut changed = Vec::new();
        {
            let mut values = self.values.write();
            for (idx, v) in writes {
                let Some(def) = self.layout.defs().get(*idx) else {
                    continue;
                };
                let Ok(v) = coerce_internal(def, v.clone()) else {
                    continue;
                };
                if values[*idx] != v {
                    values[*idx] = v.clone();
                    changed.push((*idx, v));
                }
            }
        }
        if !changed.is_empty() {
            self.version.fetch_add(1, Ordering::AcqRel);
            self.notify(&changed);
            self.follow(changed.iter().map(|(i, _)| *i));
        }
    }

    fn store(&self, idx: usize, v: ParamValue, always_notify: bool) {
        let changed = {
            let mut values = self.values.write();
            let changed = values[idx] != v;
            if changed {
                values[idx] = v.clone();
            }
            changed
        };
        if changed {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        if changed || always_notify {
            self.notify(&[(idx, v)]);
        }
        if changed {
            self.follow([idx]);
        }
    }

    fn notify(&self, changes: &[(usize, ParamValue)]) {
        let listeners: Vec<Listener> = self.listeners.lock().clone();
        for l in &listeners {
            for (idx, v) in changes {
                l(*idx, v);
            }
        }
    }

    /// Calls `f(index, new value)` after each change (and after every external write, even
    /// of the same value, so that command parameters like `Acquire` or `ResetFilter` fire).
    pub fn subscribe(&self, f: impl Fn(usize, &ParamValue) + Send + Sync + 'static) {
        self.listeners.lock().push(Arc::new(f));
    }

    /// Every PV suffix with its value as JSON (enums as strings), in declaration order.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let values = self.values.read();
        let mut map = serde_json::Map::new();
        for (def, v) in self.layout.defs().iter().zip(values.iter()) {
            let j = def.to_json(v);
            for pv in def.pv_names() {
                map.insert(pv, j.clone());
            }
        }
        map
    }
}

fn coerce_internal(def: &ParamDef, v: ParamValue) -> Result<ParamValue, ParamError> {
    // Results may legitimately fall outside user limits; only the type is enforced.
    match (&def.kind, v) {
        (ParamKind::Int32 | ParamKind::Int64 | ParamKind::Enum(_), ParamValue::Int(i)) => {
            Ok(ParamValue::Int(i))
        }
        (ParamKind::Int32 | ParamKind::Int64 | ParamKind::Enum(_), ParamValue::Float(f)) => {
            Ok(ParamValue::Int(f as i64))
        }
        (ParamKind::Float64, ParamValue::Float(f)) => Ok(ParamValue::Float(f)),
        (ParamKind::Float64, ParamValue::Int(i)) => Ok(ParamValue::Float(i as f64)),
        (ParamKind::String, ParamValue::Str(s)) => Ok(ParamValue::Str(s)),
        (ParamKind::Array(_), ParamValue::Array(a)) => Ok(ParamValue::Array(a)),
        (_, v) => def.coerce(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[ParamDef] = &[
        ParamDef::int32("SizeX", 100).range(1.0, 1000.0).doc("size"),
        ParamDef::float64("Gain", 1.0),
        ParamDef::enumeration("ImageMode", &["Single", "Multiple", "Continuous"], 2),
        ParamDef::string("Name", "x"),
        ParamDef::int32("MaxSizeX", 1024).read_only(),
        ParamDef::int32("QueueFree", 0).read_only_plain(),
    ];

    #[test]
    fn validates_and_refuses_without_change() {
        let s = ParamStore::new(&[TABLE]);
        assert_eq!(s.put("SizeX", 512.into()).unwrap(), ParamValue::Int(512));
        let e = s.put("SizeX", 0.into()).unwrap_err();
        assert!(e.to_string().contains("SizeX") && e.to_string().contains("out of range"));
        assert_eq!(s.get_by_name("SizeX").unwrap(), ParamValue::Int(512));
        assert!(matches!(
            s.put("MaxSizeX", 1.into()),
            Err(ParamError::ReadOnly { .. })
        ));
        assert!(matches!(
            s.put("Nope", 1.into()),
            Err(ParamError::Unknown { .. })
        ));
        assert!(s.put("SizeX", "abc".into()).is_err());
        assert!(s.put("SizeX", 1.5.into()).is_err());
    }

    #[test]
    fn enums_take_string_or_index() {
        let s = ParamStore::new(&[TABLE]);
        s.put("ImageMode", "Multiple".into()).unwrap();
        assert_eq!(s.get_i64(s.index("ImageMode").unwrap()), 1);
        s.put("ImageMode", 0.into()).unwrap();
        s.put("ImageMode", "2".into()).unwrap();
        let e = s.put("ImageMode", "Sometimes".into()).unwrap_err();
        assert!(e.to_string().contains("Single, Multiple, Continuous"));
        assert!(s.put("ImageMode", 3.into()).is_err());
        assert_eq!(s.to_json()["ImageMode_RBV"], "Continuous");
    }

    #[test]
    fn pv_names_follow_access() {
        let s = ParamStore::new(&[TABLE]);
        let j = s.to_json();
        assert!(j.contains_key("SizeX") && j.contains_key("SizeX_RBV"));
        assert!(j.contains_key("MaxSizeX_RBV") && !j.contains_key("MaxSizeX"));
        assert!(j.contains_key("QueueFree") && !j.contains_key("QueueFree_RBV"));
    }

    #[test]
    fn listeners_and_version() {
        let s = ParamStore::new(&[TABLE]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        s.subscribe(move |i, v| seen2.lock().push((i, v.clone())));
        let v0 = s.version();
        s.set(1, 2.5).unwrap();
        s.set(1, 2.5).unwrap(); // unchanged: no notification
        s.put("Gain", 2.5.into()).unwrap(); // external write notifies even when equal
        assert_eq!(s.version(), v0 + 1);
        assert_eq!(seen.lock().len(), 2);
        s.set_many(&[(0, 7.into()), (1, 3.0.into())]);
        assert_eq!(seen.lock().len(), 4);
    }

    #[test]
    fn duplicates_detected() {
        assert!(ParamStore::duplicate_names(&[TABLE]).is_empty());
        assert_eq!(
            ParamStore::duplicate_names(&[TABLE, TABLE]).len(),
            TABLE.len()
        );
    }

    const BASE: &[ParamDef] = &[ParamDef::enumeration(
        "ColorMode",
        &["Mono", "Bayer", "RGB1", "RGB2", "RGB3"],
        0,
    )];
    const NARROW: &[ParamDef] =
        &[
            ParamDef::enumeration("ColorMode", &["Mono", "RGB1", "RGB2", "RGB3"], 0)
                .menu_values(&[0, 2, 3, 4])
                .overrides(),
        ];

    #[test]
    fn an_overriding_menu_speaks_positions_and_stores_its_values() {
        let st = ParamStore::new(&[BASE, NARROW]);
        assert!(ParamStore::duplicate_names(&[BASE, NARROW]).is_empty());
        let def = st.def(st.index("ColorMode").unwrap()).unwrap();
        assert_eq!(
            def.choices(false).unwrap().len(),
            4,
            "the later table's menu"
        );
        // A position (CA/pvAccess index, config integer) and a name store the entry's value.
        assert_eq!(
            st.put("ColorMode", ParamValue::from(1i64)).unwrap(),
            ParamValue::Int(2)
        );
        assert_eq!(
            st.put("ColorMode", ParamValue::from("RGB3")).unwrap(),
            ParamValue::Int(4)
        );
        assert_eq!(
            st.put("ColorMode", ParamValue::from("2")).unwrap(),
            ParamValue::Int(3)
        );
        assert!(
            st.put("ColorMode", ParamValue::from(4i64)).is_err(),
            "only 4 entries"
        );
        assert!(st.put("ColorMode", ParamValue::from("Bayer")).is_err());
        assert_eq!(def.to_json(&ParamValue::Int(3)), serde_json::json!("RGB2"));
        assert_eq!((def.menu_index(4), def.menu_index(1)), (Some(3), None));
        // Internal writes (a frame's colour mode as a readback) keep the value as it is.
        st.set_by_name("ColorMode", 1i64).unwrap();
        assert_eq!(st.get_by_name("ColorMode").unwrap(), ParamValue::Int(1));
        // Without `overrides` the first declaration still wins.
        const PLAIN: &[ParamDef] = &[ParamDef::int32("ColorMode", 9)];
        let plain = PLAIN;
        let st = ParamStore::new(&[BASE, plain]);
        assert_eq!(st.def(0).unwrap().choices(false).unwrap().len(), 5);
        assert_eq!(
            ParamStore::duplicate_names(&[BASE, plain]),
            vec!["ColorMode"]
        );
    }

    #[test]
    fn derived_parameters_follow_their_sources() {
        static T: &[ParamDef] = &[
            ParamDef::int32("QueueSize", 10),
            ParamDef::int32("QueueFree", 10),
            ParamDef::float64("Low", 0.0)
                .read_only_plain()
                .helper("calcout")
                .derived(Derive::Scale("QueueSize", 0.25)),
            ParamDef::int32("Use", 0)
                .read_only_plain()
                .derived(Derive::Difference("QueueSize", "QueueFree")),
            ParamDef::float64("Rate", 0.0),
            ParamDef::float64("Recip", 0.0).derived(Derive::Reciprocal("Rate")),
            ParamDef::array("Dims", DataType::Int32),
            ParamDef::int32("Dim1", 0).derived(Derive::Element("Dims", 1)),
            ParamDef::int32("Dim5", 7).derived(Derive::Element("Dims", 5)),
            ParamDef::int32("Copy", 0).derived(Derive::Copy("Dim1")),
        ];
        let s = ParamStore::new(&[T]);
        let f = |n: &str| s.get_f64(s.index(n).unwrap());
        // Computed at construction from the defaults.
        assert_eq!(
            (f("Low"), f("Use"), f("Recip"), f("Dim5")),
            (2.5, 0.0, 0.0, 0.0)
        );
        s.put("QueueSize", ParamValue::Int(22)).unwrap();
        s.set_by_name("QueueFree", 20).unwrap();
        assert_eq!((f("Low"), f("Use")), (5.5, 2.0));
        s.put("Rate", ParamValue::Float(4.0)).unwrap();
        assert_eq!(f("Recip"), 0.25);
        s.put("Rate", ParamValue::Float(0.0)).unwrap();
        assert_eq!(f("Recip"), 0.0, "1/0 is 0, as the calc's A=0?0:1/A");
        let dims: Vec<u8> = [640i32, 480, 3]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        s.set_by_name(
            "Dims",
            ParamValue::Array(ArrayValue {
                data_type: DataType::Int32,
                buffer: crate::Buffer::from_bytes(&dims),
                len: 3,
            }),
        )
        .unwrap();
        // An element past the end is 0; a chain (Copy of a derived value) follows too.
        assert_eq!((f("Dim1"), f("Dim5"), f("Copy")), (480.0, 0.0, 480.0));
        assert_eq!(s.def(2).unwrap().record, RecordHint::Helper("calcout"));
    }
}
