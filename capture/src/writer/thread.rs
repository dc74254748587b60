//! The writer thread's loop: drain the rings while items flow, sleep when idle, hold during a
//! measured region, flush on time and on request, keep the first I/O error.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::{output::Output, output::State, rings::Rings, rings::Shared};
use super::{
    Encode, Framing, Msg, ThreadEnd, FLUSH_INTERVAL, HELD_POLL_INTERVAL, HELD_RECENTLY, IDLE_POLLS,
    NAP, POLL_INTERVAL,
};

/// Ask Linux to schedule this thread as a batch job (`SCHED_BATCH`): its wake-ups do not
/// preempt the thread running on the core, so a serving or training thread (or one of candle's
/// rayon workers, which sleep between parallel ops and are woken for each) is not switched out
/// every time the writer wakes; it keeps a nice-0 share of the CPU, so it never starves. A
/// refusal (or musl, whose `sched_setscheduler` sets no thread's policy) leaves the policy as
/// it was.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn as_batch_job() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid `sched_param` (`SCHED_BATCH`
    // takes priority 0) that outlives the call, which only reads it.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

#[cfg(not(target_os = "linux"))]
fn as_batch_job() {}

/// How long the thread waits before its next poll while items flow: [`HELD_POLL_INTERVAL`]
/// while the writer is held or was within [`HELD_RECENTLY`] (`held_at`, when a poll last saw
/// it held, updated here), else [`POLL_INTERVAL`], having said so in `polling_slowly` so that
/// a hold beginning meanwhile wakes the thread ([`Writer::hold`](super::Writer::hold)).
pub(super) fn poll_interval<T>(
    shared: &Shared<T>,
    held_at: &mut Option<Instant>,
    now: Instant,
) -> Duration {
    let held_lately = |held_at: &mut Option<Instant>| {
        if shared.held.load(Ordering::SeqCst) {
            *held_at = Some(now);
        }
        held_at.is_some_and(|t| now.saturating_duration_since(t) < HELD_RECENTLY)
    };
    if !held_lately(held_at) {
        shared.polling_slowly.store(true, Ordering::SeqCst);
        // A hold stored before the flag above did not see it: look once more.
        if !held_lately(held_at) {
            return POLL_INTERVAL;
        }
    }
    shared.polling_slowly.store(false, Ordering::SeqCst);
    HELD_POLL_INTERVAL
}

pub(super) fn run<T: Encode>(
    rx: Receiver<Msg>,
    outputs: Vec<Output>,
    framing: Framing,
    shared: &Shared<T>,
    mut encoder: T::State,
) -> ThreadEnd {
    as_batch_job();
    let counters = &shared.counters;
    let mut s = State::new(outputs, counters);
    if let Some(header) = framing.header {
        s.write_text(&header);
        // The header is on disk before any event: a reader can identify the file at once.
        s.flush();
    }
    let mut rings = Rings::new();
    // Acts on one control message; false on `Shutdown`.
    macro_rules! control {
        ($msg:expr) => {
            match $msg {
                Msg::Wake => true,
                Msg::Flush(ack) => {
                    rings.drain(shared, &mut s, &mut encoder);
                    s.flush();
                    let _ = ack.send(());
                    true
                }
                Msg::Shutdown => false,
            }
        };
    }
    // Polling while events flow: a producer never has a sleeping thread to wake (a futex call
    // costing more than the span itself). After `IDLE_POLLS` empty polls the thread says it is
    // sleeping, looks at the rings once more, and blocks on the control channel until a push
    // wakes it (or the next flush is due), so an idle recorder costs nothing.
    let mut idle_polls = 0u32;
    // When a poll last saw the writer held.
    let mut held_at: Option<Instant> = None;
    'run: loop {
        loop {
            match rx.try_recv() {
                Ok(msg) => {
                    if !control!(msg) {
                        break 'run;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break 'run,
            }
        }
        let received = rings.poll(shared, &mut s, &mut encoder);
        s.flush_if_due();
        if received > 0 {
            idle_polls = 0;
        } else {
            idle_polls += 1;
        }
        if idle_polls < IDLE_POLLS {
            // Waiting on the control channel rather than sleeping: a `flush` (or `finish`) is
            // answered at once, not at the end of the poll interval.
            let interval = poll_interval(shared, &mut held_at, Instant::now());
            match rx.recv_timeout(interval) {
                Ok(msg) => {
                    if !control!(msg) {
                        break 'run;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'run,
            }
            continue;
        }
        shared.sleeping.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        // A producer that pushed while the store above was on its way may not have seen it and
        // will not wake us. The first wait is therefore short: the drain after it takes such an
        // event. Any push after that sees `sleeping` (or finds it already cleared by a push that
        // sent `Wake`).
        let mut waits = 0u32;
        let msg = loop {
            if rings.poll(shared, &mut s, &mut encoder) > 0 {
                break None;
            }
            s.flush_if_due();
            let flush_due = s
                .dirty
                .then(|| FLUSH_INTERVAL.saturating_sub(s.last_flush.elapsed()));
            let wait = if waits == 0 {
                Some(flush_due.map_or(NAP, |due| due.min(NAP)))
            } else {
                flush_due
            };
            waits += 1;
            let Some(wait) = wait else {
                match rx.recv() {
                    Ok(msg) => break Some(msg),
                    Err(_) => break 'run,
                }
            };
            match rx.recv_timeout(wait) {
                Ok(msg) => break Some(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break 'run,
            }
        };
        shared.sleeping.store(false, Ordering::Relaxed);
        idle_polls = 0;
        if let Some(msg) = msg {
            if !control!(msg) {
                break;
            }
        }
    }
    // Everything pushed before `closed` was set (and possibly a little after) is written.
    rings.drain(shared, &mut s, &mut encoder);
    let closing = framing
        .closing
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(closing) = closing {
        s.write_text(&closing);
    }
    let dropped = counters.dropped.load(Ordering::Relaxed);
    let written = counters.written.load(Ordering::Relaxed);
    if let Some(trailer) = (framing.trailer)(dropped, written) {
        s.write_text(&trailer);
    }
    s.flush();
    ThreadEnd {
        outputs: s.outputs,
        error: s.error,
    }
}
