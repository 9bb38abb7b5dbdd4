// SPDX-License-Identifier: GPL-2.0

//! Work request validation: every opcode against every QP type, lengths,
//! SGE counts, inline limits, and random input that must never panic.

use srnic_pure::wr::{
    opcode, opcode_allowed, validate_recv, validate_send, QpType, SendLimits, WqeError,
};

const LIMITS: SendLimits = SendLimits {
    max_sge: 4,
    max_inline: 64,
    max_message: 1 << 31,
};

fn send(
    qp: QpType,
    op: u32,
    inline: bool,
    lengths: &[u32],
    declared: u32,
) -> Result<u32, WqeError> {
    validate_send(
        qp,
        &LIMITS,
        op,
        inline,
        lengths.len() as u32,
        declared,
        lengths.iter().copied(),
    )
}

#[test]
fn opcode_table() {
    use opcode::*;
    let rc = [
        RDMA_WRITE,
        RDMA_WRITE_WITH_IMM,
        SEND,
        SEND_WITH_IMM,
        RDMA_READ,
        ATOMIC_CMP_AND_SWP,
        ATOMIC_FETCH_AND_ADD,
        LOCAL_INV,
        BIND_MW,
        SEND_WITH_INV,
        REG_MR,
        ATOMIC_WRITE,
        FLUSH,
    ];
    let uc = [
        RDMA_WRITE,
        RDMA_WRITE_WITH_IMM,
        SEND,
        SEND_WITH_IMM,
        LOCAL_INV,
        BIND_MW,
        REG_MR,
    ];
    let ud = [SEND, SEND_WITH_IMM];
    for op in 0..=0x40 {
        assert_eq!(opcode_allowed(QpType::Rc, op), rc.contains(&op), "RC {op}");
        assert_eq!(opcode_allowed(QpType::Uc, op), uc.contains(&op), "UC {op}");
        assert_eq!(opcode_allowed(QpType::Ud, op), ud.contains(&op), "UD {op}");
        assert_eq!(
            opcode_allowed(QpType::Gsi, op),
            ud.contains(&op),
            "GSI {op}"
        );
    }
    for op in [TSO, RDMA_READ_WITH_INV, MASKED_ATOMIC_CMP_AND_SWP, u32::MAX] {
        assert_eq!(
            send(QpType::Rc, op, false, &[], 0),
            Err(WqeError::BadOpcode)
        );
    }
    // ATOMIC WRITE moves exactly eight bytes, inline or from one SGE.
    assert_eq!(send(QpType::Rc, ATOMIC_WRITE, true, &[], 8), Ok(8));
    assert_eq!(send(QpType::Rc, ATOMIC_WRITE, false, &[8], 8), Ok(8));
    assert_eq!(
        send(QpType::Rc, ATOMIC_WRITE, true, &[], 4),
        Err(WqeError::BadAtomicLength)
    );
    assert_eq!(
        send(QpType::Uc, ATOMIC_WRITE, true, &[], 8),
        Err(WqeError::BadOpcode)
    );
    // FLUSH is RC only and names no local memory: its range is its own.
    assert_eq!(send(QpType::Rc, FLUSH, false, &[], 0), Ok(0));
    assert_eq!(
        send(QpType::Rc, FLUSH, false, &[8], 8),
        Err(WqeError::TooManySges)
    );
    assert_eq!(
        send(QpType::Rc, FLUSH, true, &[], 0),
        Err(WqeError::TooManySges)
    );
    for qp in [QpType::Uc, QpType::Ud, QpType::Gsi] {
        assert_eq!(send(qp, FLUSH, false, &[], 0), Err(WqeError::BadOpcode));
    }
}

#[test]
fn lengths_and_sges() {
    assert_eq!(send(QpType::Rc, opcode::SEND, false, &[], 0), Ok(0));
    assert_eq!(send(QpType::Rc, opcode::SEND, false, &[10, 20], 30), Ok(30));
    assert_eq!(
        send(QpType::Rc, opcode::SEND, false, &[10, 20], 31),
        Err(WqeError::LengthMismatch)
    );
    assert_eq!(
        send(QpType::Rc, opcode::SEND, false, &[1; 5], 5),
        Err(WqeError::TooManySges)
    );
    assert_eq!(
        send(QpType::Rc, opcode::SEND, false, &[u32::MAX, u32::MAX], 0),
        Err(WqeError::LengthOverflow)
    );
    assert_eq!(
        validate_send(
            QpType::Ud,
            &SendLimits {
                max_message: 100,
                ..LIMITS
            },
            opcode::SEND,
            false,
            1,
            101,
            [101].into_iter(),
        ),
        Err(WqeError::MessageTooLong)
    );
}

#[test]
fn inline() {
    assert_eq!(send(QpType::Rc, opcode::SEND, true, &[], 64), Ok(64));
    assert_eq!(
        send(QpType::Rc, opcode::SEND, true, &[], 65),
        Err(WqeError::InlineTooLong)
    );
    assert_eq!(send(QpType::Uc, opcode::RDMA_WRITE, true, &[], 1), Ok(1));
    assert_eq!(
        send(QpType::Rc, opcode::RDMA_READ, true, &[], 8),
        Err(WqeError::InlineNotAllowed)
    );
}

#[test]
fn atomics_and_local_operations() {
    let op = opcode::ATOMIC_FETCH_AND_ADD;
    assert_eq!(send(QpType::Rc, op, false, &[8], 8), Ok(8));
    assert_eq!(
        send(QpType::Rc, op, false, &[4], 4),
        Err(WqeError::BadAtomicLength)
    );
    assert_eq!(
        send(QpType::Uc, op, false, &[8], 8),
        Err(WqeError::BadOpcode)
    );
    assert_eq!(send(QpType::Rc, opcode::LOCAL_INV, false, &[], 0), Ok(0));
    assert_eq!(
        send(QpType::Rc, opcode::BIND_MW, false, &[8], 8),
        Err(WqeError::TooManySges)
    );
}

#[test]
fn receives() {
    assert_eq!(validate_recv(2, 2, 30, [10, 20].into_iter()), Ok(30));
    assert_eq!(
        validate_recv(2, 3, 30, [10, 20, 0].into_iter()),
        Err(WqeError::TooManySges)
    );
    assert_eq!(
        validate_recv(2, 2, 3, [u32::MAX, 4].into_iter()),
        Err(WqeError::LengthOverflow)
    );
    assert_eq!(
        validate_recv(2, 1, 5, [4].into_iter()),
        Err(WqeError::LengthMismatch)
    );
}

/// Random WQEs, as a hostile process would write them: validation never
/// panics, never reads more SGEs than it was told, and what it accepts is
/// consistent.
#[test]
fn random_input_is_safe() {
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u32
    };
    for _ in 0..200_000 {
        let qp = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi][(next() % 4) as usize];
        let op = if next().is_multiple_of(2) {
            next() % 20
        } else {
            next()
        };
        let inline = next().is_multiple_of(3);
        let num_sge = if next().is_multiple_of(2) {
            next() % 8
        } else {
            next()
        };
        let lengths: Vec<u32> = (0..8).map(|_| next() >> (next() % 32)).collect();
        let declared = if next().is_multiple_of(2) {
            lengths
                .iter()
                .take(num_sge as usize)
                .fold(0u32, |a, b| a.wrapping_add(*b))
        } else {
            next()
        };
        let mut consumed = 0usize;
        let result = validate_send(
            qp,
            &LIMITS,
            op,
            inline,
            num_sge,
            declared,
            lengths.iter().copied().inspect(|_| consumed += 1),
        );
        assert!(consumed <= LIMITS.max_sge as usize);
        if let Ok(total) = result {
            assert!(opcode_allowed(qp, op));
            assert!(total <= LIMITS.max_message);
            if inline {
                assert!(total <= LIMITS.max_inline);
            } else if total != 0 || num_sge != 0 {
                assert!(num_sge <= LIMITS.max_sge);
                assert_eq!(total, declared);
            }
        }
    }
}

/// Every request opcode the requester picks is one the opcode table knows
/// as that operation, at that place in the message, with the headers the
/// operation needs there.
#[test]
fn request_opcodes_agree_with_the_opcode_table() {
    use srnic_pure::headers::{hdr, opcode_info, Operation, Position, Transport};
    use srnic_pure::wr::request_opcode;
    let ops = [
        opcode::SEND,
        opcode::SEND_WITH_IMM,
        opcode::SEND_WITH_INV,
        opcode::RDMA_WRITE,
        opcode::RDMA_WRITE_WITH_IMM,
    ];
    for uc in [false, true] {
        for op in ops {
            for (first, last) in [(true, true), (true, false), (false, false), (false, true)] {
                let Some(code) = request_opcode(uc, op, first, last) else {
                    assert!(uc && op == opcode::SEND_WITH_INV, "{op} {first} {last}");
                    continue;
                };
                let info = opcode_info(code).expect("known opcode");
                let want_transport = if uc { Transport::Uc } else { Transport::Rc };
                assert_eq!(info.transport, want_transport);
                let is_write = matches!(op, opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM);
                let want_op = if is_write {
                    Operation::Write
                } else {
                    Operation::Send
                };
                assert_eq!(info.operation, want_op);
                let want_pos = match (first, last) {
                    (true, true) => Position::Only,
                    (true, false) => Position::First,
                    (false, false) => Position::Middle,
                    (false, true) => Position::Last,
                };
                assert_eq!(info.position, want_pos);
                assert_eq!(info.headers & hdr::RETH != 0, is_write && first);
                let with_imm = matches!(op, opcode::SEND_WITH_IMM | opcode::RDMA_WRITE_WITH_IMM);
                assert_eq!(info.headers & hdr::IMM != 0, with_imm && last);
                assert_eq!(
                    info.headers & hdr::IETH != 0,
                    op == opcode::SEND_WITH_INV && last
                );
            }
        }
    }
    assert_eq!(request_opcode(false, opcode::RDMA_READ, true, true), None);
}
