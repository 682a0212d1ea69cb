//! File control by frame attributes (NDPluginFile's `FilePlugin*` NDAttributes): a frame can
//! name the writer it is for, the FileName/FileNumber of the file it goes to, and ask for that
//! file to be closed after it. The rules are in the module docs of `file.rs`.
//!
//! Attributes come from the network (a driver, an attribute file, another IOC's PV), so a
//! value of the wrong type is a reported failure of that frame, never a panic.

use ndflow_core::{AttrValue, NDArray, ParamStore};

use super::*;

/// Which writer the frame is for: "all", a port name, or absent (every writer).
pub const DESTINATION: &str = "FilePluginDestination";
/// FileName for the file this frame opens.
pub const FILE_NAME: &str = "FilePluginFileName";
/// FileNumber for the file this frame opens.
pub const FILE_NUMBER: &str = "FilePluginFileNumber";
/// Non-zero: close the file after this frame.
pub const CLOSE: &str = "FilePluginClose";

/// What one frame asks of the file it is written to.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct FileControl {
    pub(super) name: Option<String>,
    pub(super) number: Option<i64>,
    pub(super) close: bool,
}

impl FileControl {
    /// Reads the frame's FilePluginFileName/FileNumber/Close. An undefined value (a PV not
    /// connected) or an empty name asks for nothing; a value of the wrong type is an error.
    pub(super) fn of(frame: &NDArray) -> Result<FileControl, String> {
        let value = |name| frame.attribute(name).map(|a| &a.value);
        let name = match value(FILE_NAME) {
            None | Some(AttrValue::Undefined) => None,
            Some(AttrValue::String(s)) if s.is_empty() => None,
            Some(AttrValue::String(s)) => Some(s.clone()),
            Some(other) => return Err(wrong_type(FILE_NAME, "a string", other)),
        };
        let number = match value(FILE_NUMBER) {
            None | Some(AttrValue::Undefined) => None,
            Some(v) => Some(integer(v).ok_or_else(|| wrong_type(FILE_NUMBER, "an integer", v))?),
        };
        let close = match value(CLOSE) {
            None | Some(AttrValue::Undefined) => false,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| wrong_type(CLOSE, "a number", v))?
                .ne(&0.0),
        };
        Ok(FileControl {
            name,
            number,
            close,
        })
    }

    /// Whether the frame names another file than `file` was opened as (a new name or number
    /// in Stream or Capture closes the file and opens the one named).
    pub(super) fn renames(&self, file: &OpenFile) -> bool {
        self.name.as_ref().is_some_and(|n| *n != file.name)
            || self.number.is_some_and(|n| n != file.number)
    }

    /// Sets FileName/FileNumber (so their readbacks show the file about to be opened).
    pub(super) fn apply(&self, p: &ParamStore, nd: &NdFileParams) {
        if let Some(name) = &self.name {
            nd.file_name.set(p, name.clone());
        }
        if let Some(number) = self.number {
            nd.file_number.set(p, number);
        }
    }
}

/// The frame's FilePluginDestination when it names another writer than `port` (neither "all"
/// nor `port`, compared without case, as areaDetector does); `None` when the frame is for
/// this writer. An empty or undefined destination is for every writer.
pub(super) fn other_destination(frame: &NDArray, port: &str) -> Result<Option<String>, String> {
    match frame.attribute(DESTINATION).map(|a| &a.value) {
        None | Some(AttrValue::Undefined) => Ok(None),
        Some(AttrValue::String(d)) => {
            let mine =
                d.is_empty() || d.eq_ignore_ascii_case("all") || d.eq_ignore_ascii_case(port);
            Ok((!mine).then(|| d.clone()))
        }
        Some(other) => Err(wrong_type(DESTINATION, "a string", other)),
    }
}

/// An integer value: any integer type, or a float with no fraction (a DOUBLE PV).
fn integer(v: &AttrValue) -> Option<i64> {
    match *v {
        AttrValue::Int8(x) => Some(x.into()),
        AttrValue::UInt8(x) => Some(x.into()),
        AttrValue::Int16(x) => Some(x.into()),
        AttrValue::UInt16(x) => Some(x.into()),
        AttrValue::Int32(x) => Some(x.into()),
        AttrValue::UInt32(x) => Some(x.into()),
        AttrValue::Int64(x) => Some(x),
        AttrValue::UInt64(x) => i64::try_from(x).ok(),
        AttrValue::Float32(_) | AttrValue::Float64(_) => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64),
        AttrValue::String(_) | AttrValue::Undefined => None,
    }
}

fn wrong_type(attr: &str, want: &str, got: &AttrValue) -> String {
    let got = match got {
        AttrValue::String(s) => format!("the string \"{s}\""),
        other => other
            .data_type()
            .map_or("an undefined value", |t| t.name())
            .to_string(),
    };
    format!("NDAttribute {attr} must be {want}, not {got}; frame not written")
}

/// Why a frame was not written by [`FileWriterPlugin::write_controlled`].
pub(super) enum Failed {
    /// Its control attributes are wrong: only this frame is lost, the file stays open.
    Attr(String),
    /// Opening, writing or closing failed: no file is left open.
    Io(String),
}

impl<F: Format> FileWriterPlugin<F> {
    /// Writes `frame` into `slot`'s file, applying the frame's control attributes: a frame
    /// naming another file closes the open one; without an open file, FileName/FileNumber are
    /// set from the frame and a file is opened; FilePluginClose (or a single-frame format)
    /// closes it after the write. An I/O failure leaves `slot` empty.
    pub(super) fn write_controlled(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        slot: &mut Option<OpenFile>,
        frame: &NDArray,
    ) -> Result<(), Failed> {
        let ctl = FileControl::of(frame).map_err(Failed::Attr)?;
        if slot.as_ref().is_some_and(|f| ctl.renames(f)) {
            if let Some(file) = slot.take() {
                Self::close(st, p, &file).map_err(Failed::Io)?;
            }
        }
        let mut file = match slot.take() {
            Some(file) => file,
            None => {
                ctl.apply(p, &self.nd);
                self.open(st, p, frame).map_err(Failed::Io)?
            }
        };
        if let Err(message) = self.write_one(st, p, &file, frame) {
            if !F::MULTI_FRAME {
                // A partial single-frame file keeps its temporary name.
                let _ = st.format.close(p);
                return Err(Failed::Io(message));
            }
            // Close now: the file keeps every frame written before the error.
            return Err(Failed::Io(match Self::close(st, p, &file) {
                Ok(()) => message,
                Err(close) => format!("{message}; {close}"),
            }));
        }
        file.frames = file.frames.saturating_add(1);
        if ctl.close || !F::MULTI_FRAME {
            return Self::close(st, p, &file).map_err(Failed::Io);
        }
        *slot = Some(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::NDAttribute;

    fn with(attrs: &[(&str, AttrValue)]) -> NDArray {
        let mut f = NDArray::from_pixels(&ndflow_core::Pool::unlimited(), &[1], &[0u8]).unwrap();
        for (name, v) in attrs {
            f.set_attribute(NDAttribute::new(*name, "", v.clone()));
        }
        f
    }

    #[test]
    fn control_values_and_types() {
        let f = with(&[
            (FILE_NAME, AttrValue::String("run".into())),
            (FILE_NUMBER, AttrValue::Float64(12.0)),
            (CLOSE, AttrValue::UInt8(1)),
        ]);
        assert_eq!(
            FileControl::of(&f),
            Ok(FileControl {
                name: Some("run".into()),
                number: Some(12),
                close: true
            })
        );
        let none = with(&[
            (FILE_NAME, AttrValue::String(String::new())),
            (FILE_NUMBER, AttrValue::Undefined),
            (CLOSE, AttrValue::Int32(0)),
        ]);
        assert_eq!(FileControl::of(&none), Ok(FileControl::default()));
        for bad in [
            with(&[(FILE_NAME, AttrValue::Int32(3))]),
            with(&[(FILE_NUMBER, AttrValue::String("7".into()))]),
            with(&[(FILE_NUMBER, AttrValue::Float64(1.5))]),
            with(&[(FILE_NUMBER, AttrValue::UInt64(u64::MAX))]),
            with(&[(CLOSE, AttrValue::String("yes".into()))]),
        ] {
            let e = FileControl::of(&bad).unwrap_err();
            assert!(e.contains("must be"), "{e}");
        }
    }

    #[test]
    fn destination_matches_all_and_own_port_without_case() {
        let dest = |d: AttrValue| other_destination(&with(&[(DESTINATION, d)]), "HDF1");
        assert_eq!(dest(AttrValue::String("ALL".into())), Ok(None));
        assert_eq!(dest(AttrValue::String("hdf1".into())), Ok(None));
        assert_eq!(dest(AttrValue::String(String::new())), Ok(None));
        assert_eq!(dest(AttrValue::Undefined), Ok(None));
        assert_eq!(
            dest(AttrValue::String("TIF1".into())),
            Ok(Some("TIF1".into()))
        );
        assert!(dest(AttrValue::Int32(1)).is_err());
        assert_eq!(other_destination(&with(&[]), "HDF1"), Ok(None));
    }
}
