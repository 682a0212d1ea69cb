//! The private TIFF tags NDFileTIFF writes and ReadFile reads back (areaDetector's numbers).

/// The frame's timeStamp (double).
pub const TAG_TIMESTAMP: u16 = 65000;
/// The frame's uniqueId.
pub const TAG_UNIQUE_ID: u16 = 65001;
/// The EPICS time stamp: seconds, then nanoseconds.
pub const TAG_EPICS_TS_SEC: u16 = 65002;
pub const TAG_EPICS_TS_NSEC: u16 = 65003;
/// Attributes, one `name:value` string per tag, from here up.
pub const TAG_FIRST_ATTRIBUTE: u16 = 65010;
pub const TAG_LAST_ATTRIBUTE: u16 = 65535;
