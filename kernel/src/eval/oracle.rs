//! The plain interpreter: the oracle of formula strategies. One combo at a time, every node of
//! every formula computed whole by the registry's oracle computations (`crate::lines::plain`),
//! nothing shared between nodes, formulas or combos; signals bar by bar as docs/language.md
//! writes them, then `crate::oracle`'s bar-by-bar execution loop. The fast path
//! ([`super::sweep_program`]) must give the same trades, bit for bit.
//!
//! A higher-timeframe call gathers its own period bars here ([`period_bars`]: each bar's
//! period key compared with the bar before's, a value per column accumulated bar by bar), not
//! with the fast path's [`crate::timeframe::PeriodBars::of`].

use crate::execution::Execution;
use crate::expr::bind::{Bound, Field};
use crate::expr::registry::{Arg, Plain, full_form, function};
use crate::expr::{Column, Node, Program};
use crate::lines::{Bars, Input};
use crate::oracle::{Trade, execute_with_stops};
use crate::timeframe::{PeriodBars, Timeframe};

/// A node's value.
#[derive(Debug, Clone)]
pub enum Value {
    /// A number per combo.
    Const(f64),
    /// A boolean per combo (a comparison of constants).
    Bool(bool),
    /// A series.
    Series(Vec<f64>),
    /// A condition.
    Cond(Vec<bool>),
}

impl Value {
    fn num(&self, i: usize) -> f64 {
        match self {
            Self::Const(v) => *v,
            Self::Series(s) => s[i],
            _ => unreachable!("a number"),
        }
    }

    fn truth(&self, i: usize) -> bool {
        match self {
            Self::Bool(b) => *b,
            Self::Cond(c) => c[i],
            _ => unreachable!("a condition"),
        }
    }
}

fn column<'a>(bars: &Bars<'a>, c: Column) -> &'a [f64] {
    super::column(bars, c).expect("the oracle is given every column the formula reads")
}

/// The period bars of `bars` for `timeframe`, written from expressions.md bar by bar: a bar
/// whose period key differs from the bar before's starts a period bar; open is the first
/// open, high the largest high, low the smallest low, close the last close, volume the sum
/// from 0.0, an input the last value.
///
/// # Panics
/// If the bars carry no days.
pub fn period_bars(bars: &Bars<'_>, timeframe: Timeframe) -> PeriodBars {
    let days = bars
        .days
        .expect("the oracle's bars carry days for a higher timeframe");
    let mut out = PeriodBars {
        open: bars.open.map(|_| Vec::new()),
        high: bars.high.map(|_| Vec::new()),
        low: bars.low.map(|_| Vec::new()),
        volume: bars.volume.map(|_| Vec::new()),
        ..PeriodBars::default()
    };
    let mut inputs: Vec<Vec<f64>> = vec![Vec::new(); bars.inputs.len()];
    for i in 0..bars.len() {
        let key = timeframe.key(days[i]);
        let new = i == 0 || key != timeframe.key(days[i - 1]);
        if new {
            out.close.push(bars.close[i]);
            if let (Some(o), Some(x)) = (out.open.as_mut(), bars.open) {
                o.push(x[i]);
            }
            if let (Some(h), Some(x)) = (out.high.as_mut(), bars.high) {
                h.push(x[i]);
            }
            if let (Some(l), Some(x)) = (out.low.as_mut(), bars.low) {
                l.push(x[i]);
            }
            if let (Some(v), Some(x)) = (out.volume.as_mut(), bars.volume) {
                v.push(0.0 + x[i]);
            }
            for (k, values) in inputs.iter_mut().enumerate() {
                values.push(bars.input(k).map_or(f64::NAN, |x| x[i]));
            }
        } else {
            let p = out.close.len() - 1;
            out.close[p] = bars.close[i];
            if let (Some(h), Some(x)) = (out.high.as_mut(), bars.high)
                && x[i] > h[p]
            {
                h[p] = x[i];
            }
            if let (Some(l), Some(x)) = (out.low.as_mut(), bars.low)
                && x[i] < l[p]
            {
                l[p] = x[i];
            }
            if let (Some(v), Some(x)) = (out.volume.as_mut(), bars.volume) {
                v[p] += x[i];
            }
            for (k, values) in inputs.iter_mut().enumerate() {
                values[p] = bars.input(k).map_or(f64::NAN, |x| x[i]);
            }
        }
        out.of_bar.push((out.close.len() - 1) as u32);
    }
    out.inputs = inputs.into_iter().map(Into::into).collect();
    out
}

/// Evaluates one formula for one combo; also returns whether its windows fit (each window on
/// the bars no longer than the bars, each inside a higher-timeframe call no longer than that
/// timeframe's period bars): a formula whose windows do not fit gives no signal.
pub fn evaluate(bars: &Bars<'_>, bound: &Bound, values: &[f64]) -> (Value, bool) {
    let f = &bound.formula;
    let mut vals: Vec<Value> = Vec::with_capacity(f.nodes.len());
    let mut fits = true;
    // The period bars of each timeframe the formula calls, gathered when first needed.
    let mut periods: [Option<PeriodBars>; 3] = Default::default();
    for tf in bound.frames.iter().flatten() {
        if periods[tf.index()].is_none() {
            periods[tf.index()] = Some(period_bars(bars, *tf));
        }
    }
    for (i, node) in f.nodes.iter().enumerate() {
        // The bars this node is computed on.
        let here =
            bound.frames[i].map(|tf| periods[tf.index()].as_ref().expect("gathered above").bars());
        let bars = here.as_ref().unwrap_or(bars);
        let len = bars.len();
        let v = match node {
            Node::Number { value, .. } => Value::Const(*value),
            Node::Param(_) => Value::Const(values[bound.params[i].expect("a parameter") as usize]),
            Node::Column(c) => Value::Series(column(bars, *c).to_vec()),
            Node::Call { func, args } => {
                let mut entry = function(*func);
                // Each argument as its kind takes it; conditions as bytes, as the fast path.
                let conds: Vec<Option<Vec<u8>>> = args
                    .iter()
                    .zip(entry.args)
                    .map(|(&a, kind)| {
                        (*kind == Arg::Cond).then(|| {
                            let c = &vals[a as usize];
                            (0..len).map(|k| u8::from(c.truth(k))).collect()
                        })
                    })
                    .collect();
                let mut inputs: Vec<Input<'_>> = args
                    .iter()
                    .zip(entry.args)
                    .zip(&conds)
                    .map(|((&a, kind), cond)| match (kind, &vals[a as usize]) {
                        (Arg::Window, v) => Input::Window(v.num(0) as usize),
                        (Arg::Cond, _) => Input::Cond(cond.as_deref().expect("made above")),
                        (Arg::Series, Value::Const(v)) => Input::Const(*v),
                        (Arg::Series, Value::Series(x)) => Input::Series(x),
                        _ => unreachable!("the binder checked kinds"),
                    })
                    .collect();
                if let Some((full, derive)) = full_form(entry) {
                    entry = function(full);
                    let n = inputs[1].window() as u32;
                    inputs.truncate(1);
                    inputs.extend(derive(n).into_iter().map(|w| Input::Window(w as usize)));
                }
                for input in &inputs {
                    if let Input::Window(w) = input {
                        fits &= *w <= len;
                    }
                }
                match entry.plain {
                    Plain::Series(g) => Value::Series(g(bars, &inputs)),
                    Plain::Cond(g) => Value::Cond(g(bars, &inputs)),
                    // At bar `i`, the value of the period bar before bar `i`'s; NaN in the
                    // first period.
                    Plain::Frame(tf) => {
                        let p = periods[tf.index()].as_ref().expect("gathered above");
                        let x = &vals[args[0] as usize];
                        Value::Series(
                            p.of_bar
                                .iter()
                                .map(|&k| {
                                    if k == 0 {
                                        f64::NAN
                                    } else {
                                        x.num(k as usize - 1)
                                    }
                                })
                                .collect(),
                        )
                    }
                }
            }
            Node::Neg(a) => match &vals[*a as usize] {
                Value::Const(v) => Value::Const(-v),
                x => Value::Series((0..len).map(|k| -x.num(k)).collect()),
            },
            Node::Arith(op, a, b) => {
                let (x, y) = (&vals[*a as usize], &vals[*b as usize]);
                match (x, y) {
                    (Value::Const(p), Value::Const(q)) => Value::Const(op.apply(*p, *q)),
                    _ => Value::Series((0..len).map(|k| op.apply(x.num(k), y.num(k))).collect()),
                }
            }
            Node::Compare(op, a, b) => {
                let (x, y) = (&vals[*a as usize], &vals[*b as usize]);
                let cmp = |p: f64, q: f64| !p.is_nan() && !q.is_nan() && op.apply(p, q);
                match (x, y) {
                    (Value::Const(p), Value::Const(q)) => Value::Bool(cmp(*p, *q)),
                    _ => Value::Cond((0..len).map(|k| cmp(x.num(k), y.num(k))).collect()),
                }
            }
            Node::Not(a) => match &vals[*a as usize] {
                Value::Bool(b) => Value::Bool(!b),
                x => Value::Cond((0..len).map(|k| !x.truth(k)).collect()),
            },
            Node::And(a, b) | Node::Or(a, b) => {
                let and = matches!(node, Node::And(..));
                let (x, y) = (&vals[*a as usize], &vals[*b as usize]);
                match (x, y) {
                    (Value::Bool(p), Value::Bool(q)) => {
                        Value::Bool(if and { *p && *q } else { *p || *q })
                    }
                    _ => Value::Cond(
                        (0..len)
                            .map(|k| {
                                if and {
                                    x.truth(k) && y.truth(k)
                                } else {
                                    x.truth(k) || y.truth(k)
                                }
                            })
                            .collect(),
                    ),
                }
            }
        };
        vals.push(v);
    }
    (vals.pop().expect("a formula has a node"), fits)
}

/// One combo's trades over `bars` under `exec` (`exec.start` is the first evaluated bar).
pub fn run(bars: &Bars<'_>, program: &Program, values: &[f64], exec: &Execution) -> Vec<Trade> {
    let len = bars.len();
    let mut conds: [Vec<bool>; 4] = Default::default();
    let mut fits = true;
    for (slot, field) in [Field::Long, Field::Short, Field::ExitLong, Field::ExitShort]
        .into_iter()
        .enumerate()
    {
        conds[slot] = match program.formula(field) {
            None => vec![false; len],
            Some(bound) => {
                let (v, f) = evaluate(bars, bound, values);
                fits &= f;
                (0..len).map(|i| v.truth(i)).collect()
            }
        };
    }
    // The stop formulas, each a value per bar (a constant formula the same at every bar).
    let mut stops: [Option<Vec<f64>>; 3] = Default::default();
    for (k, field) in Field::STOPS.into_iter().enumerate() {
        if let Some(bound) = program.formula(field) {
            let (v, f) = evaluate(bars, bound, values);
            fits &= f;
            stops[k] = Some((0..len).map(|i| v.num(i)).collect());
        }
    }
    if !fits {
        return Vec::new();
    }
    let signals: Vec<i8> = (0..len)
        .map(|i| match (conds[0][i], conds[1][i]) {
            (true, false) => 1,
            (false, true) => -1,
            _ => 0,
        })
        .collect();
    execute_with_stops(
        bars,
        &signals,
        (&conds[2], &conds[3]),
        stops.each_ref().map(|s| s.as_deref()),
        exec,
    )
}
