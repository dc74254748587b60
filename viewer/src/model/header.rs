//! The run header: what was captured, from the trace's `meta`.

use candle_trace_schema::format::events::{Meta, Phase, TimingMode};

/// The run header's facts, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHeader {
    /// Entry point (`train::step`).
    pub entrypoint: String,
    /// (label, value) pairs in display order.
    pub facts: Vec<(&'static str, String)>,
    /// Tags, sorted by key.
    pub tags: Vec<(String, String)>,
}

impl RunHeader {
    /// The header of a trace with this `meta`.
    pub fn of(meta: &Meta) -> Self {
        let phase = match meta.phase {
            Phase::Train => "train",
            Phase::Infer => "infer",
        };
        let timing = match meta.timing_mode {
            TimingMode::Host => "host",
            TimingMode::DeviceSynchronized => "device_synchronized",
        };
        let synchronized = if meta.measured_region_device_synchronized {
            "yes"
        } else {
            "no"
        };
        let mut facts = vec![
            ("phase", phase.to_string()),
            ("device", meta.device.clone()),
            ("timing mode", timing.to_string()),
            ("measured region synchronized", synchronized.to_string()),
            ("capture step", meta.capture_step.to_string()),
            ("warm-up steps", meta.warmup_steps.to_string()),
            ("timestamp", meta.timestamp.clone()),
        ];
        if let Some(v) = &meta.candle_version {
            facts.push(("candle", v.clone()));
        }
        facts.push(("run id", meta.run_id.clone()));
        facts.push(("correlation id", meta.correlation_id.clone()));
        RunHeader {
            entrypoint: meta.entrypoint.clone(),
            facts,
            tags: meta
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_trace_schema::format::document::TraceDocument;

    #[test]
    fn golden_header() {
        let doc = TraceDocument::from_bytes(include_bytes!(
            "../../../tests/fixtures/train_step.trace6.jsonl"
        ));
        let h = RunHeader::of(&doc.meta.as_ref().unwrap().event);
        assert_eq!(h.entrypoint, "train::step");
        let fact = |l: &str| {
            h.facts
                .iter()
                .find(|(k, _)| *k == l)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(fact("phase"), Some("train"));
        assert_eq!(fact("timing mode"), Some("host"));
        assert_eq!(fact("measured region synchronized"), Some("no"));
        assert_eq!(fact("capture step"), Some("3"));
        assert_eq!(fact("warm-up steps"), Some("2"));
        assert_eq!(fact("candle"), Some("0.8.0"));
        assert_eq!(h.tags[0], ("batch_size".to_string(), "8".to_string()));
    }
}
