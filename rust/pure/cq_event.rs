// SPDX-License-Identifier: GPL-2.0

//! When a CQ raises its completion event (seed 002, FIG. 4), and how
//! moderation (`modify_cq`) holds it back.
//!
//! - Armed for the next completion, any new CQE meets the arming; armed
//!   for solicited completions, only a CQE whose WQE asked for a solicited
//!   event, or an error completion.
//! - An arming gives at most one event.
//! - With moderation, the event of a met arming waits until `count` CQEs
//!   have arrived or `period` microseconds have passed, whichever first.

/// How `req_notify_cq` arms a CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqArm {
    /// Notify on the next solicited (or error) completion.
    Solicited,
    /// Notify on the next completion.
    NextCompletion,
}

/// The longest an event may wait, in microseconds; also the wait of a
/// count set without a period, so that the last CQEs of a burst never
/// wait forever.
pub const MAX_MODERATION_PERIOD_US: u16 = 4095;
/// The most CQEs an event may wait for.
pub const MAX_MODERATION_COUNT: u16 = u16::MAX;

/// `modify_cq`'s settings; both zero means every event goes at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moderation {
    count: u16,
    period_us: u16,
}

/// A period above [`MAX_MODERATION_PERIOD_US`].
#[derive(Debug, PartialEq, Eq)]
pub struct PeriodTooLong;

impl Moderation {
    /// The settings `count` CQEs, `period_us` microseconds.
    pub fn new(count: u16, period_us: u16) -> Result<Self, PeriodTooLong> {
        if period_us > MAX_MODERATION_PERIOD_US {
            return Err(PeriodTooLong);
        }
        Ok(Self { count, period_us })
    }

    fn is_on(self) -> bool {
        self.count > 1 || self.period_us > 0
    }

    /// CQEs after which the event goes without waiting longer.
    fn cqes_needed(self) -> u32 {
        match (self.count, self.period_us) {
            (0, 0) => 1,
            (0, _) => u32::MAX,
            (count, _) => count.into(),
        }
    }

    /// How long the event waits at most.
    fn wait_us(self) -> u16 {
        match self.period_us {
            0 => MAX_MODERATION_PERIOD_US,
            period => period,
        }
    }
}

/// What a new CQE asks of the CQ's owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventAction {
    /// Nothing.
    None,
    /// An event is now held: start its wait of this many microseconds.
    StartWait(u16),
    /// Raise the event now; `stop_wait` if a wait was running for it.
    Raise {
        /// A wait is running and must be stopped.
        stop_wait: bool,
    },
}

/// A CQ's arming and moderation state.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventState {
    arm: Option<CqArm>,
    moderation: Moderation,
    /// CQEs since an arming was met whose event moderation still holds
    /// back (0: no event waits).
    held: u32,
}

impl EventState {
    /// Arms for `arm`; a request for any completion overrides one for
    /// solicited ones.
    pub fn arm(&mut self, arm: CqArm) {
        if self.arm != Some(CqArm::NextCompletion) {
            self.arm = Some(arm);
        }
    }

    /// Sets the moderation; an event already held keeps waiting.
    pub fn moderate(&mut self, moderation: Moderation) {
        self.moderation = moderation;
    }

    /// A CQE arrived; `solicited` if its WQE asked for a solicited event
    /// or it reports an error.
    pub fn on_cqe(&mut self, solicited: bool) -> EventAction {
        let meets_arming = match self.arm {
            Some(CqArm::NextCompletion) => true,
            Some(CqArm::Solicited) => solicited,
            None => false,
        };
        if self.held > 0 {
            // An event waits: this CQE counts towards it.
            self.held = self.held.saturating_add(1);
        } else if meets_arming {
            self.arm = None;
            self.held = 1;
        } else {
            return EventAction::None;
        }
        if self.held >= self.moderation.cqes_needed() {
            self.held = 0;
            EventAction::Raise {
                stop_wait: self.moderation.is_on(),
            }
        } else if self.held == 1 {
            EventAction::StartWait(self.moderation.wait_us())
        } else {
            EventAction::None
        }
    }

    /// The wait ended: whether the held event goes now.
    pub fn on_wait_over(&mut self) -> bool {
        let held = self.held > 0;
        self.held = 0;
        held
    }
}
