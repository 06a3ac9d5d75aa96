//! The combos of one call, whatever the strategy (a built-in's are its formula row's): a
//! program of formulas with each combo's parameter values; [`sweep_combos`], the one sweep
//! entry; and what a call costs (work, memory, cached lines), the tuned paths that run some
//! combos whole counted by their shape ([`crate::eval`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use crate::eval::sweep_program;
use crate::execution::Execution;
use crate::expr::registry::{Compute, function};
use crate::expr::{Node, Program};
use crate::lines::Bars;
use crate::sweep::SweepControl;
use crate::{Combo, ComboResult, Result};

/// Per-worker scratch of the paper kernel for `combos` (none: 0).
fn kernel_scratch(bars: usize, combos: &[Combo], workers: usize) -> usize {
    if combos.is_empty() {
        0
    } else {
        crate::sweep::scratch_bytes(bars, combos, workers)
    }
}

/// The combos of one call: a program of formulas and each combo's values,
/// `program.params.len()` values each (a built-in's combos are its formula row's:
/// [`crate::builtins::Builtin::program`]).
#[derive(Debug, Clone)]
pub struct Combos {
    /// The strategy's formulas.
    program: Arc<Program>,
    /// Each combo's values in parameter order, one after another.
    values: Vec<f64>,
    /// How many combos.
    count: usize,
    /// The paper kernel's combos of those it runs whole, found once (every estimate reads
    /// them).
    paper: OnceLock<Vec<Combo>>,
}

impl Combos {
    fn width(&self) -> usize {
        self.program.params.len()
    }

    /// Combo `i`'s values.
    pub fn combo(&self, i: usize) -> &[f64] {
        let w = self.width();
        &self.values[i * w..(i + 1) * w]
    }

    /// Whether the formulas call a Hull-type line (`hma`, `hma3`), whose crossings the paper
    /// kernel serves.
    fn hulls(&self) -> bool {
        self.program
            .formulas
            .iter()
            .flat_map(|b| &b.formula.nodes)
            .any(|n| matches!(n, Node::Call { func, .. } if function(*func).hull.is_some()))
    }

    /// The paper kernel's combos of those the sweep runs whole on it, whatever the series.
    fn paper_combos(&self) -> &[Combo] {
        self.paper.get_or_init(|| {
            if self.hulls() {
                crate::eval::paper_combos(&self.program, &self.values, self.count)
            } else {
                Vec::new()
            }
        })
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

/// Operations per bar per combo the formula path is charged (nodes of a typical strategy);
/// only decides between running inline and on the pool.
const FORMULA_WORK_PER_BAR: u64 = 16;

impl Combos {
    /// The combos of `program` with `values` (`count` combos).
    pub fn of_program(program: Arc<Program>, values: Vec<f64>, count: usize) -> Self {
        Self {
            program,
            values,
            count,
            paper: OnceLock::new(),
        }
    }

    /// The number of combos.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True with no combo.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parameter `k` of combo `i`, as f64 (windows are exact).
    pub fn value(&self, i: usize, k: usize) -> f64 {
        self.combo(i)[k]
    }

    /// The combos at `indices`, in that order.
    #[must_use]
    pub fn pick(&self, indices: &[usize]) -> Self {
        let p = self;
        Self::of_program(
            Arc::clone(&p.program),
            indices.iter().flat_map(|&i| p.combo(i).to_vec()).collect(),
            indices.len(),
        )
    }

    /// The combos of `parts`, one after another (of one strategy; `None` with no part).
    pub fn concat(parts: Vec<Self>) -> Option<Self> {
        let program = Arc::clone(&parts.first()?.program);
        let mut values = Vec::new();
        let mut count = 0;
        for p in &parts {
            values.extend_from_slice(&p.values);
            count += p.len();
        }
        Some(Self::of_program(program, values, count))
    }

    /// Operations a sweep over `bars` bars costs, an upper bound ignoring sharing (inline or
    /// on the pool).
    pub fn work(&self, bars: usize) -> u64 {
        let p = self;
        let formulas = (p.count as u64)
            .saturating_mul(bars as u64)
            .saturating_mul(FORMULA_WORK_PER_BAR);
        formulas.max(crate::sweep::work(bars, p.paper_combos()))
    }

    /// Per-worker scratch bytes over `bars` bars on `workers` threads.
    pub fn scratch_bytes(&self, bars: usize, workers: usize) -> usize {
        let paper = self.paper_combos();
        self.formula_scratch(bars, self.count - paper.len())
            .max(kernel_scratch(bars, paper, workers))
    }

    /// Per-worker scratch of the formula path for `formulas` of the combos (none: 0).
    fn formula_scratch(&self, bars: usize, formulas: usize) -> usize {
        if formulas == 0 {
            return 0;
        }
        let nodes: usize = self
            .program
            .formulas
            .iter()
            .map(|b| b.formula.nodes.len())
            .sum();
        // A block of every node of the formulas, as series (a condition's bits are less); a combo run
        // whole on a tuned path reads a state or signal byte a bar.
        let own = nodes * 1024 * 8 + 2048 + bars;
        // A crossing of an HMA and an HMA3 line reads the paper kernel's state bytes, made
        // with its scratch.
        let paper = if self.hulls() {
            crate::sweep::scratch_bound(bars)
        } else {
            0
        };
        own + paper
    }

    /// Bytes the sweep allocates besides its input, at most, with `shared_cap` bytes of shared
    /// arrays allowed (as [`crate::memory_bytes`]): the formula path's groups and the combos
    /// run whole on the paper kernel run one after the other, so the larger of the two, and
    /// every combo's result.
    pub fn memory_bytes(&self, bars: usize, workers: usize, shared_cap: usize) -> usize {
        let paper = self.paper_combos();
        let formulas = self.count - paper.len();
        let results = self.count * size_of::<ComboResult>() + crate::Moves::bytes(bars);
        let on_formulas = if formulas == 0 {
            0
        } else {
            // The shared arrays of a group are at most the working set (the sweep closes a
            // group past it), at least one combo's: every call node of its formulas.
            let calls: usize = self
                .program
                .formulas
                .iter()
                .flat_map(|b| &b.formula.nodes)
                .filter(|n| matches!(n, Node::Call { .. }))
                .count();
            let one = (calls * 3).max(1) * bars.max(1) * 8;
            let arrays = (calls * 3 * formulas * bars * 8).min(shared_cap.max(one));
            arrays + workers * self.formula_scratch(bars, formulas)
        };
        // The paper kernel's own figure counts its combos' results and the moves: those are
        // counted once, above.
        let on_paper = if paper.is_empty() {
            0
        } else {
            crate::sweep::memory_bytes(bars, paper, workers, shared_cap)
                - paper.len() * size_of::<ComboResult>()
                - crate::Moves::bytes(bars)
        };
        on_formulas.max(on_paper) + results
    }

    /// Whether a stop is a formula (the general execution loop runs whatever the options).
    pub fn formula_stops(&self) -> bool {
        crate::expr::Field::STOPS
            .iter()
            .any(|f| self.program.formula(*f).is_some())
    }

    /// Bytes of lines the sweep offers a cache, at most: a program's function series (each
    /// call of its formulas once per distinct combination of the parameter values it reads:
    /// a grid's combos share them), or the paper kernel's lines of the combos it runs whole.
    pub fn line_bytes(&self, bars: usize) -> usize {
        let p = self;
        let series = p.series_calls().saturating_mul(bars).saturating_mul(8);
        series.max(crate::sweep::line_bytes(bars, p.paper_combos()))
    }

    /// The arrays of combo `i` that a sweep over a row range can cut from the same arrays
    /// over the whole series ([`crate::ArrayKey::of_range`]): its lines whose every value is
    /// a fresh sum over its own window, and the state bytes of its crossings of the paper
    /// kernel's lines. A sweep of combos that between them have every such array of a grid,
    /// on the whole series, leaves them in a cache for every range of it.
    pub fn cuttable_lines(&self, i: usize) -> Vec<crate::ArrayKey> {
        let p = self;
        crate::eval::cuttable_lines(&p.program, p.combo(i))
    }
}

/// Runs every combo over `bars` under `exec`, in input order.
///
/// # Errors
/// As [`sweep_program`].
pub fn sweep_combos(
    bars: &Bars<'_>,
    combos: &Combos,
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    sweep_program(
        bars,
        &combos.program,
        &combos.values,
        combos.count,
        exec,
        control,
    )
}
