//! The word path of the per-combo phase: a combo whose own nodes are only crossings of whole
//! arrays (columns, phase-1 series, constants) or served crossings (the paper kernel's state
//! bytes, `eval::Served`), `and` / `or` / `not` and constant conditions makes its conditions'
//! bits ([`super::bits`]) without a pass over a number. Each distinct pair of crossing operands
//! is reduced to one state byte a bar (`lines::vector::signs`: vectorised), or its served bytes
//! are read; a crossing is two bit tests on the state words of eight bars and the bars before
//! them, whose results one multiplication gathers into eight bits; shared conditions' bits
//! (phase 1's) are read as they are, `and` / `or` / `not` a word of 64 bars at a time, and the
//! execution loop reads the four conditions' words (`eval::drive`).
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
    /// UNDEFINED to whole words of 64 bars.
    states: Vec<Vec<u8>>,
    /// Each step's bits (a leaf's are read from its shared array).
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

    /// The four conditions' bits (long, short, exit long, exit short) over bars `[b0, b1)`
    /// (`b0` a multiple of 64): each crossing's from its pair's state bytes, `and` / `or` /
    /// `not` a word at a time, a shared condition's bits read as they are.
    pub(super) fn events<'s>(
        &self,
        ctx: &'s Ctx<'_>,
        (b0, b1): (usize, usize),
        scratch: &'s mut WordScratch,
    ) -> [Word<'s>; 4] {
        debug_assert_eq!(b0 % 64, 0, "blocks start on a word");
        let n = b1 - b0;
        let nw = n.div_ceil(64);
        scratch.states.resize_with(self.pairs.len(), Vec::new);
        for (pair, st) in self.pairs.iter().zip(&mut scratch.states) {
            st.clear();
            match pair {
                Pair::Operands(a, b) => {
                    st.resize(nw * 64 + 1, UNDEFINED);
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
                    st.resize(nw * 64 + 1, UNDEFINED);
                }
            }
        }
        let steps = self.steps.len();
        scratch.words.resize_with(steps, Vec::new);
        // A shared condition's bits over the block.
        let leaf = |j: usize| -> Word<'s> {
            let Some(Array::Cond(conds)) = &ctx.arrays[self.leaves[j] as usize] else {
                unreachable!("a leaf is a phase-1 condition")
            };
            Word::Of(&conds.bits[b0 / 64..b1.div_ceil(64)])
        };
        for k in 0..steps {
            let (done, rest) = scratch.words.split_at_mut(k);
            let out = &mut rest[0];
            let read = |s: Src| -> Word<'_> {
                match s {
                    Src::Step(j) => Word::Of(&done[j]),
                    Src::Leaf(j) => leaf(j),
                    Src::Always(b) => Word::always(b),
                }
            };
            match self.steps[k] {
                Step::Cross(way, pair) => {
                    let st = &scratch.states[pair];
                    // Above: the state BELOW now, ABOVE or equal before (its bit 1 clear);
                    // below: ABOVE now, BELOW or equal before (bit 0 clear).
                    match way {
                        Crossing::Above => {
                            cross_bits(st, nw, out, |prev, cur| (cur >> 1) & !cur & !(prev >> 1))
                        }
                        Crossing::Below => {
                            cross_bits(st, nw, out, |prev, cur| cur & !(cur >> 1) & !prev)
                        }
                    }
                }
                Step::Not(a) => combine(read(a), Word::always(true), nw, out, |x, y| x ^ y),
                Step::And(a, b) => combine(read(a), read(b), nw, out, |x, y| x & y),
                Step::Or(a, b) => combine(read(a), read(b), nw, out, |x, y| x | y),
            }
        }
        let all = &scratch.words[..];
        self.conditions.map(|s| match s {
            Src::Step(j) => Word::Of(&all[j]),
            Src::Leaf(j) => leaf(j),
            Src::Always(b) => Word::always(b),
        })
    }
}

/// Bit 0 of every byte.
const LOW: u64 = 0x0101_0101_0101_0101;

/// Bit 0 of each byte of `x` (its other bits clear) as eight bits, byte `k` to bit `k`: the
/// multiplication puts each byte's bit at a distinct place of the top byte (no two products
/// meet, so nothing carries).
#[inline(always)]
fn low_bits(x: u64) -> u64 {
    x.wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// `nw` words of bits from the states `st` (the bar before the block, then the block, padded to
/// whole words): bar `j`'s bit is bit 0 of `f(prev, cur)` at its byte, `cur` eight bars' states
/// as a word, `prev` the bars' before each of them (eight bars at a time, as the states' words).
#[inline(always)]
fn cross_bits(st: &[u8], nw: usize, out: &mut Vec<u64>, f: impl Fn(u64, u64) -> u64) {
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    out.resize(nw, 0);
    for (w, o) in out.iter_mut().enumerate() {
        let mut bits = 0;
        for k in 0..8 {
            let at = 64 * w + 8 * k;
            let x = f(word(&st[at..at + 8]), word(&st[at + 1..at + 9])) & LOW;
            bits |= low_bits(x) << (8 * k);
        }
        *o = bits;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The crossings' bits (eight bars a multiplication) equal the byte rule phase 1 uses,
    /// bar for bar, on states of every kind in every order, the block's first bar included.
    #[test]
    fn crossing_bits_equal_the_byte_rule() {
        let mut seed = 7u64;
        let states: Vec<u8> = (0..1000)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (seed >> 62) as u8
            })
            .collect();
        for (b0, n) in [
            (0usize, 1000usize),
            (64, 200),
            (128, 1),
            (512, 488),
            (320, 64),
        ] {
            let nw = n.div_ceil(64);
            let mut st = vec![if b0 > 0 { states[b0 - 1] } else { UNDEFINED }];
            st.extend_from_slice(&states[b0..b0 + n]);
            st.resize(nw * 64 + 1, UNDEFINED);
            for way in [Crossing::Above, Crossing::Below] {
                let mut bits = Vec::new();
                match way {
                    Crossing::Above => cross_bits(&st, nw, &mut bits, |prev, cur| {
                        (cur >> 1) & !cur & !(prev >> 1)
                    }),
                    Crossing::Below => {
                        cross_bits(&st, nw, &mut bits, |prev, cur| cur & !(cur >> 1) & !prev)
                    }
                }
                let mut bytes = vec![0u8; n];
                crossing_bytes(&states, way, b0, &mut bytes);
                for (j, &b) in bytes.iter().enumerate() {
                    assert_eq!(
                        (bits[j / 64] >> (j % 64)) & 1,
                        u64::from(b),
                        "{way:?} bar {j} from {b0}"
                    );
                }
                // No bar past the block crosses (the padding is undefined).
                if n % 64 != 0 {
                    assert_eq!(bits[nw - 1] >> (n % 64), 0);
                }
            }
        }
    }
}
