// Interrupting a wait from the waiting thread itself: how Ctrl-C reaches a
// call that waits inside the engine (the Python package sets a check that
// runs Python's signal handlers).
//
// Thread safety: the check is the calling thread's own; other threads are
// unaffected.
#ifndef REPLAYDB_INTERRUPT_H_
#define REPLAYDB_INTERRUPT_H_

namespace replaydb {

// True: stop waiting.
using InterruptCheck = bool (*)(void* arg);

// Sets the calling thread's check (nullptr clears it). While a call of this
// thread waits (for the rate limiter to allow an insert or a sample, or for
// hot-tier blocks), it calls `check(arg)` every 100 ms; when that returns
// true, the call stops waiting and returns Cancelled, "interrupted" and
// what it waited for in the message. What it did before waiting stays done:
// a VectorWriter::Append keeps the step of the environments appended before
// the wait, as after any one environment's error.
void SetThreadInterruptCheck(InterruptCheck check, void* arg);

}  // namespace replaydb

#endif  // REPLAYDB_INTERRUPT_H_
