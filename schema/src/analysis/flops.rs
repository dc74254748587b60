//! Op efficiency: FLOPs estimated from shapes, FLOP/s and bytes moved per ns, per op name with
//! the mix of dtypes.
//!
//! # Shapes
//! An `op` line carries only its output `shape`. An input's shape is looked up by tensor id:
//! the shape of the id's first record in file order among `op` outputs (`output` → `shape`),
//! `tensor` lines and `memory` lines; `tensor`/`memory` lines with an empty `shape` are skipped
//! (their shape may simply be absent). Element counts are products of dims; an empty output
//! shape is a scalar (1 element).
//!
//! # Formulas (names compared case-insensitively; one multiply-add = 2 FLOPs)
//! - **matmul** (`matmul`, `broadcast_matmul`, `bmm`, `linear`): output `[..batch, M, N]`
//!   (rank ≥ 2), `b` = product of the batch dims. FLOPs = `2·b·M·N·K` (a bias add is not
//!   counted). `K`, the first rule that applies:
//!   1. input 0 known with rank ≥ 2: `K = A[-1]` when `A[-2] = M`, else `K = A[-2]` when
//!      `A[-1] = M` (a transposed operand, as in backward passes);
//!   2. input 1 known with rank ≥ 2: `K = B[-2]` when `B[-1] = N`, else `K = B[-1]` when
//!      `B[-2] = N` (`linear`'s weight is `[N, K]`);
//!   3. from bytes, assuming both inputs have the output's dtype and batch: `e` =
//!      `input_storage_bytes / size(dtype)`; `K = e / (b·(M+N))` when that divides exactly and
//!      is > 0.
//! - **conv1d** / **conv2d**: output `[B, C_out, L]` / `[B, C_out, H, W]` and the weight
//!   (input 1) known as `[C_out, C_in/groups, k]` / `[C_out, C_in/groups, kh, kw]`:
//!   FLOPs = `2 · out_elements · C_in/groups · k` (`· kh · kw`). Otherwise no estimate.
//! - **elementwise** (unary and binary: `add sub mul div maximum minimum broadcast_add
//!   broadcast_sub broadcast_mul broadcast_div broadcast_maximum broadcast_minimum relu gelu
//!   gelu_erf silu tanh exp log sqrt sqr neg abs sin cos recip sigmoid affine powf elu clamp`):
//!   FLOPs = output elements.
//! - **reductions** (`sum sum_keepdim sum_all mean mean_keepdim mean_all max max_keepdim min
//!   min_keepdim argmax argmin`): FLOPs = input 0's elements (from its shape; else
//!   `input_storage_bytes / size(dtype)` when that divides exactly).
//! - **softmax** (`softmax`, `softmax_last_dim`, `log_softmax`): FLOPs = `5 ·` output elements
//!   (max, subtract, exp, sum, divide).
//! - Anything else (dequantize, fused optimizer updates, copies ...) has no estimate.
//!
//! # Rates
//! `flops_per_s = flops · 10⁹ / duration_ns` (integer, over the estimated ops only; `None` when
//! their time is 0). Bytes moved = `input_storage_bytes` + output bytes (`storage_bytes` or
//! derived); `bytes_per_ns` = bytes moved / duration_ns as f64 (`None` when the time is 0 or
//! an op's output bytes are unknown: no `storage_bytes` and no dtype of known size).
//!
//! # Ranges
//! [`efficiency_in`] counts the ops inside a time range: an op crossing an edge with its time
//! inside and the same fraction of its FLOPs and bytes moved (its rates unchanged).

use crate::analysis::sort;
use alloc::string::String;
use alloc::string::ToString;
use alloc::vec::Vec;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::range::TimeRange;
use crate::format::document::TraceDocument;
use crate::format::events::dtype_size;
use crate::format::table::OpRow;

/// Which formula an op's estimate used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlopFormula {
    /// `2·b·M·N·K`.
    Matmul,
    /// `2 · out · C_in/groups · kernel`.
    Conv,
    /// One per output element.
    Elementwise,
    /// One per input element.
    Reduction,
    /// Five per output element.
    Softmax,
}

/// Tensor id → shape, per the module's lookup rule, for the tensors an estimate reads: the
/// inputs of ops whose formula needs input shapes ([`needs_input_shapes`]).
#[derive(Debug, Clone, Default)]
pub struct ShapeIndex<'a> {
    /// `None` until a record with a shape names the tensor.
    shapes: HashMap<&'a str, Option<(u64, &'a [u64])>>,
}

impl<'a> ShapeIndex<'a> {
    /// Index the shapes that `doc`'s op outputs, tensors and memory records give the inputs of
    /// its ops with a shape-dependent formula. Only those are kept: a small part of a trace's
    /// tensor ids, where a map of every id was as large as the trace's records.
    pub fn of(doc: &'a TraceDocument) -> Self {
        let mut shapes: HashMap<&'a str, Option<(u64, &'a [u64])>> = HashMap::new();
        for op in doc.ops.iter().filter(|op| needs_input_shapes(op.op_name)) {
            for id in op.inputs {
                shapes.entry(id).or_insert(None);
            }
        }
        let mut offer = |id: &'a str, line: u64, shape: &'a [u64]| {
            if let Some(e) = shapes.get_mut(id) {
                if e.is_none_or(|(first, _)| line < first) {
                    *e = Some((line, shape));
                }
            }
        };
        for op in &doc.ops {
            if let Some(out) = op.output {
                offer(out, op.line, op.shape);
            }
        }
        for t in doc.tensors.iter().filter(|t| !t.shape.is_empty()) {
            offer(&t.tensor_id, t.line, &t.shape);
        }
        for m in doc.memory.iter().filter(|m| !m.shape.is_empty()) {
            offer(m.tensor_id, m.line, m.shape);
        }
        ShapeIndex { shapes }
    }

    /// The shape of tensor `id`.
    pub fn get(&self, id: &str) -> Option<&'a [u64]> {
        self.shapes.get(id).copied().flatten().map(|(_, s)| s)
    }
}

fn elements(shape: &[u64]) -> u64 {
    shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
}

fn is_one_of(name: &str, names: &[&str]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

const MATMUL: &[&str] = &["matmul", "broadcast_matmul", "bmm", "linear"];
const ELEMENTWISE: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "broadcast_add",
    "broadcast_sub",
    "broadcast_mul",
    "broadcast_div",
    "broadcast_maximum",
    "broadcast_minimum",
    "relu",
    "gelu",
    "gelu_erf",
    "silu",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "sqr",
    "neg",
    "abs",
    "sin",
    "cos",
    "recip",
    "sigmoid",
    "affine",
    "powf",
    "elu",
    "clamp",
];
const REDUCTION: &[&str] = &[
    "sum",
    "sum_keepdim",
    "sum_all",
    "mean",
    "mean_keepdim",
    "mean_all",
    "max",
    "max_keepdim",
    "min",
    "min_keepdim",
    "argmax",
    "argmin",
];
const SOFTMAX: &[&str] = &["softmax", "softmax_last_dim", "log_softmax"];

fn input_shape<'a>(op: &OpRow<'_>, shapes: &ShapeIndex<'a>, i: usize) -> Option<&'a [u64]> {
    op.inputs.get(i).and_then(|id| shapes.get(id))
}

/// Input elements derived from `input_storage_bytes` and the output dtype.
fn input_elements_from_bytes(op: &OpRow<'_>) -> Option<u64> {
    let size = dtype_size(op.dtype)?;
    (op.input_storage_bytes > 0 && op.input_storage_bytes % size == 0)
        .then_some(op.input_storage_bytes / size)
}

fn matmul_k(op: &OpRow<'_>, shapes: &ShapeIndex<'_>, b: u64, m: u64, n: u64) -> Option<u64> {
    if let Some(a) = input_shape(op, shapes, 0).filter(|a| a.len() >= 2) {
        let (r, c) = (a[a.len() - 2], a[a.len() - 1]);
        if r == m {
            return Some(c);
        }
        if c == m {
            return Some(r);
        }
    }
    if let Some(w) = input_shape(op, shapes, 1).filter(|w| w.len() >= 2) {
        let (r, c) = (w[w.len() - 2], w[w.len() - 1]);
        if c == n {
            return Some(r);
        }
        if r == n {
            return Some(c);
        }
    }
    let e = input_elements_from_bytes(op)?;
    let per_k = b.checked_mul(m.checked_add(n)?)?;
    (per_k > 0 && e % per_k == 0 && e / per_k > 0).then(|| e / per_k)
}

/// Whether ops named `name` have a FLOP formula that needs their input shapes (matmul, conv,
/// reductions): when such an op has no estimate, its shapes were not recorded, rather than the
/// op having no formula.
pub fn needs_input_shapes(name: &str) -> bool {
    is_one_of(name, MATMUL)
        || name.eq_ignore_ascii_case("conv1d")
        || name.eq_ignore_ascii_case("conv2d")
        || is_one_of(name, REDUCTION)
}

/// The FLOP estimate of one op, with the formula used; `None` when the op has no formula or
/// its shapes do not allow one.
pub fn estimate(op: &OpRow<'_>, shapes: &ShapeIndex<'_>) -> Option<(u64, FlopFormula)> {
    let name = op.op_name;
    let out = op.shape;
    if is_one_of(name, MATMUL) {
        if out.len() < 2 {
            return None;
        }
        let (m, n) = (out[out.len() - 2], out[out.len() - 1]);
        let b = elements(&out[..out.len() - 2]);
        let k = matmul_k(op, shapes, b, m, n)?;
        let flops = 2u64
            .saturating_mul(b)
            .saturating_mul(m)
            .saturating_mul(n)
            .saturating_mul(k);
        return Some((flops, FlopFormula::Matmul));
    }
    if name.eq_ignore_ascii_case("conv1d") || name.eq_ignore_ascii_case("conv2d") {
        let rank = if name.eq_ignore_ascii_case("conv1d") {
            3
        } else {
            4
        };
        let w = input_shape(op, shapes, 1)?;
        if out.len() != rank || w.len() != rank || w[0] != out[1] {
            return None;
        }
        let per_out = elements(&w[1..]);
        return Some((
            2u64.saturating_mul(elements(out)).saturating_mul(per_out),
            FlopFormula::Conv,
        ));
    }
    if is_one_of(name, ELEMENTWISE) {
        return Some((elements(out), FlopFormula::Elementwise));
    }
    if is_one_of(name, REDUCTION) {
        let n = match input_shape(op, shapes, 0) {
            Some(s) => elements(s),
            None => input_elements_from_bytes(op)?,
        };
        return Some((n, FlopFormula::Reduction));
    }
    if is_one_of(name, SOFTMAX) {
        return Some((5u64.saturating_mul(elements(out)), FlopFormula::Softmax));
    }
    None
}

/// Efficiency numbers of the ops with one name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpEfficiency {
    /// Op name as first written.
    pub op_name: String,
    /// Ops with this name.
    pub count: u64,
    /// Their total time.
    pub total_ns: u64,
    /// Ops with a FLOP estimate.
    pub estimated_count: u64,
    /// Sum of the estimates.
    pub flops: u64,
    /// Time of the estimated ops.
    pub estimated_ns: u64,
    /// `flops · 10⁹ / estimated_ns`.
    pub flops_per_s: Option<u64>,
    /// Input plus output bytes of all the ops (an output of unknown bytes adds none).
    pub bytes_moved: u64,
    /// `bytes_moved / total_ns`; `None` when an op's output bytes are unknown.
    pub bytes_per_ns: Option<f64>,
    /// (dtype lowercased, op count) of the ops that name a dtype (a leaf layer's row names
    /// none), most used first, then by name.
    pub dtypes: Vec<(String, u64)>,
    /// The formula of the first estimated op, if any.
    pub formula: Option<FlopFormula>,
}

/// Efficiency of the whole trace, or of a range of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Per op name, by FLOPs (largest first), then total time (largest first), then name.
    pub rows: Vec<OpEfficiency>,
    /// Sum of all estimates.
    pub flops: u64,
    /// Time of all estimated ops.
    pub estimated_ns: u64,
    /// Time of all ops.
    pub total_ns: u64,
    /// Ops with an estimate.
    pub estimated_count: u64,
    /// All ops.
    pub count: u64,
    /// `flops · 10⁹ / estimated_ns` over every estimated op.
    pub flops_per_s: Option<u64>,
}

fn rate(flops: u64, ns: u64) -> Option<u64> {
    (ns > 0).then(|| {
        let r = u128::from(flops) * 1_000_000_000 / u128::from(ns);
        u64::try_from(r).unwrap_or(u64::MAX)
    })
}

/// The efficiency table of `doc`: [`efficiency_in`] over every time, where each op counts
/// whole.
pub fn efficiency(doc: &TraceDocument) -> Efficiency {
    efficiency_in(doc, TimeRange::ALL)
}

/// `v` scaled by an op's time inside a range, `inside_ns` of its `duration_ns`, rounded down;
/// all of `v` when all of the op is inside (an op of 0 ns included).
fn in_proportion(v: u64, inside_ns: u64, duration_ns: u64) -> u64 {
    if inside_ns >= duration_ns {
        return v;
    }
    let part = u128::from(v) * u128::from(inside_ns) / u128::from(duration_ns);
    u64::try_from(part).unwrap_or(v)
}

/// The efficiency table of the ops of `doc` inside `range` (the viewer's range selection).
/// Which ops count, and their time inside, follow [`TimeRange::inside`]: an op wholly inside
/// counts whole; an op crossing an edge counts with its part inside: its time is that part and
/// its FLOPs and bytes moved are the same fraction of its own (each rounded down), so its
/// FLOP/s and bytes per ns are unchanged; an op outside does not count, and a name with no op
/// inside has no row. `count`, `estimated_count` and the dtype mix count every op that
/// counts, one each.
pub fn efficiency_in(doc: &TraceDocument, range: TimeRange) -> Efficiency {
    efficiency_in_with(doc, &OpEstimates::of(doc), range)
}

/// Each op's FLOP estimate ([`estimate`]) of a document, in op order: made once, it lets
/// [`efficiency_in_with`] count range after range without indexing the shapes again (most
/// of the work of one range).
#[derive(Debug, Clone, PartialEq)]
pub struct OpEstimates(Vec<Option<(u64, FlopFormula)>>);

impl OpEstimates {
    /// The estimates of every op of `doc`.
    pub fn of(doc: &TraceDocument) -> Self {
        let shapes = ShapeIndex::of(doc);
        OpEstimates(doc.ops.iter().map(|op| estimate(&op, &shapes)).collect())
    }
}

/// [`efficiency_in`] with the ops' estimates made beforehand (`estimates` of the same `doc`).
pub fn efficiency_in_with(
    doc: &TraceDocument,
    estimates: &OpEstimates,
    range: TimeRange,
) -> Efficiency {
    let mut rows: Vec<OpEfficiency> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut dtypes: Vec<Vec<(String, u64)>> = Vec::new();
    // Per row: an op whose output bytes are unknown (its bytes moved are then unknown).
    let mut unknown: Vec<bool> = Vec::new();
    let mut total = Efficiency {
        rows: Vec::new(),
        flops: 0,
        estimated_ns: 0,
        total_ns: 0,
        estimated_count: 0,
        count: 0,
        flops_per_s: None,
    };
    for (op, estimate) in doc.ops.iter().zip(&estimates.0) {
        let Some(time) = range.inside(op.timestamp_ns, op.duration_ns) else {
            continue;
        };
        let part = |v: u64| in_proportion(v, time, op.duration_ns);
        let r = *index.entry(op.op_name).or_insert_with(|| {
            rows.push(OpEfficiency {
                op_name: op.op_name.to_string(),
                count: 0,
                total_ns: 0,
                estimated_count: 0,
                flops: 0,
                estimated_ns: 0,
                flops_per_s: None,
                bytes_moved: 0,
                bytes_per_ns: None,
                dtypes: Vec::new(),
                formula: None,
            });
            dtypes.push(Vec::new());
            unknown.push(false);
            rows.len() - 1
        });
        let row = &mut rows[r];
        row.count += 1;
        row.total_ns = row.total_ns.saturating_add(time);
        let output = op.known_output_bytes();
        unknown[r] |= output.is_none();
        row.bytes_moved = row.bytes_moved.saturating_add(part(
            op.input_storage_bytes.saturating_add(output.unwrap_or(0)),
        ));
        // Compared without case and lowercased once, when first seen.
        if !op.dtype.is_empty() {
            match dtypes[r]
                .iter_mut()
                .find(|(d, _)| d.eq_ignore_ascii_case(op.dtype))
            {
                Some((_, n)) => *n += 1,
                None => dtypes[r].push((op.dtype.to_ascii_lowercase(), 1)),
            }
        }
        total.count += 1;
        total.total_ns = total.total_ns.saturating_add(time);
        if let Some((flops, formula)) = *estimate {
            let flops = part(flops);
            row.estimated_count += 1;
            row.flops = row.flops.saturating_add(flops);
            row.estimated_ns = row.estimated_ns.saturating_add(time);
            row.formula.get_or_insert(formula);
            total.estimated_count += 1;
            total.flops = total.flops.saturating_add(flops);
            total.estimated_ns = total.estimated_ns.saturating_add(time);
        }
    }
    for ((row, mut d), unknown) in rows.iter_mut().zip(dtypes).zip(unknown) {
        row.flops_per_s = if row.estimated_count > 0 {
            rate(row.flops, row.estimated_ns)
        } else {
            None
        };
        row.bytes_per_ns =
            (row.total_ns > 0 && !unknown).then(|| row.bytes_moved as f64 / row.total_ns as f64);
        sort::by(&mut d, |a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        row.dtypes = d;
    }
    sort::by(&mut rows, |a, b| {
        b.flops
            .cmp(&a.flops)
            .then(b.total_ns.cmp(&a.total_ns))
            .then_with(|| a.op_name.cmp(&b.op_name))
    });
    total.flops_per_s = if total.estimated_count > 0 {
        rate(total.flops, total.estimated_ns)
    } else {
        None
    };
    total.rows = rows;
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::events::Op;

    #[test]
    fn formulas_that_need_input_shapes() {
        for name in [
            "matmul", "bmm", "linear", "Conv2D", "conv1d", "sum_all", "argmin",
        ] {
            assert!(needs_input_shapes(name), "{name}");
        }
        for name in ["add", "silu", "softmax", "log_softmax", "custom_op"] {
            assert!(!needs_input_shapes(name), "{name}");
        }
    }

    fn est(op: &Op, shapes: &ShapeIndex<'_>) -> Option<(u64, FlopFormula)> {
        estimate(&OpRow::of(0, op), shapes)
    }

    fn op(name: &str, inputs: &[&str], shape: &[u64], dtype: &str, in_bytes: u64) -> Op {
        Op {
            span_id: String::from("s").into(),
            op_name: String::from(name).into(),
            inputs: inputs.iter().map(|&s| s.into()).collect(),
            output: None,
            shape: shape.to_vec(),
            dtype: String::from(dtype).into(),
            device: String::from("cpu").into(),
            duration_ns: 1000,
            timestamp_ns: 0,
            storage_bytes: None,
            input_storage_bytes: in_bytes,
        }
    }

    #[test]
    fn formulas() {
        let empty = ShapeIndex::default();
        // linear x[32,8]·W[32,8]^T from bytes: (256 + 256) f32 elements → K = 512 / 64 = 8.
        let l = op("linear", &["x", "w"], &[32, 32], "f32", 512 * 4);
        assert_eq!(
            est(&l, &empty),
            Some((2 * 32 * 32 * 8, FlopFormula::Matmul))
        );
        // batched: [4, 16, 8] from [4,16,32]·[4,32,8]: e = 4·(512 + 256) = 3072, b·(M+N) = 96.
        let bm = op("matmul", &[], &[4, 16, 8], "bf16", 3072 * 2);
        assert_eq!(
            est(&bm, &empty),
            Some((2 * 4 * 16 * 8 * 32, FlopFormula::Matmul))
        );
        // inexact bytes: no estimate
        assert_eq!(est(&op("matmul", &[], &[4, 4], "f32", 12), &empty), None);
        assert_eq!(est(&op("matmul", &[], &[4], "f32", 64), &empty), None);
        assert_eq!(
            est(&op("softmax_last_dim", &[], &[2, 10], "f32", 0), &empty),
            Some((100, FlopFormula::Softmax))
        );
        assert_eq!(
            est(&op("Broadcast_Mul", &[], &[3, 5], "f32", 0), &empty),
            Some((15, FlopFormula::Elementwise))
        );
        assert_eq!(
            est(&op("mean_all", &[], &[], "f32", 128 * 4), &empty),
            Some((128, FlopFormula::Reduction))
        );
        assert_eq!(est(&op("dequantize", &[], &[4], "f32", 16), &empty), None);
    }

    #[test]
    fn only_the_inputs_of_shape_formulas_are_indexed_each_by_its_first_record() {
        let meta = r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#;
        let lines = [
            meta,
            r#"{"kind":"span_start","id":"s","name":"s","start_ns":0,"span_kind":"function","measured":true}"#,
            // Line 3: `a`'s first record, an op output.
            r#"{"kind":"op","span_id":"s","op_name":"relu","inputs":[],"output":"a","shape":[4,2],"dtype":"f32","device":"cpu","duration_ns":1}"#,
            r#"{"kind":"tensor","span_id":"s","tensor_id":"a","shape":[7,7],"dtype":"f32","device":"cpu"}"#,
            r#"{"kind":"op","span_id":"s","op_name":"matmul","inputs":["a","b"],"shape":[4,3],"dtype":"f32","device":"cpu","duration_ns":1}"#,
            // `b` first appears after the op that reads it.
            r#"{"kind":"tensor","span_id":"s","tensor_id":"b","shape":[],"dtype":"f32","device":"cpu"}"#,
            r#"{"kind":"tensor","span_id":"s","tensor_id":"b","shape":[2,3],"dtype":"f32","device":"cpu"}"#,
            // `d` is read only by an elementwise op, `c` by none.
            r#"{"kind":"op","span_id":"s","op_name":"add","inputs":["d"],"shape":[5],"dtype":"f32","device":"cpu","duration_ns":1}"#,
            r#"{"kind":"tensor","span_id":"s","tensor_id":"c","shape":[5],"dtype":"f32","device":"cpu"}"#,
            r#"{"kind":"tensor","span_id":"s","tensor_id":"d","shape":[5],"dtype":"f32","device":"cpu"}"#,
            r#"{"kind":"span_end","id":"s","duration_ns":3}"#,
        ];
        let text = lines.join("\n");
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let shapes = ShapeIndex::of(&doc);
        assert_eq!(shapes.get("a"), Some(&[4u64, 2][..]));
        // The empty shape is skipped; the next record gives it.
        assert_eq!(shapes.get("b"), Some(&[2u64, 3][..]));
        assert_eq!(shapes.get("c"), None);
        assert_eq!(shapes.get("d"), None);
        // matmul [4,3] with A = [4,2]: M = 4 = A[-2], K = 2 → 2·4·3·2.
        assert_eq!(
            estimate(&doc.ops.row(1), &shapes),
            Some((48, FlopFormula::Matmul))
        );
    }

    #[test]
    fn dtypes_mix_without_case_and_estimates_serve_every_range() {
        // Three adds of 10 elements at 0, 100 and 200 ns, 50 ns each, dtypes F32, f32, BF16.
        let add = |t: u64, dtype: &str| {
            alloc::format!(
                r#"{{"kind":"op","span_id":"s","op_name":"add","inputs":[],"shape":[10],"dtype":"{dtype}","device":"cpu","timestamp_ns":{t},"duration_ns":50}}"#
            )
        };
        let lines = [
            String::from(
                r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            ),
            String::from(
                r#"{"kind":"span_start","id":"s","name":"s","start_ns":0,"span_kind":"function","measured":true}"#,
            ),
            add(0, "F32"),
            add(100, "f32"),
            add(200, "BF16"),
            String::from(r#"{"kind":"span_end","id":"s","duration_ns":250}"#),
        ];
        let doc = TraceDocument::from_bytes(lines.join("\n").as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let estimates = OpEstimates::of(&doc);
        let whole = efficiency_in_with(&doc, &estimates, TimeRange::ALL);
        assert_eq!(whole.rows.len(), 1);
        // Most first, then by name; lowercased.
        let mix = [(String::from("f32"), 2), (String::from("bf16"), 1)];
        assert_eq!(whole.rows[0].dtypes, mix);
        assert_eq!((whole.count, whole.flops, whole.total_ns), (3, 30, 150));
        // 125..225 ns with the same estimates: half of the second add (10·25/50 = 5 FLOPs) and
        // the first 25 ns of the third (5 FLOPs): 10 FLOPs in 50 ns.
        let part = efficiency_in_with(&doc, &estimates, TimeRange::new(125, 225));
        assert_eq!((part.count, part.flops, part.total_ns), (2, 10, 50));
        assert_eq!(part, efficiency_in(&doc, TimeRange::new(125, 225)));
    }

    #[test]
    fn a_leaf_layers_row_names_no_dtype_and_moves_unknown_bytes() {
        // A leaf layer's row (shape [], dtype "", no storage_bytes) and an f32 add of 10.
        let lines = [
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            r#"{"kind":"span_start","id":"s","name":"s","start_ns":0,"span_kind":"function","measured":true}"#,
            r#"{"kind":"op","span_id":"s","op_name":"linear","inputs":[],"shape":[],"dtype":"","device":"cpu","timestamp_ns":0,"duration_ns":40}"#,
            r#"{"kind":"op","span_id":"s","op_name":"add","inputs":[],"shape":[10],"dtype":"f32","device":"cpu","timestamp_ns":50,"duration_ns":40}"#,
            r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
        ];
        let doc = TraceDocument::from_bytes(lines.join("\n").as_bytes());
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let e = efficiency_in(&doc, TimeRange::ALL);
        let row = |name: &str| e.rows.iter().find(|r| r.op_name == name).unwrap();
        assert_eq!(row("linear").dtypes, []);
        assert_eq!(row("linear").bytes_per_ns, None);
        // 10 f32 out, 40 ns: 1 byte a ns.
        assert_eq!(row("add").dtypes, [(String::from("f32"), 1)]);
        assert_eq!(row("add").bytes_per_ns, Some(1.0));
    }

    #[test]
    fn shapes_from_the_document_and_transposed_operands() {
        let text = concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/6","run_id":"r","correlation_id":"c","entrypoint":"e","phase":"train","timestamp":"t","capture_step":1,"warmup_steps":0,"device":"cpu","timing_mode":"host","tags":{}}"#,
            "\n",
            r#"{"kind":"span_start","id":"s","name":"s","start_ns":0,"span_kind":"function","measured":true}"#,
            "\n",
            r#"{"kind":"tensor","span_id":"s","tensor_id":"g","shape":[8,1],"dtype":"f32","device":"cpu"}"#,
            "\n",
            r#"{"kind":"tensor","span_id":"s","tensor_id":"w","shape":[6,3,5],"dtype":"f32","device":"cpu"}"#,
            "\n",
            r#"{"kind":"op","span_id":"s","op_name":"matmul","inputs":["g","h"],"shape":[1,16],"dtype":"f32","device":"cpu","duration_ns":100}"#,
            "\n",
            r#"{"kind":"op","span_id":"s","op_name":"conv1d","inputs":["x","w"],"shape":[2,6,20],"dtype":"f32","device":"cpu","duration_ns":0}"#,
            "\n",
            r#"{"kind":"span_end","id":"s","duration_ns":100}"#,
            "\n",
        );
        let doc = TraceDocument::from_bytes(text.as_bytes());
        let shapes = ShapeIndex::of(&doc);
        // g is [8,1], M = 1 = g[-1] → transposed, K = 8.
        assert_eq!(
            estimate(&doc.ops.row(0), &shapes),
            Some((2 * 16 * 8, FlopFormula::Matmul))
        );
        assert_eq!(
            estimate(&doc.ops.row(1), &shapes),
            Some((2 * 240 * 15, FlopFormula::Conv))
        );
        let e = efficiency(&doc);
        assert_eq!(e.flops, 256 + 7200);
        assert_eq!(e.estimated_ns, 100);
        assert_eq!(e.flops_per_s, Some(7456 * 10_000_000));
        let conv = e.rows.iter().find(|r| r.op_name == "conv1d").unwrap();
        assert_eq!(conv.flops_per_s, None);
        assert_eq!(conv.bytes_per_ns, None);
    }
}
