//! The camera's own GenICam features as parameters: the `GC_*` records ADGenICam's
//! `makeDb.py` generates for a camera model, built at run time from the camera's XML (or a
//! saved copy of it) with the same names, record kinds, menus and access:
//!
//! | feature | setpoint (`GC_X`) | readback (`GC_X_RBV`) |
//! |---|---|---|
//! | Integer, IntReg, IntConverter, IntSwissKnife | int64 (ao) | int64 (ai) |
//! | Float, Converter, SwissKnife | float64 (ao) | float64 (ai) |
//! | Boolean | No/Yes (bo) | No/Yes (bi) |
//! | String, StringReg | string (stringout) | string (stringin) |
//! | Enumeration | the first 16 entries, the camera's values (mbbo) | same (mbbi) |
//! | Command | write non-zero to execute (longout) | none |
//!
//! Read-only features have only the readback. Limits are the XML's constant `<Min>`/`<Max>`
//! (the camera still refuses what its computed limits do not allow, with its reason).
//! Declarations are leaked, once per port, as the camera-filled menus are.

use ndflow_core::{ParamDef, ParamStore, ParamValue};

use crate::camera::Camera;
use crate::features::{Access, Feature, FeatureList, FeatureType, Limit};

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn limit(l: Option<Limit>) -> Option<f64> {
    l.map(|l| match l {
        Limit::Int(i) => i as f64,
        Limit::Float(f) => f,
    })
}

/// Whether an enumeration's records carry the camera's values (every listed entry has one,
/// as makeDb.py requires) rather than menu positions.
fn by_value(f: &Feature) -> bool {
    f.kind == FeatureType::Enumeration && f.epics_states().iter().all(|(_, v)| v.is_some())
}

/// The declaration of one feature's records.
pub fn declaration(f: &Feature) -> ParamDef {
    let name = leak(f.pv.clone());
    let doc = f
        .description
        .as_deref()
        .or(f.display_name.as_deref())
        .unwrap_or("");
    let unit = f
        .unit
        .as_deref()
        .map_or(String::new(), |u| format!(" [{u}]"));
    let desc = leak(format!("GenICam {} {}{unit}: {doc}", f.node, f.name));
    let def = match f.kind {
        FeatureType::Integer => ParamDef::int64(name, 0),
        FeatureType::Float => ParamDef::float64(name, 0.0),
        FeatureType::Boolean => ParamDef::yes_no(name, 0),
        FeatureType::String => ParamDef::string(name, ""),
        FeatureType::Command => ParamDef::int32(name, 0).write_plain(),
        FeatureType::Enumeration => {
            let states = f.epics_states();
            let names: Vec<&'static str> = if states.is_empty() {
                vec!["N.A."]
            } else {
                states.iter().map(|(n, _)| leak(n.clone())).collect()
            };
            let mut def = ParamDef::enumeration(name, Box::leak(names.into_boxed_slice()), 0);
            if by_value(f) && !states.is_empty() {
                let values: Vec<i64> = states.iter().filter_map(|(_, v)| *v).collect();
                def.default = ndflow_core::param::DefaultValue::Int(values[0]);
                def = def.menu_values(Box::leak(values.into_boxed_slice()));
            }
            def
        }
    };
    let mut def = def.doc(desc);
    if matches!(f.kind, FeatureType::Integer | FeatureType::Float) {
        def.min = limit(f.min);
        def.max = limit(f.max);
    }
    if f.access == Access::RO && f.kind != FeatureType::Command {
        def = def.read_only();
    }
    def
}

/// A feature bound to its parameter in a port's store.
#[derive(Debug, Clone)]
pub struct Bound {
    pub index: usize,
    pub feature: Feature,
    by_value: bool,
}

/// The port's `GC_*` parameters, by store index.
#[derive(Debug, Clone, Default)]
pub struct GcFeatures {
    features: Vec<Bound>,
}

impl GcFeatures {
    /// The declarations of every listed feature, in the list's order.
    pub fn declarations(list: &FeatureList) -> Vec<ParamDef> {
        list.features.iter().map(declaration).collect()
    }

    /// Binds the listed features to their parameters in `store` (those it declares).
    pub fn bind(list: &FeatureList, store: &ParamStore) -> GcFeatures {
        let features = list
            .features
            .iter()
            .filter_map(|f| {
                Some(Bound {
                    index: store.index(&f.pv)?,
                    by_value: by_value(f),
                    feature: f.clone(),
                })
            })
            .collect();
        GcFeatures { features }
    }

    pub fn len(&self) -> usize {
        self.features.len()
    }

    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<&Bound> {
        self.features.iter().find(|b| b.index == index)
    }

    /// Writes the stored value of `b` to the camera. A command executes on a non-zero value
    /// and its parameter returns to 0.
    pub fn write(&self, cam: &Camera, b: &Bound, store: &ParamStore) -> Result<(), String> {
        let f = &b.feature;
        let name = f.name.as_str();
        let e = |e: crate::camera::CameraError| format!("{}: {e}", f.pv);
        match f.kind {
            FeatureType::Integer => cam.set_int(name, store.get_i64(b.index)).map_err(e),
            FeatureType::Float => cam.set_float(name, store.get_f64(b.index)).map_err(e),
            FeatureType::Boolean => cam.set_bool(name, store.get_i64(b.index) != 0).map_err(e),
            FeatureType::String => cam.set_string(name, &store.get_str(b.index)).map_err(e),
            FeatureType::Command => {
                let run = store.get_i64(b.index) != 0;
                let _ = store.set(b.index, 0i64);
                if run {
                    cam.execute(name).map_err(e)
                } else {
                    Ok(())
                }
            }
            FeatureType::Enumeration => {
                let v = store.get_i64(b.index);
                if b.by_value {
                    return cam.set_int(name, v).map_err(e);
                }
                let entry = f
                    .entries
                    .get(usize::try_from(v).unwrap_or(usize::MAX))
                    .ok_or_else(|| format!("{}: no entry {v}", f.pv))?;
                cam.set_enum(name, &entry.name).map_err(e)
            }
        }
    }

    /// The camera's current value of every readable feature (unavailable ones are skipped).
    pub fn read_all(&self, cam: &Camera) -> Vec<(usize, ParamValue)> {
        self.features
            .iter()
            .filter_map(|b| Some((b.index, read(cam, b)?)))
            .collect()
    }
}

fn read(cam: &Camera, b: &Bound) -> Option<ParamValue> {
    let f = &b.feature;
    let name = f.name.as_str();
    if f.access == Access::WO {
        return None;
    }
    Some(match f.kind {
        FeatureType::Integer => ParamValue::Int(cam.get_int(name).ok()?),
        FeatureType::Float => ParamValue::Float(cam.get_float(name).ok()?),
        FeatureType::Boolean => ParamValue::Int(i64::from(cam.get_bool(name).ok()?)),
        FeatureType::String => ParamValue::Str(cam.get_string(name).ok()?),
        FeatureType::Command => return None,
        FeatureType::Enumeration if b.by_value => ParamValue::Int(cam.get_enum_int(name).ok()?),
        FeatureType::Enumeration => {
            let current = cam.get_enum(name).ok()?;
            let pos = f.entries.iter().position(|e| e.name == current)?;
            ParamValue::Int(pos as i64)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::parse;
    use ndflow_core::ParamKind;

    const XML: &str = r#"<?xml version="1.0"?>
<RegisterDescription>
  <Category Name="Root"><pFeature>Ctl</pFeature></Category>
  <Category Name="Ctl">
    <pFeature>Width</pFeature><pFeature>Gamma</pFeature><pFeature>Reverse</pFeature>
    <pFeature>Mode</pFeature><pFeature>Start</pFeature><pFeature>Vendor</pFeature>
    <pFeature>Unnumbered</pFeature>
  </Category>
  <Integer Name="Width"><Value>640</Value><Min>16</Min><Max>2048</Max></Integer>
  <Float Name="Gamma"><Description>Gamma correction</Description><Value>1</Value><Unit>ratio</Unit></Float>
  <Boolean Name="Reverse"><Value>0</Value></Boolean>
  <Enumeration Name="Mode">
    <EnumEntry Name="Off"><Value>0</Value></EnumEntry>
    <EnumEntry Name="Continuous"><Value>2</Value></EnumEntry>
    <Value>0</Value>
  </Enumeration>
  <Command Name="Start"><Value>0</Value><CommandValue>1</CommandValue></Command>
  <String Name="Vendor"><ImposedAccessMode>RO</ImposedAccessMode><Value>x</Value></String>
  <Enumeration Name="Unnumbered"><EnumEntry Name="A"/><EnumEntry Name="B"/><Value>0</Value></Enumeration>
</RegisterDescription>"#;

    #[test]
    fn declarations_follow_make_db() {
        let list = parse(XML).unwrap();
        let defs = GcFeatures::declarations(&list);
        let by = |n: &str| *defs.iter().find(|d| d.name == n).unwrap();
        let w = by("GC_Width");
        assert_eq!(w.kind, ParamKind::Int64);
        assert_eq!((w.min, w.max), (Some(16.0), Some(2048.0)));
        assert_eq!(w.pv_names(), ["GC_Width", "GC_Width_RBV"]);
        let g = by("GC_Gamma");
        assert_eq!(g.kind, ParamKind::Float64);
        assert!(g.desc.contains("Gamma correction") && g.desc.contains("[ratio]"));
        assert_eq!(by("GC_Reverse").kind, ParamKind::Enum(&["No", "Yes"]));
        let m = by("GC_Mode");
        assert_eq!(m.kind, ParamKind::Enum(&["Off", "Continuous"]));
        assert_eq!(m.menu_values, Some(&[0i64, 2][..]));
        let s = by("GC_Start");
        assert_eq!(s.pv_names(), ["GC_Start"]);
        assert!(s.writable());
        let v = by("GC_Vendor");
        assert_eq!(v.pv_names(), ["GC_Vendor_RBV"]);
        assert!(!v.writable());
        let u = by("GC_Unnumbered");
        assert_eq!(u.menu_values, None);
        assert!(ParamStore::duplicate_names(&[Box::leak(defs.into_boxed_slice())]).is_empty());
    }

    #[test]
    fn a_put_is_checked_against_the_xml_limits_and_the_menu() {
        let list = parse(XML).unwrap();
        let defs: &'static [ParamDef] =
            Box::leak(GcFeatures::declarations(&list).into_boxed_slice());
        let store = ParamStore::new(&[defs]);
        let err = store.put("GC_Width", ParamValue::Int(4096)).unwrap_err();
        assert!(err.to_string().contains("GC_Width"), "{err}");
        // Menu position 1 is the entry whose camera value is 2.
        assert_eq!(
            store.put("GC_Mode", ParamValue::Int(1)).unwrap(),
            ParamValue::Int(2)
        );
        assert!(store.put("GC_Vendor", ParamValue::Str("y".into())).is_err());
        let gc = GcFeatures::bind(&list, &store);
        assert_eq!(gc.len(), 7);
        let idx = store.index("GC_Start").unwrap();
        assert_eq!(gc.get(idx).unwrap().feature.kind, FeatureType::Command);
    }
}
