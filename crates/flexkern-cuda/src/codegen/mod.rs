//! Variant code generation: the lowered mask and score programs become CUDA device functions
//! `fk_mask` / `fk_score` (FlashInfer-style hooks) that the kernel templates call per element.
//!
//! Lifted constants and captured tensors are not in the source: the kernel loads them once per
//! thread from a parameter block (`fk_params_load`), so variants with equal structure
//! (`sliding_window(4096)` and `(2048)`) share one compiled module. Integer and float operations
//! spell out the CPU's semantics (`lowered.rs`): wrapping i64 arithmetic, division by zero and
//! out-of-range shifts give 0, float `+ - * /` rounded per operation (`__fadd_rn`, ...: no FMA
//! contraction the CPU does not do). Two exceptions within an ulp (`facts.rs`): a division by a
//! launch-wide value multiplies by its reciprocal, and `tanh` is `fk_tanh` (fk_common.cuh).
//! Integers proven small are held in 32 bits (`fk_n`), with the same values.
//! Every hook is branch-free: kernels run it for dropped elements too and select.

use flexkern::expr::{BinOp, Ty, UnOp, Var};
use flexkern::variant::lowered::{Lowered, LoweredOp};
use flexkern::variant::CompiledVariant;
use std::fmt::Write as _;

mod facts;
pub use facts::SMALL_VARS;

/// The parameter block a variant needs at launch, laid out as `fk_params_load` reads it:
/// `ints` (i64), then capture pointers (u64) and lengths (i64), then `floats` (f32).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamLayout {
    pub ints: Vec<i64>,
    pub floats: Vec<f32>,
    /// (int capture?, data as i64 or f32 bits widened) in capture-slot order.
    pub captures: Vec<CaptureData>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CaptureData {
    Int(Vec<i64>),
    Float(Vec<f32>),
}

impl ParamLayout {
    pub fn num_captures(&self) -> usize {
        self.captures.len()
    }
    /// Bytes of the block: ints, capture pointers, capture lengths, floats.
    pub fn bytes(&self) -> usize {
        8 * (self.ints.len() + 2 * self.captures.len()) + 4 * self.floats.len()
    }
    /// The block, given each capture's device address.
    pub fn encode(&self, capture_ptrs: &[u64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes());
        for v in &self.ints {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for p in capture_ptrs {
            out.extend_from_slice(&p.to_le_bytes());
        }
        for c in &self.captures {
            let n = match c {
                CaptureData::Int(v) => v.len(),
                CaptureData::Float(v) => v.len(),
            } as i64;
            out.extend_from_slice(&n.to_le_bytes());
        }
        for v in &self.floats {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Generated hooks for one variant: the source and the parameters to pass at launch.
#[derive(Clone, Debug)]
pub struct VariantCode {
    pub source: String,
    pub params: ParamLayout,
    /// Readable structural key (equal for variants that share a module).
    pub key: String,
}

/// Emits `fk_mask` and `fk_score` for `v` (either may be the identity).
pub fn generate(v: &CompiledVariant) -> VariantCode {
    lower(v).code()
}

/// A variant lowered for launch: its structural key and launch parameters, all a plan depends
/// on. The CUDA source (`code`) only serves a module's compile, so a call that reuses a plan
/// skips writing it (about three quarters of `generate`'s time).
pub struct Lowering {
    mask: Option<Lowered>,
    score: Option<Lowered>,
    /// Where each hook's parameters start in `params` (mask, score).
    bases: [Bases; 2],
    pub params: ParamLayout,
    /// Readable structural key (equal for variants that share a module).
    pub key: String,
}

/// Lowers `v`'s mask and score programs and lays out their launch parameters.
pub fn lower(v: &CompiledVariant) -> Lowering {
    let mask = v.mask.as_ref().map(Lowered::new);
    let score = v.score.as_ref().map(Lowered::new);
    let mut params = ParamLayout::default();
    let mut key = String::new();
    let mut base = |l: Option<&Lowered>, which: Which, params: &mut ParamLayout| {
        let base = Bases {
            int: params.ints.len(),
            float: params.floats.len(),
            cap: params.captures.len(),
        };
        if let Some(l) = l {
            params.ints.extend_from_slice(l.int_params());
            params.floats.extend_from_slice(l.float_params());
            for c in l.captures() {
                params.captures.push(match c.ty {
                    Ty::Float => CaptureData::Float(c.floats().to_vec()),
                    _ => CaptureData::Int(c.ints().to_vec()),
                });
            }
            let _ = write!(key, "{}:{}|", which.name(), l.key().0);
        }
        base
    };
    let bases = [
        base(mask.as_ref(), Which::Mask, &mut params),
        base(score.as_ref(), Which::Score, &mut params),
    ];
    Lowering {
        mask,
        score,
        bases,
        params,
        key,
    }
}

impl Lowering {
    /// The hooks' CUDA source, with the parameters and key.
    pub fn code(self) -> VariantCode {
        VariantCode {
            source: self.source(),
            params: self.params,
            key: self.key,
        }
    }

    /// The hooks' CUDA source alone (a module's compile needs it; a module already loaded
    /// under the same key does not).
    pub fn source(&self) -> String {
        let (mask, score, params, key) = (&self.mask, &self.score, &self.params, &self.key);
        let mut body = String::new();
        function(&mut body, mask.as_ref(), Which::Mask, &self.bases[0]);
        function(&mut body, score.as_ref(), Which::Score, &self.bases[1]);
        let mut src = String::new();
        let _ = writeln!(
            src,
            "// Generated by flexkern-cuda codegen. Structure key: {:016x}",
            flexkern::variant::lowered::fnv1a(key.as_bytes())
        );
        let _ = writeln!(src, "#define FK_HAS_MASK {}", mask.is_some() as u8);
        let _ = writeln!(src, "#define FK_HAS_SCORE {}", score.is_some() as u8);
        // A mask that reads captured tensors (a document's ids): kernels keep its per-element
        // branches, whose loads would otherwise all be in flight at once and spill.
        let _ = writeln!(
            src,
            "#define FK_MASK_LOADS {}",
            mask.as_ref().is_some_and(|m| !m.captures().is_empty()) as u8
        );
        let (ni, nf, nc) = (
            params.ints.len(),
            params.floats.len(),
            params.captures.len(),
        );
        let _ = writeln!(src, "struct FkParams {{");
        let _ = writeln!(src, "  long long i[{}];", ni.max(1));
        let _ = writeln!(src, "  float f[{}];", nf.max(1));
        let _ = writeln!(src, "  const void* cap[{}];", nc.max(1));
        let _ = writeln!(src, "  long long cap_len[{}];", nc.max(1));
        let _ = writeln!(src, "}};");
        let _ = writeln!(
            src,
            "__device__ __forceinline__ void fk_params_load(FkParams& P, const unsigned char* blob) {{"
        );
        let _ = writeln!(src, "  const long long* q = (const long long*)blob;");
        for k in 0..ni {
            let _ = writeln!(src, "  P.i[{k}] = q[{k}];");
        }
        for k in 0..nc {
            let _ = writeln!(src, "  P.cap[{k}] = (const void*)q[{}];", ni + k);
            let _ = writeln!(src, "  P.cap_len[{k}] = q[{}];", ni + nc + k);
        }
        if nf > 0 {
            let _ = writeln!(
                src,
                "  const float* fl = (const float*)(q + {});",
                ni + 2 * nc
            );
            for k in 0..nf {
                let _ = writeln!(src, "  P.f[{k}] = fl[{k}];");
            }
        }
        let _ = writeln!(src, "}}");
        src.push_str(HOOKS);
        src.push_str(&body);
        src
    }
}

/// The hooks' integer type and capture loads (`kernels/hooks.cuh`), the same for every variant.
pub const HOOKS: &str = include_str!("../../kernels/hooks.cuh");

#[derive(Clone, Copy)]
enum Which {
    Mask,
    Score,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Mask => "mask",
            Which::Score => "score",
        }
    }
}

struct Bases {
    int: usize,
    float: usize,
    cap: usize,
}

fn cty(t: Ty) -> &'static str {
    match t {
        Ty::Int => "long long",
        Ty::Float => "float",
        Ty::Bool => "bool",
    }
}

fn var(v: Var) -> &'static str {
    match v {
        Var::Score => "score",
        Var::Batch => "V.b",
        Var::Head => "V.h",
        Var::QPos => "V.q_pos",
        Var::KvPos => "V.kv_pos",
        Var::QLen => "V.q_len",
        Var::KvLen => "V.kv_len",
        Var::QToken => "V.q_token",
    }
}

fn function(out: &mut String, l: Option<&Lowered>, which: Which, base: &Bases) {
    let sig = match which {
        Which::Mask => "__device__ __forceinline__ bool fk_mask(const FkParams& P, const FkVars& V)",
        Which::Score => {
            "__device__ __forceinline__ float fk_score(const FkParams& P, const FkVars& V, float score)"
        }
    };
    let _ = writeln!(out, "{sig} {{");
    let Some(l) = l else {
        let _ = writeln!(
            out,
            "  return {};",
            match which {
                Which::Mask => "true",
                Which::Score => "score",
            }
        );
        let _ = writeln!(out, "}}");
        return;
    };
    let insts = l.insts();
    let facts = facts::facts(l);
    for (i, inst) in insts.iter().enumerate() {
        let ty = |r: usize| insts[r].ty;
        let e = match inst.op {
            LoweredOp::Var(v) => var(v).to_string(),
            LoweredOp::IntParam(k) => format!("P.i[{}]", base.int + k),
            LoweredOp::FloatParam(k) => format!("P.f[{}]", base.float + k),
            LoweredOp::Bool(b) => b.to_string(),
            LoweredOp::Load { capture, index } => {
                let f = if inst.ty == Ty::Float {
                    "fk_load_f"
                } else {
                    "fk_load_i"
                };
                format!("{f}(P, {}, r{index})", base.cap + capture)
            }
            LoweredOp::Unary(UnOp::ToFloat, a) if facts::small_int(facts[a].range) => {
                format!("fk_i2f_small(r{a})")
            }
            LoweredOp::Unary(op, a) => unary(op, ty(a), a),
            // The reciprocal is one value per launch: the compiler hoists it out of the loops.
            LoweredOp::Binary(BinOp::Div, a, b) if ty(a) == Ty::Float && facts[b].invariant => {
                format!("__fmul_rn(r{a}, __frcp_rn(r{b}))")
            }
            LoweredOp::Binary(op, a, b) => binary(op, ty(a), a, b),
            LoweredOp::Select(c, a, b) => format!("(r{c} ? r{a} : r{b})"),
        };
        // Integers proven to fit 32 bits are `fk_n` (int under FK_SMALL_VARS, else i64): the
        // compiler then keeps them, and the masks over them, in half the registers.
        let t = if inst.ty == Ty::Int && facts::narrow(facts[i].range) {
            "fk_n"
        } else {
            cty(inst.ty)
        };
        let _ = writeln!(out, "  const {t} r{i} = {e};");
    }
    let _ = writeln!(out, "  return r{};", insts.len() - 1);
    let _ = writeln!(out, "}}");
}

fn unary(op: UnOp, t: Ty, a: usize) -> String {
    match (op, t) {
        (UnOp::Neg, Ty::Int) => format!("fk_neg_i(r{a})"),
        (UnOp::Abs, Ty::Int) => format!("fk_abs_i(r{a})"),
        (UnOp::Neg, _) => format!("(-r{a})"),
        (UnOp::Abs, _) => format!("fabsf(r{a})"),
        (UnOp::Not, _) => format!("(!r{a})"),
        (UnOp::Tanh, _) => format!("fk_tanh(r{a})"),
        (UnOp::Exp, _) => format!("expf(r{a})"),
        (UnOp::Log, _) => format!("logf(r{a})"),
        (UnOp::Sqrt, _) => format!("sqrtf(r{a})"),
        (UnOp::ToFloat, _) => format!("__ll2float_rn(r{a})"),
    }
}

fn binary(op: BinOp, t: Ty, a: usize, b: usize) -> String {
    use BinOp::*;
    let f = match (op, t) {
        (Add, Ty::Int) => "fk_add_i",
        (Sub, Ty::Int) => "fk_sub_i",
        (Mul, Ty::Int) => "fk_mul_i",
        (Div, Ty::Int) => "fk_div_i",
        (Rem, Ty::Int) => "fk_rem_i",
        (Min, Ty::Int) => "fk_min_i",
        (Max, Ty::Int) => "fk_max_i",
        (Shl, _) => "fk_shl_i",
        (Shr, _) => "fk_shr_i",
        (Add, _) => "__fadd_rn",
        (Sub, _) => "__fsub_rn",
        (Mul, _) => "__fmul_rn",
        (Div, _) => "__fdiv_rn",
        (Min, _) => "fminf",
        (Max, _) => "fmaxf",
        (op, _) => {
            let sym = match op {
                Eq => "==",
                Ne => "!=",
                Lt => "<",
                Le => "<=",
                Gt => ">",
                Ge => ">=",
                And => "&&",
                Or => "||",
                BitAnd => "&",
                _ => "|",
            };
            return format!("(r{a} {sym} r{b})");
        }
    };
    format!("{f}(r{a}, r{b})")
}

#[cfg(test)]
mod tests;
