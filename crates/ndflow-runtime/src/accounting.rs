//! Frame accounting: the conservation law every port obeys.

/// Why an input frame was not processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    QueueFull = 0,
    MinTime = 1,
    Unsupported = 2,
    Disabled = 3,
    Error = 4,
}

impl DropReason {
    pub const ALL: [DropReason; 5] = [
        DropReason::QueueFull,
        DropReason::MinTime,
        DropReason::Unsupported,
        DropReason::Disabled,
        DropReason::Error,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue full",
            DropReason::MinTime => "MinCallbackTime",
            DropReason::Unsupported => "unsupported input",
            DropReason::Disabled => "disabled",
            DropReason::Error => "error",
        }
    }
}

/// A consistent snapshot of one plugin port's input accounting (taken under its queue lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accounting {
    pub offered: u64,
    pub processed: u64,
    pub dropped: [u64; 5],
    pub queued: u64,
    pub in_flight: u64,
    /// Outputs dropped after processing (MaxByteRate); not part of the input balance.
    pub dropped_output: u64,
    /// Outputs waiting in the sort buffer.
    pub sort_pending: u64,
}

impl Accounting {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.dropped[r as usize]
    }
    /// offered = processed + dropped (all reasons) + queued + in flight.
    pub fn is_conserved(&self) -> bool {
        self.offered == self.processed + self.dropped_total() + self.queued + self.in_flight
    }
}
