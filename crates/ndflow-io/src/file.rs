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
//! stream. Any I/O error sets WriteStatus = WriteError and WriteMessage (path and OS error),
//! counts the frame in FramesNotWritten_RBV and returns a [`PluginError`] so the runtime counts
//! it as dropped with reason "error"; the pipeline keeps running.

mod template;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndflow_core::{AttrValue, NDArray, ParamDef, ParamStore, ParamValue, Pool};
use ndflow_runtime::{param_index, Plugin, PluginError, ProcessContext, Resolved};
use parking_lot::Mutex;

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

/// NDFile.template's parameters followed by a format's own, as one static table.
/// `ndfile_params!("%s%s_%3.3d.tif")` or `ndfile_params!("%s%s_%3.3d.jpg"; ParamDef::int32(..))`.
#[macro_export]
macro_rules! ndfile_params {
    ($template:expr $(; $extra:expr)* $(;)?) => {
        &[
            ::ndflow_core::ParamDef::string("FilePath", "").long_string().doc("Directory of the files (a trailing / is added)"),
            ::ndflow_core::ParamDef::enumeration("FilePathExists", &["No", "Yes"], 0).read_only().doc("Whether FilePath is an existing directory"),
            ::ndflow_core::ParamDef::int32("CreateDirectory", 0).doc("0 none; -N create at most the last N levels; +N require the first N levels"),
            ::ndflow_core::ParamDef::string("FileName", "").long_string().doc("Base file name"),
            ::ndflow_core::ParamDef::int32("FileNumber", 0).doc("Number of the next file"),
            ::ndflow_core::ParamDef::yes_no("AutoIncrement", 0).doc("Increment FileNumber after each file"),
            ::ndflow_core::ParamDef::string("FileTemplate", $template).long_string().doc("printf of (FilePath, FileName, FileNumber): %s %s %d forms"),
            ::ndflow_core::ParamDef::string("FullFileName", "").read_only().long_string().doc("Name of the last file written"),
            ::ndflow_core::ParamDef::yes_no("AutoSave", 0).doc("Single: write every frame; Capture: write when the buffer is full"),
            ::ndflow_core::ParamDef::enumeration("WriteFile", &["Done", "Write"], 0).readback_choices(&["Done", "Writing"]).busy().doc("Write the latest frame (Single) or the capture buffer (Capture)"),
            ::ndflow_core::ParamDef::enumeration("ReadFile", &["Done", "Read"], 0).readback_choices(&["Done", "Reading"]).busy().doc("Read the file FileNumber names back into the pipeline (TIFF); completes when read"),
            ::ndflow_core::ParamDef::enumeration("FileWriteMode", &["Single", "Capture", "Stream"], 0).doc("Single / Capture / Stream"),
            ::ndflow_core::ParamDef::enumeration("Capture", &["Done", "Capture"], 0).readback_choices(&["Done", "Capturing"]).busy().doc("Start (1) / stop (0) Capture or Stream"),
            ::ndflow_core::ParamDef::int32("NumCapture", 1).min(0.0).doc("Frames to capture or stream (Stream: 0 = unlimited)"),
            ::ndflow_core::ParamDef::int32("NumCaptured", 0).read_only().doc("Frames captured or streamed so far"),
            ::ndflow_core::ParamDef::enumeration("FreeCapture", &["Done", "Free"], 0).doc("Discard the capture buffer"),
            ::ndflow_core::ParamDef::yes_no("DeleteDriverFile", 0).doc("Delete the file named by the DriverFileName attribute after writing"),
            ::ndflow_core::ParamDef::yes_no("LazyOpen", 0).doc("Stream: open the file on the first frame, not on Capture"),
            ::ndflow_core::ParamDef::string("TempSuffix", "").doc("Write to name+suffix, rename on close"),
            ::ndflow_core::ParamDef::enumeration("WriteStatus", &["Write OK", "Write error"], 0).read_only_plain().doc("Status of the last write"),
            ::ndflow_core::ParamDef::string("WriteMessage", "").read_only_plain().long_string().doc("Error message of the last write"),
            ::ndflow_core::ParamDef::int32("FramesNotWritten", 0).read_only().doc("Frames lost to write errors"),
            $($extra,)*
        ]
    };
}

const MODE_SINGLE: i64 = 0;
const MODE_CAPTURE: i64 = 1;
const MODE_STREAM: i64 = 2;

#[derive(Debug)]
struct Indices {
    file_path: usize,
    path_exists: usize,
    create_dir: usize,
    file_name: usize,
    file_number: usize,
    auto_increment: usize,
    template: usize,
    full_name: usize,
    auto_save: usize,
    write_file: usize,
    mode: usize,
    capture: usize,
    num_capture: usize,
    num_captured: usize,
    free_capture: usize,
    delete_driver_file: usize,
    lazy_open: usize,
    temp_suffix: usize,
    write_status: usize,
    write_message: usize,
    not_written: usize,
}

impl Indices {
    fn resolve(p: &ParamStore, who: &str) -> Result<Indices, PluginError> {
        let one = |name: &str| param_index(p, who, name);
        Ok(Indices {
            file_path: one("FilePath")?,
            path_exists: one("FilePathExists")?,
            create_dir: one("CreateDirectory")?,
            file_name: one("FileName")?,
            file_number: one("FileNumber")?,
            auto_increment: one("AutoIncrement")?,
            template: one("FileTemplate")?,
            full_name: one("FullFileName")?,
            auto_save: one("AutoSave")?,
            write_file: one("WriteFile")?,
            mode: one("FileWriteMode")?,
            capture: one("Capture")?,
            num_capture: one("NumCapture")?,
            num_captured: one("NumCaptured")?,
            free_capture: one("FreeCapture")?,
            delete_driver_file: one("DeleteDriverFile")?,
            lazy_open: one("LazyOpen")?,
            temp_suffix: one("TempSuffix")?,
            write_status: one("WriteStatus")?,
            write_message: one("WriteMessage")?,
            not_written: one("FramesNotWritten")?,
        })
    }
}

/// The name FilePath/FileName/FileNumber/FileTemplate make now (areaDetector's
/// createFileName): the next file to write, or the one ReadFile reads.
fn current_name(p: &ParamStore, ix: &Indices) -> Result<String, String> {
    format_file_name(
        &p.get_str(ix.template),
        &normalize_dir(&p.get_str(ix.file_path)),
        &p.get_str(ix.file_name),
        p.get_i64(ix.file_number),
    )
}

/// A file being written: where it ends up and where it is written meanwhile.
struct OpenFile {
    final_path: PathBuf,
    write_path: PathBuf,
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
    indices: Resolved<Indices>,
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
            indices: Resolved::default(),
            read_back: Mutex::new(Vec::new()),
            read_pool: Pool::unlimited(),
        }
    }

    /// ReadFile: reads the file FilePath/FileName/FileNumber/FileTemplate names (FileNumber
    /// is not advanced, as areaDetector's readFile) and queues it for downstream.
    fn read_file(&self, p: &ParamStore, ix: &Indices) {
        let result = current_name(p, ix).and_then(|name| {
            let _ = p.set(ix.full_name, name.clone());
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
                let _ = p.set(ix.write_status, 0i64);
                let _ = p.set(ix.write_message, String::new());
            }
            Err(message) => {
                let _ = p.set(ix.write_status, 1i64);
                let _ = p.set(ix.write_message, message);
            }
        }
    }

    fn indices(&self, p: &ParamStore) -> Result<&Indices, PluginError> {
        self.indices
            .get_or_resolve(|| Indices::resolve(p, F::PLUGIN_TYPE))
    }

    /// The next file's name from FilePath/FileName/FileNumber/FileTemplate, with its
    /// directory checked (and created per CreateDirectory).
    fn next_path(&self, p: &ParamStore, ix: &Indices) -> Result<OpenFile, String> {
        let name = current_name(p, ix)?;
        let final_path = PathBuf::from(&name);
        // As asynNDArrayDriver::createFileName / openFileBase: the name is published and the
        // number consumed as soon as the name is made, whether or not the open succeeds.
        let _ = p.set(ix.full_name, name.clone());
        if p.get_i64(ix.auto_increment) != 0 {
            let _ = p.set(ix.file_number, p.get_i64(ix.file_number).saturating_add(1));
        }
        let depth = p.get_i64(ix.create_dir);
        if depth != 0 {
            if let Some(parent) = final_path.parent() {
                let ok = create_directory(parent, depth)
                    .map_err(|e| format!("cannot create directory {}: {e}", parent.display()))?;
                let _ = p.set(ix.path_exists, i64::from(ok));
            }
        }
        let suffix = p.get_str(ix.temp_suffix);
        let write_path = if suffix.is_empty() {
            final_path.clone()
        } else {
            PathBuf::from(format!("{name}{suffix}"))
        };
        Ok(OpenFile {
            final_path,
            write_path,
        })
    }

    fn open(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
        frame: &NDArray,
    ) -> Result<OpenFile, String> {
        let file = self.next_path(p, ix)?;
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
        ix: &Indices,
        file: &OpenFile,
        frame: &NDArray,
    ) -> Result<(), String> {
        st.format
            .write(frame, p)
            .map_err(|e| format!("cannot write {}: {e}", file.write_path.display()))?;
        if p.get_i64(ix.delete_driver_file) != 0 {
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

    /// Writes frames to files: one file each for a single-frame format, else one file.
    fn write_frames(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
        frames: &[Arc<NDArray>],
    ) -> Result<(), WriteFailure> {
        let Some(first) = frames.first() else {
            return Ok(());
        };
        if F::MULTI_FRAME {
            let fail = |message| WriteFailure {
                message,
                frames: frames.len() as i64,
            };
            let file = self.open(st, p, ix, first).map_err(fail)?;
            for (i, f) in frames.iter().enumerate() {
                if let Err(message) = self.write_one(st, p, ix, &file, f) {
                    // The frames written so far stay in a valid, closed file.
                    let _ = Self::close(st, p, &file);
                    return Err(WriteFailure {
                        message,
                        frames: (frames.len() - i) as i64,
                    });
                }
            }
            return Self::close(st, p, &file).map_err(fail);
        }
        let mut failure: Option<WriteFailure> = None;
        for f in frames {
            let res = self.open(st, p, ix, f).and_then(|file| {
                if let Err(e) = self.write_one(st, p, ix, &file, f) {
                    let _ = st.format.close(p);
                    return Err(e);
                }
                Self::close(st, p, &file)
            });
            if let Err(message) = res {
                // Keep going: a later file may still succeed (e.g. the disk frees up).
                let fl = failure.get_or_insert(WriteFailure {
                    message: String::new(),
                    frames: 0,
                });
                fl.message = message;
                fl.frames += 1;
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Publishes the outcome of a write to WriteStatus/WriteMessage/FramesNotWritten.
    fn report(
        &self,
        p: &ParamStore,
        ix: &Indices,
        res: Result<(), WriteFailure>,
    ) -> Option<String> {
        match res {
            Ok(()) => {
                p.set_many(&[
                    (ix.write_status, ParamValue::Int(0)),
                    (ix.write_message, ParamValue::Str(String::new())),
                ]);
                None
            }
            Err(f) => {
                let lost = p.get_i64(ix.not_written).saturating_add(f.frames);
                p.set_many(&[
                    (ix.write_status, ParamValue::Int(1)),
                    (ix.write_message, ParamValue::Str(f.message.clone())),
                    (ix.not_written, ParamValue::Int(lost)),
                ]);
                Some(f.message)
            }
        }
    }

    fn fail_now(&self, p: &ParamStore, ix: &Indices, message: String) {
        p.set_many(&[
            (ix.write_status, ParamValue::Int(1)),
            (ix.write_message, ParamValue::Str(message)),
        ]);
    }

    /// Writes and frees the capture buffer (writeFileBase in Capture mode); returns the
    /// frames for passing downstream.
    fn write_captured(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
    ) -> Result<Vec<Arc<NDArray>>, WriteFailure> {
        if st.captured.is_empty() {
            return Err(WriteFailure {
                message: "ERROR, no capture buffer present".into(),
                frames: 0,
            });
        }
        let frames = std::mem::take(&mut st.captured);
        let _ = p.set(ix.num_captured, 0i64);
        self.write_frames(st, p, ix, &frames).map(|()| frames)
    }

    /// Writes one frame of a stream (opening the file of a multi-frame format first).
    fn stream_frame(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
        frame: &Arc<NDArray>,
    ) -> Result<(), WriteFailure> {
        let one = |message| WriteFailure { message, frames: 1 };
        if !F::MULTI_FRAME {
            return self.write_frames(st, p, ix, std::slice::from_ref(frame));
        }
        if let Some(message) = &st.stream_error {
            return Err(one(message.clone()));
        }
        if st.stream.is_none() {
            match self.open(st, p, ix, frame) {
                Ok(file) => st.stream = Some(file),
                Err(message) => {
                    st.stream_error = Some(message.clone());
                    return Err(one(message));
                }
            }
        }
        let Some(file) = st.stream.take() else {
            return Ok(());
        };
        match self.write_one(st, p, ix, &file, frame) {
            Ok(()) => {
                st.stream = Some(file);
                Ok(())
            }
            Err(message) => {
                // Close now: the file keeps every frame written before the error.
                let message = match Self::close(st, p, &file) {
                    Ok(()) => message,
                    Err(close) => format!("{message}; {close}"),
                };
                st.stream_error = Some(message.clone());
                Err(one(message))
            }
        }
    }

    /// Ends a stream: Capture = 0, the file closed.
    fn stop_stream(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
    ) -> Result<(), WriteFailure> {
        let _ = p.set(ix.capture, 0i64);
        st.streaming = false;
        st.stop_at = None;
        st.stream_error = None;
        match st.stream.take() {
            Some(file) => {
                Self::close(st, p, &file).map_err(|message| WriteFailure { message, frames: 0 })
            }
            None => Ok(()),
        }
    }

    /// Stream mode: one frame while the stream runs (or drains after Capture = 0).
    fn process_stream(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        ix: &Indices,
        input: &Arc<NDArray>,
        seq: Option<u64>,
        written: &mut Vec<Arc<NDArray>>,
    ) -> Result<(), WriteFailure> {
        // A frame queued after the stop belongs to no stream (its turn can only come after
        // the last queued one, which closed the file; this is the fallback).
        if let (Some(stop), Some(seq)) = (st.stop_at, seq) {
            if seq > stop {
                return self.stop_stream(st, p, ix);
            }
        }
        let res = self.stream_frame(st, p, ix, input);
        st.stream_handled = st.stream_handled.saturating_add(1);
        if res.is_ok() {
            written.push(Arc::clone(input));
            st.streamed = st.streamed.saturating_add(1);
            let _ = p.set(ix.num_captured, st.streamed);
        }
        let want = p.get_i64(ix.num_capture);
        let drained = matches!((st.stop_at, seq), (Some(stop), Some(s)) if s >= stop)
            || (st.stop_at.is_some() && seq.is_none());
        if drained || (want > 0 && st.stream_handled >= want) {
            res.and(self.stop_stream(st, p, ix))
        } else {
            res
        }
    }

    fn start_capture(&self, st: &mut State<F>, p: &ParamStore, ix: &Indices) {
        let mode = p.get_i64(ix.mode);
        let n = p.get_i64(ix.num_capture).max(0);
        if st.streaming {
            // A new stream ends the previous one (which may still be draining).
            if let Err(e) = self.stop_stream(st, p, ix) {
                let _ = self.report(p, ix, Err(e));
            }
            let _ = p.set(ix.capture, 1i64);
        }
        let _ = p.set(ix.num_captured, 0i64);
        st.streamed = 0;
        st.stream_handled = 0;
        st.stream_error = None;
        st.stop_at = None;
        match mode {
            MODE_CAPTURE => {
                if n < 1 {
                    let _ = p.set(ix.capture, 0i64);
                    self.fail_now(
                        p,
                        ix,
                        "NumCapture must be at least 1 in Capture mode".into(),
                    );
                    return;
                }
                st.captured = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 16));
            }
            MODE_STREAM => {
                st.streaming = true;
                if F::MULTI_FRAME && p.get_i64(ix.lazy_open) == 0 {
                    let Some(frame) = st.last.clone() else {
                        let _ = p.set(ix.capture, 0i64);
                        st.streaming = false;
                        self.fail_now(
                            p,
                            ix,
                            "Stream: no frame seen yet to open the file (set LazyOpen = Yes)"
                                .into(),
                        );
                        return;
                    };
                    match self.open(st, p, ix, &frame) {
                        Ok(file) => st.stream = Some(file),
                        Err(message) => {
                            let _ = p.set(ix.capture, 0i64);
                            st.streaming = false;
                            self.fail_now(p, ix, message);
                        }
                    }
                }
            }
            _ => {
                let _ = p.set(ix.capture, 0i64);
                self.fail_now(p, ix, "Capture is not used in Single mode".into());
            }
        }
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
        let ix = self.indices(p)?;
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.last = Some(Arc::clone(input));
        let seq = ctx.input_seq();
        if let Some(s) = seq {
            st.last_seq = s;
        }
        let capturing = p.get_i64(ix.capture) != 0;
        // Frames written now are passed downstream (NDPluginFile's doNDArrayCallbacks).
        let mut written: Vec<Arc<NDArray>> = Vec::new();
        let res = match p.get_i64(ix.mode) {
            _ if st.streaming => self.process_stream(st, p, ix, input, seq, &mut written),
            MODE_SINGLE if p.get_i64(ix.auto_save) != 0 => {
                let res = self.write_frames(st, p, ix, std::slice::from_ref(input));
                if res.is_ok() {
                    written.push(Arc::clone(input));
                }
                res
            }
            MODE_CAPTURE if capturing => {
                let want = usize::try_from(p.get_i64(ix.num_capture)).unwrap_or(0);
                if st.captured.len() < want {
                    st.captured.push(Arc::clone(input));
                    let _ = p.set(ix.num_captured, st.captured.len());
                }
                if st.captured.len() >= want {
                    let res = if p.get_i64(ix.auto_save) != 0 {
                        self.write_captured(st, p, ix).map(|f| written = f)
                    } else {
                        Ok(())
                    };
                    let _ = p.set(ix.capture, 0i64);
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
        match self.report(p, ix, res) {
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
        let Ok(ix) = self.indices(p) else {
            return;
        };
        let on = value.as_i64().unwrap_or(0) != 0;
        if on && p.def(idx).is_some_and(|d| d.name == "ReadFile") {
            self.read_file(p, ix);
            // Busy record: Done once the file is read, so a put with completion returns then.
            let _ = p.set(idx, 0i64);
            return;
        }
        if idx == ix.file_path {
            let dir = normalize_dir(&p.get_str(ix.file_path));
            if dir != p.get_str(ix.file_path) {
                let _ = p.set(ix.file_path, dir.clone());
            }
            let depth = p.get_i64(ix.create_dir);
            let exists = if depth != 0 {
                create_directory(Path::new(&dir), depth).unwrap_or(false)
            } else {
                Path::new(&dir).is_dir()
            };
            let _ = p.set(ix.path_exists, i64::from(exists));
        } else if idx == ix.capture {
            let mut st = self.state.lock();
            if on {
                self.start_capture(&mut st, p, ix);
            } else if st.streaming {
                if st.last_seq >= accepted {
                    // A clean close keeps the status of the stream's last frame.
                    if let Err(e) = self.stop_stream(&mut st, p, ix) {
                        let _ = self.report(p, ix, Err(e));
                    }
                } else {
                    // Frames up to `accepted` are queued: they are written, then the file closes.
                    st.stop_at = Some(accepted);
                }
            }
            // Capture mode: stopping keeps the buffer for WriteFile, as areaDetector does.
        } else if idx == ix.write_file && on {
            let mut st = self.state.lock();
            let res = match p.get_i64(ix.mode) {
                MODE_SINGLE => match st.last.clone() {
                    Some(f) => self.write_frames(&mut st, p, ix, &[f]),
                    None => Err(WriteFailure {
                        message: "WriteFile: no frame received yet".into(),
                        frames: 0,
                    }),
                },
                MODE_CAPTURE => self.write_captured(&mut st, p, ix).map(|_| ()),
                _ => Err(WriteFailure {
                    message: "WriteFile is not used in Stream mode".into(),
                    frames: 0,
                }),
            };
            let _ = self.report(p, ix, res);
            let _ = p.set(ix.write_file, 0i64);
        } else if idx == ix.free_capture && on {
            let mut st = self.state.lock();
            st.captured = Vec::new();
            let _ = p.set(ix.num_captured, 0i64);
            let _ = p.set(ix.free_capture, 0i64);
        }
        let res = self.state.lock().format.param_changed(p, idx, value);
        if let Err(e) = res {
            self.fail_now(p, ix, format!("{}: {e}", F::PLUGIN_TYPE));
        }
    }
}
