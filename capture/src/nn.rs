//! Layers named as the program wrote them.
//!
//! Two ways, both resolved when the model is built (install the recorder or profiler first):
//!
//! - **A candle-transformers model** (or any model whose layers open `tracing` spans): build it
//!   from [`name_modules`]`(vb)`. Each layer's span is then named by the weights it loaded
//!   (`model.layers.1.self_attn.q_proj`), written as `span_start.module`; readers build the
//!   module tree, and name spans that own no weight (`block`, `attn`, `mlp`) by the longest
//!   common prefix of what they contain (SCHEMA.md §4, "Module names").
//! - **A model of plain candle-nn layers**, which open no span: build its layers with this
//!   module's constructors ([`linear`], [`conv2d`], [`embedding`], [`layer_norm`], [`rms_norm`],
//!   [`lstm`], [`gru`] …), drop-in replacements for candle-nn's that return the same layer
//!   wrapped in a span ([`Traced`]) named by `vb.prefix()`. A block of your own: hold a
//!   [`block`] span and enter it in its `forward` (or open any `tracing` span with a `module`
//!   field).
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::{VarBuilder, VarMap};
//! use candle_trace_capture::nn;
//!
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
//! let fc1 = nn::linear(4, 8, vb.pp("net.fc1"))?; // a span `linear` of module `net.fc1`
//! let y = fc1.forward(&Tensor::zeros((2, 4), DType::F32, &Device::Cpu)?)?;
//! assert_eq!(y.dims(), &[2, 8]);
//! assert_eq!(fc1.module(), "net.fc1");
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! Naming never changes what a model loads: a backend's error passes through unchanged, and a
//! weight the pairing cannot place leaves its span unnamed (readers then fall back to nesting
//! paths for it). GGUF models load through candle-transformers' own quantized `VarBuilder`,
//! which is no candle-nn backend: their spans stay unnamed.

use candle_core::{DType, Device, Module, Result, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

use crate::naming::{self, NamingGuard};

/// `vb`, reporting every weight it hands out so that the layer spans created with it are named
/// after their weights (see the [module docs](self)). The one line that names a
/// candle-transformers model: `let vb = name_modules(VarBuilder::from_varmap(&varmap, …));`
/// before `Model::load(vb, …)`. Works on any candle-nn backend (a `VarMap`, safetensors,
/// `from_backend`).
pub fn name_modules(vb: VarBuilder<'_>) -> VarBuilder<'_> {
    let prefix = vb.prefix();
    let dtype = vb.dtype();
    let device = vb.device().clone();
    let named = VarBuilder::from_backend(
        Box::new(Naming {
            inner: vb.root(),
            _guard: NamingGuard::new(),
        }),
        dtype,
        device,
    );
    if prefix.is_empty() {
        named
    } else {
        named.set_prefix(prefix)
    }
}

/// The backend [`name_modules`] puts in front of a `VarBuilder`'s own.
struct Naming<'a> {
    /// The wrapped builder at its root: names reach the backend whole.
    inner: VarBuilder<'a>,
    /// Pairing is on while a naming backend lives.
    _guard: NamingGuard,
}

impl Naming<'_> {
    /// The wrapped builder on `dev` (its own device unless the caller moved the builder).
    fn on(&self, dev: &Device) -> VarBuilder<'_> {
        if dev.same_device(self.inner.device()) {
            self.inner.clone()
        } else {
            self.inner.clone().set_device(dev.clone())
        }
    }
}

impl SimpleBackend for Naming<'_> {
    fn get(&self, s: Shape, name: &str, h: Init, dtype: DType, dev: &Device) -> Result<Tensor> {
        let tensor = self.on(dev).get_with_hints_dtype(s, name, h, dtype)?;
        naming::fetched(name);
        Ok(tensor)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> Result<Tensor> {
        let tensor = self.on(dev).get_unchecked_dtype(name, dtype)?;
        naming::fetched(name);
        Ok(tensor)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
}

/// A candle-nn layer run inside a `tracing` span named after its type (`linear` …), whose
/// `module` field is the layer's weight prefix. Derefs to the layer.
#[derive(Debug, Clone)]
pub struct Traced<L> {
    inner: L,
    module: String,
    span: tracing::Span,
}

impl<L> Traced<L> {
    /// The wrapped layer.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// The module name (the `VarBuilder` prefix the layer was built with).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The span entered around each `forward`.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }
}

impl<L> std::ops::Deref for Traced<L> {
    type Target = L;
    fn deref(&self) -> &L {
        &self.inner
    }
}

impl<L: Module> Module for Traced<L> {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward(xs)
    }
}

/// [`candle_nn::Linear`] in its span: with [`linear`], a drop-in for candle-nn's pair
/// (`use candle_trace_capture::nn::{linear, Linear};`).
pub type Linear = Traced<candle_nn::Linear>;
/// [`candle_nn::Embedding`] in its span ([`embedding`]).
pub type Embedding = Traced<candle_nn::Embedding>;
/// [`candle_nn::LayerNorm`] in its span ([`layer_norm`]).
pub type LayerNorm = Traced<candle_nn::LayerNorm>;
/// [`candle_nn::RmsNorm`] in its span ([`rms_norm`]).
pub type RmsNorm = Traced<candle_nn::RmsNorm>;
/// [`candle_nn::GroupNorm`] in its span ([`group_norm`]).
pub type GroupNorm = Traced<candle_nn::GroupNorm>;
/// [`candle_nn::Conv1d`] in its span ([`conv1d`]).
pub type Conv1d = Traced<candle_nn::Conv1d>;
/// [`candle_nn::Conv2d`] in its span ([`conv2d`], [`conv2d_no_bias`]).
pub type Conv2d = Traced<candle_nn::Conv2d>;
/// [`candle_nn::LSTM`] in its span ([`lstm`]): an [`RNN`](candle_nn::RNN).
pub type Lstm = Traced<candle_nn::LSTM>;
/// [`candle_nn::GRU`] in its span ([`gru`]): an [`RNN`](candle_nn::RNN).
pub type Gru = Traced<candle_nn::GRU>;

/// A recurrent layer in its span: a whole sequence (`seq`, `seq_init`) is one call, each
/// `step` called by the program one call; the state's making and stacking are not counted.
impl<L: candle_nn::RNN> candle_nn::RNN for Traced<L> {
    type State = L::State;

    fn zero_state(&self, batch_dim: usize) -> Result<Self::State> {
        self.inner.zero_state(batch_dim)
    }

    fn step(&self, input: &Tensor, state: &Self::State) -> Result<Self::State> {
        let _enter = self.span.enter();
        self.inner.step(input, state)
    }

    fn seq_init(&self, input: &Tensor, init_state: &Self::State) -> Result<Vec<Self::State>> {
        let _enter = self.span.enter();
        self.inner.seq_init(input, init_state)
    }

    fn states_to_tensor(&self, states: &[Self::State]) -> Result<Tensor> {
        self.inner.states_to_tensor(states)
    }
}

/// A span for a block of your own, named `module` (usually its `vb.prefix()`): create it when
/// the block is built, enter it in the block's `forward`. Readers nest the layers entered
/// inside it under it.
pub fn block(module: &str) -> tracing::Span {
    tracing::trace_span!("block", module = module)
}

/// The candle-nn constructor `$name`, its layer in a span named `$span`.
macro_rules! traced {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $layer:ty, $span:literal) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty,)* vb: VarBuilder<'_>) -> Result<Traced<$layer>> {
            let module = vb.prefix();
            let inner = candle_nn::$name($($arg,)* vb)?;
            let span = tracing::trace_span!($span, module = module.as_str());
            Ok(Traced { inner, module, span })
        }
    };
}

traced!(
    /// [`candle_nn::linear()`], in a `linear` span.
    linear(in_dim: usize, out_dim: usize) -> candle_nn::Linear, "linear"
);
traced!(
    /// [`candle_nn::linear_no_bias`], in a `linear` span.
    linear_no_bias(in_dim: usize, out_dim: usize) -> candle_nn::Linear, "linear"
);
traced!(
    /// [`candle_nn::linear_b`], in a `linear` span.
    linear_b(in_dim: usize, out_dim: usize, bias: bool) -> candle_nn::Linear, "linear"
);
traced!(
    /// [`candle_nn::embedding()`], in an `embedding` span.
    embedding(in_size: usize, out_size: usize) -> candle_nn::Embedding, "embedding"
);
traced!(
    /// [`candle_nn::layer_norm()`], in a `layer-norm` span.
    layer_norm(size: usize, config: candle_nn::LayerNormConfig) -> candle_nn::LayerNorm, "layer-norm"
);
traced!(
    /// [`candle_nn::rms_norm`], in an `rms-norm` span.
    rms_norm(size: usize, eps: f64) -> candle_nn::RmsNorm, "rms-norm"
);
traced!(
    /// [`candle_nn::group_norm()`], in a `group-norm` span.
    group_norm(num_groups: usize, num_channels: usize, eps: f64) -> candle_nn::GroupNorm, "group-norm"
);
traced!(
    /// [`candle_nn::conv1d`], in a `conv1d` span.
    conv1d(in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv1dConfig) -> candle_nn::Conv1d, "conv1d"
);
traced!(
    /// [`candle_nn::conv2d`], in a `conv2d` span.
    conv2d(in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv2dConfig) -> candle_nn::Conv2d, "conv2d"
);
traced!(
    /// [`candle_nn::lstm()`], in an `lstm` span (one call per sequence, see [`Lstm`]).
    lstm(in_dim: usize, hidden_dim: usize, config: candle_nn::LSTMConfig) -> candle_nn::LSTM, "lstm"
);
traced!(
    /// [`candle_nn::gru()`], in a `gru` span (one call per sequence, see [`Gru`]).
    gru(in_dim: usize, hidden_dim: usize, config: candle_nn::GRUConfig) -> candle_nn::GRU, "gru"
);
traced!(
    /// [`candle_nn::conv2d_no_bias`], in a `conv2d` span.
    conv2d_no_bias(in_channels: usize, out_channels: usize, kernel_size: usize, cfg: candle_nn::Conv2dConfig) -> candle_nn::Conv2d, "conv2d"
);
