// SPDX-License-Identifier: GPL-2.0

use srnic_pure::cq_event::{
    CqArm, EventAction, EventState, Moderation, PeriodTooLong, MAX_MODERATION_PERIOD_US,
};

const RAISE: EventAction = EventAction::Raise { stop_wait: false };

#[test]
fn unarmed_cq_raises_nothing() {
    let mut state = EventState::default();
    assert_eq!(state.on_cqe(false), EventAction::None);
    assert_eq!(state.on_cqe(true), EventAction::None);
}

#[test]
fn next_completion_raises_once_per_arming() {
    let mut state = EventState::default();
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), RAISE);
    for _ in 0..10 {
        assert_eq!(state.on_cqe(false), EventAction::None);
        assert_eq!(state.on_cqe(true), EventAction::None);
    }
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), RAISE);
}

#[test]
fn solicited_arming_ignores_unsolicited_cqes() {
    let mut state = EventState::default();
    state.arm(CqArm::Solicited);
    assert_eq!(state.on_cqe(false), EventAction::None);
    assert_eq!(state.on_cqe(false), EventAction::None);
    assert_eq!(state.on_cqe(true), RAISE);
    assert_eq!(state.on_cqe(true), EventAction::None);
}

#[test]
fn next_completion_overrides_solicited() {
    let mut state = EventState::default();
    state.arm(CqArm::NextCompletion);
    state.arm(CqArm::Solicited);
    assert_eq!(state.on_cqe(false), RAISE);
}

#[test]
fn count_moderation_holds_until_the_count() {
    let mut state = EventState::default();
    state.moderate(Moderation::new(4, 100).unwrap());
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), EventAction::StartWait(100));
    assert_eq!(state.on_cqe(false), EventAction::None);
    assert_eq!(state.on_cqe(false), EventAction::None);
    assert_eq!(state.on_cqe(false), EventAction::Raise { stop_wait: true });
    assert!(!state.on_wait_over(), "a late wait end finds nothing held");
}

#[test]
fn period_moderation_raises_when_the_wait_ends() {
    let mut state = EventState::default();
    state.moderate(Moderation::new(0, 50).unwrap());
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), EventAction::StartWait(50));
    for _ in 0..1000 {
        assert_eq!(state.on_cqe(false), EventAction::None);
    }
    assert!(state.on_wait_over());
    assert!(!state.on_wait_over());
    assert_eq!(state.on_cqe(false), EventAction::None, "not armed again");
}

#[test]
fn count_without_period_waits_at_most_the_maximum() {
    let mut state = EventState::default();
    state.moderate(Moderation::new(8, 0).unwrap());
    state.arm(CqArm::NextCompletion);
    assert_eq!(
        state.on_cqe(false),
        EventAction::StartWait(MAX_MODERATION_PERIOD_US)
    );
}

#[test]
fn rearming_while_an_event_is_held_gives_the_next_event() {
    let mut state = EventState::default();
    state.moderate(Moderation::new(2, 10).unwrap());
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), EventAction::StartWait(10));
    state.arm(CqArm::NextCompletion);
    assert_eq!(state.on_cqe(false), EventAction::Raise { stop_wait: true });
    assert_eq!(state.on_cqe(false), EventAction::StartWait(10));
}

#[test]
fn moderation_limits() {
    assert_eq!(
        Moderation::new(1, MAX_MODERATION_PERIOD_US + 1),
        Err(PeriodTooLong)
    );
    assert!(Moderation::new(u16::MAX, MAX_MODERATION_PERIOD_US).is_ok());
}
