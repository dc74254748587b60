//! Module names from the weights each layer loads, on real candle models: the expected names are
//! written by hand from each model's config and candle-transformers' weight names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap, SGD};
use candle_trace_capture::prelude::*;
use candle_trace_capture::{nn, Recorder};
use candle_trace_schema::analysis::findings::trace_findings;
use candle_trace_schema::analysis::module_tree::trace_tree;
use candle_trace_schema::analysis::modules::ModulePaths;
use candle_trace_schema::format::diagnostics::Severity;
use candle_trace_schema::format::document::TraceDocument;
use candle_trace_schema::format::events::SpanKind;
use candle_trace_schema::format::events::{source, GradientState};
use candle_transformers::models::{bert, llama, mistral, qwen2, t5, with_tracing};
use common::SharedBuf;

/// One recorder at a time: tracing spans go to the one routed recorder of the process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Install a recorder capturing its first step, let `run` build a model and train one step,
/// and read the trace.
fn capture(run: impl FnOnce(&Recorder) -> Result<()>) -> TraceDocument {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = SharedBuf::default();
    let recorder = Recorder::builder("names::test")
        .capture_step(1)
        .writer(out.clone())
        .install()
        .unwrap();
    run(&recorder).unwrap();
    recorder.finish().unwrap();
    let doc = TraceDocument::from_bytes(&out.bytes());
    assert!(
        doc.diagnostics
            .iter()
            .all(|d| d.severity != Severity::Error),
        "{:?}",
        doc.diagnostics
    );
    doc
}

/// (span name, module) → how many spans, for every span that has a module.
fn named(doc: &TraceDocument) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for s in &doc.spans {
        if let Some(m) = &s.module {
            *out.entry((s.name.to_string(), m.to_string())).or_insert(0) += 1;
        }
    }
    out
}

/// Names of spans written without a module.
fn unnamed(doc: &TraceDocument) -> Vec<String> {
    let mut out: Vec<String> = doc
        .spans
        .iter()
        .filter(|s| s.module.is_none())
        .map(|s| s.name.to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn expect(pairs: &[(&str, String)]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for (name, module) in pairs {
        *out.entry((name.to_string(), module.clone())).or_insert(0) += 1;
    }
    out
}

/// The kind and module key of every span called `name`, in document order.
fn span_keys<'a>(
    doc: &TraceDocument,
    paths: &'a ModulePaths,
    name: &str,
) -> Vec<(SpanKind, &'a str)> {
    doc.spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name == name)
        .map(|(i, s)| (s.span_kind, paths.path(i)))
        .collect()
}

fn module_names_source(doc: &TraceDocument) -> (bool, u64) {
    let sources = &doc.capture_sources.as_ref().unwrap().event.sources;
    let s = sources
        .iter()
        .find(|s| s.source == source::MODULE_NAMES)
        .unwrap();
    (s.on, s.events)
}

fn llama_config(tied: bool) -> llama::Config {
    llama::Config {
        hidden_size: 64,
        intermediate_size: 172,
        vocab_size: 256,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 4,
        use_flash_attn: false,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        bos_token_id: None,
        eos_token_id: None,
        rope_scaling: None,
        max_position_embeddings: 64,
        tie_word_embeddings: tied,
    }
}

/// One training step of a Llama built from `name_modules(vb)`.
fn llama_step(recorder: &Recorder, tied: bool) -> Result<()> {
    let device = Device::Cpu;
    let cfg = llama_config(tied);
    let varmap = VarMap::new();
    let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
    let model = llama::Llama::load(vb, &cfg)?;
    let mut cache = llama::Cache::new(false, DType::F32, &cfg, &device)?;
    let mut opt = SGD::new(varmap.all_vars(), 1e-3)?;
    let inputs = Tensor::from_vec((0..8u32).collect::<Vec<_>>(), (1, 8), &device)?;
    let targets = Tensor::new(&[3u32], &device)?;
    let loss = recorder.forward(|| {
        candle_nn::loss::cross_entropy(&model.forward(&inputs, 0, &mut cache)?, &targets)
    })?;
    let grads = recorder.backward(&loss)?;
    recorder.optimizer_step(&mut opt, &grads, &varmap)?;
    Ok(())
}

/// The named spans of two decoder layers as Llama, Mistral and Qwen2 write them (the same
/// weight names), then the final norm: written from llama.rs's, mistral.rs's and qwen2.rs's
/// weight names.
fn decoder_pairs() -> Vec<(&'static str, String)> {
    let mut pairs = Vec::new();
    for i in 0..2 {
        for p in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            pairs.push(("linear", format!("model.layers.{i}.self_attn.{p}")));
        }
        for p in ["gate_proj", "up_proj", "down_proj"] {
            pairs.push(("linear", format!("model.layers.{i}.mlp.{p}")));
        }
        pairs.push(("rms-norm", format!("model.layers.{i}.input_layernorm")));
        pairs.push((
            "rms-norm",
            format!("model.layers.{i}.post_attention_layernorm"),
        ));
    }
    pairs.push(("rms-norm", String::from("model.norm")));
    pairs
}

/// The named spans one forward of the 2-layer Llama enters, its head named `head`.
fn llama_expected(head: &str) -> BTreeMap<(String, String), usize> {
    let mut pairs = decoder_pairs();
    pairs.push(("linear", String::from(head)));
    expect(&pairs)
}

/// One training step of a causal LM whose `forward(inputs, 0)` gives the last position's
/// logits (Mistral, Qwen2), over six tokens.
fn causal_lm_step(
    recorder: &Recorder,
    varmap: &VarMap,
    mut forward: impl FnMut(&Tensor) -> candle_core::Result<Tensor>,
) -> Result<()> {
    let device = Device::Cpu;
    let mut opt = SGD::new(varmap.all_vars(), 1e-3)?;
    let inputs = Tensor::from_vec((0..6u32).collect::<Vec<_>>(), (1, 6), &device)?;
    let targets = Tensor::new(&[5u32], &device)?;
    let loss = recorder.forward(|| {
        let logits = forward(&inputs)?.squeeze(1)?;
        candle_nn::loss::cross_entropy(&logits, &targets)
    })?;
    let grads = recorder.backward(&loss)?;
    recorder.optimizer_step(&mut opt, &grads, varmap)?;
    Ok(())
}

#[test]
fn llama_layers_are_named_by_their_weights() {
    let doc = capture(|r| llama_step(r, false));
    assert_eq!(named(&doc), llama_expected("lm_head"));
    // Composite spans own no weight: readers name them from what they contain.
    assert_eq!(
        unnamed(&doc),
        [
            "attn",
            "attn-rot",
            "backward",
            "block",
            "forward",
            "mlp",
            "optimizer",
            "train_step"
        ]
    );
    let (on, events) = module_names_source(&doc);
    assert!(on);
    assert_eq!(events, 2 * 9 + 2);
    // Parameter bytes on the gradient records: q_proj is 64 × 64 f32.
    let q = doc
        .gradients
        .iter()
        .find(|g| g.key == "model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    assert_eq!(q.storage_bytes, Some(64 * 64 * 4));
}

#[test]
fn a_tied_lm_head_is_the_embedding_module() {
    // Tied: lm_head is built from embed_tokens' tensor and fetches nothing; the embedding
    // (candle-nn's, no span) fetched last, so the head runs module `model.embed_tokens`.
    let doc = capture(|r| llama_step(r, true));
    assert_eq!(named(&doc), llama_expected("model.embed_tokens"));
}

#[test]
fn mistral_flat_layers_are_named() {
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let cfg = mistral::Config {
            vocab_size: 128,
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            head_dim: None,
            num_key_value_heads: 2,
            hidden_act: candle_nn::Activation::Silu,
            max_position_embeddings: 64,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            sliding_window: None,
            use_flash_attn: false,
        };
        let varmap = VarMap::new();
        let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
        let mut model = mistral::Model::new(&cfg, vb)?;
        causal_lm_step(recorder, &varmap, |inputs| model.forward(inputs, 0))
    });
    assert_eq!(named(&doc), llama_expected("lm_head"));
    assert_eq!(
        unnamed(&doc),
        ["backward", "forward", "optimizer", "train_step"]
    );
}

#[test]
fn qwen2_layers_are_named_and_its_missing_gradients_point_at_the_final_norm() {
    // Qwen2: biases on q/k/v (two fetches before the span), and an empty VarMap has no
    // `lm_head.weight`, so the head is built from the embedding's tensor and fetches nothing.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let cfg = qwen2::Config {
            vocab_size: 128,
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 64,
            sliding_window: 64,
            max_window_layers: 2,
            tie_word_embeddings: false,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            use_sliding_window: false,
            hidden_act: candle_nn::Activation::Silu,
        };
        let varmap = VarMap::new();
        let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
        let mut model = qwen2::ModelForCausalLM::new(&cfg, vb)?;
        causal_lm_step(recorder, &varmap, |inputs| model.forward(inputs, 0))
    });
    assert_eq!(named(&doc), expect(&decoder_pairs()));
    // The head fetched no weight: its span stays unnamed rather than guessed.
    assert_eq!(
        unnamed(&doc),
        ["backward", "forward", "linear", "optimizer", "train_step"]
    );
    // candle's `rms_norm` has no backward, so nothing before the final norm gets a gradient;
    // the embedding does, through the head that shares its tensor. The finding names the
    // last module the forward ran without one, model.norm, not the first in the file.
    let missing: Vec<&str> = doc
        .gradients
        .iter()
        .filter(|g| g.state == GradientState::Missing)
        .map(|g| g.key.as_str())
        .collect();
    assert_eq!(missing.len(), 2 * 12 + 1, "{missing:?}");
    assert!(!missing.contains(&"model.embed_tokens.weight"));
    let findings = trace_findings(&[&doc]);
    let f = findings
        .findings
        .iter()
        .find(|f| f.rule == "gradients_missing")
        .unwrap();
    // One `VarMap`: its modules are named as in the gradients tab, without the root.
    assert_eq!(
        f.title,
        "25 parameter(s) in 19 module(s) get no gradient; the last of them in the forward: model.norm"
    );
}

/// A plain candle-nn model: three layers, the middle one used twice.
struct Mlp {
    fc1: nn::Traced<candle_nn::Linear>,
    fc2: nn::Traced<candle_nn::Linear>,
    head: nn::Traced<candle_nn::Linear>,
    block: tracing::Span,
}

impl Mlp {
    fn new(vb: VarBuilder<'_>) -> candle_core::Result<Self> {
        Ok(Mlp {
            fc1: nn::linear(4, 8, vb.pp("net.fc1"))?,
            fc2: nn::linear(8, 8, vb.pp("net.fc2"))?,
            head: nn::linear_no_bias(8, 3, vb.pp("head"))?,
            block: nn::block("net"),
        })
    }

    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        let hidden = {
            let _net = self.block.enter();
            let xs = self.fc1.forward(xs)?.relu()?;
            let xs = self.fc2.forward(&xs)?.relu()?;
            self.fc2.forward(&xs)?.relu()?
        };
        self.head.forward(&hidden)
    }
}

#[test]
fn candle_nn_layers_built_through_capture_are_named() {
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        // No naming builder: the constructors name their spans themselves.
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = Mlp::new(vb)?;
        let mut opt = SGD::new(varmap.all_vars(), 1e-2)?;
        let xs = Tensor::ones((2, 4), DType::F32, &device)?;
        let ys = Tensor::new(&[0u32, 2], &device)?;
        let loss =
            recorder.forward(|| candle_nn::loss::cross_entropy(&model.forward(&xs)?, &ys))?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    let want = expect(&[
        ("block", String::from("net")),
        ("linear", String::from("net.fc1")),
        ("linear", String::from("net.fc2")),
        ("linear", String::from("net.fc2")),
        ("linear", String::from("head")),
    ]);
    assert_eq!(named(&doc), want);
    assert_eq!(
        unnamed(&doc),
        ["backward", "forward", "optimizer", "train_step"]
    );
    // fc2's two calls are both inside the `net` block.
    let net = doc
        .spans
        .iter()
        .find(|s| s.module.as_deref() == Some("net"))
        .unwrap();
    let in_net = doc
        .spans
        .iter()
        .filter(|s| s.parent_id.as_ref() == Some(&net.id))
        .count();
    assert_eq!(in_net, 3);
}

#[test]
fn span_first_layers_rms_norm_and_conv2d() {
    // candle-transformers' with_tracing conv2d and RmsNorm create their span before fetching;
    // its linear fetches first.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
        let conv = with_tracing::conv2d(1, 2, 3, Default::default(), vb.pp("stem.conv"))?;
        let norm = with_tracing::RmsNorm::new(8, 1e-5, vb.pp("stem.norm"))?;
        let fc = with_tracing::linear(8, 2, vb.pp("classifier"))?;
        drop(vb);
        let mut opt = SGD::new(varmap.all_vars(), 1e-2)?;
        let xs = Tensor::ones((1, 1, 4, 4), DType::F32, &device)?;
        let loss = recorder.forward(|| {
            let h = conv.forward(&xs)?.flatten_from(1)?; // 2 × 2 × 2 = 8
            fc.forward(&norm.forward(&h)?)?.sum_all()
        })?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    let want = expect(&[
        ("conv2d", String::from("stem.conv")),
        ("rms-norm", String::from("stem.norm")),
        ("linear", String::from("classifier")),
    ]);
    assert_eq!(named(&doc), want);
}

#[test]
fn without_the_naming_line_nothing_is_named_and_loading_is_unchanged() {
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let fc = with_tracing::linear(4, 2, vb.pp("fc"))?;
        let xs = Tensor::ones((1, 4), DType::F32, &device)?;
        let _ = recorder.forward(|| fc.forward(&xs)?.sum_all())?;
        Ok(())
    });
    assert!(named(&doc).is_empty());
    assert_eq!(module_names_source(&doc).1, 0);
}

#[test]
fn a_backend_error_passes_through_unchanged() {
    let device = Device::Cpu;
    // An empty safetensors-like map: the weight is missing.
    let vb = VarBuilder::from_tensors(Default::default(), DType::F32, &device);
    // The message (its first line: a backtrace may follow, captured at another depth).
    let first_line = |e: candle_core::Error| e.to_string().lines().next().map(String::from);
    let plain = first_line(candle_nn::linear(4, 2, vb.pp("fc")).unwrap_err());
    let vb = VarBuilder::from_tensors(Default::default(), DType::F32, &device);
    let named = first_line(candle_nn::linear(4, 2, name_modules(vb).pp("fc")).unwrap_err());
    assert_eq!(named, plain);
    // The wrapped builder still answers what it holds.
    let t = Tensor::zeros((2, 4), DType::F32, &device).unwrap();
    let vb = VarBuilder::from_tensors(
        [(String::from("fc.weight"), t)].into_iter().collect(),
        DType::F32,
        &device,
    );
    let vb = name_modules(vb.pp("fc"));
    assert!(vb.contains_tensor("weight"));
    assert_eq!(vb.get((2, 4), "weight").unwrap().dims(), &[2, 4]);
}

#[test]
fn bert_output_blocks_are_modules_named_by_what_they_hold() {
    // BERT's `self-out` and `out` spans wrap a dense layer and its LayerNorm: module spans,
    // keyed by the prefix of the two, as the modules tab and the chart show them.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let cfg = bert::Config {
            vocab_size: 32,
            hidden_size: 16,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            intermediate_size: 32,
            hidden_act: bert::HiddenAct::Gelu,
            hidden_dropout_prob: 0.0,
            max_position_embeddings: 16,
            type_vocab_size: 2,
            initializer_range: 0.02,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: bert::PositionEmbeddingType::Absolute,
            use_cache: false,
            classifier_dropout: None,
            model_type: None,
        };
        let varmap = VarMap::new();
        let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
        let model = bert::BertForMaskedLM::load(vb, &cfg)?;
        let mut opt = SGD::new(varmap.all_vars(), 1e-3)?;
        let ids = Tensor::from_vec((0..6u32).collect::<Vec<_>>(), (1, 6), &device)?;
        let types = ids.zeros_like()?;
        let targets = Tensor::from_vec((1..7u32).collect::<Vec<_>>(), 6, &device)?;
        let loss = recorder.forward(|| {
            let logits = model.forward(&ids, &types, None)?.squeeze(0)?;
            candle_nn::loss::cross_entropy(&logits, &targets)
        })?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    let paths = ModulePaths::new(&doc);
    let keys = |name: &str| span_keys(&doc, &paths, name);
    assert_eq!(
        keys("self-out"),
        [
            (SpanKind::Module, "bert.encoder.layer.0.attention.output"),
            (SpanKind::Module, "bert.encoder.layer.1.attention.output"),
        ]
    );
    assert_eq!(
        keys("out"),
        [
            (SpanKind::Module, "bert.encoder.layer.0.output"),
            (SpanKind::Module, "bert.encoder.layer.1.output"),
        ]
    );
    // `encoder` runs the numbered layers `bert.encoder.layer.0` and `.1`: it is the module
    // holding that list, `bert.encoder`, not the list `bert.encoder.layer`.
    assert_eq!(keys("encoder"), [(SpanKind::Module, "bert.encoder")]);
    // `inter` holds one named layer (its dense) and the activation: a function span, so the
    // dense's row does not take the activation's time.
    assert_eq!(
        keys("inter"),
        [
            (SpanKind::Function, "bert.encoder.layer.0"),
            (SpanKind::Function, "bert.encoder.layer.1"),
        ]
    );
    // candle-nn's fused layer norm has no backward: only the decoder gets gradients, and the
    // finding names the last module the forward ran without one, without the VarMap's root.
    let f = trace_findings(&[&doc])
        .findings
        .into_iter()
        .find(|f| f.rule == "gradients_missing")
        .unwrap();
    assert_eq!(
        f.title,
        "41 parameter(s) in 22 module(s) get no gradient; the last of them in the forward: cls.predictions.transform.LayerNorm"
    );
}

#[test]
fn t5_blocks_are_the_modules_holding_their_numbered_layers() {
    // T5's `block` span runs its layers `layer.0` … (self-attention, then cross-attention in
    // the decoder, then the feed-forward), each layer's weights under `…block.N.layer.K`.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let cfg = t5::Config {
            vocab_size: 64,
            d_model: 32,
            d_kv: 8,
            d_ff: 64,
            num_layers: 2,
            num_decoder_layers: Some(2),
            num_heads: 4,
            relative_attention_num_buckets: 8,
            relative_attention_max_distance: 16,
            dropout_rate: 0.0,
            use_cache: false,
            ..t5::Config::default()
        };
        let varmap = VarMap::new();
        let vb = name_modules(VarBuilder::from_varmap(&varmap, DType::F32, &device));
        let mut model = t5::T5ForConditionalGeneration::load(vb, &cfg)?;
        let mut opt = SGD::new(varmap.all_vars(), 1e-3)?;
        let src = Tensor::from_vec((0..8u32).collect::<Vec<_>>(), (1, 8), &device)?;
        let tgt = Tensor::from_vec((0..5u32).collect::<Vec<_>>(), (1, 5), &device)?;
        let labels = Tensor::new(&[7u32], &device)?;
        let loss = recorder
            .forward(|| candle_nn::loss::cross_entropy(&model.forward(&src, &tgt)?, &labels))?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    let paths = ModulePaths::new(&doc);
    let keys = |name: &str| span_keys(&doc, &paths, name);
    use SpanKind::Module;
    // The encoder runs first; each block is the module holding its list `layer`.
    assert_eq!(
        keys("block"),
        [
            (Module, "encoder.block.0"),
            (Module, "encoder.block.1"),
            (Module, "decoder.block.0"),
            (Module, "decoder.block.1"),
        ]
    );
    // A layer holds its norm and its attention or feed-forward: the layer itself.
    assert_eq!(
        keys("self-attn"),
        [
            (Module, "encoder.block.0.layer.0"),
            (Module, "encoder.block.1.layer.0"),
            (Module, "decoder.block.0.layer.0"),
            (Module, "decoder.block.1.layer.0"),
        ]
    );
    assert_eq!(
        keys("cross-attn"),
        [
            (Module, "decoder.block.0.layer.1"),
            (Module, "decoder.block.1.layer.1"),
        ]
    );
    assert_eq!(
        keys("layer-ff"),
        [
            (Module, "encoder.block.0.layer.1"),
            (Module, "encoder.block.1.layer.1"),
            (Module, "decoder.block.0.layer.2"),
            (Module, "decoder.block.1.layer.2"),
        ]
    );
    // The shared embedding, fetched under `decoder.embed_tokens` (no `shared.weight` in an
    // empty VarMap), runs once per stack.
    assert_eq!(
        keys("embedding")
            .into_iter()
            .filter(|k| k.1 == "decoder.embed_tokens")
            .count(),
        2
    );
}

#[test]
fn recurrent_layers_built_through_capture_are_named_modules() {
    use candle_core::IndexOp;
    use candle_nn::RNN;
    // Embedding (vocabulary 10, 4 wide) → LSTM (hidden 8) over the whole sequence, beside a
    // GRU (hidden 8) stepped by hand over the same 3 positions → linear head to 3 classes.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let embed = nn::embedding(10, 4, vb.pp("embed"))?;
        let lstm = nn::lstm(4, 8, Default::default(), vb.pp("lstm"))?;
        let gru = nn::gru(4, 8, Default::default(), vb.pp("dec"))?;
        let head = nn::linear(8, 3, vb.pp("head"))?;
        let mut opt = SGD::new(varmap.all_vars(), 1e-2)?;
        let ids = Tensor::new(&[[1u32, 4, 7]], &device)?;
        let ys = Tensor::new(&[2u32], &device)?;
        let loss = recorder.forward(|| {
            let xs = embed.forward(&ids)?;
            let states = lstm.seq(&xs)?;
            let mut g = gru.zero_state(1)?;
            for t in 0..3 {
                g = gru.step(&xs.i((.., t, ..))?.contiguous()?, &g)?;
            }
            let h = (states[2].h() + g.h())?;
            candle_nn::loss::cross_entropy(&head.forward(&h)?, &ys)
        })?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    // The LSTM's sequence is one call, each GRU step one.
    let want = expect(&[
        ("embedding", String::from("embed")),
        ("lstm", String::from("lstm")),
        ("gru", String::from("dec")),
        ("gru", String::from("dec")),
        ("gru", String::from("dec")),
        ("linear", String::from("head")),
    ]);
    assert_eq!(named(&doc), want);
    assert_eq!(
        unnamed(&doc),
        ["backward", "forward", "optimizer", "train_step"]
    );
    // Each is a leaf layer: one `op` row per call, named after its span.
    let ops = |name: &str| doc.ops.iter().filter(|o| o.op_name == name).count();
    assert_eq!((ops("lstm"), ops("gru")), (1, 3));
    // The module rows meet the weights' gradients: LSTM weight_ih 32 × 4, weight_hh 32 × 8,
    // two biases of 32 (4 gates × 8), f32: (128 + 256 + 64) × 4 = 1792 bytes; GRU (3 gates):
    // (96 + 192 + 48) × 4 = 1344.
    let paths = ModulePaths::new(&doc);
    let tree = trace_tree(&doc, &paths);
    let node = |key: &str| tree.nodes.iter().find(|n| n.key == key).unwrap();
    let lstm = node("lstm");
    assert!(lstm.measured);
    assert_eq!(lstm.calls, 1);
    assert_eq!(lstm.param_bytes, Some(1792));
    assert_eq!(lstm.gradients.present, 4);
    let gru = node("dec");
    assert_eq!(gru.calls, 3);
    assert_eq!(gru.param_bytes, Some(1344));
    assert_eq!(gru.gradients.present, 4);
}

#[test]
fn a_layer_whose_output_is_multiplied_by_zero_gets_all_zero_gradients_and_a_finding() {
    // loss = Σ fc1(x) + Σ (fc2(x) ⊙ 0), x all ones, 0 a tensor of zeros: fc1's weight gets 2
    // (the batch) in every entry and its bias 2, fc2's weight and bias exactly 0. candle computes fc2's gradients
    // (they are not missing): a finding names the module they cannot train.
    let doc = capture(|recorder| {
        let device = Device::Cpu;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let fc1 = nn::linear(4, 3, vb.pp("fc1"))?;
        let fc2 = nn::linear(4, 3, vb.pp("fc2"))?;
        let mut opt = SGD::new(varmap.all_vars(), 1e-2)?;
        let xs = Tensor::ones((2, 4), DType::F32, &device)?;
        let zeros = Tensor::zeros((2, 3), DType::F32, &device)?;
        let loss = recorder.forward(|| {
            fc1.forward(&xs)?.sum_all()? + fc2.forward(&xs)?.mul(&zeros)?.sum_all()?
        })?;
        let grads = recorder.backward(&loss)?;
        recorder.optimizer_step(&mut opt, &grads, &varmap)?;
        Ok(())
    });
    let states: BTreeMap<&str, GradientState> = doc
        .gradients
        .iter()
        .map(|g| (g.key.as_str(), g.state))
        .collect();
    use GradientState::{Present, Zero};
    assert_eq!(
        states.into_iter().collect::<Vec<_>>(),
        [
            ("fc1.bias", Present),
            ("fc1.weight", Present),
            ("fc2.bias", Zero),
            ("fc2.weight", Zero),
        ]
    );
    let f = trace_findings(&[&doc])
        .findings
        .into_iter()
        .find(|f| f.rule == "gradients_unusable")
        .unwrap();
    assert_eq!(
        f.title,
        "2 parameter(s) in 1 module(s) get an all-zero gradient; first: fc2"
    );
    assert_eq!(f.evidence, ["fc2: 2 all zero of 2 parameter(s)"]);
}
