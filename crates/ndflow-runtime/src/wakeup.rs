//! A condition the housekeeping thread sleeps on, so that a port can wake it early (a frame
//! that starts waiting for sorting must go out after SortTime, not at the next round).

use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// Wakes the housekeeping thread before its next planned round.
#[derive(Default)]
pub(crate) struct Wakeup {
    kicked: Mutex<bool>,
    cv: Condvar,
}

impl Wakeup {
    pub(crate) fn kick(&self) {
        *self.kicked.lock() = true;
        self.cv.notify_one();
    }

    /// Sleeps until `deadline` or a kick.
    pub(crate) fn wait_until(&self, deadline: Instant) {
        let mut kicked = self.kicked.lock();
        while !*kicked {
            if self.cv.wait_until(&mut kicked, deadline).timed_out() {
                break;
            }
        }
        *kicked = false;
    }
}
