//! The `web` port: hands each frame to the IOC's web viewer ([`ndflow_web`]).
//!
//! A plugin like NDPluginPva: its own queue, drop policy and counters through the standard
//! plugin base. It takes Mono 1-D/2-D and RGB1/RGB2/RGB3 frames (shown in colour). It keeps only the newest frame (shared, not copied); each browser connected to
//! `/ws/frames/{port}` is sent the newest frame it has room for, decoded and binned on the
//! web server's threads, so a slow viewer never slows the pipeline. Frames are passed on
//! downstream unchanged.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef, ParamStore};
use ndflow_runtime::port_params::{bind, plugin_layout};
use ndflow_runtime::{Built, Plugin, PluginError, PortType, ProcessContext};
use ndflow_web::FrameSource;

use crate::pva::ImagePvs;

ndflow_core::params! {
    /// The web port's own parameters.
    pub const WEB_PARAMS, pub struct WebParams {
        stream_path: string("StreamPath", "")
            .read_only()
            .long_string()
            .doc("Path of this port's frame WebSocket on the IOC's web server (/ws/frames/PORT)"),
        max_size: int32("MaxSize", 1024)
            .range(0.0, 65535.0)
            .doc("Frames larger than this on a side are binned (block mean) to fit; 0: never binned"),
        max_rate: float64("MaxRate", 30.0)
            .min(0.0)
            .doc("Most frames a second sent to one viewer; 0: as many as it takes"),
        clients: int32("Clients", 0)
            .read_only()
            .doc("Viewers connected to this port"),
        frames_sent: int64("FramesSent", 0)
            .read_only()
            .doc("Frames sent to viewers, all viewers together"),
        frames_skipped: int64("FramesSkipped", 0)
            .read_only()
            .doc("Frames a viewer never got because a newer one replaced them (latest-wins)"),
    }
}

pub struct WebPlugin {
    src: Arc<FrameSource>,
    path: String,
    p: WebParams,
}

impl WebPlugin {
    /// A port feeding `src`, served at `/ws/frames/{port}`.
    pub fn new(src: Arc<FrameSource>, port: &str) -> WebPlugin {
        WebPlugin {
            src,
            path: format!("/ws/frames/{port}"),
            p: bind(&plugin_layout(WEB_PARAMS), WebParams::bind),
        }
    }
}

impl Plugin for WebPlugin {
    fn plugin_type(&self) -> &'static str {
        "NDPluginWeb"
    }

    fn params(&self) -> &'static [ParamDef] {
        WEB_PARAMS
    }

    fn attached(&self, params: &Arc<ParamStore>) {
        self.p.stream_path.set(params, self.path.clone());
        // Viewers come and go between frames too.
        let (params, clients) = (Arc::clone(params), self.p.clients);
        self.src
            .on_clients_changed(Box::new(move |n| clients.set(&params, n as i64)));
    }

    fn accepts_compressed(&self) -> bool {
        // Decoded by the web server, per frame actually sent.
        true
    }

    fn process(
        &self,
        input: &Arc<NDArray>,
        ctx: &mut ProcessContext<'_>,
    ) -> Result<(), PluginError> {
        ndflow_web::binning::shape(input).map_err(PluginError::Unsupported)?;
        let (max_size, max_rate) = ctx
            .params
            .with_values(|v| (self.p.max_size.read(v), self.p.max_rate.read(v)));
        self.src.set_limits(max_size.max(0) as usize, max_rate);
        self.src.slot.put(input.clone());
        ctx.params.set_many(&[
            self.p.clients.value(self.src.clients() as i64),
            self.p.frames_sent.value(self.src.sent() as i64),
            self.p.frames_skipped.value(self.src.skipped() as i64),
        ]);
        ctx.emit(input.clone());
        Ok(())
    }
}

/// The port type `type = "web"`.
pub const PORT: PortType = PortType::plugin(
    "web",
    "NDPluginWeb",
    "Streams frames to the IOC's web viewer (latest-wins per viewer, binned and decoded on the server)",
    |a| {
        let src = match a.service::<ImagePvs>() {
            Some(pvs) => pvs.web_frames().add(a.port)?,
            // Built only to list its parameters: a source nobody reads.
            None => Arc::new(FrameSource::default()),
        };
        Ok(Built::Plugin(Arc::new(WebPlugin::new(src, a.port))))
    },
);

#[cfg(test)]
mod tests {
    use super::*;
    use ndflow_core::Pool;
    use ndflow_runtime::PluginHarness;

    #[test]
    fn keeps_the_newest_frame_for_viewers_and_passes_each_on() {
        let src = Arc::new(FrameSource::default());
        let h = PluginHarness::new(WebPlugin::new(Arc::clone(&src), "WEB1"));
        h.put("MaxSize", 256).unwrap();
        for uid in 1..=3 {
            let mut f = NDArray::from_pixels(&Pool::unlimited(), &[4, 2], &[7u16; 8]).unwrap();
            f.unique_id = uid;
            assert_eq!(h.process(f).unwrap()[0].unique_id, uid);
        }
        let (_, newest) = src.slot.newer_than(0).unwrap();
        assert_eq!(newest.unique_id, 3);
        assert_eq!(src.max_side(), 256);
        let cube = NDArray::from_pixels(&Pool::unlimited(), &[2, 2, 2], &[0u8; 8]).unwrap();
        assert!(
            h.process(cube).is_err(),
            "a 3-D Mono frame is unsupported input"
        );
        let mut rgb = NDArray::from_pixels(&Pool::unlimited(), &[3, 2, 2], &[9u8; 12]).unwrap();
        rgb.set_color_mode(ndflow_core::ColorMode::RGB1);
        rgb.unique_id = 4;
        assert_eq!(
            h.process(rgb).unwrap()[0].unique_id,
            4,
            "RGB1 is shown in colour"
        );
        assert_eq!(src.slot.newer_than(0).unwrap().1.unique_id, 4);
        assert_eq!(h.get_f64("Clients"), 0.0);
    }
}
