//! The chart's lane groups and how their spans are coloured; the groups as the scene's
//! [`SpanSource`] for one frame.

use std::sync::Arc;

use leptos::prelude::*;

use crate::components::TraceContext;
use crate::timeline::lanes::{Lanes, SpanExtent};
use crate::timeline::lod::chunk_keys;
use crate::timeline::palette::{colour_key, merged_fill, span_fill, Theme};
use crate::timeline::scene::SpanSource;

/// A span's fill: (group, span index, theme) → CSS colour.
pub type FillFn = Arc<dyn Fn(usize, u32, Theme) -> &'static str + Send + Sync>;
/// A span's colour key for level-of-detail merging: (group, span index) → key.
pub type KeyFn = Arc<dyn Fn(usize, u32) -> u32 + Send + Sync>;

/// How a chart colours spans.
#[derive(Clone)]
pub struct Colours {
    /// Each span's fill.
    pub fill: FillFn,
    /// Each span's colour key: merged blocks of different keys are drawn grey.
    pub key: KeyFn,
}

impl Colours {
    /// By pass (hue) and kind (shade), the page's usual colours.
    pub fn by_pass(groups: &Arc<Vec<ChartGroup>>) -> Self {
        let (a, b) = (groups.clone(), groups.clone());
        Colours {
            fill: Arc::new(move |g, i, theme| {
                a.get(g)
                    .and_then(|x| x.ctx.model.doc.spans.get(i as usize))
                    .map_or(merged_fill(theme), |s| {
                        span_fill(s.pass, s.span_kind, theme)
                    })
            }),
            key: Arc::new(move |g, i| {
                b.get(g)
                    .and_then(|x| x.ctx.model.doc.spans.get(i as usize))
                    .map_or(0, |s| colour_key(s.pass, s.span_kind))
            }),
        }
    }
}

/// One lane group: a name (its header row when there are several) and the file's context.
#[derive(Clone)]
pub struct ChartGroup {
    /// Shown above the group's lanes.
    pub label: String,
    /// The file's model, selection, highlights and focus requests.
    pub ctx: TraceContext,
}

impl ChartGroup {
    /// A group with fresh signals for `model`.
    pub fn new(label: String, model: Arc<crate::model::TraceModel>) -> Self {
        ChartGroup {
            label,
            ctx: TraceContext {
                model,
                selected: RwSignal::new(None),
                highlighted: RwSignal::new(Arc::new(Vec::new())),
                focus: RwSignal::new(None),
            },
        }
    }
}

/// Each group's spans' colour keys, computed once: level of detail asks for a key per span
/// in view, a million times a frame when a million spans are in view.
pub(super) struct KeyTable {
    /// Each group's spans' keys, indexed like its document's spans.
    spans: Vec<Vec<u8>>,
    /// Each group's lanes' keys a chunk of spans at a time ([`chunk_keys`]).
    chunks: Vec<Vec<Vec<Option<u32>>>>,
}

pub(super) type Keys = Arc<KeyTable>;

pub(super) fn keys_of(groups: &[ChartGroup], colours: &Colours) -> Keys {
    let spans: Vec<Vec<u8>> = groups
        .iter()
        .enumerate()
        .map(|(g, x)| {
            (0..x.ctx.model.doc.spans.len() as u32)
                .map(|i| u8::try_from((colours.key)(g, i)).unwrap_or(u8::MAX))
                .collect()
        })
        .collect();
    let chunks = groups
        .iter()
        .zip(&spans)
        .map(|(x, keys)| {
            let key = |i: u32| keys.get(i as usize).map_or(0, |&k| u32::from(k));
            x.ctx
                .model
                .lanes
                .lanes
                .iter()
                .map(|lane| chunk_keys(lane, key))
                .collect()
        })
        .collect();
    Arc::new(KeyTable { spans, chunks })
}

/// The groups as [`SpanSource`] for one frame.
pub(super) struct Source<'a> {
    pub(super) groups: &'a [ChartGroup],
    pub(super) colours: &'a Colours,
    pub(super) keys: &'a KeyTable,
    pub(super) theme: Theme,
}

impl SpanSource for Source<'_> {
    fn lanes(&self, g: usize) -> Option<&Lanes> {
        self.groups.get(g).map(|x| &x.ctx.model.lanes)
    }
    fn name(&self, g: usize, span: u32) -> &str {
        let Some(model) = self.groups.get(g).map(|x| &x.ctx.model) else {
            return "";
        };
        model.span_label(span as usize)
    }
    fn fill(&self, g: usize, span: u32) -> &'static str {
        (self.colours.fill)(g, span, self.theme)
    }
    fn key(&self, g: usize, span: u32) -> u32 {
        self.keys
            .spans
            .get(g)
            .and_then(|k| k.get(span as usize))
            .map_or(0, |&k| u32::from(k))
    }
    fn chunk_keys(&self, g: usize, depth: usize) -> Option<&[Option<u32>]> {
        self.keys.chunks.get(g)?.get(depth).map(Vec::as_slice)
    }
    fn extent(&self, g: usize, span: u32) -> Option<SpanExtent> {
        self.groups.get(g)?.ctx.model.extent(span)
    }
}
