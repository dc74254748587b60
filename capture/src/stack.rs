//! The per-thread parent stacks: every thread keeps, per recorder, a stack of the spans open on
//! it. A new span's parent is the top of the calling thread's stack, so spans opened on any
//! thread nest correctly without locks. A child span inherits the `step` of its parent when it
//! has none of its own, so an op inside `recorder.pass(Pass::Backward)` belongs to the backward
//! step. The allocator hook is told the top span at every push and pop.
//!
//! Beside each stack lives the thread's [`NameCache`] (passed on to the next recorder's stack,
//! as the name table is the process's), so interning a span's name costs no second
//! thread-local lookup, and the block of span numbers the thread hands
//! out: it takes [`ID_BLOCK`] numbers at a time from the recorder's counter, so opening a span
//! costs no atomic read-modify-write (a locked instruction, which waits for every store before
//! it to reach the cache, among them the ring writes of the spans before). Numbers stay unique
//! across threads; one thread's spans are numbered in the order they open, and a
//! single-threaded trace numbers them 1, 2, 3 ... as one counter would. A stack stays when it
//! empties (its allocation and cache are reused by the next outermost span); the empty stacks
//! of other recorders go when a thread first records for a new one, so a thread outliving many
//! recorders keeps few.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_trace_schema::format::events::Pass;

use crate::intern::{Label, NameCache, NameId, NameTable};

/// One open span on a thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) id: u64,
    pub(crate) pass: Option<Pass>,
}

/// How many span numbers a thread takes from its recorder's counter at once.
pub(crate) const ID_BLOCK: u64 = 1024;

struct Stack {
    recorder: u64,
    frames: Vec<Frame>,
    names: Box<NameCache>,
    /// The span numbers this thread has taken and not used yet.
    ids: Range<u64>,
}

impl Stack {
    /// The next span number, taking a new block from `counter` when the thread's is used up.
    #[inline]
    fn next_id(&mut self, counter: &AtomicU64) -> u64 {
        if let Some(id) = self.ids.next() {
            return id;
        }
        let first = counter.fetch_add(ID_BLOCK, Ordering::Relaxed);
        self.ids = first + 1..first + ID_BLOCK;
        first
    }
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
            // The name cache of a dropped stack is kept: its answers come from the process's
            // name table, which the new recorder shares.
            let mut names = None;
            let mut k = 0;
            while k < stacks.len() {
                if stacks[k].frames.is_empty() {
                    names.get_or_insert(stacks.swap_remove(k).names);
                } else {
                    k += 1;
                }
            }
            stacks.push(Stack {
                recorder,
                frames: Vec::with_capacity(16),
                names: names.unwrap_or_else(|| Box::new(NameCache::new())),
                ids: 0..0,
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
    /// The span label's id in `names`, when its name is a `&'static str` (owned names are not
    /// interned).
    pub(crate) name: Option<NameId>,
}

/// Open a span on this thread's stack for `recorder`: number it (from the thread's block of
/// `counter`, see the module docs), push it and intern its name in `names` (when it is a
/// `&'static str`; owned names are not interned).
///
/// Never panics: during thread teardown (the thread-local is gone) the span is numbered
/// straight from `counter`, gets no parent, is not tracked, and its name is not interned.
pub(crate) fn push(
    recorder: u64,
    counter: &AtomicU64,
    pass: Option<Pass>,
    name: Option<Label>,
    names: &NameTable,
) -> Pushed {
    let pushed = STACKS
        .try_with(|stacks| {
            let mut stacks = stacks.try_borrow_mut().ok()?;
            let stack = stack_of(&mut stacks, recorder);
            let id = stack.next_id(counter);
            let parent = stack.frames.last().copied();
            let frame = Frame {
                id,
                pass: pass.or(parent.and_then(|p| p.pass)),
            };
            stack.frames.push(frame);
            Some(Pushed {
                parent,
                frame,
                name: name.and_then(|name| stack.names.label_id(name, names)),
            })
        })
        .ok()
        .flatten()
        .unwrap_or_else(|| Pushed {
            parent: None,
            frame: Frame {
                id: counter.fetch_add(ID_BLOCK, Ordering::Relaxed),
                pass,
            },
            name: None,
        });
    crate::alloc::set_current_span(recorder, pushed.frame.id, pushed.frame.pass);
    pushed
}

/// The id of `name` in `names`, through this thread's cache for `recorder`; `None` during
/// thread teardown or once the table is full.
pub(crate) fn intern(recorder: u64, name: &'static str, names: &NameTable) -> Option<NameId> {
    STACKS
        .try_with(|stacks| {
            let mut stacks = stacks.try_borrow_mut().ok()?;
            stack_of(&mut stacks, recorder)
                .names
                .label_id(Label::plain(name), names)
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
        crate::alloc::set_current_span(recorder, top.map_or(0, |f| f.id), top.and_then(|f| f.pass));
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

    /// Push a span named "x" for `recorder`, numbered from `counter`.
    fn push_plain(
        recorder: u64,
        counter: &AtomicU64,
        pass: Option<Pass>,
    ) -> (Option<Frame>, Frame) {
        let p = push(
            recorder,
            counter,
            pass,
            Some(Label::plain("x")),
            &NameTable::default(),
        );
        (p.parent, p.frame)
    }

    #[test]
    fn stacks_are_per_recorder_and_tolerate_out_of_order_pops() {
        let (c900, c901, c902) = (AtomicU64::new(1), AtomicU64::new(1), AtomicU64::new(1));
        let f = |id| Frame { id, pass: None };
        assert_eq!(push_plain(900, &c900, None), (None, f(1)));
        assert_eq!(push_plain(900, &c900, None), (Some(f(1)), f(2)));
        assert_eq!(push_plain(901, &c901, None), (None, f(1)));
        assert_eq!(top(900), Some(f(2)));
        pop(900, 1); // out of order
        assert_eq!(top(900), Some(f(2)));
        pop(900, 2);
        assert_eq!(top(900), None);
        assert_eq!(top(901), Some(f(1)));
        // A child inherits its parent's step unless it has its own.
        let backward = Some(Pass::Backward);
        assert_eq!(
            push_plain(901, &c901, backward).1,
            Frame {
                id: 2,
                pass: backward
            }
        );
        assert_eq!(
            push_plain(901, &c901, None).1,
            Frame {
                id: 3,
                pass: backward
            }
        );
        assert_eq!(
            push_plain(901, &c901, Some(Pass::Optimizer)).1.pass,
            Some(Pass::Optimizer)
        );
        for id in [4, 3, 2, 1] {
            pop(901, id);
        }
        pop(901, 1); // twice: ignored
        assert_eq!(top(901), None);
        // Emptied stacks stay for their next outermost span; a new recorder's first span
        // drops them.
        STACKS.with(|s| assert_eq!(s.borrow().len(), 2));
        push_plain(902, &c902, None);
        STACKS.with(|s| {
            let s = s.borrow();
            assert_eq!(s.len(), 1);
            assert_eq!(s[0].recorder, 902);
        });
        pop(902, 1);
    }

    #[test]
    fn threads_number_spans_from_blocks_of_one_counter() {
        let counter = AtomicU64::new(1);
        let open = |n: u64| -> Vec<u64> {
            (0..n)
                .map(|_| {
                    let id = push_plain(904, &counter, None).1.id;
                    pop(904, id);
                    id
                })
                .collect()
        };
        // This thread takes 1..=1024; another thread then takes 1025..=2048 and uses two.
        assert_eq!(open(2), [1, 2]);
        let other = std::thread::scope(|s| s.spawn(|| open(2)).join().unwrap());
        assert_eq!(other, [1025, 1026]);
        assert_eq!(counter.load(Ordering::Relaxed), 2049);
        // This thread goes on in its block, then takes the next free one when it runs out.
        let mine = open(ID_BLOCK);
        assert_eq!(mine[..2], [3, 4]);
        assert_eq!(mine[ID_BLOCK as usize - 3], 1024);
        assert_eq!(mine[ID_BLOCK as usize - 2..], [2049, 2050]);
        assert_eq!(counter.load(Ordering::Relaxed), 2049 + ID_BLOCK);
    }

    #[test]
    fn pushing_interns_static_names_only() {
        let names = NameTable::default();
        let counter = AtomicU64::new(1);
        let a = push(903, &counter, None, Some(Label::plain("attn")), &names).name;
        let b = push(903, &counter, None, None, &names).name;
        let c = push(903, &counter, None, Some(Label::plain("attn")), &names).name;
        assert!(a.is_some());
        assert_eq!((b, c), (None, a));
        assert_eq!(intern(903, "attn", &names), a);
        for id in [3, 2, 1] {
            pop(903, id);
        }
    }

    #[test]
    fn a_new_recorder_keeps_the_threads_name_cache() {
        let names = NameTable::default();
        let counter = AtomicU64::new(1);
        let label = Some(Label::plain("layer"));
        let first = push(905, &counter, None, label, &names);
        pop(905, first.frame.id);
        assert_eq!(names.asked(), 1);
        // The next recorder's first span on this thread finds the name in the cache.
        let second = push(906, &counter, None, label, &names);
        pop(906, second.frame.id);
        assert_eq!(second.name, first.name);
        assert_eq!(names.asked(), 1);
    }
}
