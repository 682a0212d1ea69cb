//! Typed parameter handles, generated from the declarations.
//!
//! A port's parameters are declared once with [`params!`](crate::params): each entry gives a
//! field name and a [`ParamDef`] constructor. The macro yields both the `const` table (what
//! the store, the PV directory, the config reader and the docs read) and a struct of
//! [`Param<T>`] handles whose `T` follows from the constructor (`int32` → [`Int`],
//! `float64` → [`Float`], `yes_no` → [`Flag`], …). Plugins read and write through the
//! handles, so a misspelt parameter or a value of the wrong type does not compile:
//!
//! ```
//! use ndflow_core::{ParamLayout, ParamStore};
//! ndflow_core::params! {
//!     pub const GAIN_PARAMS, pub struct Gain {
//!         gain: float64("Gain", 1.0).min(0.0).doc("Multiplier"),
//!         enabled: enable("EnableGain", 1).doc("Apply the gain"),
//!     }
//! }
//! let layout = ParamLayout::new(&[GAIN_PARAMS]);
//! let p = Gain::bind(&layout)?;
//! let store = ParamStore::from_layout(layout);
//! p.gain.set(&store, 2.5);
//! assert!(p.enabled.get(&store));
//! assert_eq!(p.gain.get(&store), 2.5);
//! # Ok::<(), ndflow_core::ParamError>(())
//! ```
//!
//! The same with a misspelt handle (error E0609, no such field) or a value of the wrong
//! type (E0308):
//!
//! ```compile_fail,E0609
//! # ndflow_core::params! {
//! #     pub const GAIN_PARAMS, pub struct Gain {
//! #         gain: float64("Gain", 1.0).min(0.0).doc("Multiplier"),
//! #     }
//! # }
//! fn use_it(p: &Gain, store: &ndflow_core::ParamStore) -> f64 {
//!     p.gian.get(store)
//! }
//! ```
//!
//! ```compile_fail,E0308
//! # ndflow_core::params! {
//! #     pub const GAIN_PARAMS, pub struct Gain {
//! #         gain: float64("Gain", 1.0).min(0.0).doc("Multiplier"),
//! #     }
//! # }
//! fn use_it(p: &Gain, store: &ndflow_core::ParamStore) {
//!     p.gain.set(store, "high");
//! }
//! ```
//!
//! Handles are positions in a [`ParamLayout`] (the concatenation of a port's tables), found
//! once when the port is built; reading one is an index into the store, as cheap as the
//! hand-kept indices it replaces.

use std::collections::HashMap;
use std::marker::PhantomData;

use crate::param::{ArrayValue, ParamDef, ParamError, ParamKind, ParamStore, ParamValue};

/// The parameters of one port in store order: the concatenation of its tables, where a later
/// table's declaration of an existing name is dropped unless it [`ParamDef::overrides`] it.
#[derive(Debug, Clone)]
pub struct ParamLayout {
    defs: Vec<&'static ParamDef>,
    index: HashMap<&'static str, usize>,
}

impl ParamLayout {
    pub fn new(tables: &[&'static [ParamDef]]) -> ParamLayout {
        let mut defs: Vec<&'static ParamDef> = Vec::new();
        let mut index = HashMap::new();
        for table in tables {
            for def in table.iter() {
                match index.get(def.name) {
                    None => {
                        index.insert(def.name, defs.len());
                        defs.push(def);
                    }
                    Some(&at) if def.overrides => defs[at] = def,
                    Some(_) => {}
                }
            }
        }
        ParamLayout { defs, index }
    }

    pub fn defs(&self) -> &[&'static ParamDef] {
        &self.defs
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The handle of `def`, a declaration of one of this layout's tables. Fails when the name
    /// is not here or is held by a declaration of another kind (a duplicate across tables).
    pub fn bind<T: ParamType>(&self, def: Option<&ParamDef>) -> Result<Param<T>, ParamError> {
        let def = def.ok_or_else(|| ParamError::Unknown {
            name: "(past the end of its table)".into(),
        })?;
        let idx = self.index(def.name).ok_or_else(|| ParamError::Unknown {
            name: def.name.to_string(),
        })?;
        let held = self.defs[idx];
        if !T::accepts(&held.kind) {
            return Err(ParamError::BadValue {
                name: def.name.to_string(),
                value: held.kind.name().to_string(),
                reason: format!(
                    "declared twice, as {} and {}",
                    def.kind.name(),
                    held.kind.name()
                ),
            });
        }
        Ok(Param {
            idx,
            name: def.name,
            _type: PhantomData,
        })
    }
}

/// What a handle reads and writes: one marker per kind of declaration.
pub trait ParamType {
    type Value;
    fn accepts(kind: &ParamKind) -> bool;
    fn from_param(v: &ParamValue) -> Self::Value;
    fn to_param(v: Self::Value) -> ParamValue;
}

/// `int32` / `int64`: read as `i64`.
#[derive(Debug, Clone, Copy)]
pub struct Int;
/// `float64`.
#[derive(Debug, Clone, Copy)]
pub struct Float;
/// `string`.
#[derive(Debug, Clone, Copy)]
pub struct Str;
/// `enumeration`: the stored value (the menu position unless the declaration has
/// `menu_values`).
#[derive(Debug, Clone, Copy)]
pub struct Menu;
/// `yes_no` / `enable`: a two-entry menu read as `bool` (entry 1 = true).
#[derive(Debug, Clone, Copy)]
pub struct Flag;
/// `array`: a waveform.
#[derive(Debug, Clone, Copy)]
pub struct Array;

impl ParamType for Int {
    type Value = i64;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::Int32 | ParamKind::Int64)
    }
    fn from_param(v: &ParamValue) -> i64 {
        v.as_i64().unwrap_or(0)
    }
    fn to_param(v: i64) -> ParamValue {
        ParamValue::Int(v)
    }
}

impl ParamType for Float {
    type Value = f64;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::Float64)
    }
    fn from_param(v: &ParamValue) -> f64 {
        v.as_f64().unwrap_or(0.0)
    }
    fn to_param(v: f64) -> ParamValue {
        ParamValue::Float(v)
    }
}

impl ParamType for Str {
    type Value = String;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::String)
    }
    fn from_param(v: &ParamValue) -> String {
        match v {
            ParamValue::Str(s) => s.clone(),
            v => v.to_string(),
        }
    }
    fn to_param(v: String) -> ParamValue {
        ParamValue::Str(v)
    }
}

impl ParamType for Menu {
    type Value = i64;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::Enum(_))
    }
    fn from_param(v: &ParamValue) -> i64 {
        v.as_i64().unwrap_or(0)
    }
    fn to_param(v: i64) -> ParamValue {
        ParamValue::Int(v)
    }
}

impl ParamType for Flag {
    type Value = bool;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::Enum(c) if c.len() == 2)
    }
    fn from_param(v: &ParamValue) -> bool {
        v.as_i64().unwrap_or(0) != 0
    }
    fn to_param(v: bool) -> ParamValue {
        ParamValue::Int(v as i64)
    }
}

impl ParamType for Array {
    type Value = ArrayValue;
    fn accepts(kind: &ParamKind) -> bool {
        matches!(kind, ParamKind::Array(_))
    }
    fn from_param(v: &ParamValue) -> ArrayValue {
        match v {
            ParamValue::Array(a) => a.clone(),
            _ => ArrayValue::empty(crate::DataType::Float64),
        }
    }
    fn to_param(v: ArrayValue) -> ParamValue {
        ParamValue::Array(v)
    }
}

/// One parameter of one port layout. `Copy`: keep handles in the plugin, pass them around.
pub struct Param<T> {
    idx: usize,
    name: &'static str,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Param<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Param<T> {}

impl<T> std::fmt::Debug for Param<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.idx)
    }
}

impl<T> PartialEq for Param<T> {
    fn eq(&self, o: &Self) -> bool {
        self.idx == o.idx
    }
}
impl<T> Eq for Param<T> {}

impl<T: ParamType> Param<T> {
    /// The position in the store (what [`ParamStore::subscribe`] listeners are told).
    pub fn index(self) -> usize {
        self.idx
    }

    /// The declared name (PV suffix).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Whether a change notification for store position `idx` is this parameter.
    pub fn is(self, idx: usize) -> bool {
        self.idx == idx
    }

    #[inline]
    fn check(self, store: &ParamStore) {
        debug_assert_eq!(
            store.def(self.idx).map(|d| d.name),
            Some(self.name),
            "handle used with a store of another layout"
        );
    }

    /// The current value.
    #[inline]
    pub fn get(self, store: &ParamStore) -> T::Value {
        self.check(store);
        store.with_values(|v| self.read(v))
    }

    /// The value in a snapshot taken with [`ParamStore::with_values`] (several reads under
    /// one lock).
    #[inline]
    pub fn read(self, values: &[ParamValue]) -> T::Value {
        values
            .get(self.idx)
            .map_or_else(|| T::from_param(&ParamValue::Int(0)), |v| T::from_param(v))
    }

    /// An internal write (a result or readback), access ignored. It cannot fail: the value's
    /// type is the declaration's, checked when the handle was bound.
    pub fn set(self, store: &ParamStore, value: T::Value) {
        self.check(store);
        store.write_typed(self.idx, T::to_param(value));
    }

    /// One entry of a [`ParamStore::set_many`] batch.
    pub fn value(self, value: T::Value) -> (usize, ParamValue) {
        (self.idx, T::to_param(value))
    }

    /// An external write (as a PV put or config key would make): validated, refused if
    /// read-only, listeners told even when the value is unchanged.
    pub fn put(self, store: &ParamStore, value: T::Value) -> Result<ParamValue, ParamError> {
        self.check(store);
        store.put(self.name, T::to_param(value))
    }
}

/// Copies `parts` one after the other into one array, in a `const` context: a port's table
/// made of several declared groups (`join::<{ A.len() + B.len() }>(&[A, B])`).
pub const fn join<const N: usize>(parts: &[&[ParamDef]]) -> [ParamDef; N] {
    let mut out = [ParamDef::int32("", 0); N];
    let (mut p, mut at) = (0, 0);
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[at] = parts[p][i];
            at += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(at == N, "join: N is not the total length of the parts");
    out
}

#[doc(hidden)]
#[macro_export]
macro_rules! __param_type {
    (int32) => {
        $crate::handle::Int
    };
    (int64) => {
        $crate::handle::Int
    };
    (float64) => {
        $crate::handle::Float
    };
    (string) => {
        $crate::handle::Str
    };
    (enumeration) => {
        $crate::handle::Menu
    };
    (yes_no) => {
        $crate::handle::Flag
    };
    (enable) => {
        $crate::handle::Flag
    };
    (array) => {
        $crate::handle::Array
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __param_slot_defs {
    ($n:literal, {
        $( $field:ident : $ctor:ident ( $name:literal $(, $arg:expr)* $(,)? )
            $( . $m:ident ( $($marg:expr),* $(,)? ) )* ),* $(,)?
    }) => {
        [ $( $crate::ParamDef::$ctor(concat!($n, ":", $name) $(, $arg)*) $( . $m ( $($marg),* ) )* ),* ]
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __param_slot_struct {
    ($(#[$sm:meta])* $sv:vis $slot:ident, $table:ident, $count:expr, {
        $( $field:ident : $ctor:ident ( $name:literal $(, $arg:expr)* $(,)? )
            $( . $m:ident ( $($marg:expr),* $(,)? ) )* ),* $(,)?
    }) => {
        $(#[$sm])*
        #[derive(Debug, Clone, Copy)]
        $sv struct $slot {
            $( pub $field: $crate::handle::Param<$crate::__param_type!($ctor)>, )*
        }

        impl $slot {
            /// Declarations per address.
            pub const LEN: usize = <[()]>::len(&[ $( $crate::__unit!($field) ),* ]);
            /// Addresses declared.
            pub const COUNT: usize = $count;

            /// The handles of the first `n` addresses (all: [`Self::COUNT`]).
            pub fn bind_first(
                layout: &$crate::handle::ParamLayout,
                n: usize,
            ) -> Result<Vec<$slot>, $crate::ParamError> {
                (0..n.min(Self::COUNT))
                    .map(|k| {
                        let mut defs = $table[k * Self::LEN..(k + 1) * Self::LEN].iter();
                        Ok($slot { $( $field: layout.bind(defs.next())?, )* })
                    })
                    .collect()
            }
        }
    };
}

/// Declares a parameter table and its typed handles; see the [module docs](crate::handle).
///
/// Flat form: `pub const TABLE, pub struct Handles { field: ctor(args).more(..), … }` with
/// `ctor` one of [`ParamDef`]'s constructors. `Handles::bind(&layout)` finds every handle.
///
/// Addressed form (areaDetector's `N:` records, one group per address):
/// `pub const TABLE: [pub struct Slot; "1", "2", …] { field: ctor("Name", …), … }` names each
/// entry `"1:Name"`, `"2:Name"`, … in address order; `Slot::bind_first(&layout, n)` gives the
/// handles of the first `n` addresses.
#[macro_export]
macro_rules! params {
    (
        $(#[$tm:meta])* $tv:vis const $table:ident, $(#[$sm:meta])* $sv:vis struct $handles:ident {
            $( $field:ident : $ctor:ident ( $($arg:expr),* $(,)? )
                $( . $m:ident ( $($marg:expr),* $(,)? ) )* ),* $(,)?
        }
    ) => {
        $(#[$tm])*
        $tv const $table: &[$crate::ParamDef] = &[
            $( $crate::ParamDef::$ctor( $($arg),* ) $( . $m ( $($marg),* ) )* ),*
        ];

        $(#[$sm])*
        #[derive(Debug, Clone, Copy)]
        $sv struct $handles {
            $( pub $field: $crate::handle::Param<$crate::__param_type!($ctor)>, )*
        }

        impl $handles {
            /// Every handle, found in `layout` (which must hold this table).
            pub fn bind(layout: &$crate::handle::ParamLayout) -> Result<$handles, $crate::ParamError> {
                let mut defs = $table.iter();
                Ok($handles { $( $field: layout.bind(defs.next())?, )* })
            }
        }
    };
    (
        $(#[$tm:meta])* $tv:vis const $table:ident : [$(#[$sm:meta])* $sv:vis struct $slot:ident; $($n:literal),+ $(,)?]
        $body:tt
    ) => {
        $(#[$tm])*
        $tv const $table: &[$crate::ParamDef] = {
            const NESTED: &[[$crate::ParamDef; $crate::__param_slot_len!($body)]] =
                &[ $( $crate::__param_slot_defs!($n, $body) ),+ ];
            NESTED.as_flattened()
        };
        $crate::__param_slot_struct!(
            $(#[$sm])* $sv $slot, $table, <[&str]>::len(&[$($n),+]), $body
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __param_slot_len {
    ({
        $( $field:ident : $ctor:ident ( $($arg:tt)* )
            $( . $m:ident ( $($marg:tt)* ) )* ),* $(,)?
    }) => {
        <[()]>::len(&[ $( $crate::__unit!($field) ),* ])
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __unit {
    ($x:ident) => {
        ()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::params! {
        const BASE_PARAMS, struct Base {
            size_x: int32("SizeX", 100).range(1.0, 1000.0).doc("size"),
            gain: float64("Gain", 1.0),
            mode: enumeration("ImageMode", &["Single", "Multiple", "Continuous"], 2),
            name: string("Name", "x"),
            enabled: enable("Enable", 1),
        }
    }

    crate::params! {
        const SLOT_PARAMS: [struct Slot; "1", "2", "3"] {
            use_: yes_no("Use", 0).doc("Draw it"),
            width: int32("Width", 1).min(0.0),
        }
    }

    const ALL: &[ParamDef] =
        &join::<{ BASE_PARAMS.len() + SLOT_PARAMS.len() }>(&[BASE_PARAMS, SLOT_PARAMS]);

    #[test]
    fn handles_follow_the_declarations() {
        let layout = ParamLayout::new(&[ALL]);
        let b = Base::bind(&layout).unwrap();
        let store = ParamStore::from_layout(layout.clone());
        assert_eq!(b.size_x.get(&store), 100);
        assert!(b.enabled.get(&store));
        b.gain.set(&store, 2.5);
        assert_eq!(store.get_by_name("Gain").unwrap(), ParamValue::Float(2.5));
        assert_eq!(b.mode.get(&store), 2);
        assert_eq!(b.name.get(&store), "x");
        assert!(b.size_x.put(&store, 0).is_err(), "limits apply to puts");
        assert_eq!(store.with_values(|v| b.size_x.read(v)), 100);
        assert!(b.gain.is(store.index("Gain").unwrap()));
    }

    #[test]
    fn addressed_groups_are_named_and_bound_per_address() {
        assert_eq!((Slot::LEN, Slot::COUNT), (2, 3));
        let names: Vec<_> = SLOT_PARAMS.iter().map(|d| d.name).collect();
        assert_eq!(
            names,
            ["1:Use", "1:Width", "2:Use", "2:Width", "3:Use", "3:Width"]
        );
        let layout = ParamLayout::new(&[ALL]);
        let slots = Slot::bind_first(&layout, 2).unwrap();
        assert_eq!(slots.len(), 2);
        let store = ParamStore::from_layout(layout);
        slots[1].width.set(&store, 7);
        assert_eq!(store.get_by_name("2:Width").unwrap(), ParamValue::Int(7));
        assert_eq!(slots[1].use_.name(), "2:Use");
    }

    #[test]
    fn a_table_missing_from_the_layout_fails_to_bind() {
        let layout = ParamLayout::new(&[SLOT_PARAMS]);
        let e = Base::bind(&layout).unwrap_err();
        assert!(e.to_string().contains("SizeX"), "{e}");
    }
}
