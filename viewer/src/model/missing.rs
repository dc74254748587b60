//! What a panel without data says instead of vanishing: what is missing, and how a program
//! captures it (the `candle-trace-capture` calls and the `capture_sources` name, as README.md
//! describes them). Where the file says the source was off, the panel says "not captured
//! (… off)" first (`model::capture`).

/// A panel that can have nothing to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    /// Training phases (steps in the measured region).
    Phases,
    /// Op efficiency (op rows).
    Ops,
    /// Memory over time (memory events).
    Memory,
    /// Gradient health (gradient events).
    Gradients,
}

impl Panel {
    /// `phases`, `ops`, `memory` or `gradients` (the note's `data-what`).
    pub fn as_str(self) -> &'static str {
        match self {
            Panel::Phases => "phases",
            Panel::Ops => "ops",
            Panel::Memory => "memory",
            Panel::Gradients => "gradients",
        }
    }

    /// What the file lacks.
    pub fn missing(self) -> &'static str {
        match self {
            Panel::Phases => {
                "No training phases: the file has no measured region (no span marked measured)."
            }
            Panel::Ops => "No op rows in this file.",
            Panel::Memory => "No memory events in this file.",
            Panel::Gradients => "No gradient events in this file.",
        }
    }

    /// How to capture it.
    pub fn how(self) -> &'static str {
        match self {
            Panel::Phases => "Mark the region with recorder.measured(\"step\") and its phases with recorder.forward(…), recorder.backward(…) and recorder.optimizer_step(…), or wrap your own code in recorder.pass(Pass::Forward) (Backward, Optimizer).",
            Panel::Ops => "Op rows come from candle's traced leaf layers (source layer_ops): install the recorder (Recorder::builder(…).install()) before the model is built.",
            Panel::Memory => "Host allocations of the captured step are recorded with TrackingAllocator as the global allocator (source allocator); recorder.forward/backward/optimizer_step add device checkpoints (source device_memory).",
            Panel::Gradients => "recorder.optimizer_step(&mut optimizer, &grads, &varmap) records one gradient event per VarMap variable (source gradients).",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_panel_names_what_is_missing_and_the_capture_call() {
        for (p, call) in [
            (Panel::Phases, "recorder.forward"),
            (Panel::Ops, "install()"),
            (Panel::Memory, "TrackingAllocator"),
            (Panel::Gradients, "recorder.optimizer_step"),
        ] {
            assert!(p.missing().starts_with("No "), "{p:?}");
            assert!(p.how().contains(call), "{p:?}");
        }
        assert_eq!(Panel::Gradients.as_str(), "gradients");
    }
}
