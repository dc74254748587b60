//! The per-thread parent stacks: every thread keeps, per recorder, a stack of the spans open on
//! it. A new span's parent is the top of the calling thread's stack, so spans opened on any
//! thread nest correctly without locks. A child span inherits the `step` of its parent when it
//! has none of its own, so an op inside `recorder.step(Step::Backward)` belongs to the backward
//! step. The allocator hook is told the top span at every push and pop.

use std::cell::RefCell;

use candle_trace_schema::format::events::Step;

/// One open span on a thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) id: u64,
    pub(crate) step: Option<Step>,
}

struct Stack {
    recorder: u64,
    frames: Vec<Frame>,
}

thread_local! {
    /// Open spans of this thread, one stack per recorder (usually one).
    static STACKS: RefCell<Vec<Stack>> = const { RefCell::new(Vec::new()) };
}

/// Push span `id` on this thread's stack for `recorder`; returns the frame below it (the
/// parent) and the frame pushed, whose `step` is `step` or else the parent's.
///
/// Never panics: during thread teardown (the thread-local is gone) the span simply gets no
/// parent and is not tracked.
pub(crate) fn push(recorder: u64, id: u64, step: Option<Step>) -> (Option<Frame>, Frame) {
    let mut frame = Frame { id, step };
    let parent = STACKS
        .try_with(|stacks| {
            let mut stacks = stacks.try_borrow_mut().ok()?;
            if let Some(stack) = stacks.iter_mut().find(|s| s.recorder == recorder) {
                let parent = stack.frames.last().copied();
                frame.step = step.or(parent.and_then(|p| p.step));
                stack.frames.push(frame);
                parent
            } else {
                let mut frames = Vec::with_capacity(16);
                frames.push(frame);
                stacks.push(Stack { recorder, frames });
                None
            }
        })
        .ok()
        .flatten();
    crate::alloc::set_current_span(recorder, id, frame.step);
    (parent, frame)
}

/// Remove span `id` from this thread's stack for `recorder` (normally the top; guards dropped
/// out of order are found further down). Empty stacks are removed.
pub(crate) fn pop(recorder: u64, id: u64) {
    let _ = STACKS.try_with(|stacks| {
        let Ok(mut stacks) = stacks.try_borrow_mut() else {
            return;
        };
        let Some(at) = stacks.iter().position(|s| s.recorder == recorder) else {
            return;
        };
        let frames = &mut stacks[at].frames;
        if frames.last().map(|f| f.id) == Some(id) {
            frames.pop();
        } else if let Some(i) = frames.iter().rposition(|f| f.id == id) {
            frames.remove(i);
        }
        let top = frames.last().copied();
        if frames.is_empty() {
            stacks.swap_remove(at);
        }
        crate::alloc::set_current_span(recorder, top.map_or(0, |f| f.id), top.and_then(|f| f.step));
    });
}

/// The innermost open span on this thread for `recorder`.
pub(crate) fn top(recorder: u64) -> Option<Frame> {
    STACKS
        .try_with(|stacks| {
            let stacks = stacks.try_borrow().ok()?;
            stacks
                .iter()
                .find(|s| s.recorder == recorder)
                .and_then(|s| s.frames.last().copied())
        })
        .ok()
        .flatten()
}

/// The trace/6 id of span number `n`.
pub(crate) fn span_id(n: u64) -> String {
    format!("s{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_per_recorder_and_tolerate_out_of_order_pops() {
        let f = |id| Frame { id, step: None };
        assert_eq!(push(900, 1, None), (None, f(1)));
        assert_eq!(push(900, 2, None), (Some(f(1)), f(2)));
        assert_eq!(push(901, 3, None), (None, f(3)));
        assert_eq!(top(900), Some(f(2)));
        pop(900, 1); // out of order
        assert_eq!(top(900), Some(f(2)));
        pop(900, 2);
        assert_eq!(top(900), None);
        assert_eq!(top(901), Some(f(3)));
        // A child inherits its parent's step unless it has its own.
        let backward = Some(Step::Backward);
        push(901, 4, backward);
        assert_eq!(push(901, 5, None).1.step, backward);
        assert_eq!(
            push(901, 6, Some(Step::Optimizer)).1.step,
            Some(Step::Optimizer)
        );
        for id in [6, 5, 4, 3] {
            pop(901, id);
        }
        pop(901, 3); // twice: ignored
        assert_eq!(top(901), None);
        STACKS.with(|s| assert!(s.borrow().is_empty()));
    }
}
