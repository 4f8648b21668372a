//! Text to `Expr`: the expression language of `flexkern attn --mask-expr / --score-expr`.
//!
//! ```text
//! expr    := or
//! or      := and ("||" and)*
//! and     := cmp ("&&" cmp)*
//! cmp     := bitor (("==" | "!=" | "<" | "<=" | ">" | ">=") bitor)?
//! bitor   := bitand ("|" bitand)*
//! bitand  := shift ("&" shift)*
//! shift   := sum (("<<" | ">>") sum)*
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/" | "%") unary)*
//! unary   := ("-" | "!") unary | primary
//! primary := INT | FLOAT | "true" | "false" | VARIABLE | CAPTURE "[" expr "]"
//!          | FUNCTION "(" expr ("," expr)* ")" | "(" expr ")"
//! ```
//! Variables: `score b h q_pos kv_pos q_len kv_len q_token`. Functions: `select(c, a, b)`,
//! `min max clamp(x, lo, hi) abs tanh exp log sqrt float(int)`. Bit operations bind tighter
//! than comparisons (as in Rust, unlike C). Ints are i64; an Int operand meeting a Float is
//! widened to Float. Every error names the 1-based column it was found at.

use super::expr::{self, BinOp, Expr, Tensor, Ty, UnOp, Var};
use lex::{lex, Tok};

mod lex;

/// A parse or type error at a 1-based character column of the source.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {msg}")]
pub struct ParseError {
    pub column: usize,
    pub msg: String,
}

/// Parses a mask (`Bool`, must not read `score`). `captures` are the tensors the text may index
/// by name.
pub fn parse_mask(src: &str, captures: &[Tensor]) -> Result<Expr, ParseError> {
    let (e, ty, col) = Parser::new(src, captures, false)?.parse_all()?;
    if ty != Ty::Bool {
        return Err(err(
            col,
            format!("a mask must be Bool (a condition), got {ty:?}"),
        ));
    }
    Ok(e)
}

/// Parses a score modification (`Float`; reads the incoming score as `score`; an Int result is
/// widened).
pub fn parse_score(src: &str, captures: &[Tensor]) -> Result<Expr, ParseError> {
    let (e, ty, col) = Parser::new(src, captures, true)?.parse_all()?;
    match ty {
        Ty::Float => Ok(e),
        Ty::Int => Ok(widen(e)),
        Ty::Bool => Err(err(col, "a score expression must be a number, got Bool")),
    }
}

fn err(column: usize, msg: impl Into<String>) -> ParseError {
    ParseError {
        column,
        msg: msg.into(),
    }
}

/// A typed expression and the column where it starts.
type Typed = (Expr, Ty, usize);

struct Parser<'a> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    captures: &'a [Tensor],
    allow_score: bool,
}

const VARS: [Var; 8] = [
    Var::Score,
    Var::Batch,
    Var::Head,
    Var::QPos,
    Var::KvPos,
    Var::QLen,
    Var::KvLen,
    Var::QToken,
];

impl<'a> Parser<'a> {
    fn new(src: &str, captures: &'a [Tensor], allow_score: bool) -> Result<Self, ParseError> {
        Ok(Parser {
            toks: lex(src)?,
            pos: 0,
            captures,
            allow_score,
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn col(&self) -> usize {
        self.toks[self.pos].1
    }
    fn next(&mut self) -> (Tok, usize) {
        let t = self.toks[self.pos].clone();
        if t.0 != Tok::End {
            self.pos += 1;
        }
        t
    }
    fn eat(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Tok::Sym(s) if *s == sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, sym: &str) -> Result<(), ParseError> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(err(
                self.col(),
                format!("expected `{sym}`, found {}", describe(self.peek())),
            ))
        }
    }

    fn parse_all(mut self) -> Result<Typed, ParseError> {
        if *self.peek() == Tok::End {
            return Err(err(self.col(), "empty expression"));
        }
        let e = self.or()?;
        if *self.peek() != Tok::End {
            return Err(err(
                self.col(),
                format!(
                    "unexpected {} after a complete expression",
                    describe(self.peek())
                ),
            ));
        }
        Ok(e)
    }

    /// Left-associative binary levels: `next` parses the operands, `ops` maps symbols to ops.
    fn left_assoc(
        &mut self,
        ops: &[(&'static str, BinOp)],
        next: fn(&mut Self) -> Result<Typed, ParseError>,
    ) -> Result<Typed, ParseError> {
        let mut lhs = next(self)?;
        loop {
            let Some(&(sym, op)) = ops
                .iter()
                .find(|(s, _)| matches!(self.peek(), Tok::Sym(t) if t == s))
            else {
                return Ok(lhs);
            };
            let col = self.col();
            self.pos += 1;
            let rhs = next(self)?;
            lhs = binary(op, sym, col, lhs, rhs)?;
        }
    }

    fn or(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("||", BinOp::Or)], Self::and)
    }
    fn and(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("&&", BinOp::And)], Self::cmp)
    }
    fn cmp(&mut self) -> Result<Typed, ParseError> {
        const OPS: [(&str, BinOp); 6] = [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ];
        let lhs = self.bitor()?;
        let Some(&(sym, op)) = OPS
            .iter()
            .find(|(s, _)| matches!(self.peek(), Tok::Sym(t) if t == s))
        else {
            return Ok(lhs);
        };
        let col = self.col();
        self.pos += 1;
        let rhs = self.bitor()?;
        let out = binary(op, sym, col, lhs, rhs)?;
        if let Tok::Sym(s) = self.peek() {
            if OPS.iter().any(|(o, _)| o == s) {
                return Err(err(
                    self.col(),
                    "comparisons do not chain: write `a < b && b < c`",
                ));
            }
        }
        Ok(out)
    }
    fn bitor(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("|", BinOp::BitOr)], Self::bitand)
    }
    fn bitand(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("&", BinOp::BitAnd)], Self::shift)
    }
    fn shift(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("<<", BinOp::Shl), (">>", BinOp::Shr)], Self::sum)
    }
    fn sum(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(&[("+", BinOp::Add), ("-", BinOp::Sub)], Self::product)
    }
    fn product(&mut self) -> Result<Typed, ParseError> {
        self.left_assoc(
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
            Self::unary,
        )
    }

    fn unary(&mut self) -> Result<Typed, ParseError> {
        let col = self.col();
        if self.eat("-") {
            // A negated literal stays a constant.
            if let Tok::Int(_) | Tok::Float(_) = self.peek() {
                let (t, _) = self.next();
                return Ok(match t {
                    Tok::Int(v) => (Expr::Int(v.wrapping_neg()), Ty::Int, col),
                    Tok::Float(v) => (Expr::Float(-v), Ty::Float, col),
                    _ => unreachable!(),
                });
            }
            let (e, ty, _) = self.unary()?;
            if ty == Ty::Bool {
                return Err(err(col, "`-` needs a number, got Bool (use `!` for not)"));
            }
            return Ok((-e, ty, col));
        }
        if self.eat("!") {
            let (e, ty, _) = self.unary()?;
            if ty != Ty::Bool {
                return Err(err(col, format!("`!` needs a Bool, got {ty:?}")));
            }
            return Ok((e.not(), Ty::Bool, col));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Typed, ParseError> {
        let (tok, col) = self.next();
        match tok {
            Tok::Int(v) => Ok((Expr::Int(v), Ty::Int, col)),
            Tok::Float(v) => Ok((Expr::Float(v), Ty::Float, col)),
            Tok::Sym("(") => {
                let (e, ty, _) = self.or()?;
                self.expect(")")?;
                Ok((e, ty, col))
            }
            Tok::Ident(name) => self.ident(&name, col),
            other => Err(err(
                col,
                format!("expected a value, found {}", describe(&other)),
            )),
        }
    }

    fn ident(&mut self, name: &str, col: usize) -> Result<Typed, ParseError> {
        match name {
            "true" => return Ok((Expr::Bool(true), Ty::Bool, col)),
            "false" => return Ok((Expr::Bool(false), Ty::Bool, col)),
            _ => {}
        }
        if let Some(&v) = VARS.iter().find(|v| v.name() == name) {
            if v == Var::Score && !self.allow_score {
                return Err(err(col, "a mask cannot read `score` (use --score-expr)"));
            }
            return Ok((Expr::Var(v), v.ty(), col));
        }
        if let Some(t) = self.captures.iter().find(|t| t.0.name == name) {
            if !self.eat("[") {
                return Err(err(
                    self.col(),
                    format!("capture `{name}` must be indexed: `{name}[...]`"),
                ));
            }
            let icol = self.col();
            let (i, ity, _) = self.or()?;
            if ity != Ty::Int {
                return Err(err(
                    icol,
                    format!("the index of `{name}` must be Int, got {ity:?}"),
                ));
            }
            self.expect("]")?;
            return Ok((t.at(i), t.0.ty(), col));
        }
        if matches!(self.peek(), Tok::Sym("(")) {
            return self.call(name, col);
        }
        let caps: Vec<&str> = self.captures.iter().map(|t| t.0.name.as_str()).collect();
        Err(err(
            col,
            format!(
                "unknown name `{name}` (variables: score b h q_pos kv_pos q_len kv_len q_token; \
                 captures: {})",
                if caps.is_empty() {
                    "none".to_string()
                } else {
                    caps.join(" ")
                }
            ),
        ))
    }

    fn call(&mut self, name: &str, col: usize) -> Result<Typed, ParseError> {
        let arity = match name {
            "select" | "clamp" => 3,
            "min" | "max" => 2,
            "abs" | "tanh" | "exp" | "log" | "sqrt" | "float" => 1,
            _ => {
                return Err(err(
                    col,
                    format!(
                    "unknown function `{name}` (select min max clamp abs tanh exp log sqrt float)"
                ),
                ))
            }
        };
        self.expect("(")?;
        let mut args = vec![self.or()?];
        while self.eat(",") {
            args.push(self.or()?);
        }
        if args.len() != arity {
            return Err(err(
                col,
                format!("`{name}` takes {arity} argument(s), got {}", args.len()),
            ));
        }
        self.expect(")")?;
        let mut it = args.into_iter();
        let mut arg = || it.next().unwrap();
        match name {
            "select" => {
                let (c, cty, ccol) = arg();
                if cty != Ty::Bool {
                    return Err(err(
                        ccol,
                        format!("select's condition must be Bool, got {cty:?}"),
                    ));
                }
                let (a, b) = unify("select", col, arg(), arg())?;
                Ok((expr::select(c, a.0, b.0), a.1, col))
            }
            "min" | "max" => {
                let op = if name == "min" {
                    BinOp::Min
                } else {
                    BinOp::Max
                };
                binary(op, name, col, arg(), arg())
            }
            "clamp" => {
                let x = arg();
                let lo = binary(BinOp::Max, "clamp", col, x, arg())?;
                binary(BinOp::Min, "clamp", col, lo, arg())
            }
            "float" => {
                let (e, ty, acol) = arg();
                match ty {
                    Ty::Int => Ok((e.to_float(), Ty::Float, col)),
                    Ty::Float => Ok((e, Ty::Float, col)),
                    Ty::Bool => Err(err(acol, "float() needs a number, got Bool")),
                }
            }
            "abs" => {
                let (e, ty, acol) = arg();
                if ty == Ty::Bool {
                    return Err(err(acol, "abs() needs a number, got Bool"));
                }
                Ok((e.abs(), ty, col))
            }
            _ => {
                let (e, ty, acol) = arg();
                let e = match ty {
                    Ty::Float => e,
                    Ty::Int => e.to_float(),
                    Ty::Bool => {
                        return Err(err(acol, format!("{name}() needs a number, got Bool")))
                    }
                };
                let op = match name {
                    "tanh" => UnOp::Tanh,
                    "exp" => UnOp::Exp,
                    "log" => UnOp::Log,
                    _ => UnOp::Sqrt,
                };
                Ok((Expr::Unary(op, Box::new(e)), Ty::Float, col))
            }
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Int(v) => format!("number `{v}`"),
        Tok::Float(v) => format!("number `{v}`"),
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Sym(s) => format!("`{s}`"),
        Tok::End => "the end of the expression".to_string(),
    }
}

/// An Int expression as Float: literals convert in place, others through `to_float`.
fn widen(e: Expr) -> Expr {
    match e {
        Expr::Int(v) => Expr::Float(v as f64),
        e => e.to_float(),
    }
}

/// Two numeric operands brought to one type (Int widened to Float when they differ).
fn unify(what: &str, col: usize, a: Typed, b: Typed) -> Result<(Typed, Typed), ParseError> {
    match (a.1, b.1) {
        (x, y) if x == y => Ok((a, b)),
        (Ty::Int, Ty::Float) => Ok(((widen(a.0), Ty::Float, a.2), b)),
        (Ty::Float, Ty::Int) => Ok((a, (widen(b.0), Ty::Float, b.2))),
        (x, y) => Err(err(col, format!("`{what}` cannot combine {x:?} and {y:?}"))),
    }
}

/// Type-checks `a op b` (reporting at the operator's column) and builds it.
fn binary(op: BinOp, sym: &str, col: usize, a: Typed, b: Typed) -> Result<Typed, ParseError> {
    use BinOp::*;
    let start = a.2;
    let need =
        |want: &str, got: Ty| err(col, format!("`{sym}` needs {want} operands, got {got:?}"));
    let (a, b) = match op {
        And | Or => {
            for t in [a.1, b.1] {
                if t != Ty::Bool {
                    return Err(need("Bool", t));
                }
            }
            (a, b)
        }
        Rem | BitAnd | BitOr | Shl | Shr => {
            for t in [a.1, b.1] {
                if t != Ty::Int {
                    return Err(need("Int", t));
                }
            }
            (a, b)
        }
        Eq | Ne => unify(sym, col, a, b)?,
        _ => {
            for t in [a.1, b.1] {
                if t == Ty::Bool {
                    return Err(need("numeric", t));
                }
            }
            unify(sym, col, a, b)?
        }
    };
    let ty = match op {
        Eq | Ne | Lt | Le | Gt | Ge | And | Or => Ty::Bool,
        _ => a.1,
    };
    Ok((Expr::Binary(op, Box::new(a.0), Box::new(b.0)), ty, start))
}

#[cfg(test)]
mod tests;
