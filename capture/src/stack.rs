//! The per-thread parent stacks: every thread keeps, per recorder, a stack of the spans open on
//! it. A new span's parent is the top of the calling thread's stack, so spans opened on any
//! thread nest correctly without locks. A child span inherits the `step` of its parent when it
//! has none of its own, so an op inside `recorder.step(Step::Backward)` belongs to the backward
//! step. The allocator hook is told the top span at every push and pop.
//!
//! Beside each stack lives the thread's [`NameCache`] for that recorder, so interning a span's
//! name costs no second thread-local lookup. A stack stays when it empties (its allocation and
//! cache are reused by the next outermost span); the empty stacks of other recorders go when a
//! thread first records for a new one, so a thread outliving many recorders keeps few.

use std::cell::RefCell;

use candle_trace_schema::format::events::Step;

use crate::intern::{NameCache, NameId, NameTable};

/// One open span on a thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) id: u64,
    pub(crate) step: Option<Step>,
}

struct Stack {
    recorder: u64,
    frames: Vec<Frame>,
    names: Box<NameCache>,
}

thread_local! {
    /// Open spans of this thread, one stack per recorder (usually one).
    static STACKS: RefCell<Vec<Stack>> = const { RefCell::new(Vec::new()) };
}

/// This thread's stack for `recorder`, made when there is none (dropping the empty stacks of
/// other recorders first).
fn stack_of(stacks: &mut Vec<Stack>, recorder: u64) -> &mut Stack {
    let at = match stacks.iter().position(|s| s.recorder == recorder) {
        Some(at) => at,
        None => {
            stacks.retain(|s| !s.frames.is_empty());
            stacks.push(Stack {
                recorder,
                frames: Vec::with_capacity(16),
                names: Box::new(NameCache::new()),
            });
            stacks.len() - 1
        }
    };
    &mut stacks[at]
}

/// What [`push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pushed {
    /// The frame below the new one: the span's parent.
    pub(crate) parent: Option<Frame>,
    /// The frame pushed, whose `step` is the one asked for or else the parent's.
    pub(crate) frame: Frame,
    /// The span name's id in `names`, when it is a `&'static str` (owned names are not
    /// interned).
    pub(crate) name: Option<NameId>,
}

/// Push span `id` on this thread's stack for `recorder` and intern its name in `names` (when
/// it is a `&'static str`; owned names are not interned).
///
/// Never panics: during thread teardown (the thread-local is gone) the span simply gets no
/// parent, is not tracked, and its name is not interned.
pub(crate) fn push(
    recorder: u64,
    id: u64,
    step: Option<Step>,
    name: Option<&'static str>,
    names: &NameTable,
) -> Pushed {
    let mut pushed = Pushed {
        parent: None,
        frame: Frame { id, step },
        name: None,
    };
    let _ = STACKS.try_with(|stacks| {
        let Ok(mut stacks) = stacks.try_borrow_mut() else {
            return;
        };
        let stack = stack_of(&mut stacks, recorder);
        let parent = stack.frames.last().copied();
        pushed.frame.step = step.or(parent.and_then(|p| p.step));
        pushed.parent = parent;
        stack.frames.push(pushed.frame);
        if let Some(name) = name {
            pushed.name = stack.names.id_of(name, names);
        }
    });
    crate::alloc::set_current_span(recorder, id, pushed.frame.step);
    pushed
}

/// The id of `name` in `names`, through this thread's cache for `recorder`; `None` during
/// thread teardown or once the table is full.
pub(crate) fn intern(recorder: u64, name: &'static str, names: &NameTable) -> Option<NameId> {
    STACKS
        .try_with(|stacks| {
            let mut stacks = stacks.try_borrow_mut().ok()?;
            stack_of(&mut stacks, recorder).names.id_of(name, names)
        })
        .ok()
        .flatten()
}

/// Remove span `id` from this thread's stack for `recorder` (normally the top; guards dropped
/// out of order are found further down).
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

    fn push_plain(recorder: u64, id: u64, step: Option<Step>) -> (Option<Frame>, Frame) {
        let p = push(recorder, id, step, Some("x"), &NameTable::default());
        (p.parent, p.frame)
    }

    #[test]
    fn stacks_are_per_recorder_and_tolerate_out_of_order_pops() {
        let push = push_plain;
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
        // Emptied stacks stay for their next outermost span; a new recorder's first span
        // drops them.
        STACKS.with(|s| assert_eq!(s.borrow().len(), 2));
        push(902, 7, None);
        STACKS.with(|s| {
            let s = s.borrow();
            assert_eq!(s.len(), 1);
            assert_eq!(s[0].recorder, 902);
        });
        pop(902, 7);
    }

    #[test]
    fn pushing_interns_static_names_only() {
        let names = NameTable::default();
        let a = push(903, 1, None, Some("attn"), &names).name;
        let b = push(903, 2, None, None, &names).name;
        let c = push(903, 3, None, Some("attn"), &names).name;
        assert!(a.is_some());
        assert_eq!((b, c), (None, a));
        assert_eq!(intern(903, "attn", &names), a);
        for id in [3, 2, 1] {
            pop(903, id);
        }
    }
}
