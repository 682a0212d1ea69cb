//! The reference for rivers2013's paced rows: the same plugins doing the same work on one
//! thread, called directly (no graph, no scheduler, no queues), on the same schedule.
//!
//! A paced pipeline does the same work per frame as a flat-out one, yet on a virtual machine
//! its CPU per frame grows with the period: after the vCPU has idled for a few milliseconds
//! the host has run other guests on the core (caches, TLB and branch predictors cold) and the
//! core may have slowed down. Measured here on 2026-11-24 with numpy, no ndflow involved: a
//! pass over an 8 MiB f64 array took 1.9× as long after a 20–200 ms sleep as back to back,
//! and arithmetic on 16 KiB that never leaves L1 took 1.6× as long. To tell that price from
//! the runtime's, the bench runs PROC1, ROI1-4, STATS1-4 on the ROIs and STATS5, configured
//! from the same scenario file, frame after frame in one thread (each frame first copied
//! into a fresh pool buffer, as the simulator writes one), pass n due at start + n·period
//! like the simulator's frames, and reports its CPU per frame next to the pipeline's. Both
//! are process CPU time (all threads, wake-ups included).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ndflow::config::{Config, PortConfig};
use ndflow_core::{NDArray, Pool};
use ndflow_plugins::process::ProcessPlugin;
use ndflow_plugins::roi::RoiPlugin;
use ndflow_plugins::stats::StatsPlugin;
use ndflow_runtime::{Plugin, PluginHarness};

use crate::host::process_cpu_seconds;

/// One row: the reference run for `frames` frames at `period` (0 = back to back).
#[derive(Debug, Clone)]
pub struct RefRow {
    pub period: f64,
    pub frames: u32,
    pub cpu_ms_per_frame: f64,
}

/// The scenario's processing plugins, each with its own parameters, fed by hand.
pub struct SyncPipeline {
    proc1: PluginHarness<ProcessPlugin>,
    /// (ROI, the Stats port fed by it)
    rois: Vec<(PluginHarness<RoiPlugin>, PluginHarness<StatsPlugin>)>,
    stats_full: PluginHarness<StatsPlugin>,
    pool: Pool,
    pixels: Vec<u8>,
    sizes: [usize; 2],
}

fn configured<P: Plugin>(plugin: P, port: &PortConfig) -> Result<PluginHarness<P>, String> {
    let h = PluginHarness::new(plugin);
    for s in &port.settings {
        h.put(&s.key, s.value.clone())
            .map_err(|e| format!("reference {}.{}: {e}", port.name, s.key))?;
    }
    Ok(h)
}

impl SyncPipeline {
    /// From a scenario like rivers2013.toml: one `process` port, `roi` ports each feeding one
    /// `stats` port, and `stats` ports on the driver; frames of `width`×`height` UInt8.
    pub fn from_config(cfg: &Config, width: usize, height: usize) -> Result<SyncPipeline, String> {
        let source = |p: &PortConfig| {
            p.settings
                .iter()
                .find(|s| s.key == "NDArrayPort")
                .and_then(|s| match &s.value {
                    ndflow_core::ParamValue::Str(v) => Some(v.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        };
        let of_type = |t: &'static str| cfg.ports.iter().filter(move |p| p.type_name == t);
        let proc_port = of_type("process")
            .next()
            .ok_or("the scenario has no process port")?;
        let mut rois = Vec::new();
        let mut stats_full = None;
        for roi in of_type("roi") {
            let stats = of_type("stats")
                .find(|s| source(s) == roi.name)
                .ok_or_else(|| format!("no stats port on {}", roi.name))?;
            rois.push((
                configured(RoiPlugin::new(), roi)?,
                configured(StatsPlugin::new(), stats)?,
            ));
        }
        for s in of_type("stats") {
            if !cfg
                .ports
                .iter()
                .any(|p| p.name == source(s) && p.type_name == "roi")
            {
                stats_full = Some(configured(StatsPlugin::new(), s)?);
            }
        }
        // Like the simulator's LinearRamp in UInt8: x + y, wrapping.
        let pixels = (0..width * height)
            .map(|i| ((i % width + i / width) % 256) as u8)
            .collect();
        Ok(SyncPipeline {
            proc1: configured(ProcessPlugin::new(), proc_port)?,
            rois,
            stats_full: stats_full.ok_or("the scenario has no stats port on the driver")?,
            pool: Pool::unlimited(),
            pixels,
            sizes: [width, height],
        })
    }

    /// One frame through every plugin.
    pub fn run_frame(&self) -> Result<(), String> {
        let frame = NDArray::from_pixels(&self.pool, &self.sizes, &self.pixels)
            .map_err(|e| e.to_string())?;
        let frame = Arc::new(frame);
        let err = |e: ndflow_runtime::PluginError| e.to_string();
        drop(self.proc1.process_arc(&frame).map_err(err)?);
        for (roi, stats) in &self.rois {
            for out in roi.process_arc(&frame).map_err(err)? {
                drop(stats.process_arc(&out).map_err(err)?);
            }
        }
        drop(self.stats_full.process_arc(&frame).map_err(err)?);
        Ok(())
    }

    /// `frames` frames, frame n due at start + n·period (like the simulator's), sleeping in
    /// between; period 0 runs them back to back.
    pub fn paced(&self, period: f64, frames: u32) -> Result<RefRow, String> {
        self.run_frame()?; // buffers mapped and caches warm, as a running pipeline's are
        let cpu0 = process_cpu_seconds();
        let start = Instant::now();
        for n in 0..frames {
            if period > 0.0 {
                let due = start + Duration::from_secs_f64(period * f64::from(n));
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            self.run_frame()?;
        }
        let cpu = process_cpu_seconds() - cpu0;
        Ok(RefRow {
            period,
            frames,
            cpu_ms_per_frame: 1000.0 * cpu / f64::from(frames.max(1)),
        })
    }

    /// The STATS5 (full-frame) port's value of `param`, for tests.
    pub fn full_frame_stat(&self, param: &str) -> f64 {
        self.stats_full.get_f64(param)
    }

    /// The PROC1 port's value of `param`, for tests.
    pub fn process_param(&self, param: &str) -> f64 {
        self.proc1.get_f64(param)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline(w: usize, h: usize) -> SyncPipeline {
        let cfg = match Config::parse(crate::rivers2013::RIVERS2013, "examples/rivers2013.toml") {
            Ok(c) => c,
            Err(e) => panic!("scenario: {e}"),
        };
        match SyncPipeline::from_config(&cfg, w, h) {
            Ok(p) => p,
            Err(e) => panic!("reference: {e}"),
        }
    }

    #[test]
    fn every_plugin_of_the_scenario_sees_each_frame() {
        let (w, h) = (1024, 1024);
        let p = pipeline(w, h);
        assert_eq!(p.rois.len(), 4);
        for _ in 0..2 {
            if let Err(e) = p.run_frame() {
                panic!("{e}");
            }
        }
        let mean = |x0: usize, y0: usize, n: usize| {
            let mut sum = 0.0;
            for y in y0..y0 + n {
                for x in x0..x0 + n {
                    sum += ((x + y) % 256) as f64;
                }
            }
            sum / (n * n) as f64
        };
        assert_eq!(p.full_frame_stat("MeanValue"), mean(0, 0, 1024));
        assert_eq!(p.process_param("NumFiltered"), 2.0);
        // ROI1..4 are the quadrants (0,0), (512,0), (0,512), (512,512).
        let corners = [(0, 0), (512, 0), (0, 512), (512, 512)];
        for ((_, stats), (x0, y0)) in p.rois.iter().zip(corners) {
            assert_eq!(
                stats.get_f64("MeanValue"),
                mean(x0, y0, 512),
                "quadrant {x0},{y0}"
            );
        }
    }

    #[test]
    fn paced_frames_keep_their_schedule_and_count_cpu() {
        let p = pipeline(256, 256);
        let t0 = Instant::now();
        let r = match p.paced(0.02, 5) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let wall = t0.elapsed().as_secs_f64();
        assert_eq!(r.frames, 5);
        // Frames 0..4 are due at 0..80 ms: the run cannot end before the last is due.
        assert!(wall >= 0.08, "wall {wall}");
        assert!(r.cpu_ms_per_frame > 0.0 && r.cpu_ms_per_frame.is_finite());
    }
}
