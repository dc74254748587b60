//! Property tests: any event the writer can emit reads back equal, and any bytes read give
//! diagnostics, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is the report

use std::collections::BTreeMap;

use candle_trace_schema::document::TraceReader;
use candle_trace_schema::events::*;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, including quotes, backslashes and control characters that JSON must escape.
    prop_oneof![".{0,12}", "[a-z_./:0-9]{1,12}"]
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
        text(),
        prop::option::of(text()),
        text(),
        any::<u64>(),
        prop::sample::select(vec![SpanKind::Function, SpanKind::Op, SpanKind::Module]),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![
            Step::Forward,
            Step::Backward,
            Step::Optimizer,
        ])),
    )
        .prop_map(
            |(id, parent_id, name, start_ns, span_kind, measured, step)| {
                TraceEvent::SpanStart(SpanStart {
                    id,
                    parent_id,
                    name,
                    start_ns,
                    span_kind,
                    measured,
                    step,
                })
            },
        );
    let span_end = (text(), any::<u64>())
        .prop_map(|(id, duration_ns)| TraceEvent::SpanEnd(SpanEnd { id, duration_ns }));
    let op = (
        (
            text(),
            text(),
            prop::collection::vec(text(), 0..3),
            prop::option::of(text()),
            shape(),
        ),
        (
            text(),
            text(),
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
        text(),
        text(),
        shape(),
        text(),
        text(),
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
            text(),
            text(),
            prop::option::of(text()),
            text(),
        ),
        (any::<u64>(), any::<bool>(), shape(), text(), category()),
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
            })
        });
    let edge = (text(), text(), any::<u64>()).prop_map(|(from_span, to_span, duration_ns)| {
        TraceEvent::Edge(Edge {
            from_span,
            to_span,
            duration_ns,
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
        edge
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
}
