//! The word path of the per-combo phase: a combo whose own nodes are only crossings of whole
//! arrays (columns, phase-1 series, constants) or served crossings (the paper kernel's state
//! bytes, `eval::Served`), `and` / `or` / `not` and constant conditions reads its conditions
//! eight bars a `u64` word. Each distinct pair of crossing operands is reduced to one state
//! byte a bar (`lines::vector::signs`: vectorised), or its served bytes are read, a crossing is
//! two bit tests on the state words of a bar and the bar before, shared conditions (phase-1
//! bytes) are read as words, and the event words the execution loop visits are assembled from
//! them as it reads them: no per-node pass over the block's bars in bytes, no byte-wise `and`.
//!
//! Exactly the language's crossings: with `signs(a, b)`, `b > a` is ABOVE (01), `b < a` is
//! BELOW (10), equal is 0 and a NaN on either side is UNDEFINED (11). `a` crosses above `b` at
//! `i` when the state at `i` is BELOW (`a > b`) and the state at `i - 1` is ABOVE or equal (`a
//! <= b`, both defined: bit 1 clear); below, when the state at `i` is ABOVE and at `i - 1`
//! BELOW or equal (bit 0 clear). The bar before the computed range's first is UNDEFINED, so
//! nothing crosses there.

use std::sync::Arc;

use super::bits::{Word, combine};
use super::{Array, Ctx, whole_series};
use crate::expr::registry::{Crossing, function};
use crate::lines::vector::{UNDEFINED, signs};
use crate::plan::{CallArg, Cond, Def, Operand};

/// Bit 0 of every byte.
const LOW: u64 = 0x0101_0101_0101_0101;

/// Where a condition's words come from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Src {
    /// An own node: step `.0`'s words.
    Step(usize),
    /// A phase-1 condition array: leaf `.0`'s words.
    Leaf(usize),
    /// True or false at every bar.
    Always(bool),
}

/// Where a crossing's state bytes come from.
#[derive(Debug, Clone)]
enum Pair {
    /// Its two operands, reduced to states a block at a time.
    Operands(Operand, Operand),
    /// A tuned path's bytes over the whole series (`eval::Served`).
    Served(Arc<[u8]>),
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Operands(a, b), Self::Operands(c, d)) => (a, b) == (c, d),
            (Self::Served(x), Self::Served(y)) => Arc::ptr_eq(x, y),
            _ => false,
        }
    }
}

/// One own node of the combo, as the word path computes it.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A crossing of operand pair `.1` ([`Words::pairs`]).
    Cross(Crossing, usize),
    Not(Src),
    And(Src, Src),
    Or(Src, Src),
}

/// A combo's own nodes on the word path.
#[derive(Debug)]
pub(super) struct Words {
    /// Own nodes in dependency order.
    steps: Vec<Step>,
    /// The distinct pairs of the crossings.
    pairs: Vec<Pair>,
    /// The phase-1 condition arrays read.
    leaves: Vec<u32>,
    /// The four conditions (long, short, exit long, exit short).
    conditions: [Src; 4],
}

/// Per-worker buffers of the word path.
#[derive(Debug, Default)]
pub(super) struct WordScratch {
    /// Each pair's state bytes: the bar before the block, then the block, padded with
    /// UNDEFINED to whole words.
    states: Vec<Vec<u8>>,
    /// Each step's words, then each leaf's.
    words: Vec<Vec<u64>>,
    /// A constant operand's values over the block.
    constants: [Vec<f64>; 2],
}

impl Words {
    /// The word path for the own nodes `order` (ascending ids) of a combo with `conditions`,
    /// if every own node is a crossing of whole arrays or constants, `and`, `or`, `not` or a
    /// constant condition.
    pub(super) fn of(ctx: &Ctx<'_>, order: &[u32], conditions: &[Cond; 4]) -> Option<Self> {
        let mut out = Self {
            steps: Vec::with_capacity(order.len()),
            pairs: Vec::new(),
            leaves: Vec::new(),
            conditions: [Src::Always(false); 4],
        };
        // Each own node's source, as it is read by the nodes after it.
        let mut own: Vec<(u32, Src)> = Vec::with_capacity(order.len());
        for &id in order {
            let mut src = |n: u32| out.source(ctx, &own, n);
            let step = match &ctx.defs[id as usize] {
                Def::Call { func, args } => {
                    let mut way = function(*func).crossing?;
                    let pair = match ctx.served(id as usize) {
                        Some(served) => {
                            way = served.way(way);
                            Pair::Served(Arc::clone(&served.states))
                        }
                        None => {
                            let [CallArg::Operand(a), CallArg::Operand(b)] = args[..] else {
                                return None;
                            };
                            for o in [a, b] {
                                if let Operand::Node(n) = o {
                                    whole_series(ctx.bars, ctx.defs, ctx.arrays, n)?;
                                }
                            }
                            Pair::Operands(a, b)
                        }
                    };
                    let k = out
                        .pairs
                        .iter()
                        .position(|p| *p == pair)
                        .unwrap_or_else(|| {
                            out.pairs.push(pair);
                            out.pairs.len() - 1
                        });
                    Step::Cross(way, k)
                }
                Def::Not(a) => Step::Not(src(*a)?),
                Def::And(a, b) => Step::And(src(*a)?, src(*b)?),
                Def::Or(a, b) => Step::Or(src(*a)?, src(*b)?),
                Def::Always(b) => {
                    own.push((id, Src::Always(*b)));
                    continue;
                }
                _ => return None,
            };
            own.push((id, Src::Step(out.steps.len())));
            out.steps.push(step);
        }
        for (k, c) in conditions.iter().enumerate() {
            out.conditions[k] = match *c {
                Cond::Always(b) => Src::Always(b),
                Cond::Node(n) => out.source(ctx, &own, n)?,
            };
        }
        Some(out)
    }

    /// The source of condition node `n`: an own node's, a phase-1 array (a leaf), or a
    /// constant.
    fn source(&mut self, ctx: &Ctx<'_>, own: &[(u32, Src)], n: u32) -> Option<Src> {
        if let Some(&(_, s)) = own.iter().find(|(id, _)| *id == n) {
            return Some(s);
        }
        match (&ctx.defs[n as usize], &ctx.arrays[n as usize]) {
            (Def::Always(b), _) => Some(Src::Always(*b)),
            (_, Some(Array::Cond(_))) => {
                let k = self.leaves.iter().position(|l| *l == n).unwrap_or_else(|| {
                    self.leaves.push(n);
                    self.leaves.len() - 1
                });
                Some(Src::Leaf(k))
            }
            _ => None,
        }
    }

    /// The event words of bars `[b0, b1)`: byte `k` of word `w` is bar `b0 + 8 * w + k`'s
    /// event (bit 0 long, 1 short, 2 exit long, 3 exit short), made from the block's words in
    /// `scratch` as they are read (never written out).
    pub(super) fn events<'s>(
        &self,
        ctx: &Ctx<'_>,
        (b0, b1): (usize, usize),
        scratch: &'s mut WordScratch,
    ) -> impl Iterator<Item = u64> + use<'s> {
        let n = b1 - b0;
        let nw = n.div_ceil(8);
        scratch.states.resize_with(self.pairs.len(), Vec::new);
        for (pair, st) in self.pairs.iter().zip(&mut scratch.states) {
            st.clear();
            match pair {
                Pair::Operands(a, b) => {
                    st.resize(nw * 8 + 1, UNDEFINED);
                    let [ca, cb] = &mut scratch.constants;
                    let a = operand(ctx, *a, b0, b1, ca);
                    let b = operand(ctx, *b, b0, b1, cb);
                    if b0 > 0 {
                        // The bar before the block: its state, from its values.
                        signs(a.0, b.0, &mut st[..1]);
                    }
                    signs(a.1, b.1, &mut st[1..=n]);
                }
                Pair::Served(states) => {
                    st.push(if b0 > 0 { states[b0 - 1] } else { UNDEFINED });
                    st.extend_from_slice(&states[b0..b1]);
                    st.resize(nw * 8 + 1, UNDEFINED);
                }
            }
        }
        let steps = self.steps.len();
        scratch
            .words
            .resize_with(steps + self.leaves.len(), Vec::new);
        // The leaves: a phase-1 condition's bytes over the block, as words.
        for (&id, out) in self.leaves.iter().zip(&mut scratch.words[steps..]) {
            let Some(Array::Cond(conds)) = &ctx.arrays[id as usize] else {
                unreachable!("a leaf is a phase-1 condition")
            };
            out.clear();
            let block = &conds.bytes[b0..b1];
            let mut chunks = block.chunks_exact(8);
            out.extend((&mut chunks).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))));
            if !chunks.remainder().is_empty() {
                let mut x = [0u8; 8];
                x[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
                out.push(u64::from_le_bytes(x));
            }
        }
        for k in 0..steps {
            let (done, rest) = scratch.words.split_at_mut(k);
            let (out, leaves) = rest.split_first_mut().expect("a step's words");
            let leaves = &leaves[steps - k - 1..];
            let read = |s: Src| -> Word<'_> {
                match s {
                    Src::Step(j) => Word::Of(&done[j]),
                    Src::Leaf(j) => Word::Of(&leaves[j]),
                    Src::Always(b) => Word::All(if b { LOW } else { 0 }),
                }
            };
            out.clear();
            match self.steps[k] {
                Step::Cross(way, pair) => {
                    let st = &scratch.states[pair];
                    match way {
                        Crossing::Above => cross_words(st, nw, out, |prev, cur| {
                            (cur >> 1) & !cur & !(prev >> 1) & LOW
                        }),
                        Crossing::Below => {
                            cross_words(st, nw, out, |prev, cur| cur & !(cur >> 1) & !prev & LOW)
                        }
                    }
                }
                Step::Not(a) => combine(read(a), Word::All(LOW), nw, out, |x, y| x ^ y),
                Step::And(a, b) => combine(read(a), read(b), nw, out, |x, y| x & y),
                Step::Or(a, b) => combine(read(a), read(b), nw, out, |x, y| x | y),
            }
        }
        let all = &scratch.words[..];
        let read = move |s: Src| -> Word<'s> {
            match s {
                Src::Step(j) => Word::Of(&all[j]),
                Src::Leaf(j) => Word::Of(&all[steps + j]),
                Src::Always(b) => Word::All(if b { LOW } else { 0 }),
            }
        };
        let [l, s, el, es] = self.conditions.map(read);
        // The last word's bytes past the block are no bars: a condition true everywhere
        // would set them.
        let last = if n % 8 == 0 {
            u64::MAX
        } else {
            u64::MAX >> (8 * (8 - n % 8))
        };
        (0..nw).map(move |w| {
            let e = l.at(w) | (s.at(w) << 1) | (el.at(w) << 2) | (es.at(w) << 3);
            if w + 1 == nw { e & last } else { e }
        })
    }
}

/// `out[w] = f(prev, cur)` over `nw` words of the states `st` (the bar before the block, then
/// the block): `cur` is bars `8w..8w+8` of the block, `prev` the bars before each of them.
#[inline(always)]
fn cross_words(st: &[u8], nw: usize, out: &mut Vec<u64>, f: impl Fn(u64, u64) -> u64) {
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let prev = st[..nw * 8].chunks_exact(8);
    let cur = st[1..=nw * 8].chunks_exact(8);
    out.extend(prev.zip(cur).map(|(p, c)| f(word(p), word(c))));
}

/// The bytes of a crossing `way` (1 where it holds) at bars `[b0, b0 + out.len())` from the
/// state bytes of its pair over the whole series (the bar before the series is undefined).
pub(super) fn crossing_bytes(states: &[u8], way: Crossing, b0: usize, out: &mut [u8]) {
    let prev = |i: usize| if i > 0 { states[i - 1] } else { UNDEFINED };
    for (j, o) in out.iter_mut().enumerate() {
        let (p, c) = (prev(b0 + j), states[b0 + j]);
        *o = match way {
            Crossing::Above => (c >> 1) & !c & !(p >> 1) & 1,
            Crossing::Below => c & !(c >> 1) & !p & 1,
        };
    }
}

/// An operand over the block and the bar before it: (the bar before, the block).
fn operand<'a>(
    ctx: &'a Ctx<'_>,
    o: Operand,
    b0: usize,
    b1: usize,
    constant: &'a mut Vec<f64>,
) -> (&'a [f64], &'a [f64]) {
    match o {
        Operand::Node(n) => {
            let x = whole_series(ctx.bars, ctx.defs, ctx.arrays, n).expect("checked whole");
            (&x[b0.saturating_sub(1)..b0.max(1)], &x[b0..b1])
        }
        Operand::Const(bits) => {
            constant.clear();
            constant.resize(b1 - b0 + 1, f64::from_bits(bits));
            (&constant[..1], &constant[1..])
        }
    }
}
