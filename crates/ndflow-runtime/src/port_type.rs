//! What a port type is, in one record defined beside its driver or plugin: the config name,
//! the areaDetector class, a description, the keys read at construction and the constructor.
//! The IOC's registry is a plain list of these; the config reader, `ndflow params`, the PV
//! directory and the generated reference all read the records.

use std::any::Any;
use std::sync::Arc;

use ndflow_core::{ParamDef, ParamValue};

use crate::driver::Driver;
use crate::plugin::Plugin;
use crate::port_params::{ARRAY_BASE_PARAMS, DRIVER_PARAMS, PLUGIN_BASE_PARAMS};

/// A key of a port's config table that is read once, when the port is built (a size fixed
/// for the port's life), rather than set as a parameter.
#[derive(Debug, Clone, Copy)]
pub struct ConstructorKey {
    pub name: &'static str,
    pub doc: &'static str,
}

/// A port built from its [`PortType`].
pub enum Built {
    Driver(Box<dyn Driver>),
    Plugin(Arc<dyn Plugin>),
}

/// What a constructor is given: the port's name, the PV prefix it is served under, the
/// values of its constructor keys, and the IOC's shared services (absent when a port is
/// built only to list its parameters).
pub struct PortArgs<'a> {
    pub port: &'a str,
    /// The IOC prefix followed by the port's prefix (e.g. `13SIM1:image1:`).
    pub pv_prefix: &'a str,
    values: Vec<(&'a str, &'a ParamValue)>,
    services: Option<&'a (dyn Any + Send + Sync)>,
}

impl<'a> PortArgs<'a> {
    pub fn new(port: &'a str, pv_prefix: &'a str) -> PortArgs<'a> {
        PortArgs {
            port,
            pv_prefix,
            values: Vec::new(),
            services: None,
        }
    }

    /// Every constructor key at its default: what listing a type's parameters builds.
    pub fn defaults() -> PortArgs<'static> {
        PortArgs::new("", "")
    }

    pub fn with_value(mut self, key: &'a str, value: &'a ParamValue) -> PortArgs<'a> {
        self.values.push((key, value));
        self
    }

    pub fn with_services(mut self, services: &'a (dyn Any + Send + Sync)) -> PortArgs<'a> {
        self.services = Some(services);
        self
    }

    /// The IOC's service of type `T`, when the port is built inside an IOC.
    pub fn service<T: 'static>(&self) -> Option<&'a T> {
        self.services.and_then(|s| s.downcast_ref::<T>())
    }

    pub fn value(&self, key: &str) -> Option<&'a ParamValue> {
        self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// An integer key within `range`, or `default` when absent; the error names the key.
    pub fn int(
        &self,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
        default: i64,
    ) -> Result<i64, String> {
        match self.value(key) {
            None => Ok(default),
            Some(ParamValue::Int(v)) if range.contains(v) => Ok(*v),
            Some(v) => Err(format!(
                "{key} must be an integer {}..{}, not {v}",
                range.start(),
                range.end()
            )),
        }
    }

    /// A non-empty string key, or `None` when absent.
    pub fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.value(key) {
            None => Ok(None),
            Some(ParamValue::Str(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(v) => Err(format!("{key} must be a non-empty string, not {v}")),
        }
    }
}

/// One port type.
#[derive(Clone, Copy)]
pub struct PortType {
    /// The config's `type = "…"`.
    pub name: &'static str,
    /// areaDetector's class (PluginType_RBV / the driver's name), e.g. `NDPluginROI`.
    pub class: &'static str,
    /// One line for listings and the reference.
    pub description: &'static str,
    pub driver: bool,
    pub constructor_keys: &'static [ConstructorKey],
    pub build: fn(&PortArgs<'_>) -> Result<Built, String>,
}

impl std::fmt::Debug for PortType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortType")
            .field("name", &self.name)
            .finish()
    }
}

impl PortType {
    /// A plugin type built by `build`, with no constructor keys.
    pub const fn plugin(
        name: &'static str,
        class: &'static str,
        description: &'static str,
        build: fn(&PortArgs<'_>) -> Result<Built, String>,
    ) -> PortType {
        PortType {
            name,
            class,
            description,
            driver: false,
            constructor_keys: &[],
            build,
        }
    }

    /// A driver type built by `build`, with no constructor keys.
    pub const fn driver(
        name: &'static str,
        class: &'static str,
        description: &'static str,
        build: fn(&PortArgs<'_>) -> Result<Built, String>,
    ) -> PortType {
        PortType {
            driver: true,
            ..PortType::plugin(name, class, description, build)
        }
    }

    /// The keys read at construction.
    pub const fn keys(mut self, keys: &'static [ConstructorKey]) -> PortType {
        self.constructor_keys = keys;
        self
    }

    pub fn is_constructor_key(&self, key: &str) -> bool {
        self.constructor_keys.iter().any(|k| k.name == key)
    }

    /// Every parameter table of a port built with `args`, base tables first, each with the
    /// areaDetector template it follows.
    pub fn param_tables(
        &self,
        args: &PortArgs<'_>,
    ) -> Result<Vec<(&'static str, &'static [ParamDef])>, String> {
        Ok(match (self.build)(args)? {
            Built::Driver(d) => vec![
                ("NDArrayBase", ARRAY_BASE_PARAMS),
                ("ADBase", DRIVER_PARAMS),
                (self.class, d.params()),
            ],
            Built::Plugin(p) => vec![
                ("NDArrayBase", ARRAY_BASE_PARAMS),
                ("NDPluginBase", PLUGIN_BASE_PARAMS),
                (self.class, p.params()),
            ],
        })
    }
}
