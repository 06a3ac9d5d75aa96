//! The parsed formula: an arena of nodes in post-order (every node's operands come before it),
//! each with the byte span it was read from. Post-order lets every later pass (kinds, binding,
//! canonical text) walk a formula with a loop instead of recursion, so no input, however deep,
//! can exhaust a stack after the parser has accepted it.

/// Index of a node in its [`Formula`].
pub type NodeId = u32;

/// A column of the bars a formula may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Column {
    /// The bar's open.
    Open,
    /// The bar's high.
    High,
    /// The bar's low.
    Low,
    /// The bar's close.
    Close,
    /// The bar's volume.
    Volume,
    /// One of the strategy's own columns (protocol v1.4, `inputs`): its index in
    /// [`crate::expr::Program::inputs`], whose names say which dataset column it is.
    Input(u8),
}

impl Column {
    /// Every column, in the order `explain` lists them.
    pub const ALL: [Self; 5] = [Self::Open, Self::High, Self::Low, Self::Close, Self::Volume];

    /// The name formulas and datasets use; an input's is its program's (`"input"` here).
    pub fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::High => "high",
            Self::Low => "low",
            Self::Close => "close",
            Self::Volume => "volume",
            Self::Input(_) => "input",
        }
    }

    /// The position among the five bar columns (`None` for an input).
    pub fn bar_index(self) -> Option<usize> {
        Self::ALL.iter().position(|c| *c == self)
    }

    /// The column of a name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// `+ - * /`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl BinOp {
    /// The operator's text.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Add => "+",
            Self::Sub => "-",
            Self::Mul => "*",
            Self::Div => "/",
        }
    }

    /// IEEE float64 arithmetic, one operation.
    #[inline(always)]
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Self::Add => a + b,
            Self::Sub => a - b,
            Self::Mul => a * b,
            Self::Div => a / b,
        }
    }
}

/// `< <= > >= == !=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    /// The operator's text.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Eq => "==",
            Self::Ne => "!=",
        }
    }

    /// The comparison as the language defines it: false whenever a side is NaN, `!=`
    /// included (docs/language.md, "Kinds and types").
    #[inline(always)]
    #[expect(
        clippy::double_comparisons,
        reason = "`a != b` is true with a NaN side; the language's `!=` is false there"
    )]
    pub fn apply(self, a: f64, b: f64) -> bool {
        match self {
            Self::Lt => a < b,
            Self::Le => a <= b,
            Self::Gt => a > b,
            Self::Ge => a >= b,
            Self::Eq => a == b,
            Self::Ne => a < b || a > b,
        }
    }

    /// The comparison with its sides swapped: `a op b` is `b op.mirrored() a` for every pair
    /// of values, NaN included.
    pub fn mirrored(self) -> Self {
        match self {
            Self::Lt => Self::Gt,
            Self::Le => Self::Ge,
            Self::Gt => Self::Lt,
            Self::Ge => Self::Le,
            Self::Eq | Self::Ne => self,
        }
    }
}

/// One node of a formula.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A NUMBER; `integer` when it was written with digits only (a valid window literal).
    Number {
        /// Its value, the nearest float64.
        value: f64,
        /// Written as digits only.
        integer: bool,
    },
    /// A column of the bars.
    Column(Column),
    /// A parameter, by name.
    Param(Box<str>),
    /// A function call; `func` indexes [`super::registry::FUNCTIONS`].
    Call {
        /// The function's entry.
        func: u16,
        /// Its arguments.
        args: Box<[NodeId]>,
    },
    /// Unary minus.
    Neg(NodeId),
    /// `not`.
    Not(NodeId),
    /// `+ - * /`.
    Arith(BinOp, NodeId, NodeId),
    /// A comparison.
    Compare(CmpOp, NodeId, NodeId),
    /// `and`.
    And(NodeId, NodeId),
    /// `or`.
    Or(NodeId, NodeId),
}

impl Node {
    /// The node's operands, in order.
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            Self::Number { .. } | Self::Column(_) | Self::Param(_) => Vec::new(),
            Self::Call { args, .. } => args.to_vec(),
            Self::Neg(a) | Self::Not(a) => vec![*a],
            Self::Arith(_, a, b) | Self::Compare(_, a, b) | Self::And(a, b) | Self::Or(a, b) => {
                vec![*a, *b]
            }
        }
    }
}

/// A parsed formula: its nodes in post-order with their spans, and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    /// The nodes, every operand before the node that reads it; the root is the last.
    pub nodes: Vec<Node>,
    /// Byte spans `[start, end)` into `text`, one per node.
    pub spans: Vec<(u32, u32)>,
    /// The text it was parsed from.
    pub text: String,
}

impl Formula {
    /// The root node (the last).
    pub fn root(&self) -> NodeId {
        (self.nodes.len() - 1) as NodeId
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The byte offset node `id` starts at.
    pub fn offset(&self, id: NodeId) -> usize {
        self.spans[id as usize].0 as usize
    }

    /// The depth of the tree: the nodes on its longest path from the root to a leaf.
    pub fn depth(&self) -> usize {
        let mut depth = vec![0usize; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            depth[i] = 1 + node
                .operands()
                .iter()
                .map(|&o| depth[o as usize])
                .max()
                .unwrap_or(0);
        }
        depth.last().copied().unwrap_or(0)
    }
}
