//! Property tests: any event the writer can emit reads back equal, alone and as a whole document;
//! a file cut into chunks anywhere reads exactly as the whole file (trace, profile and
//! `AnyReader`); and any bytes read give diagnostics, never a panic, through every reader.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::BTreeMap;

use candle_trace_schema::format::detect::AnyReader;
use candle_trace_schema::format::document::{TraceDocument, TraceReader};
use candle_trace_schema::format::events::*;
use candle_trace_schema::format::profile::{read_profile, ProfileReader};
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, including quotes, backslashes and control characters that JSON must escape.
    prop_oneof![".{0,12}", "[a-z_./:0-9]{1,12}"]
}

/// The same, for the fields stored as [`CompactString`]; up to 40 characters, so both the
/// inline and the heap form are read back.
fn ctext() -> impl Strategy<Value = CompactString> {
    prop_oneof![".{0,40}", "[a-z_./:0-9]{1,40}"].prop_map(CompactString::from)
}

fn shape() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 0..5)
}

fn category() -> impl Strategy<Value = TensorCategory> {
    prop::sample::select(TensorCategory::ALL.to_vec())
}

fn meta() -> impl Strategy<Value = Meta> {
    (
        (text(), text(), text(), text(), any::<bool>(), text()),
        (
            any::<u64>(),
            any::<u64>(),
            text(),
            any::<bool>(),
            any::<bool>(),
        ),
        prop::collection::btree_map(text(), text(), 0..4),
        prop::option::of(text()),
    )
        .prop_map(
            |(
                (schema, run_id, correlation_id, entrypoint, train, timestamp),
                (capture_step, warmup_steps, device, sync, dev_timing),
                tags,
                candle_version,
            )| Meta {
                schema,
                run_id,
                correlation_id,
                entrypoint,
                phase: if train { Phase::Train } else { Phase::Infer },
                timestamp,
                capture_step,
                warmup_steps,
                device,
                measured_region_device_synchronized: sync,
                timing_mode: if dev_timing {
                    TimingMode::DeviceSynchronized
                } else {
                    TimingMode::Host
                },
                tags: tags.into_iter().collect::<BTreeMap<_, _>>(),
                candle_version,
            },
        )
}

fn event() -> impl Strategy<Value = TraceEvent> {
    let span_start = (
        ctext(),
        prop::option::of(ctext()),
        ctext(),
        any::<u64>(),
        prop::sample::select(vec![SpanKind::Function, SpanKind::Op, SpanKind::Module]),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            Pass::Forward,
            Pass::Backward,
            Pass::Optimizer,
        ])),
        prop::option::of(ctext()),
    )
        .prop_map(
            |(id, parent_id, name, start_ns, span_kind, measured, step, module)| {
                TraceEvent::SpanStart(SpanStart {
                    id,
                    parent_id,
                    name,
                    start_ns,
                    span_kind,
                    measured,
                    pass: step,
                    module,
                })
            },
        );
    let span_end = (ctext(), any::<u64>())
        .prop_map(|(id, duration_ns)| TraceEvent::SpanEnd(SpanEnd { id, duration_ns }));
    let op = (
        (
            ctext(),
            ctext(),
            prop::collection::vec(ctext(), 0..3),
            prop::option::of(ctext()),
            shape(),
        ),
        (
            ctext(),
            ctext(),
            any::<u64>(),
            any::<u64>(),
            prop::option::of(any::<u64>()),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (span_id, op_name, inputs, output, shape),
                (dtype, device, duration_ns, timestamp_ns, storage_bytes, input_storage_bytes),
            )| {
                TraceEvent::Op(Op {
                    span_id,
                    op_name,
                    inputs,
                    output,
                    shape,
                    dtype,
                    device,
                    duration_ns,
                    timestamp_ns,
                    storage_bytes,
                    input_storage_bytes,
                })
            },
        );
    let tensor = (
        ctext(),
        ctext(),
        shape(),
        ctext(),
        ctext(),
        any::<bool>(),
        prop::option::of(any::<u64>()),
        category(),
    )
        .prop_map(
            |(span_id, tensor_id, shape, dtype, device, requires_grad, storage_bytes, category)| {
                TraceEvent::Tensor(TensorEvent {
                    span_id,
                    tensor_id,
                    shape,
                    dtype,
                    device,
                    requires_grad,
                    storage_bytes,
                    category,
                })
            },
        );
    let memory = (
        (
            any::<u64>(),
            ctext(),
            ctext(),
            prop::option::of(ctext()),
            ctext(),
        ),
        (any::<u64>(), any::<bool>(), shape(), ctext(), category()),
    )
        .prop_map(
            |(
                (timestamp_ns, tensor_id, span_id, op_name, device),
                (bytes, alloc, shape, dtype, category),
            )| {
                TraceEvent::Memory(MemoryEvent {
                    timestamp_ns,
                    tensor_id,
                    span_id,
                    op_name,
                    device,
                    bytes,
                    action: if alloc {
                        MemoryAction::Alloc
                    } else {
                        MemoryAction::Free
                    },
                    shape,
                    dtype,
                    category,
                })
            },
        );
    let device_memory = (
        any::<u64>(),
        text(),
        any::<u64>(),
        any::<u64>(),
        prop::option::of(any::<u64>()),
    )
        .prop_map(
            |(timestamp_ns, device, used_bytes, free_bytes, reserved_bytes)| {
                TraceEvent::DeviceMemory(DeviceMemory {
                    timestamp_ns,
                    device,
                    used_bytes,
                    free_bytes,
                    reserved_bytes,
                })
            },
        );
    let gradient = (
        text(),
        text(),
        text(),
        prop::sample::select(GradientState::ALL.to_vec()),
        // JSON has no NaN or infinity: writers omit a non-finite norm.
        prop::option::of(prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::SUBNORMAL),
    )
        .prop_map(|(event_id, root, key, state, norm)| {
            TraceEvent::Gradient(Gradient {
                event_id,
                root,
                key,
                state,
                norm,
                storage_bytes: None,
            })
        });
    let edge = (text(), text(), any::<u64>()).prop_map(|(from_span, to_span, duration_ns)| {
        TraceEvent::Edge(Edge {
            from_span,
            to_span,
            duration_ns,
        })
    });
    let capture_source = (
        prop_oneof![
            prop::sample::select(source::ALL.to_vec()).prop_map(String::from),
            text()
        ],
        any::<bool>(),
        any::<u64>(),
        prop::option::of(any::<u64>()),
    )
        .prop_map(|(source, on, events, threshold_bytes)| CaptureSource {
            source,
            on,
            events,
            threshold_bytes,
        });
    let capture_sources = (
        prop::collection::vec(capture_source, 0..7),
        any::<u64>(),
        prop::collection::vec(text(), 0..3),
    )
        .prop_map(|(sources, events_dropped, warnings)| {
            TraceEvent::CaptureSources(CaptureSources {
                sources,
                events_dropped,
                warnings,
            })
        });
    prop_oneof![
        meta().prop_map(TraceEvent::Meta),
        span_start,
        span_end,
        op,
        tensor,
        memory,
        device_memory,
        gradient,
        edge,
        capture_sources
    ]
}

proptest! {
    #[test]
    fn every_written_event_reads_back_equal(e in event()) {
        let line = e.to_json_line();
        prop_assert!(!line.contains('\n'));
        prop_assert!(!line.contains("null"), "optional fields are omitted, never null: {}", line);
        prop_assert_eq!(decode_line(line.as_bytes()), Ok(e));
    }

    #[test]
    fn any_bytes_give_diagnostics_never_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), cut in 0usize..512) {
        let mut r = TraceReader::new();
        let cut = cut.min(bytes.len());
        r.push(&bytes[..cut]);
        r.push(&bytes[cut..]);
        let doc = r.finish();
        // With no meta there is always at least the "no meta" error.
        prop_assert!(doc.meta.is_some() || !doc.diagnostics.is_empty());
        for d in &doc.diagnostics {
            prop_assert!(d.line >= 1);
        }
    }

    #[test]
    fn mangled_valid_lines_never_panic(e in event(), cut in 0usize..200, junk in ".{0,4}") {
        let mut line = e.to_json_line();
        let cut = cut.min(line.len());
        let cut = (0..=cut).rev().find(|&c| line.is_char_boundary(c)).unwrap_or(0);
        line.truncate(cut);
        line.push_str(&junk);
        let _ = decode_line(line.as_bytes());
        let _ = TraceReader::new().finish();
    }

    #[test]
    fn a_written_document_reads_back_whole_in_any_chunks(
        m in meta(),
        events in prop::collection::vec(event(), 0..40),
        cuts in cut_points(),
    ) {
        let mut text = TraceEvent::Meta(m.clone()).to_json_line();
        text.push('\n');
        for e in &events {
            text.push_str(&e.to_json_line());
            text.push('\n');
        }
        let whole = TraceDocument::from_bytes(text.as_bytes());
        // Every event is kept with its line (spans as spans, the rest in their lists).
        prop_assert_eq!(whole.meta.as_ref().map(|l| &l.event), Some(&m));
        let kept = whole.spans.len() + whole.ops.len() + whole.tensors.len() + whole.memory.len()
            + whole.device_memory.len() + whole.gradients.len() + whole.edges.len();
        let starts = events.iter().filter(|e| matches!(e, TraceEvent::SpanStart(_))).count();
        let ends = events.iter().filter(|e| matches!(e, TraceEvent::SpanEnd(_))).count();
        let metas = events.iter().filter(|e| matches!(e, TraceEvent::Meta(_))).count();
        let sources = events.iter().filter(|e| matches!(e, TraceEvent::CaptureSources(_))).count();
        let dup_starts = starts - whole.spans.len();
        prop_assert_eq!(kept + ends + metas + sources + dup_starts, events.len());
        // The first capture_sources line is the one kept.
        let first_sources = events.iter().find_map(|e| match e {
            TraceEvent::CaptureSources(c) => Some(c),
            _ => None,
        });
        prop_assert_eq!(whole.capture_sources.as_ref().map(|l| &l.event), first_sources);
        let streamed = read_in_chunks(text.as_bytes(), &cuts);
        assert_same(&streamed, &whole);
    }

    #[test]
    fn any_bytes_read_the_same_in_any_chunks(
        bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(b'\n'), Just(b'{'), Just(b'"')], 0..600),
        cuts in cut_points(),
    ) {
        let whole = TraceDocument::from_bytes(&bytes);
        assert_same(&read_in_chunks(&bytes, &cuts), &whole);
        let profile = read_profile(&bytes);
        let mut r = ProfileReader::new();
        for c in chunks(&bytes, &cuts) {
            r.push(c);
        }
        prop_assert_eq!(r.finish(), profile.clone());
        let _ = (profile.summary(), profile.requests(), profile.errors(), profile.memory_snapshots());
    }

    #[test]
    fn any_bytes_through_any_reader_never_panic_and_ignore_chunking(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        bom in any::<bool>(),
        prefix in prop::sample::select(vec![&b""[..], b"{\"kind\":\"meta\"}\n", b"{\"schema_version\":1,\"event_kind\":\"instant\"}\n", b"["]),
        cuts in cut_points(),
    ) {
        let mut file = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        file.extend_from_slice(prefix);
        file.extend_from_slice(&bytes);
        let mut whole = AnyReader::new();
        whole.push(&file);
        let whole = whole.finish();
        let mut streamed = AnyReader::new();
        for c in chunks(&file, &cuts) {
            streamed.push(c);
        }
        let streamed = streamed.finish();
        prop_assert_eq!(streamed.format(), whole.format());
        prop_assert_eq!(streamed.diagnostics(), whole.diagnostics());
        prop_assert!(!whole.diagnostics().is_empty() || whole.format().is_some());
    }
}

/// Up to 8 cut positions (taken modulo the length + 1), biased towards the first bytes where
/// format detection and a byte-order mark live.
fn cut_points() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![0usize..8, any::<usize>()], 0..8)
}

/// `bytes` cut at the given positions (modulo the length + 1, sorted).
fn chunks<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut start = 0;
    for c in at {
        out.push(&bytes[start..c]);
        start = c;
    }
    out.push(&bytes[start..]);
    out
}

fn read_in_chunks(bytes: &[u8], cuts: &[usize]) -> TraceDocument {
    let mut r = TraceReader::new();
    for c in chunks(bytes, cuts) {
        r.push(c);
    }
    r.finish()
}

fn assert_same(a: &TraceDocument, b: &TraceDocument) {
    assert_eq!(a.diagnostics, b.diagnostics);
    assert_eq!(a.summary(), b.summary());
    assert_eq!(a.meta, b.meta);
    assert_eq!(a.spans, b.spans);
    assert_eq!(a.ops, b.ops);
    assert_eq!(a.tensors, b.tensors);
    assert_eq!(a.memory, b.memory);
    assert_eq!(a.device_memory, b.device_memory);
    assert_eq!(a.gradients, b.gradients);
    assert_eq!(a.edges, b.edges);
    assert_eq!(a.capture_sources, b.capture_sources);
    assert_eq!(a.tree, b.tree);
    assert_eq!(a.memory_profile, b.memory_profile);
}
