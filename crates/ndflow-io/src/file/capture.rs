//! Capture mode: up to NumCapture frames held (shared, no pixel copy), written on WriteFile
//! or, with AutoSave, when the buffer is full.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamStore};

use super::*;

impl<F: Format> FileWriterPlugin<F> {
    /// Writes and frees the capture buffer (writeFileBase in Capture mode); returns the
    /// frames for passing downstream.
    pub(super) fn write_captured(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
    ) -> Result<Vec<Arc<NDArray>>, WriteFailure> {
        let nd = &self.nd;
        if st.captured.is_empty() {
            return Err(WriteFailure {
                message: "ERROR, no capture buffer present".into(),
                frames: 0,
            });
        }
        let frames = std::mem::take(&mut st.captured);
        nd.num_captured.set(p, 0);
        self.write_frames(st, p, &frames).map(|()| frames)
    }

    pub(super) fn start_capture(&self, st: &mut State<F>, p: &ParamStore) {
        let nd = &self.nd;
        let mode = nd.file_write_mode.get(p);
        let n = nd.num_capture.get(p).max(0);
        if st.streaming {
            // A new stream ends the previous one (which may still be draining).
            if let Err(e) = self.stop_stream(st, p) {
                let _ = self.report(p, Err(e));
            }
            nd.capture.set(p, 1);
        }
        nd.num_captured.set(p, 0);
        st.streamed = 0;
        st.stream_handled = 0;
        st.stream_error = None;
        st.stop_at = None;
        match mode {
            MODE_CAPTURE => {
                if n < 1 {
                    nd.capture.set(p, 0);
                    self.fail_now(p, "NumCapture must be at least 1 in Capture mode".into());
                    return;
                }
                st.captured = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 16));
            }
            MODE_STREAM => {
                st.streaming = true;
                // A last frame that names its file defers the open to the first frame of
                // the stream, whose attributes name it (as areaDetector does).
                let named = st.last.as_ref().is_some_and(|f| {
                    f.attribute(attributes::FILE_NAME).is_some()
                        || f.attribute(attributes::FILE_NUMBER).is_some()
                });
                if F::MULTI_FRAME && !nd.lazy_open.get(p) && !named {
                    let Some(frame) = st.last.clone() else {
                        nd.capture.set(p, 0);
                        st.streaming = false;
                        self.fail_now(
                            p,
                            "Stream: no frame seen yet to open the file (set LazyOpen = Yes)"
                                .into(),
                        );
                        return;
                    };
                    match self.open(st, p, &frame) {
                        Ok(file) => st.stream = Some(file),
                        Err(message) => {
                            nd.capture.set(p, 0);
                            st.streaming = false;
                            self.fail_now(p, message);
                        }
                    }
                }
            }
            _ => {
                nd.capture.set(p, 0);
                self.fail_now(p, "Capture is not used in Single mode".into());
            }
        }
    }
}
