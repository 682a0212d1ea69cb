//! # ndflow-sim: the simulated detector
//!
//! [`SimDetector`] is areaDetector's ADSimDetector as an ndflow [`Driver`](ndflow_runtime::Driver):
//! the same parameters ([`SIM_PARAMS`], names and enum strings of simDetector.template),
//! the same four patterns and the same arithmetic (computed in the output type, so integer
//! images wrap):
//!
//! - **LinearRamp**: `Gain·(GainX·x + GainY·y)`, plus `Gain` per frame (per-colour gains in
//!   RGB modes). The moving bands of an 8-bit ramp are its wrap-around.
//! - **Peaks**: a grid of 2-D Gaussians (σ = PeakWidth, drawn over ±4σ, height Gain ×
//!   colour gain, each scaled by `1 + PeakVariation/100·(U − 0.5)` per frame).
//! - **Sine**: `Gain·(X1 ⊕ X2 + Y1 ⊕ Y2)`, ⊕ = Add or Multiply; frequency 1 is one period
//!   across the sensor; a counter that runs on across frames makes non-integer
//!   frequencies drift. RGB: red from XSine1, green from YSine1, blue from the mean of
//!   XSine2 and YSine2.
//! - **Offset&Noise** (also the background of the other modes whenever Offset or Noise is
//!   not 0): a noise frame computed once per reset, copied from a random start each frame.
//!
//! The full `MaxSizeX × MaxSizeY` raw frame is generated, then MinX/SizeX/BinX/ReverseX (and
//! Y) are applied in one pass into a pool buffer (binning sums; dims carry offset, binning
//! and reverse). Invalid region values are clamped and written back, as simDetector does.
//!
//! Speed is the point of the design: everything that does not change per frame (ramp base,
//! noise frame, peak kernel) is computed once, at reset, and a frame that reads out the
//! whole sensor is written straight into its output buffer in one pass — a 1024×1024 UInt8
//! ramp frame is one read of the base image and one write. A reset happens when Reset is
//! written 1 or when any parameter that shapes the image changes (found by comparing a
//! settings snapshot, taken only when the store's version moved).

mod detector;
mod generate;
mod layout;
mod params;
mod pixel;

pub use detector::{SimDetector, PORT};
pub use params::{SIM_MODE_CHOICES, SIM_PARAMS, SINE_OPERATION_CHOICES};
