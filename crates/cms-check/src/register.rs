//! The model of one tenant under concurrent clients: a register holding a
//! value (a label the clients write) and its `resourceVersion`. Reads see
//! both; a `PUT` is compare-and-set on `resourceVersion`, which succeeds
//! with the version plus one or fails with 409 `Conflict`.

use crate::linearizability::Model;

/// What a tenant holds, as far as the model is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Register {
    pub resource_version: u64,
    pub value: u64,
}

/// A request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `GET` the tenant.
    Read,
    /// `PUT` the tenant with `metadata.resourceVersion = expected` and the value.
    CompareAndSet { expected: u64, value: u64 },
}

/// A reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// 200 to a `GET`, with what it showed.
    Read(Register),
    /// 200 to a `PUT`, with the new `resourceVersion`.
    Written { resource_version: u64 },
    /// 409 to a `PUT`: the version did not match.
    Conflict,
}

/// The register model: versions grow by one on every successful write.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareAndSetRegister;

impl Model for CompareAndSetRegister {
    type State = Register;
    type Input = Request;
    type Output = Reply;

    fn step(&self, state: &Register, input: &Request, output: &Reply) -> Option<Register> {
        match (input, output) {
            (Request::Read, Reply::Read(seen)) => (seen == state).then_some(*state),
            (Request::CompareAndSet { expected, value }, Reply::Written { resource_version }) => {
                let applies = state.resource_version == *expected && *resource_version == expected + 1;
                applies.then_some(Register { resource_version: *resource_version, value: *value })
            }
            (Request::CompareAndSet { expected, .. }, Reply::Conflict) => {
                (state.resource_version != *expected).then_some(*state)
            }
            _ => None,
        }
    }

    fn step_unseen(&self, state: &Register, input: &Request) -> Option<Register> {
        match input {
            Request::Read => Some(*state),
            Request::CompareAndSet { expected, value } => (state.resource_version == *expected)
                .then_some(Register { resource_version: expected + 1, value: *value }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CompareAndSetRegister, Register, Reply, Request};
    use crate::linearizability::{NEVER, Operation, Outcome, Verdict, check};

    const BUDGET: usize = 1_000_000;

    fn register(resource_version: u64, value: u64) -> Register {
        Register { resource_version, value }
    }

    fn read(client: usize, invoked: u64, returned: u64, seen: Register) -> Operation<Request, Reply> {
        Operation {
            client,
            invoked,
            returned,
            input: Request::Read,
            outcome: Outcome::Returned(Reply::Read(seen)),
        }
    }

    fn cas(
        client: usize,
        invoked: u64,
        returned: u64,
        (expected, value): (u64, u64),
        reply: Option<Reply>,
    ) -> Operation<Request, Reply> {
        let outcome = match reply {
            Some(reply) => Outcome::Returned(reply),
            None => Outcome::Unknown,
        };
        Operation { client, invoked, returned, input: Request::CompareAndSet { expected, value }, outcome }
    }

    fn written(resource_version: u64) -> Option<Reply> {
        Some(Reply::Written { resource_version })
    }

    /// Checks `history` from version 1 holding 0 and compares the verdict's kind.
    fn check_history(history: &[Operation<Request, Reply>], linearizable: bool) -> Verdict<Register> {
        let verdict = check(&CompareAndSetRegister, register(1, 0), history, BUDGET);
        let got = matches!(verdict, Verdict::Linearizable { .. });
        assert_eq!(got, linearizable, "{verdict:?} for {history:#?}");
        verdict
    }

    #[test]
    fn an_empty_history_is_linearizable() {
        check_history(&[], true);
    }

    #[test]
    fn sequential_reads_and_writes_are_linearizable() {
        check_history(
            &[
                read(0, 0, 1, register(1, 0)),
                cas(0, 2, 3, (1, 7), written(2)),
                read(1, 4, 5, register(2, 7)),
                cas(1, 6, 7, (1, 8), Some(Reply::Conflict)),
                read(0, 8, 9, register(2, 7)),
            ],
            true,
        );
    }

    #[test]
    fn a_stale_read_after_a_write_returned_is_not() {
        let verdict =
            check_history(&[cas(0, 0, 10, (1, 7), written(2)), read(1, 11, 12, register(1, 0))], false);
        let Verdict::Violation { longest, stuck, .. } = verdict else { unreachable!() };
        assert_eq!(longest, [0], "the write fits, the read after it does not");
        assert_eq!(stuck, [1]);
    }

    #[test]
    fn overlapping_operations_may_take_effect_in_either_order() {
        // The read overlaps the write: it may see the old or the new value.
        check_history(&[cas(0, 0, 10, (1, 7), written(2)), read(1, 5, 6, register(1, 0))], true);
        check_history(&[cas(0, 0, 10, (1, 7), written(2)), read(1, 5, 6, register(2, 7))], true);
        // Two concurrent writes from the same version: one wins, one conflicts.
        check_history(
            &[
                cas(0, 0, 10, (1, 7), Some(Reply::Conflict)),
                cas(1, 1, 9, (1, 8), written(2)),
                read(2, 11, 12, register(2, 8)),
            ],
            true,
        );
    }

    #[test]
    fn two_writes_from_one_version_cannot_both_succeed() {
        check_history(&[cas(0, 0, 10, (1, 7), written(2)), cas(1, 1, 9, (1, 8), written(2))], false);
    }

    #[test]
    fn a_conflict_when_the_version_matched_is_not_linearizable() {
        check_history(&[cas(0, 0, 1, (1, 7), Some(Reply::Conflict))], false);
    }

    #[test]
    fn a_lost_acknowledged_write_is_not_linearizable() {
        // Written, then a later read shows the version before it: the write was lost.
        check_history(
            &[
                cas(0, 0, 1, (1, 7), written(2)),
                cas(0, 2, 3, (2, 9), written(3)),
                read(1, 20, 21, register(2, 7)),
            ],
            false,
        );
    }

    #[test]
    fn an_unknown_write_may_or_may_not_have_taken_effect() {
        let applied = [cas(0, 0, NEVER, (1, 7), None), read(1, 5, 6, register(2, 7))];
        check_history(&applied, true);
        let not_applied = [cas(0, 0, NEVER, (1, 7), None), read(1, 5, 6, register(1, 0))];
        check_history(&not_applied, true);
        // It can take effect late, after reads that did not see it.
        check_history(
            &[cas(0, 0, NEVER, (1, 7), None), read(1, 5, 6, register(1, 0)), read(1, 7, 8, register(2, 7))],
            true,
        );
        // But not after the time it is bounded by (its server was reaped at 6).
        check_history(
            &[cas(0, 0, 6, (1, 7), None), read(1, 7, 8, register(1, 0)), read(1, 9, 10, register(2, 7))],
            false,
        );
        // And never with a value nobody wrote.
        check_history(&[cas(0, 0, NEVER, (1, 7), None), read(1, 5, 6, register(2, 8))], false);
    }

    #[test]
    fn versions_grow_by_one() {
        check_history(&[cas(0, 0, 1, (1, 7), written(3))], false);
    }

    #[test]
    fn many_clients_interleaved_are_decided_quickly() {
        // Eight clients, each doing read-then-write rounds in overlapping
        // windows against a correct register.
        let mut history = Vec::new();
        let mut current = register(1, 0);
        let mut clock = 0;
        for round in 0..300_u64 {
            for client in 0..8_usize {
                let invoked = clock;
                clock += 1;
                let seen = current;
                history.push(read(client, invoked, invoked + 20, seen));
                if client == (round as usize) % 8 {
                    let next = register(current.resource_version + 1, round * 8 + client as u64);
                    history.push(cas(
                        client,
                        invoked + 1,
                        invoked + 5,
                        (current.resource_version, next.value),
                        written(next.resource_version),
                    ));
                    current = next;
                } else {
                    history.push(cas(client, invoked + 1, invoked + 30, (0, 1), Some(Reply::Conflict)));
                }
            }
        }
        check_history(&history, true);
    }
}
