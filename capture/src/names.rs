//! The default `span_kind` rule for `tracing` spans, shared by the global subscriber and the
//! `tracing_subscriber` layer.

use tracing::Metadata;

/// Words that make a span name a module (`self-attn`, `layer-norm`, `mlp` ...).
const MODULE_WORDS: &[&str] = &[
    "attn",
    "attention",
    "block",
    "conv",
    "conv1d",
    "conv2d",
    "decoder",
    "embed",
    "embedding",
    "embeddings",
    "encoder",
    "ffn",
    "head",
    "layer",
    "layernorm",
    "linear",
    "mlp",
    "model",
    "norm",
    // BERT's `out` and `self-out` (candle-transformers `bert`: a dense layer and its norm).
    "out",
    "output",
    "rmsnorm",
    "transformer",
];

/// The default rule for `span_kind`: `module` when the name starts with an uppercase letter (a
/// type name such as `Linear`), when one of its words (split at `-`, `_`, `.`, `:` and blanks)
/// names a model part (`attn`, `mlp`, `block`, `layer`, `linear`, `embedding`, `norm`,
/// `conv2d`, `encoder` ...), or when the target is in `candle_nn`.
pub fn looks_like_module(metadata: &Metadata<'_>) -> bool {
    let name = metadata.name();
    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        return true;
    }
    if metadata.target().starts_with("candle_nn") {
        return true;
    }
    name.split(|c: char| matches!(c, '-' | '_' | '.' | ':') || c.is_whitespace())
        .any(|word| MODULE_WORDS.iter().any(|m| m.eq_ignore_ascii_case(word)))
}
