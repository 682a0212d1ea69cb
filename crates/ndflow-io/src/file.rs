//! The shared NDFile behaviour (NDPluginFile): parameters, file names, the three write modes,
//! capture buffer, temp-suffix rename and error reporting. A format only implements
//! [`Format`] (open / write / close one file).
//!
//! - **Single**: with AutoSave = Yes each frame goes to its own file; WriteFile writes the
//!   latest frame.
//! - **Capture**: while Capture = 1, up to NumCapture frame `Arc`s are held (no pixel copy;
//!   areaDetector copies into its pool). When the buffer is full, Capture returns to 0 and,
//!   with AutoSave = Yes, the frames are written and the buffer freed. Setting Capture = 0
//!   early only stops capturing (as in areaDetector): WriteFile then writes what was held,
//!   FreeCapture discards it.
//! - **Stream**: while Capture = 1 each frame is written as it arrives; NumCaptured counts
//!   frames written, and the stream stops when NumCapture frames have been handled (0 = until
//!   Capture = 0). Setting Capture = 0 still writes the frames that were already queued at this
//!   port when it was set (areaDetector drops them, issue #469), then closes the file: the port
//!   tells the plugin the input sequence number of the last frame it had accepted
//!   ([`Plugin::param_changed_at`]) and each frame carries its own
//!   ([`ndflow_runtime::ProcessContext::input_seq`]).
//!
//! As in areaDetector, FullFileName is published and FileNumber incremented (AutoIncrement)
//! when a file name is made, before the open: a failed open still consumes the number.
//! Frames written are passed downstream (the runtime applies ArrayCallbacks).
//!
//! A single-frame format writes one file per frame in every mode (FileNumber incrementing when
//! AutoIncrement = Yes), as areaDetector does. A multi-frame format gets one file per capture or
//! stream, unless the frames' attributes ask for more (below). Any I/O error sets WriteStatus = WriteError and WriteMessage (path and OS error),
//! counts the frame in FramesNotWritten_RBV and returns a [`PluginError`] so the runtime counts
//! it as dropped with reason "error"; the pipeline keeps running.
//!
//! ## File control by frame attributes
//!
//! As areaDetector's NDPluginFile, four NDAttributes on a frame steer the writer
//! (`file/attributes.rs`):
//!
//! - `FilePluginDestination` (string): a frame whose destination is neither `all` nor this
//!   port's name (both without case; empty or undefined = every writer) is not for this writer.
//!   It is not written, not kept for WriteFile and not passed downstream; the port counts it as
//!   dropped with reason "unsupported input" (DroppedArrays_RBV, logged once per destination),
//!   not in FramesNotWritten_RBV: nothing failed.
//! - `FilePluginFileName` (string) and `FilePluginFileNumber` (integer): set FileName and
//!   FileNumber (so their readbacks show them) before a file is opened for the frame, in every
//!   mode; AutoIncrement then advances FileNumber as after any open, so a later frame without
//!   them gets a new name (areaDetector turns AutoIncrement off for good). In Stream and Capture a
//!   multi-frame file stays open while the frames name the same file; a frame whose name or
//!   number differs from the open file's closes it and opens the one it names. A frame without
//!   them, an empty name or an undefined value (a PV not connected) asks for nothing. In Stream
//!   mode without LazyOpen, a last frame that carries either defers the open at Capture = 1
//!   to the stream's first frame.
//! - `FilePluginClose` (number, non-zero): after this frame is written, its multi-frame file
//!   is closed. In Stream mode the capture ends there too (Capture = 0), as NDPluginFile does;
//!   the next Capture = 1 opens a new file. In Capture mode the held frames after it go to a
//!   new file. Single-frame formats write a file per frame anyway.
//!
//! A control attribute of the wrong type (a number for the name, a string for the number) is
//! that frame's write failure, reported as any other (WriteStatus/WriteMessage naming the
//! attribute, FramesNotWritten_RBV, dropped "error"); the open file stays open for the next.
//! `DriverFileName` (DeleteDriverFile) is read as before, after a frame is written.

mod attributes;
mod capture;
mod stream;
mod template;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndflow_core::param::DefaultValue;
use ndflow_core::{AttrValue, NDArray, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_runtime::port_params::{bind, plugin_layout, ArrayBaseParams};
use ndflow_runtime::{Plugin, PluginError, ProcessContext};
use parking_lot::Mutex;

pub use attributes::{CLOSE, DESTINATION, FILE_NAME, FILE_NUMBER};
pub use template::{create_directory, format_file_name, normalize_dir};

/// One file format. The plugin calls `open`, then `write` once per frame (once for a
/// single-frame format), then `close`; on any error it still calls `close` before giving up.
pub trait Format: Send + 'static {
    /// PluginType_RBV, e.g. "NDFileTIFF".
    const PLUGIN_TYPE: &'static str;
    /// The full parameter table: [`ndfile_params!`] plus the format's own.
    const PARAMS: &'static [ParamDef];
    /// Whether one file can hold many frames (HDF5); otherwise one file per frame.
    const MULTI_FRAME: bool = false;
    /// Whether frames compressed by the Codec plugin are accepted (HDF5 writes them with a
    /// direct chunk write); others get only uncompressed frames.
    const ACCEPTS_COMPRESSED: bool = false;
    /// Whether the format creates files at all (NDFileNull does not: TempSuffix then names no
    /// file to rename).
    const WRITES_FILES: bool = true;
    /// Opens `path` for writing; `frame` is the first frame (shape, type, attributes).
    fn open(&mut self, path: &Path, frame: &NDArray, params: &ParamStore) -> io::Result<()>;
    fn write(&mut self, frame: &NDArray, params: &ParamStore) -> io::Result<()>;
    /// Flushes and closes; called even after a failed open or write (must then be harmless).
    fn close(&mut self, params: &ParamStore) -> io::Result<()>;
    /// Told of every external parameter write, after NDFile's own handling, whether a file is
    /// open or not (HDF5's FlushNow). An error is published in WriteStatus/WriteMessage.
    fn param_changed(
        &mut self,
        _params: &ParamStore,
        _idx: usize,
        _value: &ParamValue,
    ) -> io::Result<()> {
        Ok(())
    }
    /// ReadFile: the file at `path` as a frame with pixels from `pool`.
    fn read(&mut self, path: &Path, pool: &Pool) -> io::Result<NDArray> {
        let _ = pool;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{} cannot read {} back", Self::PLUGIN_TYPE, path.display()),
        ))
    }
}

// NDFile.template's records are declared with the other ADCore base templates (drivers
// that save files, like ADEiger's FileWriter download, serve them too).
pub use ndflow_runtime::port_params::{NdFileParams, NDFILE_PARAMS};

/// FileTemplate's position in [`NDFILE_PARAMS`] (checked at compile time).
const FILE_TEMPLATE_AT: usize = 6;
const _: () = assert!(same_name(
    NDFILE_PARAMS[FILE_TEMPLATE_AT].name,
    "FileTemplate"
));

/// [`NDFILE_PARAMS`] with FileTemplate's default set to `template`, followed by `own` (a
/// format's table): what [`ndfile_params!`] expands to. `N` is the total length.
pub const fn ndfile_table<const N: usize>(
    template: &'static str,
    own: &[ParamDef],
) -> [ParamDef; N] {
    let mut out = ndflow_core::handle::join::<N>(&[NDFILE_PARAMS, own]);
    out[FILE_TEMPLATE_AT].default = DefaultValue::Str(template);
    out
}

const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// NDFile.template's parameters followed by a format's own, as one static table:
/// `ndfile_params!("%s%s_%3.3d.tif")` or `ndfile_params!("%s%s_%3.3d.jpg"; JPEG_OWN_PARAMS)`
/// (a table declared with [`ndflow_core::params!`]). The template is FileTemplate's default.
#[macro_export]
macro_rules! ndfile_params {
    ($template:expr $(;)?) => {
        &$crate::file::ndfile_table::<{ $crate::file::NDFILE_PARAMS.len() }>($template, &[])
    };
    ($template:expr; $own:expr $(;)?) => {
        &$crate::file::ndfile_table::<{ $crate::file::NDFILE_PARAMS.len() + $own.len() }>(
            $template, $own,
        )
    };
}

const MODE_SINGLE: i64 = 0;
const MODE_CAPTURE: i64 = 1;
const MODE_STREAM: i64 = 2;

/// The name FilePath/FileName/FileNumber/FileTemplate make now (areaDetector's
/// createFileName): the next file to write, or the one ReadFile reads; with the FileName and
/// FileNumber it was made from.
fn current_name(p: &ParamStore, nd: &NdFileParams) -> Result<(String, String, i64), String> {
    let (template, dir, name, number) = p.with_values(|v| {
        (
            nd.file_template.read(v),
            nd.file_path.read(v),
            nd.file_name.read(v),
            nd.file_number.read(v),
        )
    });
    let full = format_file_name(&template, &normalize_dir(&dir), &name, number)?;
    Ok((full, name, number))
}

/// A file being written: where it ends up and where it is written meanwhile.
struct OpenFile {
    final_path: PathBuf,
    write_path: PathBuf,
    /// FileName and FileNumber that named it (a frame naming others opens a new file).
    name: String,
    number: i64,
    /// Frames written into it (lost if it cannot be closed).
    frames: i64,
}

struct State<F> {
    format: F,
    /// Latest frame, for WriteFile in Single mode (areaDetector keeps it too).
    last: Option<Arc<NDArray>>,
    /// Capture buffer: shared frames, no pixel copy.
    captured: Vec<Arc<NDArray>>,
    /// Stream of a multi-frame format.
    stream: Option<OpenFile>,
    /// Stream mode between Capture = 1 and the end of the stream.
    streaming: bool,
    /// Capture = 0 came while frames were queued: write those up to this input sequence
    /// number, then close.
    stop_at: Option<u64>,
    /// Input sequence number of the last frame seen (0 without a port).
    last_seq: u64,
    /// The error that stopped this stream's file; later frames are counted as not written.
    stream_error: Option<String>,
    /// Frames written in this stream (NumCaptured).
    streamed: i64,
    /// Frames of this stream handled, written or not (ends the stream at NumCapture).
    stream_handled: i64,
}

/// A write failure: the message for WriteMessage and how many frames it lost.
struct WriteFailure {
    message: String,
    frames: i64,
}

/// NDPluginFile over a [`Format`]. Serial by nature (one file at a time): one thread.
pub struct FileWriterPlugin<F: Format> {
    state: Mutex<State<F>>,
    /// NDFile's handles in this port's layout.
    nd: NdFileParams,
    /// PortName, which FilePluginDestination is compared with.
    base: ArrayBaseParams,
    /// Frames ReadFile produced, sent downstream by the port after the write.
    read_back: Mutex<Vec<Arc<NDArray>>>,
    read_pool: Pool,
}

impl<F: Format + Default> Default for FileWriterPlugin<F> {
    fn default() -> Self {
        Self::with_format(F::default())
    }
}

impl<F: Format + Default> FileWriterPlugin<F> {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<F: Format> FileWriterPlugin<F> {
    pub fn with_format(format: F) -> Self {
        FileWriterPlugin {
            state: Mutex::new(State {
                format,
                last: None,
                captured: Vec::new(),
                stream: None,
                streaming: false,
                stop_at: None,
                last_seq: 0,
                stream_error: None,
                streamed: 0,
                stream_handled: 0,
            }),
            nd: bind(&plugin_layout(F::PARAMS), NdFileParams::bind),
            base: bind(&plugin_layout(F::PARAMS), ArrayBaseParams::bind),
            read_back: Mutex::new(Vec::new()),
            read_pool: Pool::unlimited(),
        }
    }

    /// ReadFile: reads the file FilePath/FileName/FileNumber/FileTemplate names (FileNumber
    /// is not advanced, as areaDetector's readFile) and queues it for downstream.
    fn read_file(&self, p: &ParamStore) {
        let nd = &self.nd;
        let result = current_name(p, nd).and_then(|(name, _, _)| {
            nd.full_file_name.set(p, name.clone());
            let frame = self
                .state
                .lock()
                .format
                .read(Path::new(&name), &self.read_pool);
            frame.map_err(|e| format!("cannot read {name}: {e}"))
        });
        match result {
            Ok(frame) => {
                self.read_back.lock().push(Arc::new(frame));
                nd.write_status.set(p, 0);
                nd.write_message.set(p, String::new());
            }
            Err(message) => {
                nd.write_status.set(p, 1);
                nd.write_message.set(p, message);
            }
        }
    }

    /// The next file's name from FilePath/FileName/FileNumber/FileTemplate, with its
    /// directory checked (and created per CreateDirectory).
    fn next_path(&self, p: &ParamStore) -> Result<OpenFile, String> {
        let nd = &self.nd;
        let (name, file_name, number) = current_name(p, nd)?;
        let final_path = PathBuf::from(&name);
        // As asynNDArrayDriver::createFileName / openFileBase: the name is published and the
        // number consumed as soon as the name is made, whether or not the open succeeds.
        nd.full_file_name.set(p, name.clone());
        if nd.auto_increment.get(p) {
            nd.file_number
                .set(p, nd.file_number.get(p).saturating_add(1));
        }
        let depth = nd.create_directory.get(p);
        if depth != 0 {
            if let Some(parent) = final_path.parent() {
                let ok = create_directory(parent, depth)
                    .map_err(|e| format!("cannot create directory {}: {e}", parent.display()))?;
                nd.file_path_exists.set(p, i64::from(ok));
            }
        }
        let suffix = nd.temp_suffix.get(p);
        let write_path = if suffix.is_empty() || !F::WRITES_FILES {
            final_path.clone()
        } else {
            PathBuf::from(format!("{name}{suffix}"))
        };
        Ok(OpenFile {
            final_path,
            write_path,
            name: file_name,
            number,
            frames: 0,
        })
    }

    fn open(&self, st: &mut State<F>, p: &ParamStore, frame: &NDArray) -> Result<OpenFile, String> {
        let file = self.next_path(p)?;
        if let Err(e) = st.format.open(&file.write_path, frame, p) {
            let _ = st.format.close(p);
            return Err(format!("cannot open {}: {e}", file.write_path.display()));
        }
        Ok(file)
    }

    /// Closes and renames a temp file.
    fn close(st: &mut State<F>, p: &ParamStore, file: &OpenFile) -> Result<(), String> {
        st.format
            .close(p)
            .map_err(|e| format!("cannot close {}: {e}", file.write_path.display()))?;
        if file.write_path != file.final_path {
            std::fs::rename(&file.write_path, &file.final_path).map_err(|e| {
                format!(
                    "cannot rename {} to {}: {e}",
                    file.write_path.display(),
                    file.final_path.display()
                )
            })?;
        }
        Ok(())
    }

    fn write_one(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        file: &OpenFile,
        frame: &NDArray,
    ) -> Result<(), String> {
        let nd = &self.nd;
        st.format
            .write(frame, p)
            .map_err(|e| format!("cannot write {}: {e}", file.write_path.display()))?;
        if nd.delete_driver_file.get(p) {
            if let Some(AttrValue::String(name)) =
                frame.attribute("DriverFileName").map(|a| &a.value)
            {
                if let Err(e) = std::fs::remove_file(name) {
                    if e.kind() != io::ErrorKind::NotFound {
                        return Err(format!("cannot delete driver file {name}: {e}"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes frames to files: one file each for a single-frame format, else one file (or
    /// several, where the frames' FilePlugin* attributes ask for a new file or a close).
    fn write_frames(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        frames: &[Arc<NDArray>],
    ) -> Result<(), WriteFailure> {
        let mut failure: Option<WriteFailure> = None;
        let mut lost = |message: String, n: usize| {
            let fl = failure.get_or_insert(WriteFailure {
                message: String::new(),
                frames: 0,
            });
            fl.message = message;
            fl.frames = fl.frames.saturating_add(n as i64);
        };
        let mut slot: Option<OpenFile> = None;
        for (i, f) in frames.iter().enumerate() {
            match self.write_controlled(st, p, &mut slot, f) {
                Ok(()) => {}
                Err(attributes::Failed::Attr(message)) => lost(message, 1),
                Err(attributes::Failed::Io(message)) if F::MULTI_FRAME => {
                    // The frames written so far stay in a valid, closed file.
                    lost(message, frames.len() - i);
                    break;
                }
                // Keep going: a later file may still succeed (e.g. the disk frees up).
                Err(attributes::Failed::Io(message)) => lost(message, 1),
            }
        }
        if let Some(file) = slot.take() {
            if let Err(message) = Self::close(st, p, &file) {
                lost(message, usize::try_from(file.frames).unwrap_or(0));
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Publishes the outcome of a write to WriteStatus/WriteMessage/FramesNotWritten.
    fn report(&self, p: &ParamStore, res: Result<(), WriteFailure>) -> Option<String> {
        let nd = &self.nd;
        match res {
            Ok(()) => {
                p.set_many(&[
                    nd.write_status.value(0),
                    nd.write_message.value(String::new()),
                ]);
                None
            }
            Err(f) => {
                let lost = nd.frames_not_written.get(p).saturating_add(f.frames);
                p.set_many(&[
                    nd.write_status.value(1),
                    nd.write_message.value(f.message.clone()),
                    nd.frames_not_written.value(lost),
                ]);
                Some(f.message)
            }
        }
    }

    fn fail_now(&self, p: &ParamStore, message: String) {
        let nd = &self.nd;
        p.set_many(&[nd.write_status.value(1), nd.write_message.value(message)]);
    }
}

impl<F: Format> Plugin for FileWriterPlugin<F> {
    fn plugin_type(&self) -> &'static str {
        F::PLUGIN_TYPE
    }

    fn params(&self) -> &'static [ParamDef] {
        F::PARAMS
    }

    fn max_threads(&self) -> usize {
        1
    }

    fn accepts_compressed(&self) -> bool {
        F::ACCEPTS_COMPRESSED
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        let p = ctx.params;
        let nd = &self.nd;
        // A frame for another writer is not this writer's at all (not kept for WriteFile).
        match attributes::other_destination(input, &self.base.port_name.get(p)) {
            Ok(None) => {}
            Ok(Some(dest)) => {
                return Err(PluginError::Unsupported(format!(
                    "{DESTINATION} \"{dest}\" is another writer"
                )))
            }
            Err(message) => {
                let message = self
                    .report(p, Err(WriteFailure { message, frames: 1 }))
                    .unwrap_or_default();
                return Err(PluginError::Other(format!("{}: {message}", F::PLUGIN_TYPE)));
            }
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.last = Some(Arc::clone(input));
        let seq = ctx.input_seq();
        if let Some(s) = seq {
            st.last_seq = s;
        }
        let capturing = nd.capture.get(p) != 0;
        // Frames written now are passed downstream (NDPluginFile's doNDArrayCallbacks).
        let mut written: Vec<Arc<NDArray>> = Vec::new();
        let res = match nd.file_write_mode.get(p) {
            _ if st.streaming => self.process_stream(st, p, input, seq, &mut written),
            MODE_SINGLE if nd.auto_save.get(p) => {
                let res = self.write_frames(st, p, std::slice::from_ref(input));
                if res.is_ok() {
                    written.push(Arc::clone(input));
                }
                res
            }
            MODE_CAPTURE if capturing => {
                let want = usize::try_from(nd.num_capture.get(p)).unwrap_or(0);
                if st.captured.len() < want {
                    st.captured.push(Arc::clone(input));
                    nd.num_captured.set(p, st.captured.len() as i64);
                }
                if st.captured.len() >= want {
                    let res = if nd.auto_save.get(p) {
                        self.write_captured(st, p).map(|f| written = f)
                    } else {
                        Ok(())
                    };
                    nd.capture.set(p, 0);
                    res
                } else {
                    Ok(())
                }
            }
            _ => return Ok(()),
        };
        drop(guard);
        for f in written {
            ctx.emit(f);
        }
        match self.report(p, res) {
            None => Ok(()),
            Some(message) => Err(PluginError::Other(format!("{}: {message}", F::PLUGIN_TYPE))),
        }
    }

    fn param_changed(&self, p: &ParamStore, idx: usize, value: &ParamValue) {
        self.param_changed_at(p, idx, value, 0);
    }

    fn emit_after_put(&self, emit: &mut dyn FnMut(Arc<NDArray>)) {
        let frames = std::mem::take(&mut *self.read_back.lock());
        frames.into_iter().for_each(emit);
    }

    fn param_changed_at(&self, p: &ParamStore, idx: usize, value: &ParamValue, accepted: u64) {
        let nd = &self.nd;
        let on = value.as_i64().unwrap_or(0) != 0;
        if on && nd.read_file.is(idx) {
            self.read_file(p);
            // Busy record: Done once the file is read, so a put with completion returns then.
            nd.read_file.set(p, 0);
            return;
        }
        if nd.file_path.is(idx) {
            let dir = normalize_dir(&nd.file_path.get(p));
            if dir != nd.file_path.get(p) {
                nd.file_path.set(p, dir.clone());
            }
            let depth = nd.create_directory.get(p);
            let exists = if depth != 0 {
                create_directory(Path::new(&dir), depth).unwrap_or(false)
            } else {
                Path::new(&dir).is_dir()
            };
            nd.file_path_exists.set(p, i64::from(exists));
        } else if nd.capture.is(idx) {
            let mut st = self.state.lock();
            if on {
                self.start_capture(&mut st, p);
            } else if st.streaming {
                if st.last_seq >= accepted {
                    // A clean close keeps the status of the stream's last frame.
                    if let Err(e) = self.stop_stream(&mut st, p) {
                        let _ = self.report(p, Err(e));
                    }
                } else {
                    // Frames up to `accepted` are queued: they are written, then the file closes.
                    st.stop_at = Some(accepted);
                }
            }
            // Capture mode: stopping keeps the buffer for WriteFile, as areaDetector does.
        } else if nd.write_file.is(idx) && on {
            let mut st = self.state.lock();
            let res = match nd.file_write_mode.get(p) {
                MODE_SINGLE => match st.last.clone() {
                    Some(f) => self.write_frames(&mut st, p, &[f]),
                    None => Err(WriteFailure {
                        message: "WriteFile: no frame received yet".into(),
                        frames: 0,
                    }),
                },
                MODE_CAPTURE => self.write_captured(&mut st, p).map(|_| ()),
                _ => Err(WriteFailure {
                    message: "WriteFile is not used in Stream mode".into(),
                    frames: 0,
                }),
            };
            let _ = self.report(p, res);
            nd.write_file.set(p, 0);
        } else if nd.free_capture.is(idx) && on {
            let mut st = self.state.lock();
            st.captured = Vec::new();
            nd.num_captured.set(p, 0);
            nd.free_capture.set(p, 0);
        }
        let res = self.state.lock().format.param_changed(p, idx, value);
        if let Err(e) = res {
            self.fail_now(p, format!("{}: {e}", F::PLUGIN_TYPE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_tables_are_ndfile_then_their_own_with_their_template() {
        let formats = [
            (
                crate::tiff::TIFF_PARAMS,
                crate::tiff::TIFF_OWN_PARAMS,
                "%s%s_%3.3d.tif",
            ),
            (
                crate::jpeg::JPEG_PARAMS,
                crate::jpeg::JPEG_OWN_PARAMS,
                "%s%s_%3.3d.jpg",
            ),
            (
                crate::hdf5::HDF5_PARAMS,
                crate::hdf5::HDF5_OWN_PARAMS,
                "%s%s_%3.3d.h5",
            ),
        ];
        for (table, own, template) in formats {
            assert_eq!(table.len(), NDFILE_PARAMS.len() + own.len());
            let expected = NDFILE_PARAMS.iter().chain(own);
            for (i, (got, want)) in table.iter().zip(expected).enumerate() {
                if i == FILE_TEMPLATE_AT {
                    assert_eq!(got.default, DefaultValue::Str(template));
                    assert_eq!(
                        ParamDef {
                            default: want.default,
                            ..*got
                        },
                        *want
                    );
                } else {
                    assert_eq!(got, want);
                }
            }
        }
    }
}
