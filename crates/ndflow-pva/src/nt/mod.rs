//! Normative types (`epics:nt/...`) as type descriptions and value helpers.

pub mod ntndarray;
