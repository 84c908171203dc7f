/*
 * FutoIn AsyncSteps: the universal binary interface (FTN12 v1.14, section 2.7).
 *
 * The structures below are those of the specification, in its order. The
 * implementation in github.com/asyncsteps/asyncsteps/cabi adds a few
 * functions at the end of this file: futoin_asyncsteps_new and the
 * constructors of its synchronization primitives.
 *
 * Valid C99 and later (with <uchar.h>) and C++11 and later, clean under
 * -pedantic: the spec's anonymous structs and unions are marked
 * FUTOIN_EXTENSION (GCC and Clang's __extension__), so that members read
 * as in the spec: v->i32, args->arg0, bsi->api->add.
 *
 * Include this header, not the libfutoin_asyncsteps.h that cgo writes beside
 * the shared library: that one only lists the exported functions.
 *
 * The rules of this implementation where the spec is silent are given with
 * each function below; in short:
 *   - The receiver owns what it is given. success() takes the values of the
 *     FutoInArgs over (copies strings and arrays at once, resets the slots);
 *     a step may take over any value it receives, casting away the const
 *     of its args (the slots are the library's, writable): either copy the
 *     value out and set the slot's type to NULL without a cleanup (the
 *     copy is the step's: futoin_reset_binval() it once done, from any
 *     thread), or use it and futoin_reset_binval() the slot (its cleanup
 *     runs then). Never copy it out and futoin_reset_binval() the slot:
 *     that cleanup frees what the copy points to. What is still in the
 *     slots when the step completes is cleaned up by the library, exactly
 *     once.
 *   - A FutoInAsyncSteps* given to a callback is valid until that step
 *     completes, also while it waits for an external event; calls on a stale
 *     pointer are ignored (those that answer return 0 or NULL;
 *     sched_immediate and sched_deferred an invalid handle), but for
 *     sched_cancel and sched_is_valid, which read their handle only. The
 *     step keeps its pointer and stack memory for its sub-steps. Only a step's own callback adds sub-steps to it, makes
 *     it wait or completes it while it runs: a call that does (add,
 *     parallel, loop, repeat, addSync, setTimeout, setCancel, waitExternal,
 *     success, handle_error, breakLoop, continueLoop) through the pointer
 *     of a step that waits for its sub-steps, from the callback of one of
 *     them (or of a step under them), fails that sub-step with
 *     InternalError once its callback returns (which it should at once),
 *     and from elsewhere has no effect; one that adds sub-steps or makes it
 *     wait, on a step that waits for an external completion, from anywhere
 *     once its callback has returned (another thread, a sched_* callback,
 *     another step's callback such as a sibling parallel branch's: the call
 *     is posted), fails the step with InternalError, as a handle_error from
 *     there would (breakLoop and continueLoop there end or continue its
 *     loop). The info names the call as Go does ("Add called on ...").
 *     The pointer of a Go step given to C (cabi.Binary) is valid likewise,
 *     however Go ends the step (success or error from another thread, a
 *     timeout, a cancel, a closed loop): the library releases it once the
 *     step is over, at the latest as the step's flow ends (see cabi.Binary
 *     for a Go decorator without Unwrap).
 *     A root is valid until free(). The struct behind a stale or freed
 *     pointer is reused only once 1024 later pointers (of steps,
 *     parallels or roots) have been released, and for a step that
 *     waited, a minute after its release at the earliest: a pointer kept
 *     longer may name another step, which C gives no way to detect.
 *   - Every callback runs on the loop's thread. success, handle_error,
 *     cancel, execute, free and the sched_* functions may be called from any
 *     thread (they post to the loop and return without blocking; to wait
 *     for what free posts, see futoin_asyncsteps_free_wait), and so may
 *     isValid and is_same_thread (they read, and post nothing); the other
 *     functions only from the callback that was given the pointer (or, for a
 *     root, before it is executed or while it is idle); from another thread,
 *     add, parallel, loop, repeat and addSync have no effect on a running
 *     root and on a parallel made on it (the loop takes their steps): the
 *     first such call is recorded in the root, whose next execute fails at
 *     once with InternalError through its unhandled_error, before any step
 *     runs (the info names the call), or, if the root is freed first, is
 *     logged; they have no effect either on the pointer of a parallel made
 *     in a step, where success and handle_error fail that step with
 *     InternalError while the step's callback runs (the engine's rule for
 *     a call from another goroutine on a step that does not wait), and
 *     have no effect once it has returned. setTimeout, setCancel,
 *     waitExternal, success, handle_error, breakLoop and continueLoop act
 *     on a step: made on a root or on a parallel made on one, from any
 *     thread, idle or running, they
 *     are recorded in the root the same way ("setTimeout called on a root:
 *     it has no step to time", "... called on a parallel made on a root:
 *     ..."), and a cancel handler given is never called (what its data
 *     holds stays the caller's to free); on the pointer of a parallel made
 *     in a step, in the step's callback, they fail the step with
 *     InternalError. On the pointer of a Go root given by cabi.Binary, or
 *     of a parallel made on it, these calls and the adds above are
 *     recorded in the Go root itself, whose next execution, Go's or C's,
 *     fails with it; free does not log it.
 *   - Strings given to the library (codes, infos, labels, names) are copied:
 *     the caller may free them when the call returns.
 *
 * Published spec: https://specs.futoin.org/final/preview/ftn12_async_api.html
 */
#ifndef FUTOIN_ASYNCSTEPS_H
#define FUTOIN_ASYNCSTEPS_H

#if defined(__GNUC__) || defined(__clang__)
#define FUTOIN_EXTENSION __extension__
#else
#define FUTOIN_EXTENSION
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#else
#include <uchar.h>
#endif

/* 2.7.1. Binary data */

typedef struct FutoInBinaryValue_ FutoInBinaryValue;
typedef struct FutoInType_ FutoInType;
typedef uint8_t FutoInTypeFlags;

enum
{
    FTN_TYPE_CUSTOM_OBJECT = 0x01,
    FTN_TYPE_STRING = 0x02,
    FTN_TYPE_STRING16 = 0x03,
    FTN_TYPE_STRING32 = 0x04,
    FTN_TYPE_BOOL = 0x05,
    FTN_TYPE_INT8 = 0x06,
    FTN_TYPE_INT16 = 0x07,
    FTN_TYPE_INT32 = 0x08,
    FTN_TYPE_INT64 = 0x09,
    FTN_TYPE_UINT8 = 0x0A,
    FTN_TYPE_UINT16 = 0x0B,
    FTN_TYPE_UINT32 = 0x0C,
    FTN_TYPE_UINT64 = 0x0D,
    FTN_TYPE_FLOAT = 0x0E,
    FTN_TYPE_DOUBLE = 0x0F,
    FTN_BASE_TYPE_MASK = 0x0F,
    // --
    FTN_TYPE_ARRAY = 0x10,
    FTN_COMPLEX_TYPE_MASK = 0xF0
};
/* A Go int or uint crosses as FTN_TYPE_INT64 or FTN_TYPE_UINT64, and so
 * it comes back to Go after C: as an int64 or uint64. */

struct FutoInType_
{
    const FutoInTypeFlags flags;
    void (*const cleanup)(FutoInBinaryValue* v);
    // NOTE: extendable by implementation
};

struct FutoInBinaryValue_
{
    const FutoInType* type;
    FUTOIN_EXTENSION union
    {
        const void* p;
        const char* cstr;
        const char16_t* cstr16;
        const char32_t* cstr32;
        bool b;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float f;
        double d;
    };
    void* custom_data;
    uint32_t length;
};

/*
 * futoin_reset_binval calls the value's type cleanup (if any) and empties
 * the slot. A step that takes a received value over calls it on the slot
 * once it no longer needs the value, or moves the value out, zeroes the
 * slot's type (no cleanup: the value now lives in the copy) and calls it
 * on the copy later.
 * The spec writes this with C++ `auto`; this is the same in plain C.
 */
static inline void futoin_reset_binval(FutoInBinaryValue* v)
{
    const FutoInType* tp = v->type;
    if (tp) {
        void (*f)(FutoInBinaryValue*) = tp->cleanup;
        if (f) {
            f(v);
        }
    }

    v->type = 0;
    v->u64 = 0;
    v->custom_data = 0;
    v->length = 0;
}

/* 2.7.2. Binary AsyncSteps interface */

typedef struct FutoInAsyncStepsAPI_ FutoInAsyncStepsAPI;
typedef struct FutoInAsyncSteps_ FutoInAsyncSteps;
typedef struct FutoInSyncAPI_ FutoInSyncAPI;
typedef struct FutoInSync_ FutoInSync;
typedef struct FutoInArgs_ FutoInArgs;
typedef struct FutoInHandle_ FutoInHandle;

FUTOIN_EXTENSION struct FutoInArgs_
{
    FUTOIN_EXTENSION union
    {
        FUTOIN_EXTENSION struct
        {
            FutoInBinaryValue arg0;
            FutoInBinaryValue arg1;
            FutoInBinaryValue arg2;
            FutoInBinaryValue arg3;
        };
        FutoInBinaryValue args[4];
    };
};

struct FutoInHandle_
{
    void* data1;
    void* data2;
    ptrdiff_t data3;
};

/* A callback must not let a C++ exception escape: it cannot unwind through
 * the library, and the process terminates. Catch it in the callback and
 * call handle_error (in an error handler: handle_error on its bsi too, to
 * replace the error, or success to recover).
 * The code an error callback (an error handler, execute's unhandled_error)
 * is given is the library's copy, valid during the callback only: copy it
 * to keep it (stateVariable's "last_exception" gives one that lasts until
 * the next error or the end of the flow). */
typedef void (*FutoInAsyncSteps_execute_callback)(
        FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args);
typedef void (*FutoInAsyncSteps_error_callback)(
        FutoInAsyncSteps* bsi, void* data, const char* code);
typedef void (*FutoInAsyncSteps_cancel_callback)(
        FutoInAsyncSteps* bsi, void* data);

FUTOIN_EXTENSION struct FutoInAsyncStepsAPI_
{
    FUTOIN_EXTENSION union
    {
        FUTOIN_EXTENSION struct
        {
            /* Index 0. add: adds a step running f(bsi, data, args) and, if eh is
             * not NULL, its error handler eh(bsi, data, code). From the step's
             * own callback (sub-steps), or on an idle root. data is passed as
             * is: the caller keeps it alive until the step and its handler are
             * done. args is valid during f only (see success for ownership).
             * A NULL f fails the calling step with InternalError, "Add: nil
             * step function", once its callback returns. */
            void (*add)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    FutoInAsyncSteps_execute_callback f,
                    FutoInAsyncSteps_error_callback eh);
            /* Index 1. parallel: adds a step whose branches run concurrently;
             * each add (loop, repeat, addSync) on the returned pointer adds a
             * branch. The pointer is owned by the library (never freed by the
             * caller) and valid until the step that made it completes. Each
             * branch has its own rootId. eh as for add. NULL on a stale
             * pointer, and from another thread on a running root (the
             * adds of the other thread have no effect there, see above). */
            FutoInAsyncSteps* (*parallel)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    FutoInAsyncSteps_error_callback eh);
            /* Index 2. stateVariable: the flow's variable name (copied). With
             * allocate, every name is an ordinary variable: allocate(data) makes
             * it on first use, cleanup(data, value) runs once: when the root is
             * freed, for a root made by futoin_asyncsteps_new or newInstance.
             * In the flow of a Go root given to C (cabi.Binary), which stays
             * Go's and may run C steps again after its free, cleanup runs once
             * the Go state no longer holds the variable (the root collected,
             * or the variable replaced or unset by Go): only after a Go
             * garbage collection, on a Go runtime thread, on no loop and
             * possibly beside callbacks of the flow's loop. An allocate that
             * returns NULL makes a variable holding NULL: later calls return
             * NULL without calling allocate again, and cleanup(data, NULL)
             * still runs. A variable is the flow's that allocated it: in a
             * Go copy of the root (Root.Clone, CopyFrom), the same steps
             * find it missing and allocate one of the copy's own.
             * With allocate NULL: an existing variable, or NULL; and two
             * names are reserved: "error_info" returns the info of the last
             * error as const char* (valid until the next error or the end of
             * the flow), "last_exception" the code of the last error. This is
             * how an error handler reads the info:
             *     (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL)
             * From a callback of the flow, or on an idle root or a parallel
             * made on it; from another thread while the flow runs it returns
             * NULL. NULL also for a stale pointer or a NULL name, and for
             * "last_exception" before any error. */
            void* (*stateVariable)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    const char* name,
                    void* (*allocate)(void* data),
                    void (*cleanup)(void* data, void* value));
            /* Index 3. stack: data_size bytes of zeroed memory aligned like
             * max_align_t, for the life of the current step. cleanup(value)
             * (may be NULL) runs when the step completes in any way; when the
             * step fails, after its own error handler has returned. The memory
             * is freed by the library. From the step's own callback, or on an
             * idle root or a parallel made on it (the memory then lasts until
             * the root is freed); from another thread while the flow runs it
             * returns NULL. NULL also for a stale pointer, and when the
             * memory cannot be allocated. */
            void* (*stack)(
                    FutoInAsyncSteps* bsi,
                    size_t data_size,
                    void (*cleanup)(void* value));
            /* Index 4. success: completes the step with args (may be NULL: no
             * args). The values are taken over: strings and arrays of built-in
             * types are copied before it returns, each value's type cleanup is
             * called exactly once by the library, the caller's slots are reset;
             * a FTN_TYPE_CUSTOM_OBJECT is passed on as is to the next step,
             * and so is, as a custom object, a value whose type flags the
             * header does not define (0, 0x2F, an array of custom objects).
             * A string or array whose p is NULL is empty, whatever its
             * length says (a NULL item of an array of strings is an empty
             * string). A string or array whose length a Go int cannot
             * hold (past INT32_MAX where int has 32 bits) fails the step with
             * InternalError naming it; every value is still cleaned up.
             * The other way, a Go value longer than length (uint32_t)
             * holds fails the C step that would receive it, before it
             * runs, with InternalError naming it; so do more than 4 Go
             * values. FutoInArgs has no count: empty slots at its end are
             * no values, so a Go step after this one gets as many args as
             * the last slot that is not empty tells, and Go nils at the
             * end of a Go success do not reach a C step.
             * Not after adding sub-steps in the same callback (InternalError).
             * From any thread: from another one it posts to the loop. Of
             * two completions of a waiting step from outside its callback
             * (success, handle_error) that race, the one called first
             * applies, even when the other reaches the loop first. From
             * another thread, on a step that waits, it completes the step
             * as it is called: a timeout of the step that falls due before
             * the loop applies it does not fail the step, and a cancel
             * then runs no cancel handler of the step's. */
            void (*success)(FutoInAsyncSteps* bsi, FutoInArgs* args);
            /* Index 5. handle_error: fails the step with code and info (both
             * copied; info may be NULL; a NULL code is InternalError with
             * info "handle_error: NULL code", and an empty one InternalError
             * with info "Error: empty error code", followed by "; info: "
             * and the info given, if any). It RETURNS to the caller, which must
             * return from its callback at once, without further calls on bsi
             * (C has no exceptions). The step's own cancel handler (setCancel)
             * runs first, wherever handle_error comes from; then the step's
             * error handler, then the outer ones, see code; they read info through stateVariable
             * "error_info". After a cancel of the root requested before it
             * (see cancel), no error handler runs: the cancel handlers do,
             * and the flow ends cancelled. In a callback whose step already failed or
             * completed (a second handle_error, one after success, breakLoop
             * or continueLoop) it has no effect: the first code and info
             * stay. From any thread: from another one, on a step that waits,
             * it fails the step as it is called, as success completes it: a
             * timeout of the step that falls due before the loop applies it
             * does not replace its code, and a cancel then runs the step's
             * cancel handler. */
            void (*handle_error)(
                    FutoInAsyncSteps* bsi, const char* code, const char* info);
            /* Index 6. setTimeout: the step (with its sub-steps) fails with
             * Timeout unless it completes within timeout_ms; calling it again
             * re-arms it. The step waits for an external completion. A
             * success or handle_error from another thread called before the
             * timeout falls due wins over it, also if the loop applies it
             * later. From the step's own callback. */
            void (*setTimeout)(FutoInAsyncSteps* bsi, uint32_t timeout_ms);
            /* Index 7. setCancel: ch(bsi, data) runs once, on the loop, if the
             * step is cancelled (a timeout, an error of a parallel branch, a
             * cancel of the root) or fails (handle_error, breakLoop or
             * continueLoop on it, which run it before its error handler, as
             * the failing step's own cancel handler); never after success.
             * The step waits for an external completion.
             * (A root freed when its loop was closed before it cancelled the
             * flow: then it runs on another thread, see free.) From the step's
             * own callback. In ch the step is over: isValid(bsi) is 0, and
             * success, handle_error and the calls that add have no effect;
             * rootId, and on the loop stateVariable and stack, still answer
             * (stack memory taken there is cleaned up with the step's).
             * Called again, it replaces the handler (with its data): the
             * step has one, the one set last. A NULL ch removes it: the
             * step still waits, and nothing runs on its cancel. */
            void (*setCancel)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    FutoInAsyncSteps_cancel_callback ch);
            /* Index 8. waitExternal: the step does not complete when its
             * callback returns; success or handle_error (from any thread)
             * completes it later. From the step's own callback. */
            void (*waitExternal)(FutoInAsyncSteps* bsi);
            /* Index 9. loop: adds a step that runs f(bsi, data) until
             * breakLoop. label may be NULL ("" is the same); it is copied. A
             * body that calls success and then breakLoop in one callback ends
             * the loop with those args for the next step; otherwise loops give
             * the next step no args. From a callback or an idle root. A NULL
             * f fails the calling step as for add ("Loop: nil body
             * function"). */
            void (*loop)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    void (*f)(FutoInAsyncSteps* bsi, void* data),
                    const char* label);
            /* Index 10. repeat: as loop, f(bsi, data, i) for i from 0 to
             * count-1 ("Repeat: nil body function" for a NULL f). */
            void (*repeat)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    size_t count,
                    void (*f)(FutoInAsyncSteps* bsi, void* data, size_t i),
                    const char* label);
            /* Index 11. breakLoop: leaves the innermost loop, or the one with
             * label (NULL or "": innermost). Unwinds as the error LoopBreak:
             * like handle_error it returns, and the caller must return at once.
             * From a callback inside the loop; through the pointer of a body
             * that waits for an external completion, also from elsewhere. */
            void (*breakLoop)(FutoInAsyncSteps* bsi, const char* label);
            /* Index 12. continueLoop: as breakLoop, to the next iteration
             * (LoopCont). */
            void (*continueLoop)(FutoInAsyncSteps* bsi, const char* label);
            /* Index 13. execute: starts the root's flow; it only posts to the
             * loop, no callback runs before it returns. unhandled_error(root,
             * data, code) (may be NULL: the error is logged) is called once, on
             * the loop, when an error ends this execution; never for cancel.
             * In it, "error_info" and "last_exception" (see stateVariable)
             * tell of that error, also of one that no step raised: a flow
             * that its closed loop ends gets InternalError, "the flow's loop
             * is closed".
             * (A loop closed before the flow began runs nothing: then it is
             * called on another thread.) Nothing happens on a running root
             * or a freed one; on a step's pointer, see free. From any
             * thread: a free on another thread
             * that comes while execute starts the flow follows the start,
             * as a free after execute does (it cancels the flow). */
            void (*execute)(
                    FutoInAsyncSteps* bsi,
                    void* data,
                    FutoInAsyncSteps_error_callback unhandled_error);
            /* Index 14. cancel: cancels the root's running flow: the cancel
             * handlers of its running steps run on the loop, innermost first; no
             * error handler runs. It returns at once; the flow sees it before
             * its next step or as an error unwinds, and a cancel requested
             * before an error wins over it: no error handler runs from then
             * on, also for a handle_error that the callback which called
             * cancel makes after it. It acts on the execution running when it
             * is called: if that one ends first, it does nothing, and it never
             * cancels an execution started after it. From any thread. On a
             * step's pointer (see free). */
            void (*cancel)(FutoInAsyncSteps* bsi);
            /* Index 15. addSync: adds a step that enters sync (ours from
             * futoin_mutex_new and the like, or another implementation's): it
             * calls sync->api->lock(step, sync); once the lock is held (lock
             * returned without making the step wait, or the step was completed
             * by success) f runs with the incoming args, and unlock is called
             * once when f's step ends in any way: on the loop or, for a root
             * freed when its loop had been closed with the section held, on
             * the other thread where free releases the steps the loop left
             * (see free), after the cancel handlers of the steps inside.
             * eh and data as for add. A sync whose api, lock or unlock is
             * NULL fails the step with InternalError (eh sees it); f does
             * not run. A NULL sync or f fails the calling step as for add
             * ("Sync: nil Syncer", "Sync: nil step function"). */
            void (*addSync)(
                    FutoInAsyncSteps* bsi,
                    FutoInSync* sync,
                    void* data,
                    FutoInAsyncSteps_execute_callback f,
                    FutoInAsyncSteps_error_callback eh);
            /* Index 16. rootId: the same for every step of a flow; each
             * parallel branch has its own. A Go copy of a root (Root.Clone,
             * CopyFrom) has ids of its own, its branches' included. A Go
             * step given to C (cabi.Binary) and the steps added on it have
             * the rootId of the flow or branch the Go step runs in, also in a
             * branch made by Go (through a Go decorator whose branch cannot
             * be told, or given off the loop: one of its own). Never 0 (0
             * is the answer of a stale pointer). */
            ptrdiff_t (*rootId)(FutoInAsyncSteps* bsi);
            /* Index 17. isValid: 1 for a step until it completes; for a root,
             * 1 while it is idle and 0 while its flow runs; 0 for a stale
             * pointer. From any thread: it reads what the loop has settled,
             * so the answer may be stale by the time it returns; from
             * another thread, a step whose callback still runs is 1, also
             * once that callback has completed it. In a
             * callback that called handle_error, breakLoop or continueLoop
             * it still returns 1 until the callback returns: the step is
             * settled then (a completion after the error has no effect). */
            int (*isValid)(FutoInAsyncSteps* bsi);
            /* Index 18. newInstance: a new, empty root on the same loop, owned
             * by the caller (release it with free). NULL on a stale pointer. */
            FutoInAsyncSteps* (*newInstance)(FutoInAsyncSteps* bsi);
            /* Index 19. free: releases a root from futoin_asyncsteps_new or
             * newInstance: cancels its running flow, then cleans up its state
             * variables and stack memory, on the loop. The pointer is invalid
             * once free returns. From any thread; free roots before their loop
             * ends (the process exits). It returns at once; the cleanups run
             * later on the loop (futoin_asyncsteps_free_wait waits for them).
             * If the loop is closed before it runs them, they run on another
             * thread once it has stopped: first the cancel handlers and stack
             * memory cleanups of the steps it left waiting, innermost first,
             * with the unlock of each foreign FutoInSync whose section they
             * are in (see addSync). A free that comes while an execute on
             * another thread starts the flow is released once that execute
             * has started it, and cancels it: no step of the root runs after
             * the release. Called in a callback of the root's own flow (a
             * step that ends its request frees its root), it cancels the
             * flow at once, as cancel does there: no later step of it runs.
             * From another thread the cancel reaches the flow on the loop,
             * and steps of the flow may start until then: keep what they
             * use until futoin_asyncsteps_free_wait returns, or until the
             * cleanups of the root's state variables have run.
             * free, execute and cancel are a root's: called on a step's
             * pointer in the step's own callback (for a Go step given by
             * cabi.Binary, its Go callback), they fail the step with
             * InternalError, "free called on a step's pointer: it is for a
             * root's" (execute, cancel likewise); anywhere else on a pointer
             * that is not a root's (another thread, a sub-step's callback, a
             * parallel's) they do nothing. */
            void (*free)(FutoInAsyncSteps* bsi);
            /* Index 20. sched_immediate: runs cb(data) on the loop soon. From
             * any thread. With a NULL cb or a stale pointer, nothing runs
             * and the handle is not valid. The callback is the loop's, not
             * the step's or the root's: it runs also once the step that
             * scheduled it has completed or its root has been freed; cancel
             * it (sched_cancel) if data does not outlive them. */
            FutoInHandle (*sched_immediate)(
                    FutoInAsyncSteps* bsi, void* data, void (*cb)(void* data));
            /* Index 21. sched_deferred: runs cb(data) on the loop after
             * delay_ms. From any thread. NULL cb, stale pointer: as for
             * sched_immediate. */
            FutoInHandle (*sched_deferred)(
                    FutoInAsyncSteps* bsi,
                    uint32_t delay_ms,
                    void* data,
                    void (*cb)(void* data));
            /* Index 22. sched_cancel: cancels handle's callback; harmless once
             * it ran or was cancelled, and on a NULL handle. From any
             * thread. It reads the handle only: bsi may be any pointer of
             * the same library, not the one that scheduled the callback, or
             * one gone stale since (the step completed, the root freed), and
             * sched_is_valid likewise. */
            void (*sched_cancel)(FutoInAsyncSteps* bsi, FutoInHandle* handle);
            /* Index 23. sched_is_valid: 1 while handle's callback is still to
             * run; 0 once it ran or was cancelled, and for a NULL handle.
             * From any thread. */
            int (*sched_is_valid)(FutoInAsyncSteps* bsi, FutoInHandle* handle);
            /* Index 24. is_same_thread: 1 when called on the loop's OS thread
             * (in every callback), 0 elsewhere, and 0 for a stale pointer
             * wherever it is called. From any thread. */
            int (*is_same_thread)(FutoInAsyncSteps* bsi);
        };
        void* funcs[25];
    };
    // NOTE: extendable by implementation
};
struct FutoInAsyncSteps_
{
#ifdef __cplusplus
    FutoInAsyncSteps_(const FutoInAsyncStepsAPI* api) noexcept : api(api) {}
#endif
    const FutoInAsyncStepsAPI* const api;
    // NOTE: extendable by implementation
};

/* 2.7.3. Binary synchronization primitive's interface */

FUTOIN_EXTENSION struct FutoInSyncAPI_
{
    FUTOIN_EXTENSION union
    {
        FUTOIN_EXTENSION struct
        {
            /* Index 0. lock: called by addSync's step with that step's bsi.
             * It either returns with the lock held, or makes the step wait
             * (waitExternal) and completes it with success once held, or fails
             * it with handle_error (e.g. DefenseRejected for a full queue). A
             * success from another thread made before a cancel of the flow
             * reaches the loop counts as held: unlock follows. */
            void (*lock)(FutoInAsyncSteps* bsi, FutoInSync* sync);
            /* Index 1. unlock: called once when the critical section ends in
             * any way, with a bsi of the same rootId as lock's: on the loop,
             * or, for the section of a root freed after its loop was closed,
             * on another thread once the loop has stopped (see free). */
            void (*unlock)(FutoInAsyncSteps* bsi, FutoInSync* sync);
        };
        void* funcs[2];
    };
    // NOTE: extendable by implementation
};
struct FutoInSync_
{
#ifdef __cplusplus
    FutoInSync_() noexcept : api(nullptr) {}
#endif
    const FutoInSyncAPI* const api;
    // NOTE: extendable by implementation
};

/*
 * The library: libfutoin_asyncsteps (github.com/asyncsteps/asyncsteps/cabi/lib).
 */

/* futoin_asyncsteps_new returns a new, empty root on the library's default
 * event loop, owned by the caller: valid until bsi->api->free(bsi). From any
 * thread. */
FutoInAsyncSteps* futoin_asyncsteps_new(void);

/* futoin_asyncsteps_free_wait releases a root as bsi->api->free(bsi) does,
 * and returns once the loop has cancelled its flow and run the cleanups of
 * its state variables and stack memory, as the C++ reference
 * implementation's destructor does: the caller may then destroy what those
 * cleanups use, or exit. Where waiting could deadlock (in a callback of
 * any loop) it returns at once, as free does; and so it does for a root
 * never executed and with no state variable or stack memory (taken on the
 * idle root, or on a parallel made on it). A step that blocks its loop
 * until the caller does something deadlocks while it waits. If the loop
 * closes meanwhile, it returns and the cleanups run once the loop has
 * stopped. On a step's pointer, as free there: in that step's own callback
 * the step fails with InternalError, "futoin_asyncsteps_free_wait called on
 * a step's pointer: it is for a root's"; elsewhere, and on a parallel's
 * pointer, nothing happens. */
void futoin_asyncsteps_free_wait(FutoInAsyncSteps* bsi);

/* The lock and unlock functions of the library's syncs (below), for
 * steps of other implementations of the table and for C that calls them,
 * enter the sync on behalf of the caller's flow, which they tell by its
 * table and rootId: a flow that holds the sync enters again at once
 * (reentrant), and unlock gives back what that flow's lock took. Called
 * with a step of the library's own, in its callback, lock holds as that
 * step's flow or parallel branch, the holder its addSync enters as: the
 * two nest in either order within a flow or branch, and still exclude
 * other branches. Such a lock is held until its unlock or until the
 * execution of the step's flow ends, by any path (its last step, an
 * error, a timeout, a cancel, a closed loop), whichever comes first: a
 * flow that fails between its lock and its unlock leaves no holder
 * behind, as a section of addSync is left however its step ends. A lock
 * from another implementation's step is held until its unlock, which
 * that implementation owes however the flow ends. A rootId
 * of 0 (a table without the rootId function) tells no flow from another,
 * so each lock with it enters as a flow of its own, never as a reentrant
 * one: two such flows exclude each other, and a nested lock of one such
 * flow waits for its outer lock (or fails, DefenseRejected, on a full
 * queue) as a Go decorator without Unwrap does. Its unlock gives back the
 * first entry with rootId 0 of the table that is inside the section.
 * lock sets a cancel handler on the caller's step, and completes the step
 * (success or handle_error) from the loop of the hidden flow, another
 * thread than the caller's, possibly, and then possibly before lock has
 * returned to the caller: the cancel handler and that
 * completion exclude each other, so that once the cancel handler has
 * returned, neither success nor handle_error reaches the step; a
 * completion under way when the handler is called runs to its end first
 * (the handler then does nothing: the step holds the section). A table
 * whose success or handle_error waits for that cancel handler to return
 * deadlocks. lock needs success and setCancel of the caller's table
 * (setCancel makes the step wait without waitExternal): without one, it
 * fails the step with InternalError naming it ("FutoInSync lock: the
 * foreign table has no setCancel") and does not enter the sync. Where the
 * table has no handle_error, such an error, or a rejection of the sync,
 * is logged, and the step left waiting, not completed.
 * Called with another implementation's step, only unlock gives back
 * what a completed lock took: the library cannot tell when a section of
 * another implementation ends, so the caller must unlock on every path
 * out of it (its cancel handler included), as addSync does. Such a lock
 * never unlocked holds the sync for its rootId for as long as the sync
 * exists, through later executions of that root, whose locks then enter
 * at once as reentrant ones. */

/* futoin_mutex_new returns the library's Mutex: at most max flows inside at
 * once, reentrant within a flow (each parallel branch is a flow of its own);
 * at most max_queue flows wait (a negative max_queue: no limit), more fail
 * with DefenseRejected. NULL when max is 0, or past what a Go int holds
 * (INT32_MAX, where an int has 32 bits). Valid until futoin_sync_free. */
FutoInSync* futoin_mutex_new(uint32_t max, int32_t max_queue);

/* futoin_throttle_new returns the library's Throttle: at most max entries
 * per period_ms; max_queue as for futoin_mutex_new. NULL when max or
 * period_ms is 0, or max past what a Go int holds (as for
 * futoin_mutex_new). Valid until futoin_sync_free. */
FutoInSync* futoin_throttle_new(uint32_t max, uint32_t period_ms, int32_t max_queue);

/* futoin_limiter_new returns the library's Limiter: a Mutex of concurrent
 * flows with max_queue waiting (a negative max_queue: no limit), followed by
 * a Throttle of rate entries per period_ms with burst waiting. A zero
 * concurrent or rate is no limit of that kind; a zero period_ms with a
 * rate is a period of one second, as for the Go Limiter. NULL when
 * concurrent, rate or burst is past what a Go int holds (as for
 * futoin_mutex_new). Valid until futoin_sync_free. */
FutoInSync* futoin_limiter_new(
        uint32_t concurrent,
        int32_t max_queue,
        uint32_t rate,
        uint32_t period_ms,
        uint32_t burst);

/* futoin_sync_free releases a synchronization object of the library, at
 * once: call it only when no flow uses it any more. */
void futoin_sync_free(FutoInSync* sync);

#ifdef __cplusplus
} // extern "C"
#endif

#endif /* FUTOIN_ASYNCSTEPS_H */
