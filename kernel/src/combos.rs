//! The combos of one call, whatever the strategy: a built-in's typed combos ([`Params`]), or a
//! program of formulas with each combo's parameter values; [`sweep_combos`], the one sweep
//! entry that runs either; and what a call costs (work, memory, cached lines).
//!
//! A program whose `long` and `short` are exactly a built-in's expression form (canonical
//! text, no exits) is that built-in: [`Combos::of_program`] recognises it and its combos run on
//! the built-in's tuned path (the paper kernel, the shared SMA / EMA / channel passes), which
//! the tests hold equal to the formula path bit for bit.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::builtins::BUILTINS;
use crate::builtins::{Params, Strategy};
use crate::eval::sweep_program;
use crate::execution::Execution;
use crate::expr::registry::{Compute, function};
use crate::expr::{Field, Node, Program};
use crate::lines::Bars;
use crate::strategy;
use crate::sweep::SweepControl;
use crate::{ComboResult, Result};

/// A program and its combos' values, `program.params.len()` values each.
#[derive(Debug, Clone)]
pub struct ProgramCombos {
    /// The strategy's formulas.
    pub program: Arc<Program>,
    /// Each combo's values in parameter order, one after another.
    pub values: Vec<f64>,
    /// How many combos.
    pub count: usize,
}

impl ProgramCombos {
    fn width(&self) -> usize {
        self.program.params.len()
    }

    /// Combo `i`'s values.
    pub fn combo(&self, i: usize) -> &[f64] {
        let w = self.width();
        &self.values[i * w..(i + 1) * w]
    }

    /// How many function series the combos' formulas compute, at most: each call (once per
    /// distinct text) once per distinct combination of the values of the parameters it reads.
    fn series_calls(&self) -> usize {
        let distinct: Vec<usize> = (0..self.width())
            .map(|k| {
                (0..self.count)
                    .map(|i| self.combo(i)[k].to_bits())
                    .collect::<HashSet<u64>>()
                    .len()
            })
            .collect();
        let mut calls: HashMap<&str, usize> = HashMap::new();
        for bound in &self.program.formulas {
            let f = &bound.formula;
            // The parameters each node reads, operands before the nodes that read them.
            let mut reads: Vec<BTreeSet<usize>> = Vec::with_capacity(f.nodes.len());
            for (node, &(start, end)) in f.nodes.iter().zip(&f.spans) {
                let mut set = BTreeSet::new();
                if let Node::Param(name) = node {
                    set.extend(self.program.params.iter().position(|q| *q.name == **name));
                }
                for o in node.operands() {
                    set.extend(reads[o as usize].iter().copied());
                }
                if let Node::Call { func, .. } = node
                    && matches!(function(*func).compute, Compute::Series(_))
                {
                    let n = set
                        .iter()
                        .map(|&k| distinct[k])
                        .fold(1usize, usize::saturating_mul)
                        .min(self.count.max(1));
                    calls.insert(&f.text[start as usize..end as usize], n);
                }
                reads.push(set);
            }
        }
        calls.values().fold(0, |a, &n| a.saturating_add(n))
    }
}

/// The combos of one call.
#[derive(Debug, Clone)]
pub enum Combos {
    /// A built-in strategy's combos (its tuned path).
    Builtin(Vec<Params>),
    /// A program of formulas (the formula path).
    Program(ProgramCombos),
}

/// Operations per bar per combo the formula path is charged (nodes of a typical strategy);
/// only decides between running inline and on the pool.
const FORMULA_WORK_PER_BAR: u64 = 16;

impl Combos {
    /// The combos of `program` with `values` (`count` combos): a built-in's when the program is
    /// one's exact expression form and every combo is valid for it.
    pub fn of_program(program: Arc<Program>, values: Vec<f64>, count: usize) -> Self {
        if let Some(params) = builtin_form(&program, &values, count) {
            return Self::Builtin(params);
        }
        Self::Program(ProgramCombos {
            program,
            values,
            count,
        })
    }

    /// The number of combos.
    pub fn len(&self) -> usize {
        match self {
            Self::Builtin(p) => p.len(),
            Self::Program(p) => p.count,
        }
    }

    /// True with no combo.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parameter `k` of combo `i`, as f64 (windows are exact).
    pub fn value(&self, i: usize, k: usize) -> f64 {
        match self {
            Self::Builtin(p) => p[i].value(k),
            Self::Program(p) => p.combo(i)[k],
        }
    }

    /// The combos at `indices`, in that order.
    #[must_use]
    pub fn pick(&self, indices: &[usize]) -> Self {
        match self {
            Self::Builtin(p) => Self::Builtin(indices.iter().map(|&i| p[i]).collect()),
            Self::Program(p) => Self::Program(ProgramCombos {
                program: Arc::clone(&p.program),
                values: indices.iter().flat_map(|&i| p.combo(i).to_vec()).collect(),
                count: indices.len(),
            }),
        }
    }

    /// The combos of `parts`, one after another (of one strategy).
    pub fn concat(parts: Vec<Self>) -> Self {
        let program = parts.iter().find_map(|p| match p {
            Self::Program(p) => Some(Arc::clone(&p.program)),
            Self::Builtin(_) => None,
        });
        let Some(program) = program else {
            return Self::Builtin(
                parts
                    .into_iter()
                    .flat_map(|p| match p {
                        Self::Builtin(p) => p,
                        Self::Program(_) => unreachable!("no program part"),
                    })
                    .collect(),
            );
        };
        // A part that ran as its built-in's form holds the same values in the same order.
        let width = program.params.len();
        let mut values = Vec::new();
        let mut count = 0;
        for p in &parts {
            for i in 0..p.len() {
                values.extend((0..width).map(|k| p.value(i, k)));
            }
            count += p.len();
        }
        Self::of_program(program, values, count)
    }

    /// Operations a sweep over `bars` bars costs, an upper bound ignoring sharing (inline or
    /// on the pool).
    pub fn work(&self, bars: usize) -> u64 {
        match self {
            Self::Builtin(p) => strategy::work(bars, p),
            Self::Program(p) => (p.count as u64)
                .saturating_mul(bars as u64)
                .saturating_mul(FORMULA_WORK_PER_BAR),
        }
    }

    /// Per-worker scratch bytes over `bars` bars on `workers` threads.
    pub fn scratch_bytes(&self, bars: usize, workers: usize) -> usize {
        match self {
            Self::Builtin(p) => strategy::scratch_bytes(bars, p, workers),
            // A block of every node of the formulas, as series, and the event bytes.
            Self::Program(p) => {
                let nodes: usize = p
                    .program
                    .formulas
                    .iter()
                    .map(|b| b.formula.nodes.len())
                    .sum();
                // A crossing of an HMA and an HMA3 line reads the paper kernel's state bytes,
                // made with its scratch.
                let hulls = p
                    .program
                    .formulas
                    .iter()
                    .flat_map(|b| &b.formula.nodes)
                    .any(|n| {
                        matches!(n, crate::expr::Node::Call { func, .. }
                            if crate::expr::registry::function(*func).hull.is_some())
                    });
                let paper = if hulls {
                    crate::sweep::scratch_bound(bars)
                } else {
                    0
                };
                nodes * 1024 * 8 + 2048 + paper
            }
        }
    }

    /// Bytes the sweep allocates besides its input, at most, with `shared_cap` bytes of shared
    /// arrays allowed (as [`crate::memory_bytes`]).
    pub fn memory_bytes(&self, bars: usize, workers: usize, shared_cap: usize) -> usize {
        match self {
            Self::Builtin(p) => strategy::memory_bytes(bars, p, workers, shared_cap),
            Self::Program(p) => {
                // The shared arrays of a group are at most the working set (the sweep closes a
                // group past it), at least one combo's: every call node of its formulas.
                let calls: usize = p
                    .program
                    .formulas
                    .iter()
                    .flat_map(|b| &b.formula.nodes)
                    .filter(|n| matches!(n, crate::expr::Node::Call { .. }))
                    .count();
                let one = (calls * 3).max(1) * bars.max(1) * 8;
                let arrays = (calls * 3 * p.count * bars * 8).min(shared_cap.max(one));
                arrays
                    + workers * self.scratch_bytes(bars, workers)
                    + p.count * size_of::<ComboResult>()
                    + crate::Moves::bytes(bars)
            }
        }
    }

    /// Whether a stop is a formula (the general execution loop runs whatever the options).
    pub fn formula_stops(&self) -> bool {
        match self {
            Self::Builtin(_) => false,
            Self::Program(p) => crate::expr::Field::STOPS
                .iter()
                .any(|f| p.program.formula(*f).is_some()),
        }
    }

    /// Bytes of lines the sweep offers a cache, at most: a built-in's lines, or a program's
    /// function series (each call of its formulas once per distinct combination of the
    /// parameter values it reads: a grid's combos share them).
    pub fn line_bytes(&self, bars: usize) -> usize {
        match self {
            Self::Builtin(p) => strategy::line_bytes(bars, p),
            Self::Program(p) => p.series_calls().saturating_mul(bars).saturating_mul(8),
        }
    }
}

/// The built-in `program` is the exact form of, with its combos, if every combo is valid for
/// it.
fn builtin_form(program: &Program, values: &[f64], count: usize) -> Option<Vec<Params>> {
    // Exits and stop formulas are not the built-ins' (the tuned paths take numbers for stops).
    if program
        .formulas
        .iter()
        .any(|b| !matches!(b.field, Field::Long | Field::Short | Field::Constraint))
    {
        return None;
    }
    let text = |f: Field| {
        program
            .formula(f)
            .map(|b| crate::expr::canon::text(&b.formula))
    };
    let (long, short) = (text(Field::Long)?, text(Field::Short)?);
    let b = BUILTINS
        .iter()
        .find(|b| b.long == long && b.short == short)?;
    let strategy = Strategy::from_name(b.name)?;
    let width = program.params.len();
    if width != strategy.params().len() {
        return None;
    }
    (0..count)
        .map(|i| Params::new(strategy, &values[i * width..(i + 1) * width]).ok())
        .collect()
}

/// Runs every combo over `bars` under `exec`, in input order: a built-in's on its tuned path
/// (closes only), a program's on the formula path.
///
/// # Errors
/// As [`strategy::sweep_params`] and [`sweep_program`].
pub fn sweep_combos(
    bars: &Bars<'_>,
    combos: &Combos,
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    match combos {
        Combos::Builtin(p) => strategy::sweep_params_on(bars, p, exec, control),
        Combos::Program(p) => sweep_program(bars, &p.program, &p.values, p.count, exec, control),
    }
}
