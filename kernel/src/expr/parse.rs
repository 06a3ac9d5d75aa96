//! The parser: docs/language.md's grammar into a [`Formula`], by hand.
//!
//! Hand-written (no parsing crate) because the grammar is eleven lines, its errors must name a
//! byte offset and what was expected, and its limits must hold *before* any recursion they
//! protect: the text's size is checked first, a parenthesis past the 64th level or a chain of
//! prefix operators past the depth limit is refused the moment it is read, and every other
//! construct is a loop. So the parser's own recursion is at most ~600 frames whatever it is
//! given (a formula of 100,000 nested parentheses is refused by its size before any of it is
//! read).

use super::registry;
use super::tree::{BinOp, CmpOp, Column, Formula, Node, NodeId};

/// At most this many bytes per formula.
pub const MAX_BYTES: usize = 4096;
/// At most this many nodes per formula.
pub const MAX_NODES: usize = 256;
/// At most this deep (nodes on the longest root-to-leaf path).
pub const MAX_DEPTH: usize = 64;
/// At most this many nested parentheses (a call's own included).
pub const MAX_PARENS: usize = 64;
/// At most this many bytes per NAME.
pub const MAX_NAME: usize = 64;

/// A parse error: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 0-based byte offset into the formula.
    pub offset: usize,
    /// What was expected or what is wrong, as a user can act on it.
    pub message: String,
}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        offset,
        message: message.into(),
    })
}

/// Python's keywords (`keyword.kwlist`) that are not the language's own `and`, `or`, `not`.
/// The capitalised ones (`True`, `None`...) are refused as upper-case names anyway.
const PYTHON_KEYWORDS: [&str; 29] = [
    "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "pass", "raise", "return", "try", "while", "with", "yield",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok<'a> {
    Num { value: f64, integer: bool },
    Name(&'a str),
    And,
    Or,
    Not,
    LParen,
    RParen,
    Comma,
    Arith(BinOp),
    Cmp(CmpOp),
    End,
}

fn describe(t: &Tok<'_>) -> String {
    match t {
        Tok::Num { .. } => "a number".into(),
        Tok::Name(n) => format!("`{n}`"),
        Tok::And => "`and`".into(),
        Tok::Or => "`or`".into(),
        Tok::Not => "`not`".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::Comma => "`,`".into(),
        Tok::Arith(op) => format!("`{}`", op.symbol()),
        Tok::Cmp(op) => format!("`{}`", op.symbol()),
        Tok::End => "the end of the formula".into(),
    }
}

fn lex(text: &str) -> Result<Vec<(Tok<'_>, usize, usize)>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b'+' => Tok::Arith(BinOp::Add),
            b'-' => Tok::Arith(BinOp::Sub),
            b'*' if b.get(i + 1) == Some(&b'*') => {
                return err(i, "`**` is not in the language (no powers)");
            }
            b'*' => Tok::Arith(BinOp::Mul),
            b'/' => Tok::Arith(BinOp::Div),
            b'<' | b'>' | b'=' | b'!' => {
                let eq = b.get(i + 1) == Some(&b'=');
                let op = match (c, eq) {
                    (b'<', false) => CmpOp::Lt,
                    (b'<', true) => CmpOp::Le,
                    (b'>', false) => CmpOp::Gt,
                    (b'>', true) => CmpOp::Ge,
                    (b'=', true) => CmpOp::Eq,
                    (b'!', true) => CmpOp::Ne,
                    (b'=', false) => return err(i, "`=` is not an operator; compare with `==`"),
                    _ => return err(i, "`!` is not an operator; write `not x` or `a != b`"),
                };
                i += if eq { 2 } else { 1 };
                out.push((Tok::Cmp(op), start, i));
                continue;
            }
            b'&' => return err(i, "`&` is not an operator; write `and`"),
            b'|' => return err(i, "`|` is not an operator; write `or`"),
            b'~' => return err(i, "`~` is not an operator; write `not`"),
            b'0'..=b'9' | b'.' => {
                let (value, integer, end) = number(b, i)?;
                out.push((Tok::Num { value, integer }, start, end));
                i = end;
                continue;
            }
            b'a'..=b'z' | b'_' | b'A'..=b'Z' => {
                let mut end = i;
                while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                    end += 1;
                }
                let name = &text[i..end];
                if let Some(k) = name.find(|c: char| c.is_ascii_uppercase()) {
                    return err(
                        i + k,
                        format!(
                            "names are lower case: `{name}` (did you mean `{}`?)",
                            name.to_ascii_lowercase()
                        ),
                    );
                }
                if name.len() > MAX_NAME {
                    return err(
                        i,
                        format!(
                            "a name is at most {MAX_NAME} bytes, this one is {}",
                            name.len()
                        ),
                    );
                }
                i = end;
                let tok = match name {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    _ if PYTHON_KEYWORDS.contains(&name) => {
                        return err(
                            start,
                            format!(
                                "`{name}` is a Python keyword, not a name; formulas use only `and`, `or`, `not`"
                            ),
                        );
                    }
                    _ => Tok::Name(name),
                };
                out.push((tok, start, end));
                continue;
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return err(i, format!("unexpected character {ch:?}"));
            }
        };
        i += 1;
        out.push((tok, start, i));
    }
    out.push((Tok::End, b.len(), b.len()));
    Ok(out)
}

/// A NUMBER at `i`: `int ["." digits] [exponent] | "." digits [exponent]`.
fn number(b: &[u8], i: usize) -> Result<(f64, bool, usize), ParseError> {
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut j = i;
    let mut integer = true;
    if b[j] == b'.' {
        let end = digits(j + 1);
        if end == j + 1 {
            return err(i, "expected digits after `.`");
        }
        integer = false;
        j = end;
    } else {
        let end = digits(j);
        if b[i] == b'0' && end > i + 1 {
            return err(i, "a number may not start with 0 (write 10, not 010)");
        }
        j = end;
        if j < b.len() && b[j] == b'.' {
            let end = digits(j + 1);
            if end == j + 1 {
                return err(j, "expected digits after `.` (write 1.0 or 1, not 1.)");
            }
            integer = false;
            j = end;
        }
    }
    if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        let end = digits(k);
        if end == k {
            return err(j, "expected digits in the exponent");
        }
        integer = false;
        j = end;
    }
    if j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'.') {
        return err(
            j,
            "a number must be followed by an operator, `,`, `)` or a space",
        );
    }
    let text = std::str::from_utf8(&b[i..j]).expect("ASCII");
    let value: f64 = text.parse().map_err(|_| ParseError {
        offset: i,
        message: format!("not a number: {text}"),
    })?;
    if !value.is_finite() {
        return err(i, format!("{text} is not a finite float64"));
    }
    Ok((value, integer, j))
}

/// Makes a binary node of its two operands.
type MakeNode = fn(NodeId, NodeId) -> Node;

struct Parser<'a> {
    toks: Vec<(Tok<'a>, usize, usize)>,
    at: usize,
    nodes: Vec<Node>,
    spans: Vec<(u32, u32)>,
    parens: usize,
    prefix: usize,
}

/// True for a NAME of the grammar: `[a-z_][a-z0-9_]*`, at most [`MAX_NAME`] bytes, not a
/// Python keyword (`and`, `or` and `not` included).
pub fn is_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && (b[0].is_ascii_lowercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !PYTHON_KEYWORDS.contains(&name)
        && !matches!(name, "and" | "or" | "not")
}

/// Parses `text` into a formula.
///
/// # Errors
/// [`ParseError`] at the first offending byte: a token the grammar does not allow there (saying
/// what was expected), an unknown function (naming the closest known one), a call with the
/// wrong number of arguments, or a limit (size, nodes, depth, parentheses) passed.
pub fn parse(text: &str) -> Result<Formula, ParseError> {
    if text.len() > MAX_BYTES {
        return err(
            MAX_BYTES,
            format!(
                "a formula is at most {MAX_BYTES} bytes (limit), this one is {}",
                text.len()
            ),
        );
    }
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        nodes: Vec::new(),
        spans: Vec::new(),
        parens: 0,
        prefix: 0,
    };
    if p.peek() == Tok::End {
        return err(0, "the formula is empty");
    }
    let root = p.or()?;
    debug_assert_eq!(root as usize, p.nodes.len() - 1);
    if p.peek() != Tok::End {
        let (t, at, _) = p.toks[p.at];
        let hint = if matches!(t, Tok::Cmp(_)) {
            "; comparisons do not chain: write `a < b and b < c`"
        } else {
            ""
        };
        return err(
            at,
            format!(
                "expected an operator or the end, found {}{hint}",
                describe(&t)
            ),
        );
    }
    let formula = Formula {
        nodes: p.nodes,
        spans: p.spans,
        text: text.to_owned(),
    };
    let depth = formula.depth();
    if depth > MAX_DEPTH {
        return err(
            0,
            format!("the formula is {depth} nodes deep; the limit is {MAX_DEPTH}"),
        );
    }
    Ok(formula)
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Tok<'a> {
        self.toks[self.at].0
    }

    fn start(&self) -> usize {
        self.toks[self.at].1
    }

    fn push(&mut self, node: Node, span: (usize, usize)) -> Result<NodeId, ParseError> {
        if self.nodes.len() >= MAX_NODES {
            return err(
                span.0,
                format!("a formula has at most {MAX_NODES} nodes (limit)"),
            );
        }
        self.nodes.push(node);
        self.spans.push((span.0 as u32, span.1 as u32));
        Ok((self.nodes.len() - 1) as NodeId)
    }

    fn span(&self, id: NodeId) -> (usize, usize) {
        let (a, b) = self.spans[id as usize];
        (a as usize, b as usize)
    }

    fn expect(&mut self, want: Tok<'_>, what: &str) -> Result<usize, ParseError> {
        let (t, at, end) = self.toks[self.at];
        if t == want {
            self.at += 1;
            Ok(end)
        } else {
            err(at, format!("expected {what}, found {}", describe(&t)))
        }
    }

    /// A left-associative chain of `op`s over `next`.
    fn chain(
        &mut self,
        next: fn(&mut Self) -> Result<NodeId, ParseError>,
        op: fn(Tok<'_>) -> Option<MakeNode>,
    ) -> Result<NodeId, ParseError> {
        let mut left = next(self)?;
        while let Some(make) = op(self.peek()) {
            self.at += 1;
            let right = next(self)?;
            let span = (self.span(left).0, self.span(right).1);
            left = self.push(make(left, right), span)?;
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<NodeId, ParseError> {
        self.chain(Self::and, |t| {
            (t == Tok::Or).then_some(Node::Or as MakeNode)
        })
    }

    fn and(&mut self) -> Result<NodeId, ParseError> {
        self.chain(Self::not, |t| {
            (t == Tok::And).then_some(Node::And as MakeNode)
        })
    }

    fn not(&mut self) -> Result<NodeId, ParseError> {
        if self.peek() == Tok::Not {
            let at = self.start();
            self.at += 1;
            let inner = self.prefixed(at, Self::not)?;
            return self.push(Node::Not(inner), (at, self.span(inner).1));
        }
        self.compare()
    }

    /// `next` after a prefix operator at `at`: a chain of them longer than the depth limit is
    /// refused before it recurses further.
    fn prefixed(
        &mut self,
        at: usize,
        next: fn(&mut Self) -> Result<NodeId, ParseError>,
    ) -> Result<NodeId, ParseError> {
        self.prefix += 1;
        if self.prefix > MAX_DEPTH {
            return err(
                at,
                format!("more than {MAX_DEPTH} prefix operators in a row (depth limit)"),
            );
        }
        let inner = next(self);
        self.prefix -= 1;
        inner
    }

    fn compare(&mut self) -> Result<NodeId, ParseError> {
        let left = self.sum()?;
        if let Tok::Cmp(op) = self.peek() {
            self.at += 1;
            let right = self.sum()?;
            if let Tok::Cmp(_) = self.peek() {
                return err(
                    self.start(),
                    "comparisons do not chain: write `a < b and b < c`",
                );
            }
            let span = (self.span(left).0, self.span(right).1);
            return self.push(Node::Compare(op, left, right), span);
        }
        Ok(left)
    }

    fn sum(&mut self) -> Result<NodeId, ParseError> {
        self.chain(Self::product, |t| match t {
            Tok::Arith(op @ (BinOp::Add | BinOp::Sub)) => Some(arith(op)),
            _ => None,
        })
    }

    fn product(&mut self) -> Result<NodeId, ParseError> {
        self.chain(Self::unary, |t| match t {
            Tok::Arith(op @ (BinOp::Mul | BinOp::Div)) => Some(arith(op)),
            _ => None,
        })
    }

    fn unary(&mut self) -> Result<NodeId, ParseError> {
        if self.peek() == Tok::Arith(BinOp::Sub) {
            let at = self.start();
            self.at += 1;
            let inner = self.prefixed(at, Self::unary)?;
            return self.push(Node::Neg(inner), (at, self.span(inner).1));
        }
        self.atom()
    }

    fn open_paren(&mut self, at: usize) -> Result<(), ParseError> {
        self.parens += 1;
        if self.parens > MAX_PARENS {
            return err(
                at,
                format!("more than {MAX_PARENS} nested parentheses (limit)"),
            );
        }
        Ok(())
    }

    fn atom(&mut self) -> Result<NodeId, ParseError> {
        let (t, at, end) = self.toks[self.at];
        match t {
            Tok::Num { value, integer } => {
                self.at += 1;
                self.push(Node::Number { value, integer }, (at, end))
            }
            Tok::LParen => {
                self.open_paren(at)?;
                self.at += 1;
                let inner = self.or()?;
                self.expect(Tok::RParen, "`)`")?;
                self.parens -= 1;
                Ok(inner)
            }
            Tok::Name(name) if self.toks[self.at + 1].0 == Tok::LParen => {
                self.at += 2;
                self.open_paren(at)?;
                let mut args = Vec::new();
                if self.peek() != Tok::RParen {
                    loop {
                        args.push(self.or()?);
                        match self.peek() {
                            Tok::Comma => {
                                self.at += 1;
                                if self.peek() == Tok::RParen {
                                    return err(
                                        self.start(),
                                        "expected an argument after `,` (no trailing commas)",
                                    );
                                }
                            }
                            Tok::RParen => break,
                            t => {
                                return err(
                                    self.start(),
                                    format!(
                                        "expected `,` or `)` in the call of {name}, found {}",
                                        describe(&t)
                                    ),
                                );
                            }
                        }
                    }
                }
                let close = self.expect(Tok::RParen, "`)`")?;
                self.parens -= 1;
                let func = registry::lookup(name, args.len()).map_err(|message| ParseError {
                    offset: at,
                    message,
                })?;
                self.push(
                    Node::Call {
                        func,
                        args: args.into(),
                    },
                    (at, close),
                )
            }
            Tok::Name(name) => {
                self.at += 1;
                let node = match Column::from_name(name) {
                    Some(c) => Node::Column(c),
                    None => Node::Param(name.into()),
                };
                self.push(node, (at, end))
            }
            t => err(
                at,
                format!(
                    "expected a number, a name, a call or `(`, found {}",
                    describe(&t)
                ),
            ),
        }
    }
}

fn arith(op: BinOp) -> MakeNode {
    match op {
        BinOp::Add => |a, b| Node::Arith(BinOp::Add, a, b),
        BinOp::Sub => |a, b| Node::Arith(BinOp::Sub, a, b),
        BinOp::Mul => |a, b| Node::Arith(BinOp::Mul, a, b),
        BinOp::Div => |a, b| Node::Arith(BinOp::Div, a, b),
    }
}
