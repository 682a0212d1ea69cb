//! The [`Driver`] trait: what a detector driver implements. The runtime's acquisition
//! thread (ADDriver's behaviour) owns timing, ImageMode counting, state,
//! uniqueId, timestamps, counters and fan-out; a driver only produces pixels.

use ndflow_core::{NDArray, ParamDef, ParamStore, Pool};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DriverError {
    #[error(transparent)]
    Core(#[from] ndflow_core::CoreError),
    /// No frame arrived in time (a network source waiting for its producer): not an error;
    /// the acquisition thread checks Acquire and calls `acquire` again.
    #[error("no frame available yet")]
    NoFrame,
    #[error("{0}")]
    Other(String),
}

/// A detector driver. Runs on its own acquisition thread, so `&mut self` is fine.
pub trait Driver: Send + 'static {
    /// e.g. "simDetector" (for logs).
    fn driver_type(&self) -> &'static str;
    /// This driver's own declarations; the runtime adds NDArrayBase/ADBase ones
    /// ([`crate::port_params::DRIVER_PARAMS`]), whose defaults the driver may override in `init`.
    fn params(&self) -> &'static [ParamDef];
    /// Called once when the port is created: set identity readbacks (Manufacturer_RBV,
    /// Model_RBV, MaxSizeX_RBV, ...) and defaults.
    fn init(&mut self, params: &ParamStore) -> Result<(), DriverError>;
    /// Called when Acquire goes to 1, before the first frame.
    fn start(&mut self, _params: &ParamStore) -> Result<(), DriverError> {
        Ok(())
    }
    /// Produces the next frame's pixels, dims, data type and ColorMode attribute. The runtime
    /// then sets uniqueId, timestamps and the array readbacks. An error stops acquisition
    /// (state Error, StatusMessage_RBV set); a pool-exhausted error only drops the frame.
    fn acquire(&mut self, params: &ParamStore, pool: &Pool) -> Result<NDArray, DriverError>;
    /// Called when an acquisition ends (done, stopped or failed): release what `start` took
    /// (a network subscription must not hold back its producer while nobody acquires).
    fn stop(&mut self, _params: &ParamStore) {}
    /// True for drivers that forward frames made elsewhere (pvaDriver): their uniqueId and
    /// timestamps are kept instead of being assigned by the acquisition thread.
    fn keeps_frame_identity(&self) -> bool {
        false
    }
}
