//! Module names from a model's own weights: which layer a `tracing` span stands for.
//!
//! candle-transformers creates one `tracing` span per layer when the model is built (`linear`,
//! `rms-norm` …), and the same layer loads its weights through a candle-nn `VarBuilder` at the
//! same moment. A `VarBuilder` wrapped by [`crate::nn::name_modules`] reports every weight it
//! hands out ([`fetched`]); the subscriber reports every span created ([`span_created`]). On each
//! thread the two streams are paired by the layer type's order in candle-transformers 0.11's
//! `with_tracing` ([`order_of`]):
//! - **weights first** (`linear`, `embedding`, `layer-norm`, `qmatmul`): the span takes the
//!   module of the latest weight fetched since the previous span was created (a tied `lm_head`
//!   built from the embedding's tensor fetches nothing and so takes the embedding's module: the
//!   same weights, one module);
//! - **span first** (`rms-norm`, `conv2d`): the span takes the module of the first weight
//!   fetched after it, before any other span is created (its bias, same module, follows);
//! - any other span (`block`, `attn`, `mlp`, `attn-rot`, a program's own) owns no weight here:
//!   readers name it by the longest common prefix of what it contains (SCHEMA.md §4).
//!
//! A span created with a `module` field (`tracing::trace_span!("linear", module = "fc1")`, as
//! [`crate::nn`]'s layers do) is named by that field, whatever the order.
//!
//! A module is the weight's path without its last segment (`model.layers.0.mlp.down_proj.weight`
//! → `model.layers.0.mlp.down_proj`). Names are interned once per process (leaked: a model's
//! layers are few and live as long as the model), and each named span's [`ModuleSlot`] too.
//! Outside a naming `VarBuilder`'s life creating a span costs one atomic load here.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The module of one layer's span: set when the span is created (weights-first layers, spans
/// with a `module` field) or by the first weight fetched right after (span-first layers).
#[derive(Debug, Default)]
pub(crate) struct ModuleSlot(OnceLock<&'static str>);

impl ModuleSlot {
    /// The module, once known.
    pub(crate) fn get(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

/// When a layer type creates its span relative to fetching its weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Fetches its weights, then creates its span.
    WeightsFirst,
    /// Creates its span, then fetches its weights.
    SpanFirst,
    /// Owns no weight of its own (a composite, or a type this table does not know).
    NoWeights,
}

/// The order of candle-transformers 0.11's `with_tracing` layers (see the module docs).
pub(crate) fn order_of(span_name: &str) -> Order {
    match span_name {
        "linear" | "embedding" | "layer-norm" | "qmatmul" => Order::WeightsFirst,
        "rms-norm" | "conv2d" => Order::SpanFirst,
        _ => Order::NoWeights,
    }
}

/// Naming backends alive ([`NamingGuard`]s): while none is, fetch pairing is off.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Whether this process ever named a module (a naming backend, or a span with a `module`
/// field): the `module_names` capture source is on.
static USED: AtomicBool = AtomicBool::new(false);

/// Whether this process ever asked for module names.
pub(crate) fn used() -> bool {
    USED.load(Ordering::Relaxed)
}

/// Interned module names, and the shared slot of each (spans named at creation).
static NAMES: Mutex<Option<Names>> = Mutex::new(None);

#[derive(Default)]
struct Names {
    texts: HashSet<&'static str>,
    slots: HashMap<&'static str, &'static ModuleSlot>,
}

fn with_names<R>(f: impl FnOnce(&mut Names) -> R) -> R {
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    f(names.get_or_insert_with(Names::default))
}

/// `module` stored once per process; `None` for an empty name.
pub(crate) fn intern(module: &str) -> Option<&'static str> {
    if module.is_empty() {
        return None;
    }
    Some(with_names(|names| match names.texts.get(module) {
        Some(&text) => text,
        None => {
            let text: &'static str = Box::leak(module.to_owned().into_boxed_str());
            names.texts.insert(text);
            text
        }
    }))
}

/// The slot every span named `module` at its creation shares.
fn named_slot(module: &'static str) -> &'static ModuleSlot {
    with_names(|names| {
        *names.slots.entry(module).or_insert_with(|| {
            let slot: &'static ModuleSlot = Box::leak(Box::default());
            let _ = slot.0.set(module);
            slot
        })
    })
}

/// What one thread's model build has seen lately.
#[derive(Default)]
struct Pairing {
    /// The module of the latest weight fetched since the last span was created.
    pending: Option<&'static str>,
    /// The latest span-first span, waiting for (or holding) its first weight's module.
    awaiting: Option<&'static ModuleSlot>,
}

thread_local! {
    static PAIRING: RefCell<Pairing> = RefCell::new(Pairing::default());
}

/// A naming backend is alive while this lives: fetch pairing is on.
#[derive(Debug)]
#[cfg_attr(not(feature = "candle"), allow(dead_code))] // the backend is `nn`'s (feature candle)
pub(crate) struct NamingGuard(());

impl NamingGuard {
    #[cfg_attr(not(feature = "candle"), allow(dead_code))]
    pub(crate) fn new() -> Self {
        USED.store(true, Ordering::Relaxed);
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        NamingGuard(())
    }
}

impl Drop for NamingGuard {
    fn drop(&mut self) {
        if ACTIVE.fetch_sub(1, Ordering::Relaxed) == 1 {
            // The last naming backend is gone: nothing fetched may name a later span.
            let _ = PAIRING.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    *p = Pairing::default();
                }
            });
        }
    }
}

/// A weight at `path` was handed out on this thread by a naming `VarBuilder`.
#[cfg_attr(not(feature = "candle"), allow(dead_code))] // called by `nn` (feature candle)
pub(crate) fn fetched(path: &str) {
    let Some((module, _)) = path.rsplit_once('.') else {
        return; // a weight at the root belongs to no module
    };
    let _ = PAIRING.try_with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            return;
        };
        if let Some(slot) = p.awaiting {
            match slot.get() {
                None => {
                    if let Some(module) = intern(module) {
                        let _ = slot.0.set(module);
                    }
                    return;
                }
                // The same layer's next weight (a bias).
                Some(taken) if taken == module => return,
                // Another layer's: the span-first layer is done.
                Some(_) => p.awaiting = None,
            }
        }
        p.pending = intern(module);
    });
}

/// A span named `span_name` is being created on this thread, with `field` its `module` field
/// when it has one: the slot that names it, if any (see the module docs).
pub(crate) fn span_created(span_name: &str, field: Option<&str>) -> Option<&'static ModuleSlot> {
    let active = ACTIVE.load(Ordering::Relaxed) > 0;
    let slot = field.and_then(intern).map(named_slot);
    if slot.is_some() {
        USED.store(true, Ordering::Relaxed);
    }
    if !active {
        return slot;
    }
    PAIRING
        .try_with(|p| {
            let mut p = p.try_borrow_mut().ok()?;
            let pending = p.pending.take();
            p.awaiting = None;
            if slot.is_some() {
                return slot;
            }
            match order_of(span_name) {
                Order::WeightsFirst => pending.map(named_slot),
                Order::SpanFirst => {
                    let fresh: &'static ModuleSlot = Box::leak(Box::default());
                    p.awaiting = Some(fresh);
                    Some(fresh)
                }
                Order::NoWeights => None,
            }
        })
        .ok()
        .flatten()
        .or(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own (pairing is per thread; ACTIVE is process-wide, which is
    /// harmless here: other threads have nothing pending).
    fn on_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    }

    fn named(slot: Option<&'static ModuleSlot>) -> Option<&'static str> {
        slot.and_then(ModuleSlot::get)
    }

    #[test]
    fn weights_first_layers_take_the_latest_fetch() {
        on_thread(|| {
            let _guard = NamingGuard::new();
            // Llama's Block::load: block, attn and attn-rot spans first, then each linear.
            assert!(span_created("block", None).is_none());
            assert!(span_created("attn", None).is_none());
            assert!(span_created("attn-rot", None).is_none());
            fetched("model.layers.0.self_attn.q_proj.weight");
            let q = span_created("linear", None);
            fetched("model.layers.0.self_attn.k_proj.weight");
            fetched("model.layers.0.self_attn.k_proj.bias");
            let k = span_created("linear", None);
            assert_eq!(named(q), Some("model.layers.0.self_attn.q_proj"));
            assert_eq!(named(k), Some("model.layers.0.self_attn.k_proj"));
        });
    }

    #[test]
    fn span_first_layers_take_the_next_fetch() {
        on_thread(|| {
            let _guard = NamingGuard::new();
            fetched("model.layers.0.mlp.down_proj.weight");
            let down = span_created("linear", None);
            let rms_1 = span_created("rms-norm", None);
            fetched("model.layers.0.input_layernorm.weight");
            let rms_2 = span_created("rms-norm", None);
            fetched("model.layers.0.post_attention_layernorm.weight");
            let conv = span_created("conv2d", None);
            fetched("encoder.conv.weight");
            fetched("encoder.conv.bias");
            // The next layer's weight ends the conv's: a weights-first layer takes it.
            fetched("encoder.fc.weight");
            let fc = span_created("linear", None);
            assert_eq!(named(down), Some("model.layers.0.mlp.down_proj"));
            assert_eq!(named(rms_1), Some("model.layers.0.input_layernorm"));
            assert_eq!(
                named(rms_2),
                Some("model.layers.0.post_attention_layernorm")
            );
            assert_eq!(named(conv), Some("encoder.conv"));
            assert_eq!(named(fc), Some("encoder.fc"));
        });
    }

    #[test]
    fn tied_and_unspanned_weights() {
        on_thread(|| {
            let _guard = NamingGuard::new();
            // embed_tokens fetched without a span, then a tied lm_head built from its tensor.
            fetched("model.embed_tokens.weight");
            let tied = span_created("linear", None);
            assert_eq!(named(tied), Some("model.embed_tokens"));
            // Untied: the embedding (no span) then lm_head's own weight; the span takes the latest.
            fetched("model.embed_tokens.weight");
            fetched("lm_head.weight");
            let head = span_created("linear", None);
            assert_eq!(named(head), Some("lm_head"));
            // A weights-first span with nothing fetched since the last span: no name.
            assert!(span_created("linear", None).is_none());
            // A root weight names no module.
            fetched("scale");
            assert!(span_created("linear", None).is_none());
        });
    }

    #[test]
    fn a_module_field_names_the_span_with_or_without_a_naming_builder() {
        on_thread(|| {
            let a = span_created("linear", Some("net.fc1"));
            let b = span_created("linear", Some("net.fc1"));
            assert_eq!(named(a), Some("net.fc1"));
            // One layer, one slot, however often its span is created.
            assert!(std::ptr::eq(a.unwrap(), b.unwrap()));
            let _guard = NamingGuard::new();
            fetched("other.weight");
            assert_eq!(
                named(span_created("rms-norm", Some("net.norm"))),
                Some("net.norm")
            );
            assert!(span_created("block", Some("")).is_none());
        });
    }

    #[test]
    fn nothing_pairs_without_a_naming_builder() {
        on_thread(|| {
            fetched("model.fc.weight");
            // No guard alive on any thread of this test: but another test's guard may be, so
            // check the pairing only through a guard dropped here.
            let guard = NamingGuard::new();
            drop(guard);
            if ACTIVE.load(Ordering::Relaxed) == 0 {
                assert!(span_created("linear", None).is_none());
            }
        });
    }
}
