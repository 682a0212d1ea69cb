//! The [`Driver`] trait: what a detector driver implements. The runtime's acquisition
//! thread (ADDriver's behaviour) owns timing, ImageMode counting, state,
//! uniqueId, timestamps, counters and fan-out; a driver only produces pixels.

use std::sync::Arc;

use ndflow_core::{NDArray, ParamDef, ParamStore, ParamValue, Pool};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DriverError {
    #[error(transparent)]
    Core(#[from] ndflow_core::CoreError),
    /// No frame arrived in time (a network source waiting for its producer): not an error;
    /// the acquisition thread checks Acquire and calls `acquire` again.
    #[error("no frame available yet")]
    NoFrame,
    /// The acquisition is complete (a driver that [`Driver::paces_itself`] decides when).
    #[error("acquisition complete")]
    Finished,
    #[error("{0}")]
    Other(String),
}

/// Called after every external write to one of the port's parameters (a PV put, the config
/// file, the Python API), on the writer's thread: it must only queue work.
pub type PutHandler = Box<dyn Fn(usize, &ParamValue) + Send + Sync>;

/// Says whether a driver's detector is reachable now (see [`Driver::connection`]).
pub type ConnectionProbe = Arc<dyn Fn() -> bool + Send + Sync>;

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
    /// True for drivers that keep the frame's timestamp but take the port's uniqueId (a
    /// detector's own clock, EIGER's StreamAsTSSource).
    fn keeps_timestamp(&self) -> bool {
        self.keeps_frame_identity()
    }
    /// True for drivers whose hardware times the frames and decides when the acquisition
    /// ends (a detector armed over the network): the acquisition thread then waits no
    /// exposure or period and counts no ImageMode; it ends on [`DriverError::Finished`] or
    /// when Acquire goes to 0.
    fn paces_itself(&self) -> bool {
        false
    }
    /// A driver that acts on a write at once, whether or not it is acquiring (a setting sent
    /// to the detector), returns its handler here; called once, after `init`.
    fn put_handler(&mut self, _params: &Arc<ParamStore>) -> Option<PutHandler> {
        None
    }
    /// A driver of a detector that can be unreachable (over a network) returns how to ask;
    /// called once, after `put_handler`. While it answers false the port shows
    /// `DetectorState_RBV` = Disconnected (an INVALID alarm, as ADBase.template declares it).
    fn connection(&self) -> Option<ConnectionProbe> {
        None
    }
    /// How many addresses the port publishes on (areaDetector's asyn addresses 0..N-1).
    /// Every frame goes to address 0; a driver with more addresses names, per frame, one
    /// more address it also goes to ([`Driver::also_on`]). Fixed for the port's life.
    fn addresses(&self) -> usize {
        1
    }
    /// The address besides 0 that the frame `acquire` just returned is also published on
    /// (ADEiger: channel n of a multi-channel image on address n + 1); called right after
    /// `acquire`. None (the default): address 0 only.
    fn also_on(&self, _frame: &NDArray) -> Option<usize> {
        None
    }
}
