//! The strategy language of protocol v1.3 (docs/language.md): formulas over a series' bars as a
//! tree ([`tree`]), read by a hand-written parser with byte offsets and limits ([`parse`]),
//! printed back as canonical text ([`canon`]), checked as a whole strategy with its
//! parameters numbered and typed ([`bind`]), and the one table of functions everything else
//! looks up ([`registry`]).
//!
//! Nothing here computes a value: the binder's [`Program`] goes to `crate::plan`, which binds
//! it per combo and finds the distinct arrays of a whole call.

pub mod bind;
pub mod canon;
pub mod parse;
pub mod registry;
pub mod tree;

pub use bind::{Field, Kind, Param, ParamKind, Program};
pub use tree::{BinOp, CmpOp, Column, Formula, Node, NodeId};
