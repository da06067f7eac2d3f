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

/// A set of operation indices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(len: usize) -> Bits {
        Bits(vec![0; len.div_ceil(64)])
    }

    fn contains(&self, index: usize) -> bool {
        self.0[index / 64] & (1 << (index % 64)) != 0
    }

    fn with(&self, index: usize) -> Bits {
        let mut bits = self.clone();
        bits.0[index / 64] |= 1 << (index % 64);
        bits
    }
}

/// One level of the depth-first search: the operations applied so far, the
/// state they lead to, and the choices at this level still to try.
struct Level<S> {
    applied: Bits,
    state: S,
    /// (operation, took effect, state after), tried from the back.
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
    let mut by_invocation: Vec<usize> = (0..history.len()).collect();
    by_invocation.sort_by_key(|&index| history[index].invoked);
    let mut seen: HashSet<(Bits, M::State)> = HashSet::new();
    let applied = Bits::new(history.len());
    let first = choices(model, history, &by_invocation, &applied, &initial);
    let mut path: Vec<(usize, bool)> = Vec::new();
    let mut levels = vec![Level { applied, state: initial, choices: first }];
    let mut longest: (Vec<usize>, M::State) = (Vec::new(), levels[0].state.clone());
    while let Some(level) = levels.last_mut() {
        if path.len() == history.len() {
            return Verdict::Linearizable { order: path };
        }
        let Some((index, effect, state)) = level.choices.pop() else {
            levels.pop();
            path.pop();
            continue;
        };
        let applied = level.applied.with(index);
        if !seen.insert((applied.clone(), state.clone())) {
            continue;
        }
        if seen.len() > budget {
            return Verdict::Undecided { explored: seen.len() };
        }
        path.push((index, effect));
        if path.len() > longest.0.len() {
            longest = (path.iter().map(|&(index, _)| index).collect(), state.clone());
        }
        let next = choices(model, history, &by_invocation, &applied, &state);
        levels.push(Level { applied, state, choices: next });
    }
    let (longest, state) = longest;
    let mut applied = Bits::new(history.len());
    for &index in &longest {
        applied = applied.with(index);
    }
    let stuck = candidates(history, &by_invocation, &applied);
    Verdict::Violation { longest, state, stuck }
}

/// The operations that may come next after `applied`: those not applied yet
/// that were invoked before the earliest return among them.
fn candidates<I, O>(history: &[Operation<I, O>], by_invocation: &[usize], applied: &Bits) -> Vec<usize> {
    let first_return = by_invocation
        .iter()
        .filter(|&&index| !applied.contains(index))
        .map(|&index| history[index].returned)
        .min()
        .unwrap_or(NEVER);
    by_invocation
        .iter()
        .copied()
        .take_while(|&index| history[index].invoked <= first_return)
        .filter(|&index| !applied.contains(index))
        .collect()
}

fn choices<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    by_invocation: &[usize],
    applied: &Bits,
    state: &M::State,
) -> Vec<(usize, bool, M::State)> {
    let mut choices = Vec::new();
    // Reversed, so that popping from the back tries the earliest invocation first.
    for index in candidates(history, by_invocation, applied).into_iter().rev() {
        let operation = &history[index];
        match &operation.outcome {
            Outcome::Returned(output) => {
                if let Some(next) = model.step(state, &operation.input, output) {
                    choices.push((index, true, next));
                }
            }
            Outcome::Unknown => {
                choices.push((index, false, state.clone()));
                if let Some(next) = model.step_unseen(state, &operation.input) {
                    choices.push((index, true, next));
                }
            }
        }
    }
    choices
}
