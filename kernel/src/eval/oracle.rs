//! The plain interpreter: the oracle of formula strategies. One combo at a time, every node of
//! every formula computed whole by the registry's oracle computations (`crate::lines::plain`),
//! nothing shared between nodes, formulas or combos; signals bar by bar as docs/language.md
//! writes them, then `crate::oracle`'s bar-by-bar execution loop. The fast path
//! ([`super::sweep_program`]) must give the same trades, bit for bit.

use crate::execution::Execution;
use crate::expr::bind::{Bound, Field};
use crate::expr::registry::{Arg, Plain, full_form, function};
use crate::expr::{Column, Node, Program};
use crate::lines::{Bars, Input};
use crate::oracle::{Trade, execute_with_stops};

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

/// Evaluates one formula for one combo; also returns its longest window.
pub fn evaluate(bars: &Bars<'_>, bound: &Bound, values: &[f64]) -> (Value, usize) {
    let len = bars.len();
    let f = &bound.formula;
    let mut vals: Vec<Value> = Vec::with_capacity(f.nodes.len());
    let mut longest = 0;
    for (i, node) in f.nodes.iter().enumerate() {
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
                        longest = longest.max(*w);
                    }
                }
                match entry.plain {
                    Plain::Series(g) => Value::Series(g(bars, &inputs)),
                    Plain::Cond(g) => Value::Cond(g(bars, &inputs)),
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
    (vals.pop().expect("a formula has a node"), longest)
}

/// One combo's trades over `bars` under `exec` (`exec.start` is the first evaluated bar).
pub fn run(bars: &Bars<'_>, program: &Program, values: &[f64], exec: &Execution) -> Vec<Trade> {
    let len = bars.len();
    let mut conds: [Vec<bool>; 4] = Default::default();
    let mut longest = 0;
    for (slot, field) in [Field::Long, Field::Short, Field::ExitLong, Field::ExitShort]
        .into_iter()
        .enumerate()
    {
        conds[slot] = match program.formula(field) {
            None => vec![false; len],
            Some(bound) => {
                let (v, w) = evaluate(bars, bound, values);
                longest = longest.max(w);
                (0..len).map(|i| v.truth(i)).collect()
            }
        };
    }
    // The stop formulas, each a value per bar (a constant formula the same at every bar).
    let mut stops: [Option<Vec<f64>>; 3] = Default::default();
    for (k, field) in Field::STOPS.into_iter().enumerate() {
        if let Some(bound) = program.formula(field) {
            let (v, w) = evaluate(bars, bound, values);
            longest = longest.max(w);
            stops[k] = Some((0..len).map(|i| v.num(i)).collect());
        }
    }
    if longest > len {
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
