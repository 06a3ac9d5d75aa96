//! The plan of a call: every combo's formulas bound to its parameter values, each distinct
//! node of the whole call interned once under its canonical key (the function or operator,
//! its operand nodes, its window and constant values), so an array that two formulas or two
//! combos reach is one node, computed once per series.
//!
//! Constants are folded per combo (`2 * atr(14)` and `k * atr(14)` with `k = 2` are one node;
//! constants are compared by their bits, so `x / 0.0` and `x / -0.0`, which differ, stay two).
//! Binding walks each formula's post-order arena with a loop: no recursion, whatever the
//! formula.
//!
//! A node inside a higher-timeframe call (`weekly(sma(close, 10))`, protocol v1.4) is a node
//! of that timeframe: its key is the def *and* the timeframe ([`Plan::frames`]), so
//! `sma(close, 10)` inside `weekly` and outside it are two nodes, computed on the period bars
//! and on the bars; the call itself is a node on the bars that reads one of that timeframe.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::expr::bind::{Bound, Field, Kind, MAX_WINDOW, Program};
use crate::expr::registry::{Arg, Returns, full_form, function, lookup};
use crate::expr::{BinOp, CmpOp, Column, Node};
use crate::keys::{ArrayKey, NodeKey};
use crate::lines::Line;
use crate::timeframe::Timeframe;

/// An operand of a node: another node, or a constant (its bits, so keys hash and compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operand {
    /// Node `id` of the plan.
    Node(u32),
    /// A constant's `f64::to_bits`.
    Const(u64),
}

impl Operand {
    fn constant(v: f64) -> Self {
        Self::Const(v.to_bits())
    }
}

/// A call's argument: an operand or a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallArg {
    /// A series, a constant or a condition node.
    Operand(Operand),
    /// A window length.
    Window(u32),
}

/// One distinct node of a call, its operands interned before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Def {
    /// A column of the bars.
    Column(Column),
    /// A function call ([`crate::expr::registry::FUNCTIONS`]).
    Call {
        /// The function.
        func: u16,
        /// Its arguments.
        args: Box<[CallArg]>,
    },
    /// Unary minus of a series.
    Neg(Operand),
    /// Arithmetic with at least one series operand.
    Arith(BinOp, Operand, Operand),
    /// A comparison with at least one series operand.
    Compare(CmpOp, Operand, Operand),
    /// `not` of a condition node.
    Not(u32),
    /// `and` of two condition nodes.
    And(u32, u32),
    /// `or` of two condition nodes.
    Or(u32, u32),
    /// A condition true or false at every bar.
    Always(bool),
}

impl Def {
    /// The nodes it reads.
    pub fn inputs(&self) -> Vec<u32> {
        let node = |o: &Operand| match o {
            Operand::Node(n) => Some(*n),
            Operand::Const(_) => None,
        };
        match self {
            Self::Column(_) | Self::Always(_) => Vec::new(),
            Self::Call { args, .. } => args
                .iter()
                .filter_map(|a| match a {
                    CallArg::Operand(o) => node(o),
                    CallArg::Window(_) => None,
                })
                .collect(),
            Self::Neg(a) => node(a).into_iter().collect(),
            Self::Arith(_, a, b) | Self::Compare(_, a, b) => {
                node(a).into_iter().chain(node(b)).collect()
            }
            Self::Not(a) => vec![*a],
            Self::And(a, b) | Self::Or(a, b) => vec![*a, *b],
        }
    }

    /// Feeds the def to `h` with each operand node replaced by its entry in `nodes`.
    fn hash_with(&self, nodes: &[u128], inputs: &[String], h: &mut impl Hasher) {
        let operand = |o: &Operand, h: &mut dyn Hasher| match o {
            Operand::Node(n) => {
                h.write_u8(0);
                h.write_u128(nodes[*n as usize]);
            }
            Operand::Const(bits) => {
                h.write_u8(1);
                h.write_u64(*bits);
            }
        };
        std::mem::discriminant(self).hash(h);
        match self {
            // An input by its name (the dataset column), so equal columns of two calls match
            // whatever their positions in `inputs`.
            Self::Column(Column::Input(k)) => {
                h.write_u8(0xff);
                inputs[usize::from(*k)].hash(h);
            }
            Self::Column(c) => c.hash(h),
            Self::Always(b) => b.hash(h),
            Self::Call { func, args } => {
                func.hash(h);
                h.write_usize(args.len());
                for a in args {
                    match a {
                        CallArg::Operand(o) => operand(o, h),
                        CallArg::Window(w) => {
                            h.write_u8(2);
                            h.write_u32(*w);
                        }
                    }
                }
            }
            Self::Neg(a) => operand(a, h),
            Self::Arith(op, a, b) => {
                op.hash(h);
                operand(a, h);
                operand(b, h);
            }
            Self::Compare(op, a, b) => {
                op.hash(h);
                operand(a, h);
                operand(b, h);
            }
            Self::Not(a) => h.write_u128(nodes[*a as usize]),
            Self::And(a, b) | Self::Or(a, b) => {
                h.write_u128(nodes[*a as usize]);
                h.write_u128(nodes[*b as usize]);
            }
        }
    }

    /// Whether it is one of `explain`'s arrays: a series node that is not a column.
    fn is_array(&self) -> bool {
        self.is_series() && !matches!(self, Self::Column(_))
    }

    /// Leading bars its values leave undefined wherever the series starts, where every value
    /// is computed afresh from its inputs' values over that lookback (a column; elementwise
    /// arithmetic; a function the registry marks `fresh`, over such inputs), given its operand
    /// nodes' (`warm`); `None` where values depend on where the series starts.
    fn warm_up(&self, warm: &[Option<u32>]) -> Option<u32> {
        let operand = |o: &Operand| match o {
            Operand::Node(n) => warm[*n as usize],
            Operand::Const(_) => Some(0),
        };
        match self {
            Self::Column(_) => Some(0),
            Self::Neg(a) => operand(a),
            Self::Arith(_, a, b) => Some(operand(a)?.max(operand(b)?)),
            Self::Call { func, args } if function(*func).fresh => {
                let lookbacks: Vec<usize> = args
                    .iter()
                    .map(|a| match a {
                        CallArg::Operand(o) => operand(o).map(|w| w as usize),
                        CallArg::Window(n) => Some(*n as usize),
                    })
                    .collect::<Option<_>>()?;
                u32::try_from((function(*func).lookback)(&lookbacks)).ok()
            }
            _ => None,
        }
    }

    /// Whether it is a series (else a condition).
    pub fn is_series(&self) -> bool {
        match self {
            Self::Column(_) | Self::Neg(_) | Self::Arith(..) => true,
            Self::Call { func, .. } => function(*func).returns == Returns::Series,
            Self::Compare(..) | Self::Not(_) | Self::And(..) | Self::Or(..) | Self::Always(_) => {
                false
            }
        }
    }
}

/// One node's fingerprint ([`Plan::fingerprints`]): its def on `frame`, its operand nodes
/// replaced by their fingerprints (`nodes`).
fn fingerprint(def: &Def, frame: Option<Timeframe>, nodes: &[u128], inputs: &[String]) -> u128 {
    let half = |salt: u64| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        // A node of a higher timeframe never shares a key (nor a cached line) with the bars'
        // node of the same def; the bars' keys are as before timeframes.
        if let Some(tf) = frame {
            h.write_u8(0xfe);
            tf.hash(&mut h);
        }
        def.hash_with(nodes, inputs, &mut h);
        h.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

/// The node key of the call that computes `line` over the closes, on the bars: the key a
/// formula's node of that call has in any plan ([`Plan::node_keys`]), so a line a tuned pass
/// makes and the same call in a formula are one cached array.
pub fn line_key(line: Line) -> NodeKey {
    let (name, windows) = line.call();
    let func = lookup(name, windows.len() + 1).expect("a line is a call of the registry");
    let close = Def::Column(Column::Close);
    let call = Def::Call {
        func,
        args: std::iter::once(CallArg::Operand(Operand::Node(0)))
            .chain(windows.into_iter().map(CallArg::Window))
            .collect(),
    };
    let of_close = fingerprint(&close, None, &[], &[]);
    NodeKey::new(
        fingerprint(&call, None, &[of_close], &[]),
        call.warm_up(&[close.warm_up(&[])]),
    )
}

/// The cache's key of `line`'s values: its call's node key ([`line_key`]).
pub fn line_array_key(line: Line) -> ArrayKey {
    ArrayKey::Node(line_key(line))
}

/// The cache's key of the state bytes of lines `a` and `b` (`crate::signal`: `b` crossing
/// `a`): the pair of their calls' node keys.
pub fn signs_key(a: Line, b: Line) -> ArrayKey {
    ArrayKey::Signs(NodeKey::pair(line_key(a), line_key(b)))
}

/// A formula's value for one combo: the same number or truth at every bar, or a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    /// A number at every bar.
    Const(f64),
    /// A truth at every bar.
    Bool(bool),
    /// A node of the plan.
    Node(u32),
}

/// A condition of one combo: a node, or the same value at every bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// True or false everywhere (an absent formula is false).
    Always(bool),
    /// A condition node.
    Node(u32),
}

/// The longest window a combo's formulas use on the bars and on each higher timeframe's period
/// bars: a combo gives no signal on a series where one of them does not fit (expressions.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Windows {
    /// On the bars.
    pub bars: usize,
    /// On the period bars, in [`Timeframe::ALL`] order.
    pub periods: [usize; 3],
}

impl Windows {
    /// Whether every window fits in `have` (a series' bars and its period bars).
    pub fn fit(&self, have: &Self) -> bool {
        self.bars <= have.bars && self.periods.iter().zip(&have.periods).all(|(w, h)| w <= h)
    }

    /// The longer of each window.
    #[must_use]
    pub fn max(self, other: Self) -> Self {
        let mut out = self;
        out.bars = out.bars.max(other.bars);
        for (a, b) in out.periods.iter_mut().zip(other.periods) {
            *a = (*a).max(b);
        }
        out
    }

    fn note(&mut self, frame: Option<Timeframe>, w: usize) {
        let slot = match frame {
            None => &mut self.bars,
            Some(tf) => &mut self.periods[tf.index()],
        };
        *slot = (*slot).max(w);
    }
}

/// One combo as the plan holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComboPlan {
    /// `long`, `short`, `exit_long`, `exit_short`.
    pub conditions: [Cond; 4],
    /// The stop formulas' values (`stop_loss`, `take_profit`, `trailing_stop`): a node or a
    /// constant; `None` where the body gives a number or nothing.
    pub stops: [Option<Operand>; 3],
    /// The longest window its formulas use on each timeframe (0 with none).
    pub windows: Windows,
    /// The largest lookback of its formulas (docs/language.md's table).
    pub lookback: usize,
}

/// The distinct nodes of a call.
#[derive(Debug, Default)]
pub struct Plan {
    defs: Vec<Def>,
    /// Each def's higher timeframe (`None`: the bars).
    frames: Vec<Option<Timeframe>>,
    index: HashMap<(Option<Timeframe>, Def), u32>,
    /// How many combos reach each node, and the last combo that did (to count each once).
    reached: Vec<(u32, u32)>,
    /// Combos bound so far.
    combos: u32,
    /// The names of the inputs its column nodes read ([`Program::inputs`]): a node's
    /// fingerprint names its column, never its position in one call's list.
    inputs: Vec<String>,
}

/// A bound value during the walk of one formula.
#[derive(Debug, Clone, Copy)]
enum Val {
    Const(f64),
    Bool(bool),
    Node(u32),
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// The distinct nodes, every operand before the node that reads it.
    pub fn defs(&self) -> &[Def] {
        &self.defs
    }

    /// Each def's timeframe, in [`Plan::defs`] order: `None` for a node on the bars, the
    /// timeframe of the `daily` / `weekly` / `monthly` call a node is inside.
    pub fn frames(&self) -> &[Option<Timeframe>] {
        &self.frames
    }

    /// The number of distinct series nodes that are not columns: `explain`'s `arrays`.
    pub fn arrays(&self) -> usize {
        self.defs.iter().filter(|d| d.is_array()).count()
    }

    /// The fingerprints ([`Plan::fingerprints`]) of the nodes [`Plan::arrays`] counts.
    pub fn array_fingerprints(&self) -> Vec<u128> {
        self.fingerprints()
            .into_iter()
            .zip(&self.defs)
            .filter_map(|(f, d)| d.is_array().then_some(f))
            .collect()
    }

    /// A 128-bit fingerprint of each node's canonical key (the def, its operand nodes
    /// replaced by their fingerprints), in [`Plan::defs`] order: equal nodes of two plans
    /// have equal fingerprints, so the distinct nodes of a call too large to bind into one
    /// plan can be counted a few bytes each (`explain`). Two independent SipHash-1-3 halves:
    /// a collision among 10^9 nodes has odds of about 10^-21.
    pub fn fingerprints(&self) -> Vec<u128> {
        let mut out: Vec<u128> = Vec::with_capacity(self.defs.len());
        for (def, frame) in self.defs.iter().zip(&self.frames) {
            out.push(fingerprint(def, *frame, &out, &self.inputs));
        }
        out
    }

    /// Each node's cache key ([`NodeKey`]: its fingerprint and, where its values are fresh
    /// over a window of its inputs, its warm-up), in [`Plan::defs`] order.
    pub fn node_keys(&self) -> Vec<NodeKey> {
        let mut warm: Vec<Option<u32>> = Vec::with_capacity(self.defs.len());
        for (def, frame) in self.defs.iter().zip(&self.frames) {
            // A node of a higher timeframe reads periods, which depend on where the bars start.
            warm.push(frame.is_none().then(|| def.warm_up(&warm)).flatten());
        }
        self.fingerprints()
            .into_iter()
            .zip(warm)
            .map(|(f, w)| NodeKey::new(f, w))
            .collect()
    }

    fn intern(&mut self, frame: Option<Timeframe>, def: Def) -> u32 {
        let key = (frame, def);
        let id = match self.index.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.defs.len() as u32;
                self.defs.push(key.1.clone());
                self.frames.push(frame);
                self.index.insert(key, id);
                self.reached.push((0, u32::MAX));
                id
            }
        };
        let (count, last) = &mut self.reached[id as usize];
        if *last != self.combos {
            *last = self.combos;
            *count += 1;
        }
        id
    }

    /// How many of the combos bound so far reach node `id` (a node two combos reach is worth
    /// computing once for both).
    pub fn combos_reaching(&self, id: u32) -> u32 {
        self.reached[id as usize].0
    }

    /// The id of `def` on the bars if the plan holds it (for walks over a finished plan).
    pub fn find(&self, def: &Def) -> Option<u32> {
        self.index.get(&(None, def.clone())).copied()
    }

    /// Binds `program` to one combo's parameter `values` (in [`Program::params`] order),
    /// interning every node it reaches.
    pub fn bind(&mut self, program: &Program, values: &[f64]) -> ComboPlan {
        self.combos += 1;
        if self.inputs != program.inputs {
            // One plan binds one program (a call's); its inputs are fixed once.
            assert!(
                self.inputs.is_empty() || program.inputs.is_empty(),
                "a plan binds programs of one strategy's inputs"
            );
            if self.inputs.is_empty() {
                self.inputs.clone_from(&program.inputs);
            }
        }
        let mut conditions = [Cond::Always(false); 4];
        let mut stops = [None; 3];
        let mut windows = Windows::default();
        let mut lookback = 0;
        for bound in &program.formulas {
            let (root, w, l) = self.bind_formula(bound, values);
            windows = windows.max(w);
            lookback = lookback.max(l);
            let slot = match bound.field {
                Field::Long => 0,
                Field::Short => 1,
                Field::ExitLong => 2,
                Field::ExitShort => 3,
                Field::StopLoss | Field::TakeProfit | Field::TrailingStop => {
                    let k = Field::STOPS.iter().position(|f| *f == bound.field);
                    stops[k.expect("a stop field")] = Some(match root {
                        Val::Const(c) => Operand::constant(c),
                        Val::Node(n) => Operand::Node(n),
                        Val::Bool(_) => unreachable!("the binder checked stops are numbers"),
                    });
                    continue;
                }
                // A portfolio's formulas are read as series by its own evaluation.
                Field::Constraint | Field::Rank | Field::Filter | Field::Weight => continue,
            };
            conditions[slot] = match root {
                Val::Bool(b) => Cond::Always(b),
                Val::Node(n) => Cond::Node(n),
                Val::Const(_) => unreachable!("the binder checked the formula is a condition"),
            };
        }
        ComboPlan {
            conditions,
            stops,
            windows,
            lookback,
        }
    }

    /// Binds a portfolio `program` (protocol v1.4) to one combo's `values`: the root of each of
    /// its `rank`, `filter` and `weight` formulas (`None` where absent), in that order, and the
    /// longest windows they use (a series where one does not fit is never eligible) and their
    /// largest lookback.
    pub fn bind_portfolio(
        &mut self,
        program: &Program,
        values: &[f64],
    ) -> ([Option<Root>; 3], Windows, usize) {
        self.combos += 1;
        if self.inputs.is_empty() {
            self.inputs.clone_from(&program.inputs);
        }
        let mut roots = [None; 3];
        let (mut longest, mut lookback) = (Windows::default(), 0);
        for bound in &program.formulas {
            let Some(k) = Field::PORTFOLIO.iter().position(|f| *f == bound.field) else {
                continue;
            };
            let (root, w, l) = self.bind_formula(bound, values);
            longest = longest.max(w);
            lookback = lookback.max(l);
            roots[k] = Some(match root {
                Val::Const(c) => Root::Const(c),
                Val::Bool(b) => Root::Bool(b),
                Val::Node(n) => Root::Node(n),
            });
        }
        (roots, longest, lookback)
    }

    fn cond_node(&mut self, frame: Option<Timeframe>, v: Val) -> u32 {
        match v {
            Val::Bool(b) => self.intern(frame, Def::Always(b)),
            Val::Node(n) => n,
            Val::Const(_) => unreachable!("the binder checked kinds"),
        }
    }

    /// The root's value, the longest windows and the lookback of one formula for one combo.
    fn bind_formula(&mut self, bound: &Bound, values: &[f64]) -> (Val, Windows, usize) {
        let f = &bound.formula;
        let mut vals: Vec<Val> = Vec::with_capacity(f.nodes.len());
        let mut looks: Vec<usize> = Vec::with_capacity(f.nodes.len());
        let mut longest = Windows::default();
        let operand = |v: Val| match v {
            Val::Const(c) => Operand::constant(c),
            Val::Node(n) => Operand::Node(n),
            Val::Bool(_) => unreachable!("the binder checked kinds"),
        };
        for (i, node) in f.nodes.iter().enumerate() {
            let frame = bound.frames[i];
            let (val, look) = match node {
                Node::Number { value, .. } => (Val::Const(*value), 0),
                Node::Param(_) => (
                    Val::Const(values[bound.params[i].expect("a parameter") as usize]),
                    0,
                ),
                Node::Column(c) => (Val::Node(self.intern(frame, Def::Column(*c))), 0),
                Node::Call { func, args } => {
                    let mut entry = function(*func);
                    let mut id = *func;
                    let mut call: Vec<CallArg> = Vec::with_capacity(args.len() + 2);
                    let mut arg_looks: Vec<usize> = Vec::with_capacity(args.len() + 2);
                    for (&a, kind) in args.iter().zip(entry.args) {
                        let v = vals[a as usize];
                        match kind {
                            Arg::Window => {
                                let Val::Const(w) = v else {
                                    unreachable!("a window is a number or a parameter")
                                };
                                // Protocol checks make windows integers in range; clamp so a
                                // direct kernel caller cannot wrap.
                                let w = w.clamp(1.0, f64::from(MAX_WINDOW)) as u32;
                                call.push(CallArg::Window(w));
                                arg_looks.push(w as usize);
                            }
                            Arg::Series => {
                                call.push(CallArg::Operand(operand(v)));
                                arg_looks.push(looks[a as usize]);
                            }
                            Arg::Cond => {
                                let n = self.cond_node(frame, v);
                                call.push(CallArg::Operand(Operand::Node(n)));
                                arg_looks.push(looks[a as usize]);
                            }
                        }
                    }
                    if let Some((full, windows)) = full_form(entry) {
                        let CallArg::Window(n) = call[1] else {
                            unreachable!("a short form's second argument is a window")
                        };
                        let derived = windows(n);
                        call.truncate(1);
                        arg_looks.truncate(1);
                        for w in derived {
                            call.push(CallArg::Window(w));
                            arg_looks.push(w as usize);
                        }
                        id = full;
                        entry = function(full);
                    }
                    for a in &call {
                        if let CallArg::Window(w) = a {
                            longest.note(frame, *w as usize);
                        }
                    }
                    let look = (entry.lookback)(&arg_looks);
                    let def = Def::Call {
                        func: id,
                        args: call.into(),
                    };
                    (Val::Node(self.intern(frame, def)), look)
                }
                Node::Neg(a) => match vals[*a as usize] {
                    Val::Const(c) => (Val::Const(-c), 0),
                    v => (
                        Val::Node(self.intern(frame, Def::Neg(operand(v)))),
                        looks[*a as usize],
                    ),
                },
                Node::Arith(op, a, b) => {
                    let look = looks[*a as usize].max(looks[*b as usize]);
                    match (vals[*a as usize], vals[*b as usize]) {
                        (Val::Const(x), Val::Const(y)) => (Val::Const(op.apply(x, y)), 0),
                        (x, y) => (
                            Val::Node(self.intern(frame, Def::Arith(*op, operand(x), operand(y)))),
                            look,
                        ),
                    }
                }
                Node::Compare(op, a, b) => {
                    let look = looks[*a as usize].max(looks[*b as usize]);
                    match (vals[*a as usize], vals[*b as usize]) {
                        (Val::Const(x), Val::Const(y)) => (Val::Bool(op.apply(x, y)), 0),
                        (x, y) => (
                            Val::Node(
                                self.intern(frame, Def::Compare(*op, operand(x), operand(y))),
                            ),
                            look,
                        ),
                    }
                }
                Node::Not(a) => match vals[*a as usize] {
                    Val::Bool(b) => (Val::Bool(!b), 0),
                    v => {
                        let n = self.cond_node(frame, v);
                        (
                            Val::Node(self.intern(frame, Def::Not(n))),
                            looks[*a as usize],
                        )
                    }
                },
                Node::And(a, b) | Node::Or(a, b) => {
                    let and = matches!(node, Node::And(..));
                    let look = looks[*a as usize].max(looks[*b as usize]);
                    match (vals[*a as usize], vals[*b as usize]) {
                        (Val::Bool(x), Val::Bool(y)) => {
                            (Val::Bool(if and { x && y } else { x || y }), 0)
                        }
                        (x, y) => {
                            let (x, y) = (self.cond_node(frame, x), self.cond_node(frame, y));
                            let def = if and { Def::And(x, y) } else { Def::Or(x, y) };
                            (Val::Node(self.intern(frame, def)), look)
                        }
                    }
                }
            };
            vals.push(val);
            looks.push(look);
        }
        (
            *vals.last().expect("a formula has a node"),
            longest,
            *looks.last().expect("a formula has a node"),
        )
    }
}

/// Whether a constraint formula holds for `values` (a constraint is parameters and numbers
/// only, so it folds to one boolean).
pub fn constraint_holds(program: &Program, values: &[f64]) -> bool {
    program.formula(Field::Constraint).is_none_or(|bound| {
        let mut plan = Plan::new();
        matches!(plan.bind_formula(bound, values).0, Val::Bool(true))
    })
}

/// The lookback of `program` for one combo: the largest of its formulas' (`warmup: "auto"`).
pub fn lookback(program: &Program, values: &[f64]) -> usize {
    Plan::new().bind(program, values).lookback
}

/// The kind of the root of a bound formula (for callers that hold a [`Bound`]).
pub fn root_kind(bound: &Bound) -> Kind {
    bound.kinds[bound.formula.root() as usize]
}
