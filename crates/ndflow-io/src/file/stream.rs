//! Stream mode: each frame written as it arrives into one file (multi-frame formats) or one
//! file each; a Capture = 0 still writes the frames queued before it, then closes.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamStore};

use super::*;

impl<F: Format> FileWriterPlugin<F> {
    /// Writes one frame of a stream (opening the file of a multi-frame format first, or a new
    /// one when the frame's FilePlugin* attributes name another file).
    pub(super) fn stream_frame(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        frame: &Arc<NDArray>,
    ) -> Result<(), WriteFailure> {
        let one = |message| WriteFailure { message, frames: 1 };
        if !F::MULTI_FRAME {
            return self.write_frames(st, p, std::slice::from_ref(frame));
        }
        if let Some(message) = &st.stream_error {
            return Err(one(message.clone()));
        }
        let mut slot = st.stream.take();
        let res = self.write_controlled(st, p, &mut slot, frame);
        st.stream = slot;
        match res {
            Ok(()) => Ok(()),
            Err(attributes::Failed::Attr(message)) => Err(one(message)),
            Err(attributes::Failed::Io(message)) => {
                // The stream's file is gone: later frames are counted as not written.
                st.stream_error = Some(message.clone());
                Err(one(message))
            }
        }
    }

    /// Ends a stream: Capture = 0, the file closed.
    pub(super) fn stop_stream(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
    ) -> Result<(), WriteFailure> {
        let nd = &self.nd;
        nd.capture.set(p, 0);
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
    pub(super) fn process_stream(
        &self,
        st: &mut State<F>,
        p: &ParamStore,
        input: &Arc<NDArray>,
        seq: Option<u64>,
        written: &mut Vec<Arc<NDArray>>,
    ) -> Result<(), WriteFailure> {
        let nd = &self.nd;
        // A frame queued after the stop belongs to no stream (its turn can only come after
        // the last queued one, which closed the file; this is the fallback).
        if let (Some(stop), Some(seq)) = (st.stop_at, seq) {
            if seq > stop {
                return self.stop_stream(st, p);
            }
        }
        let res = self.stream_frame(st, p, input);
        st.stream_handled = st.stream_handled.saturating_add(1);
        if res.is_ok() {
            written.push(Arc::clone(input));
            st.streamed = st.streamed.saturating_add(1);
            nd.num_captured.set(p, st.streamed);
        }
        let want = nd.num_capture.get(p);
        let drained = matches!((st.stop_at, seq), (Some(stop), Some(s)) if s >= stop)
            || (st.stop_at.is_some() && seq.is_none());
        // As NDPluginFile: a frame's FilePluginClose closes the file and ends the capture.
        let closed = res.is_ok() && attributes::FileControl::of(input).is_ok_and(|c| c.close);
        if drained || closed || (want > 0 && st.stream_handled >= want) {
            res.and(self.stop_stream(st, p))
        } else {
            res
        }
    }
}
