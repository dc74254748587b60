//! The tiny candle-transformers Llama the examples train and serve (random weights from a
//! `VarMap`, nothing downloaded), included by each example with `#[path]`.

use candle_transformers::models::llama::Config;

/// Hidden 64, 2 layers, 4 heads of 16, MLP 172, vocabulary 256, context 64.
pub fn config() -> Config {
    Config {
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
        tie_word_embeddings: false,
    }
}
