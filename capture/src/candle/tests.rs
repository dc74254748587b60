//! The candle helpers against real candle tensors and a real backward.

use super::events::*;
use super::gradients::*;
use super::graph::*;
use super::names::*;
use crate::sink::{Sink, VecSink};
use crate::sync::DeviceSync;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Optimizer, VarMap};
use candle_trace_schema::format::events::{
    Gradient, GradientState, MemoryAction, Op, TensorCategory, TraceEvent,
};

fn ops(sink: &VecSink) -> Vec<Op> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::Op(op) => Some(op),
            _ => None,
        })
        .collect()
}

/// A sink that never records: every function must do nothing.
struct Off;
impl Sink for Off {
    fn is_recording(&self) -> bool {
        false
    }
    fn now_ns(&self) -> u64 {
        panic!("now_ns called while not recording")
    }
    fn current_span_id(&self) -> Option<String> {
        panic!("current_span_id called while not recording")
    }
    fn device(&self) -> &str {
        "cpu"
    }
    fn emit(&self, _event: TraceEvent) {
        panic!("emit called while not recording")
    }
}

#[test]
fn record_op_of_a_matmul_has_exact_shape_dtype_bytes_and_ids() -> candle_core::Result<()> {
    let sink = VecSink::new("cpu");
    sink.set_current_span(Some("forward".into()));
    let a = Tensor::ones((8, 16), DType::F32, &Device::Cpu)?;
    let b = Tensor::ones((16, 4), DType::F32, &Device::Cpu)?;
    let c = a.matmul(&b)?;
    record_op(&sink, "matmul", &[&a, &b], &c, 1_000);
    let ops = ops(&sink);
    assert_eq!(ops.len(), 1);
    let op = &ops[0];
    assert_eq!(op.span_id, "forward");
    assert_eq!(op.op_name, "matmul");
    assert_eq!(op.shape, vec![8, 4]);
    assert_eq!(op.dtype, "f32");
    assert_eq!(op.device, "cpu");
    assert_eq!(op.storage_bytes, Some(8 * 4 * 4));
    assert_eq!(op.input_storage_bytes, (8 * 16 + 16 * 4) * 4);
    assert_eq!(op.duration_ns, 1_000);
    assert_eq!(op.inputs, vec![tensor_id(&a), tensor_id(&b)]);
    assert_eq!(op.output.as_deref(), Some(tensor_id(&c).as_str()));
    // Ids are candle's TensorId numbers, distinct per tensor.
    assert!(op.inputs[0].parse::<u64>().is_ok());
    assert_ne!(op.inputs[0], op.inputs[1]);
    assert_ne!(op.inputs[0], tensor_id(&c));
    // The bytes agree with what a reader derives from shape and dtype.
    assert_eq!(
        op.storage_bytes,
        Some(candle_trace_schema::format::events::derived_storage_bytes(
            &op.shape, &op.dtype
        ))
    );
    Ok(())
}

#[test]
fn timed_op_times_and_passes_the_result_through() -> candle_core::Result<()> {
    let sink = VecSink::new("cpu");
    let a = Tensor::new(&[1u8, 2, 3], &Device::Cpu)?;
    let b = timed_op(&sink, "to_f16", &[&a], || a.to_dtype(DType::F16))?;
    assert_eq!(b.dtype(), DType::F16);
    let ops = ops(&sink);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].span_id, "");
    assert_eq!(ops[0].dtype, "f16");
    assert_eq!(ops[0].storage_bytes, Some(6));
    assert_eq!(ops[0].input_storage_bytes, 3);
    // A failing op records nothing and returns the error.
    let bad = timed_op(&sink, "bad", &[&a], || a.matmul(&a));
    assert!(bad.is_err());
    assert_eq!(sink.events().len(), 1);
    Ok(())
}

#[test]
fn nothing_happens_when_not_recording() -> candle_core::Result<()> {
    let a = Tensor::ones((2, 2), DType::F32, &Device::Cpu)?;
    record_op(&Off, "x", &[&a], &a, 1);
    let dyn_sink: &dyn Sink = &Off;
    let b = timed_op(dyn_sink, "x", &[&a], || a.exp())?;
    assert_eq!(b.dims(), &[2, 2]);
    record_tensor(&Off, "a", &a, TensorCategory::Activation);
    record_tensor_alloc(&Off, &a, TensorCategory::Activation, None);
    record_tensor_free(&Off, &a, TensorCategory::Activation);
    let grads = a.sum_all()?.backward()?;
    assert_eq!(
        record_gradients(&Off, "m", &[], &grads)?,
        GradientTally::default()
    );
    Ok(())
}

#[test]
fn dtype_and_device_spellings() -> candle_core::Result<()> {
    for (dtype, name, size) in [
        (DType::U8, "u8", 1u64),
        (DType::U32, "u32", 4),
        (DType::I64, "i64", 8),
        (DType::F16, "f16", 2),
        (DType::BF16, "bf16", 2),
        (DType::F32, "f32", 4),
        (DType::F64, "f64", 8),
    ] {
        assert_eq!(dtype_name(dtype), name);
        assert_eq!(
            candle_trace_schema::format::events::dtype_size(name),
            Some(size),
            "{name}"
        );
        let t = Tensor::zeros((3, 5), dtype, &Device::Cpu)?;
        assert_eq!(storage_bytes(&t), 15 * size);
    }
    assert_eq!(device_name(&Device::Cpu), "cpu");
    let scalar = Tensor::new(2.0f32, &Device::Cpu)?;
    assert_eq!(storage_bytes(&scalar), 4);
    assert!(shape_of(&scalar).is_empty());
    Ok(())
}

#[test]
fn record_tensor_and_memory_events() -> candle_core::Result<()> {
    let sink = VecSink::new("cpu");
    sink.set_current_span(Some("s".into()));
    let var = Var::zeros((4, 2), DType::F32, &Device::Cpu)?;
    record_tensor(
        &sink,
        "fc.weight",
        var.as_tensor(),
        TensorCategory::Parameter,
    );
    let act = var.as_tensor().exp()?;
    record_tensor_alloc(&sink, &act, TensorCategory::Activation, Some("exp"));
    record_tensor_free(&sink, &act, TensorCategory::Activation);
    let events = sink.events();
    assert_eq!(events.len(), 3);
    match &events[0] {
        TraceEvent::Tensor(t) => {
            assert_eq!(t.tensor_id, "fc.weight");
            assert!(t.requires_grad);
            assert_eq!(t.storage_bytes, Some(32));
            assert_eq!(t.category, TensorCategory::Parameter);
            assert_eq!(t.span_id, "s");
        }
        other => panic!("expected a tensor event, got {other:?}"),
    }
    match (&events[1], &events[2]) {
        (TraceEvent::Memory(a), TraceEvent::Memory(f)) => {
            assert_eq!(a.action, MemoryAction::Alloc);
            assert_eq!(f.action, MemoryAction::Free);
            assert_eq!(a.tensor_id, tensor_id(&act));
            assert_eq!(a.tensor_id, f.tensor_id);
            assert_eq!(a.bytes, 32);
            assert_eq!(a.op_name.as_deref(), Some("exp"));
            assert_eq!(a.shape, vec![4, 2]);
            assert!(f.timestamp_ns >= a.timestamp_ns);
        }
        other => panic!("expected memory events, got {other:?}"),
    }
    Ok(())
}

fn norm_close(fact: GradientFact, want: f64) {
    let got = fact.norm.unwrap_or(f64::NAN);
    assert!(
        (got - want).abs() <= want.abs() * 1e-12,
        "norm {got} != {want}"
    );
}

#[test]
fn classify_hand_made_gradients() -> candle_core::Result<()> {
    let cpu = Device::Cpu;
    let present = Tensor::new(&[3.0f32, 4.0], &cpu)?; // √(9+16) = 5
    let present_2d = Tensor::new(&[[1.0f64, 2.0], [2.0, 4.0]], &cpu)?; // √25 = 5
    let half = Tensor::new(&[1.0f32, -1.0, 1.0, -1.0], &cpu)?.to_dtype(DType::F16)?; // 2
    let zero = Tensor::zeros((3, 3), DType::F32, &cpu)?;
    let nan = Tensor::new(&[1.0f32, f32::NAN], &cpu)?;
    let inf = Tensor::new(&[f32::NEG_INFINITY, 0.0], &cpu)?;
    let big = Tensor::new(&[3e200f64, 4e200], &cpu)?; // Σg² overflows f64: 5e200
    let tiny = Tensor::new(&[3e-200f64, 4e-200], &cpu)?; // Σg² underflows: 5e-200
    let empty = Tensor::zeros((0, 4), DType::F32, &cpu)?;
    let facts = classify_gradients(&[
        Some(&present),
        None,
        Some(&present_2d),
        Some(&half),
        Some(&zero),
        Some(&nan),
        Some(&inf),
        Some(&big),
        Some(&tiny),
        Some(&empty),
    ])?;
    let states: Vec<GradientState> = facts.iter().map(|f| f.state).collect();
    use GradientState::*;
    assert_eq!(
        states,
        vec![
            Present, Missing, Present, Present, Zero, NonFinite, NonFinite, Present, Present, Zero
        ]
    );
    norm_close(facts[0], 5.0);
    assert_eq!(facts[1].norm, None);
    norm_close(facts[2], 5.0);
    norm_close(facts[3], 2.0);
    assert_eq!(facts[4].norm, Some(0.0));
    assert_eq!(facts[5].norm, None);
    assert_eq!(facts[6].norm, None);
    norm_close(facts[7], 5e200);
    norm_close(facts[8], 5e-200);
    assert_eq!(facts[9].norm, Some(0.0));
    Ok(())
}

#[test]
fn host_pass_reads_in_place_and_views_go_to_the_device() -> candle_core::Result<()> {
    let cpu = Device::Cpu;
    // 19 values (two chunks of 8 and a remainder of 3): Σ k² for k = 1..=19 is
    // 19·20·39/6 = 2470, max 19; negated odd entries change neither.
    let values: Vec<f32> = (1..=19)
        .map(|k| if k % 2 == 1 { -(k as f32) } else { k as f32 })
        .collect();
    let t = Tensor::new(values.as_slice(), &cpu)?;
    assert_eq!(host_sum_sq_max_abs(&t), Some((2470.0, 19.0)));
    let half = t.to_dtype(DType::BF16)?;
    assert_eq!(host_sum_sq_max_abs(&half), Some((2470.0, 19.0)));
    // A NaN makes Σg² NaN; an infinity makes both infinite.
    let nan = Tensor::new(&[1.0f64, f64::NAN, 2.0], &cpu)?;
    assert!(host_sum_sq_max_abs(&nan).is_some_and(|(s, _)| s.is_nan()));
    let inf = Tensor::new(&[1.0f32, f32::NEG_INFINITY], &cpu)?;
    assert_eq!(
        host_sum_sq_max_abs(&inf),
        Some((f64::INFINITY, f64::INFINITY))
    );
    // In f32 too: a NaN makes Σg² NaN (and is no maximum).
    let nan32 = Tensor::new(&[1.0f32, f32::NAN, -2.0], &cpu)?;
    assert!(host_sum_sq_max_abs(&nan32).is_some_and(|(s, m)| s.is_nan() && m == 2.0));
    // 1000 f32 values (62 chunks of 16 and 8 left): the f32 pass against Σ and max in f64
    // added one by one; they differ in the order of additions only.
    let many: Vec<f32> = (0..1000)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
        .collect();
    let (want_sum, want_max) = many.iter().fold((0.0f64, 0.0f64), |(s, m), &v| {
        (s + f64::from(v) * f64::from(v), m.max(f64::from(v).abs()))
    });
    let (sum, max) = f32_sum_sq_max_abs(&many);
    assert!(
        (sum - want_sum).abs() <= want_sum * 1e-12,
        "{sum} vs {want_sum}"
    );
    assert_eq!(max, want_max);
    // [[1, 2], [3, 4]]: its second row is contiguous at an offset (read in place: 9 + 16);
    // its transpose is not contiguous and an integer tensor is not a float (both left to
    // the device).
    let m = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], &cpu)?;
    let row = m.narrow(0, 1, 1)?;
    assert_eq!(host_sum_sq_max_abs(&row), Some((25.0, 4.0)));
    let transposed = m.t()?;
    assert_eq!(host_sum_sq_max_abs(&transposed), None);
    let ints = Tensor::new(&[3u32, 4], &cpu)?;
    assert_eq!(host_sum_sq_max_abs(&ints), None);
    // Both paths in one call, in order: √25, √30 (1+4+9+16), √25.
    let facts = classify_gradients(&[Some(&row), Some(&transposed), None, Some(&ints)])?;
    norm_close(facts[0], 5.0);
    norm_close(facts[1], 30f64.sqrt());
    assert_eq!(facts[2].state, GradientState::Missing);
    norm_close(facts[3], 5.0);
    Ok(())
}

#[test]
fn record_gradients_after_a_real_backward() -> candle_core::Result<()> {
    let cpu = Device::Cpu;
    // loss = Σ w·x with x = [1, 2, 2]: ∂loss/∂w = x, norm 3.
    let w = Var::new(&[0.5f32, 0.5, 0.5], &cpu)?;
    // d enters the loss multiplied by a zero tensor: its gradient exists and is all zero.
    let d = Var::new(&[7.0f32, 8.0], &cpu)?;
    // frozen never enters the loss: its gradient is missing.
    let frozen = Var::new(&[1.0f32], &cpu)?;
    let x = Tensor::new(&[1.0f32, 2.0, 2.0], &cpu)?;
    let loss = (w.as_tensor() * &x)?
        .sum_all()?
        .add(&(d.as_tensor() * Tensor::zeros(2, DType::F32, &cpu)?)?.sum_all()?)?;
    let grads = loss.backward()?;
    let sink = VecSink::new("cpu");
    let params = vec![
        ("w".to_string(), w),
        ("d".to_string(), d),
        ("frozen".to_string(), frozen),
    ];
    let tally = record_gradients(&sink, "model", &params, &grads)?;
    assert_eq!(
        tally,
        GradientTally {
            present: 1,
            missing: 1,
            zero: 1,
            non_finite: 0
        }
    );
    let gradients: Vec<Gradient> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::Gradient(g) => Some(g),
            _ => None,
        })
        .collect();
    assert_eq!(gradients.len(), 3);
    assert_eq!(gradients[0].key, "w");
    assert_eq!(gradients[0].root, "model");
    assert_eq!(gradients[0].state, GradientState::Present);
    assert!((gradients[0].norm.unwrap_or(0.0) - 3.0).abs() < 1e-9);
    assert_eq!(gradients[1].state, GradientState::Zero);
    assert_eq!(gradients[2].state, GradientState::Missing);
    assert_eq!(gradients[2].norm, None);
    let mut ids: Vec<&str> = gradients.iter().map(|g| g.event_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "event ids are unique");
    Ok(())
}

#[test]
fn a_failed_forward_ends_its_training_step() -> candle_core::Result<()> {
    // A loop that skips a failed batch and goes on: the captured step (the first) ends at
    // the failure instead of running on into the next update with recording on.
    let recorder = crate::Recorder::builder("train::fail")
        .capture_step(1)
        .writer(std::io::sink())
        .build()
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
    let failed: candle_core::Result<Tensor> =
        recorder.forward(|| Err(candle_core::Error::Msg("bad batch".into())));
    assert!(failed.is_err());
    assert!(
        recorder.capture_done(),
        "the captured step ended at its failure"
    );
    assert!(!recorder.is_recording());
    // The next update is step 2, not recorded.
    use candle_nn::Module;
    let varmap = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let lin = candle_nn::linear(3, 1, vb.pp("fc"))?;
    let mut opt = candle_nn::SGD::new(varmap.all_vars(), 0.1)?;
    let x = Tensor::ones((2, 3), DType::F32, &Device::Cpu)?;
    let loss = recorder.forward(|| lin.forward(&x)?.sqr()?.mean_all())?;
    assert!(!recorder.is_recording());
    let grads = recorder.backward(&loss)?;
    recorder.optimizer_step(&mut opt, &grads, &varmap)?;
    Ok(())
}

#[test]
fn varmap_gradients_are_sorted_by_name() -> candle_core::Result<()> {
    let varmap = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let lin = candle_nn::linear(3, 2, vb.pp("fc"))?;
    let x = Tensor::ones((4, 3), DType::F32, &Device::Cpu)?;
    let loss = candle_nn::Module::forward(&lin, &x)?.sqr()?.sum_all()?;
    let grads = loss.backward()?;
    let sink = VecSink::new("cpu");
    let tally = record_varmap_gradients(&sink, "varmap", &varmap, &grads)?;
    assert_eq!(tally.total(), 2);
    let keys: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::Gradient(g) => Some(g.key),
            _ => None,
        })
        .collect();
    assert_eq!(keys, vec!["fc.bias", "fc.weight"]);
    Ok(())
}

#[test]
fn tensor_numbers_are_the_ids_and_the_clock_moves() -> candle_core::Result<()> {
    let t = Tensor::ones(3, DType::F32, &Device::Cpu)?;
    assert_eq!(
        tensor_number(&t).map(|n| n.to_string()),
        Some(tensor_id(&t))
    );
    let before = tensor_clock().unwrap_or(0);
    let u = t.exp()?;
    let after = tensor_clock().unwrap_or(0);
    // The probe's own reading takes an id too: the tensor made between lies strictly inside.
    let id = tensor_number(&u).unwrap_or(0);
    assert!(before < id && id < after, "{before} < {id} < {after}");
    Ok(())
}

#[test]
fn version_and_sync() {
    assert!(candle_version().starts_with("0.11"));
    DeviceSync::synchronize(&Device::Cpu);
}
