//! Deciding whether a history of concurrent operations on one object is
//! linearizable: whether the operations can be put in one order, consistent
//! with real time, in which a sequential [`Model`] gives every recorded output.
//!
//! The search is Wing and Gong's: repeatedly pick an operation that could
//! take effect next (one invoked before every pending operation returned),
//! apply it to the model, and backtrack when no operation fits. Lowe's
//! memoisation keeps a set of (operations applied, model state) pairs already
//! explored, which makes typical histories of thousands of operations
//! quick to decide.
//!
//! An operation whose outcome was never observed (its connection broke, or
//! the server was killed under it) may or may not have taken effect: the
//! search tries it both ways. Its `returned` time is the latest moment it
//! could have taken effect, such as when the killed server was reaped, or
//! [`NEVER`] when there is no such bound.

use std::collections::HashSet;
use std::fmt;
use std::hash::Hash;

/// The `returned` time of an operation with no bound on when it took effect.
pub const NEVER: u64 = u64::MAX;

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<O> {
    /// The reply arrived and said this.
    Returned(O),
    /// No reply: the operation may or may not have taken effect.
    Unknown,
}

/// One operation of a history. Times are on one clock, in any unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// Who issued it, for messages.
    pub client: usize,
    /// When the request was sent.
    pub invoked: u64,
    /// When the reply arrived, or the latest time an operation of unknown
    /// outcome could have taken effect.
    pub returned: u64,
    pub input: I,
    pub outcome: Outcome<O>,
}

/// A sequential specification of the object.
pub trait Model {
    type State: Clone + Eq + Hash + fmt::Debug;
    type Input: fmt::Debug;
    type Output: fmt::Debug;

    /// The state after `input` is applied to `state` and answers `output`,
    /// or `None` when the object in `state` could not have answered that.
    fn step(&self, state: &Self::State, input: &Self::Input, output: &Self::Output) -> Option<Self::State>;

    /// The state after `input` took effect on `state` with an unseen answer,
    /// or `None` when it could not have taken effect there. Not taking
    /// effect at all is always considered besides.
    fn step_unseen(&self, state: &Self::State, input: &Self::Input) -> Option<Self::State>;
}

/// What the search decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<S> {
    /// An order exists; it lists the operations by index, each with whether it
    /// took effect (operations of unknown outcome may not have).
    Linearizable { order: Vec<(usize, bool)> },
    /// No order exists. `longest` is the longest prefix of an order the
    /// search found, `state` the model's state after it, and `stuck` the
    /// operations that could have come next, none of which fits.
    Violation { longest: Vec<usize>, state: S, stuck: Vec<usize> },
    /// The search explored `explored` configurations without deciding.
    Undecided { explored: usize },
}

/// The operations applied so far, as positions in invocation order: every
/// position below `prefix`, and the few above it in `extra` (sorted). Most
/// of a long history is in the prefix, so keys stay small.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Applied {
    prefix: usize,
    extra: Vec<usize>,
}

impl Applied {
    fn contains(&self, position: usize) -> bool {
        position < self.prefix || self.extra.binary_search(&position).is_ok()
    }

    fn with(&self, position: usize) -> Applied {
        let mut applied = self.clone();
        if let Err(at) = applied.extra.binary_search(&position) {
            applied.extra.insert(at, position);
        }
        let run =
            applied.extra.iter().enumerate().take_while(|&(offset, &p)| p == applied.prefix + offset).count();
        applied.prefix += run;
        applied.extra.drain(..run);
        applied
    }

    fn len(&self) -> usize {
        self.prefix + self.extra.len()
    }
}

/// One level of the depth-first search: the operations applied so far, the
/// state they lead to, and the choices at this level still to try.
struct Level<S> {
    applied: Applied,
    /// (position, took effect, state after), tried from the back.
    choices: Vec<(usize, bool, S)>,
}

/// Decides whether `history` is linearizable from `initial`, exploring at
/// most `budget` configurations.
pub fn check<M: Model>(
    model: &M,
    initial: M::State,
    history: &[Operation<M::Input, M::Output>],
    budget: usize,
) -> Verdict<M::State> {
    let mut order: Vec<usize> = (0..history.len()).collect();
    order.sort_by_key(|&index| history[index].invoked);
    let ordered: Vec<&Operation<M::Input, M::Output>> = order.iter().map(|&index| &history[index]).collect();
    let mut seen: HashSet<(Applied, M::State)> = HashSet::new();
    let applied = Applied { prefix: 0, extra: Vec::new() };
    let first = choices(model, &ordered, &applied, &initial);
    let mut path: Vec<(usize, bool)> = Vec::new();
    let mut levels = vec![Level { applied, choices: first }];
    let mut longest: (Vec<usize>, M::State) = (Vec::new(), initial);
    while let Some(level) = levels.last_mut() {
        if level.applied.len() == history.len() {
            let order = path.iter().map(|&(position, effect)| (order[position], effect)).collect();
            return Verdict::Linearizable { order };
        }
        let Some((position, effect, state)) = level.choices.pop() else {
            levels.pop();
            path.pop();
            continue;
        };
        let applied = level.applied.with(position);
        if !seen.insert((applied.clone(), state.clone())) {
            continue;
        }
        if seen.len() > budget {
            return Verdict::Undecided { explored: seen.len() };
        }
        path.push((position, effect));
        if path.len() > longest.0.len() {
            longest = (path.iter().map(|&(position, _)| position).collect(), state.clone());
        }
        let next = choices(model, &ordered, &applied, &state);
        levels.push(Level { applied, choices: next });
    }
    let (prefix, state) = longest;
    let mut applied = Applied { prefix: 0, extra: Vec::new() };
    for &position in &prefix {
        applied = applied.with(position);
    }
    let stuck = candidates(&ordered, &applied).into_iter().map(|position| order[position]).collect();
    let longest = prefix.into_iter().map(|position| order[position]).collect();
    Verdict::Violation { longest, state, stuck }
}

/// The positions of the operations that may come next after `applied`:
/// those not applied yet that were invoked before the earliest return among
/// them. Since operations are in invocation order and each returns after it
/// was invoked, the scan stops at the first invoked after that return.
fn candidates<I, O>(ordered: &[&Operation<I, O>], applied: &Applied) -> Vec<usize> {
    let mut first_return = NEVER;
    let mut found = Vec::new();
    for (position, operation) in ordered.iter().enumerate().skip(applied.prefix) {
        if operation.invoked > first_return {
            break;
        }
        if applied.contains(position) {
            continue;
        }
        first_return = first_return.min(operation.returned);
        found.push(position);
    }
    found
}

fn choices<M: Model>(
    model: &M,
    ordered: &[&Operation<M::Input, M::Output>],
    applied: &Applied,
    state: &M::State,
) -> Vec<(usize, bool, M::State)> {
    let mut choices = Vec::new();
    // Reversed, so that popping from the back tries the earliest invocation first.
    for position in candidates(ordered, applied).into_iter().rev() {
        let operation = ordered[position];
        match &operation.outcome {
            Outcome::Returned(output) => {
                if let Some(next) = model.step(state, &operation.input, output) {
                    choices.push((position, true, next));
                }
            }
            Outcome::Unknown => {
                choices.push((position, false, state.clone()));
                if let Some(next) = model.step_unseen(state, &operation.input) {
                    choices.push((position, true, next));
                }
            }
        }
    }
    choices
}
