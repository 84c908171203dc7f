// C steps and a fake foreign table for the tests of package cabi.
// This file is long on purpose: one C test program, one section per rule
// of the C interface, so that cabi_test.go calls into a single unit.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctest.h"

// ---- trace ---------------------------------------------------------------------

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char trace[1 << 16];
static size_t trace_len;
static int done;
static int cleanups;
static int state_variable_calls; // the fake's stateVariable calls (see ct_state_variable_calls)
static int have_thread;
static pthread_t loop_thread;
static int bare_order; // see ct_bare_order

void ct_reset(void)
{
    pthread_mutex_lock(&mu);
    trace[0] = 0;
    trace_len = 0;
    done = 0;
    cleanups = 0;
    state_variable_calls = 0;
    have_thread = 0;
    bare_order = CT_BARE_ANY_ORDER;
    pthread_mutex_unlock(&mu);
}

static void logf_(const char* fmt, ...)
{
    pthread_mutex_lock(&mu);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(trace + trace_len, sizeof(trace) - trace_len - 1, fmt, ap);
    va_end(ap);
    if (n > 0 && trace_len + n < sizeof(trace) - 2) {
        trace_len += n;
        trace[trace_len++] = '\n';
        trace[trace_len] = 0;
    }
    pthread_mutex_unlock(&mu);
}
#define LOG(...) logf_(__VA_ARGS__)

// ct_trace returns a copy of the trace, taken under the lock (free it):
// read in place, a line being logged could be seen half written over the
// stale bytes of an earlier test's trace.
char* ct_trace(void)
{
    pthread_mutex_lock(&mu);
    char* t = strdup(trace);
    pthread_mutex_unlock(&mu);
    return t;
}

int ct_done(void)
{
    pthread_mutex_lock(&mu);
    int d = done;
    pthread_mutex_unlock(&mu);
    return d;
}

int ct_cleanups(void)
{
    pthread_mutex_lock(&mu);
    int c = cleanups;
    pthread_mutex_unlock(&mu);
    return c;
}

int ct_state_variable_calls(void)
{
    pthread_mutex_lock(&mu);
    int n = state_variable_calls;
    pthread_mutex_unlock(&mu);
    return n;
}

static void mark_done(void)
{
    pthread_mutex_lock(&mu);
    ++done;
    pthread_mutex_unlock(&mu);
}

// enter checks that a callback runs on the loop's thread.
static void enter(FutoInAsyncSteps* bsi)
{
    pthread_mutex_lock(&mu);
    int bad = 0;
    if (!have_thread) {
        have_thread = 1;
        loop_thread = pthread_self();
    } else if (!pthread_equal(loop_thread, pthread_self())) {
        bad = 1;
    }
    pthread_mutex_unlock(&mu);
    if (bad) {
        LOG("VIOLATION: callback on another thread");
    }
    if (bsi != NULL && bsi->api->is_same_thread(bsi) != 1) {
        LOG("VIOLATION: is_same_thread is not 1 in a callback");
    }
}

static void count_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    pthread_mutex_lock(&mu);
    ++cleanups;
    pthread_mutex_unlock(&mu);
}

static void custom_cleanup(FutoInBinaryValue* v)
{
    LOG("custom cleanup %d", *(const int*)v->p);
    free((void*)v->p);
    count_cleanup(v);
}

static const FutoInType t_i32 = {FTN_TYPE_INT32, count_cleanup};
static const FutoInType t_str = {FTN_TYPE_STRING, count_cleanup};
static const FutoInType t_str16 = {FTN_TYPE_STRING16, count_cleanup};
static const FutoInType t_arr_i32 = {FTN_TYPE_ARRAY | FTN_TYPE_INT32, count_cleanup};
static const FutoInType t_u8 = {FTN_TYPE_UINT8, NULL};
static const FutoInType t_double = {FTN_TYPE_DOUBLE, NULL};
static const FutoInType t_bool = {FTN_TYPE_BOOL, NULL};
static const FutoInType t_custom = {FTN_TYPE_CUSTOM_OBJECT, custom_cleanup};

// ---- the caller's conventions: the library's own, or the C++ RI's ------------------
//
// Every C step below is added, and every success, loop and break is called,
// through the ct_* functions of this section. With ct_set_strict(1) they call
// the library as the FutoIn C++ reference implementation does as a caller,
// where our documentation allows more:
//   - each step callback dereferences its args and takes over every value it
//     receives: moved out, the slot reset, cleaned up by the test when the
//     callback returns (unless the callback passed it on), exactly once;
//   - success never gets NULL args, and every unused slot is filled with a
//     placeholder custom object, whose cleanup must run exactly once;
//   - labels given to loop, repeat, breakLoop and continueLoop are the test's
//     own heap strings, overwritten and freed as soon as the call returns
//     (stricter than the RI, which keeps them for the loop's life);
//   - each step takes stack memory that its error handler reads (the RI keeps
//     it until the step's handler has returned).
// State variables are made only through allocate in both modes, and in RI
// mode every access of an existing one passes allocate too, as the RI does;
// reads without allocate of absent names, "error_info" and
// "last_exception" are this library's extension and stay in both modes.
// A broken rule is logged as a VIOLATION (or, freed memory, caught by ASan).

static int strict;
static int strict_alive; // placeholders and stack canaries not yet cleaned up

void ct_set_strict(int on) { __atomic_store_n(&strict, on, __ATOMIC_SEQ_CST); }
static int is_strict(void) { return __atomic_load_n(&strict, __ATOMIC_SEQ_CST); }

int ct_strict_alive(void)
{
    pthread_mutex_lock(&mu);
    int n = strict_alive;
    pthread_mutex_unlock(&mu);
    return n;
}

static void alive_add(int d)
{
    pthread_mutex_lock(&mu);
    strict_alive += d;
    pthread_mutex_unlock(&mu);
}

enum { LIVE = 0x11fe, DEAD = 0xdead };

// checked_free checks that p is alive, marks it dead and frees it.
static void checked_free(int* p, const char* what)
{
    if (*p != LIVE) {
        LOG("VIOLATION: %s cleaned up twice", what);
        return;
    }
    *p = DEAD;
    free(p);
    alive_add(-1);
}

static int* checked_new(void)
{
    int* p = malloc(sizeof(int));
    *p = LIVE;
    alive_add(1);
    return p;
}

static void placeholder_of_caller_cleanup(FutoInBinaryValue* v) { checked_free((int*)v->p, "a placeholder"); }
static const FutoInType t_caller_placeholder = {FTN_TYPE_CUSTOM_OBJECT, placeholder_of_caller_cleanup};

static void ct_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    if (!is_strict()) {
        bsi->api->success(bsi, args);
        return;
    }
    FutoInArgs none;
    if (args == NULL) {
        memset(&none, 0, sizeof(none));
        args = &none;
    }
    for (int k = 0; k < 4; ++k) {
        if (args->args[k].type == NULL) {
            args->args[k].type = &t_caller_placeholder;
            args->args[k].p = checked_new();
        }
    }
    bsi->api->success(bsi, args);
    for (int k = 0; k < 4; ++k) {
        if (args->args[k].type != NULL) {
            LOG("VIOLATION: success left slot %d to its caller", k);
        }
    }
}

typedef struct {
    FutoInAsyncSteps_execute_callback f;
    FutoInAsyncSteps_error_callback eh;
    void* data;
    int* stack; // the step's stack canary, read by its error handler
} ct_wrapped;

static ct_wrapped wrapped[4096]; // a ring: a test adds far fewer steps
static unsigned nwrapped;

static ct_wrapped* wrap(void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    pthread_mutex_lock(&mu);
    ct_wrapped* w = &wrapped[nwrapped++ % 4096];
    pthread_mutex_unlock(&mu);
    *w = (ct_wrapped){f, eh, data, NULL};
    return w;
}

// stack_canary_cleanup checks the step's stack memory is cleaned up once;
// the library frees it.
static void stack_canary_cleanup(void* p)
{
    int* c = p;
    if (*c != LIVE) {
        LOG("VIOLATION: stack memory cleaned up twice");
        return;
    }
    *c = DEAD;
    alive_add(-1);
}

static void strict_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    ct_wrapped* w = data;
    FutoInArgs* slots = (FutoInArgs*)in;
    FutoInArgs mine = *slots; // dereferenced, as the RI does
    memset(slots, 0, sizeof(*slots)); // taken over: the slots are reset
    w->stack = bsi->api->stack(bsi, sizeof(int), stack_canary_cleanup);
    *w->stack = LIVE;
    alive_add(1);
    w->f(bsi, w->data, &mine);
    for (int k = 0; k < 4; ++k) {
        futoin_reset_binval(&mine.args[k]); // cleaned up once, by the receiver
    }
}

static void strict_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    ct_wrapped* w = data;
    if (w->stack != NULL && *w->stack != LIVE) {
        LOG("VIOLATION: the step's stack memory is gone in its error handler");
    }
    w->eh(bsi, w->data, code);
}

static void ct_add(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    if (!is_strict()) {
        bsi->api->add(bsi, data, f, eh);
        return;
    }
    bsi->api->add(bsi, wrap(data, f, eh), strict_step, eh ? strict_eh : NULL);
}

static void ct_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, void* data, FutoInAsyncSteps_execute_callback f,
                        FutoInAsyncSteps_error_callback eh)
{
    if (!is_strict()) {
        bsi->api->addSync(bsi, sync, data, f, eh);
        return;
    }
    bsi->api->addSync(bsi, sync, wrap(data, f, eh), strict_step, eh ? strict_eh : NULL);
}

// ct_passed_on marks slot k of a step's args as moved into its success (RI
// mode: the caller's copy must not be cleaned up as well).
static void ct_passed_on(const FutoInArgs* in, int k)
{
    if (is_strict()) {
        memset(&((FutoInArgs*)in)->args[k], 0, sizeof(FutoInBinaryValue));
    }
}

// label_copy returns label as a heap string of the test's in RI mode.
static const char* label_copy(const char* label) { return is_strict() && label != NULL ? strdup(label) : label; }

static void label_drop(const char* given, const char* label)
{
    if (given != label) {
        memset((char*)given, 'x', strlen(given));
        free((char*)given);
    }
}

static void ct_loop(FutoInAsyncSteps* bsi, void* data, void (*f)(FutoInAsyncSteps*, void*), const char* label)
{
    const char* l = label_copy(label);
    bsi->api->loop(bsi, data, f, l);
    label_drop(l, label);
}

static void ct_repeat(FutoInAsyncSteps* bsi, void* data, size_t count, void (*f)(FutoInAsyncSteps*, void*, size_t), const char* label)
{
    const char* l = label_copy(label);
    bsi->api->repeat(bsi, data, count, f, l);
    label_drop(l, label);
}

static void ct_break(FutoInAsyncSteps* bsi, const char* label)
{
    const char* l = label_copy(label);
    bsi->api->breakLoop(bsi, l);
    label_drop(l, label);
}

static void ct_continue(FutoInAsyncSteps* bsi, const char* label)
{
    const char* l = label_copy(label);
    bsi->api->continueLoop(bsi, l);
    label_drop(l, label);
}

static void end_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    enter(bsi);
    LOG("end");
    mark_done();
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    enter(bsi);
    LOG("unhandled %s data=%s root=%d", code, (const char*)data, bsi->api->isValid(bsi));
    mark_done();
}

void ct_execute(FutoInAsyncSteps* root, const char* data)
{
    ct_add(root, NULL, end_step, NULL);
    root->api->execute(root, (void*)data, unhandled);
}

static void unhandled_other(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    enter(bsi);
    LOG("unhandled_other %s data=%s", code, (const char*)data);
    mark_done();
}

// ct_execute_only executes root as is, with unhandled (which 1) or
// unhandled_other.
void ct_execute_only(FutoInAsyncSteps* root, const char* data, int which)
{
    root->api->execute(root, (void*)data, which == 1 ? unhandled : unhandled_other);
}

static FutoInAsyncSteps* held;

static void held1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    bsi->api->waitExternal(bsi);
    held = bsi;
    LOG("held");
}

// ct_held adds a step that waits until ct_fail_held fails it.
void ct_held(FutoInAsyncSteps* root) { ct_add(root, NULL, held1, NULL); }
void ct_fail_held(void) { held->api->handle_error(held, "Boom", NULL); }
FutoInAsyncSteps* ct_held_step(void) { return held; }

static void held_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    LOG("held cancel");
}

static void held_with_cancel(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    held1(bsi, data, in);
    bsi->api->setCancel(bsi, NULL, held_cancel);
}

// ct_held_with_cancel adds a held step (see ct_held) with a cancel handler
// that logs "held cancel".
void ct_held_with_cancel(FutoInAsyncSteps* root) { ct_add(root, NULL, held_with_cancel, NULL); }

// ---- a cancel handler on a Go step's pointer ----------------------------

static void guard_cleanup(void* p)
{
    (void)p;
    LOG("guard cleanup");
}

static void guard_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    LOG("guard cancel");
}

// ct_guard takes stack memory whose cleanup logs "guard cleanup" on bsi, a
// Go step's pointer given by Binary, in the step's callback, and sets a
// cancel handler that logs "guard cancel": C code that keeps data for the
// step and frees it when the step is cancelled.
void ct_guard(FutoInAsyncSteps* bsi)
{
    if (bsi->api->stack(bsi, 16, guard_cleanup) == NULL) {
        LOG("guard: no stack memory");
    }
    bsi->api->setCancel(bsi, NULL, guard_cancel);
}

static void* held_alloc(void* data)
{
    (void)data;
    return calloc(1, 1);
}
static void held_free(void* data, void* value)
{
    (void)data;
    free(value);
}

// ct_stack_held and ct_state_held call stack and stateVariable on the held
// step from the calling thread (misuse: both are for the step's callback)
// and report whether they gave memory.
int ct_stack_held(void) { return held->api->stack(held, 16, NULL) != NULL; }
int ct_state_held(void) { return held->api->stateVariable(held, NULL, "held", held_alloc, held_free) != NULL; }

void ct_cancel(FutoInAsyncSteps* root) { root->api->cancel(root); }
int ct_is_valid(FutoInAsyncSteps* root) { return root->api->isValid(root); }
void ct_free(FutoInAsyncSteps* root) { root->api->free(root); }

// ---- args -------------------------------------------------------------

static void args1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("args1 in=%d", in != NULL && in->arg0.type == NULL);
    char* s = strdup("h\xc3\xa9llo"); // 6 bytes, 6 code units
    char16_t s16[] = {'h', 0xe9, 'l', 'l', 'o', 0};
    int32_t arr[] = {1, 2, 3};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_i32;
    out.arg0.i32 = 42;
    out.arg1.type = &t_str;
    out.arg1.cstr = s;
    out.arg1.length = 6;
    out.arg2.type = &t_arr_i32;
    out.arg2.p = arr;
    out.arg2.length = 3;
    out.arg3.type = &t_str16;
    out.arg3.cstr16 = s16;
    out.arg3.length = 5;
    ct_success(bsi, &out);
    memset(s, 'x', 6); // copied: the caller may reuse its memory at once
    free(s);
    arr[0] = 99;
    s16[0] = 'X';
    int reset = out.arg0.type == NULL && out.arg1.type == NULL && out.arg2.type == NULL && out.arg3.type == NULL;
    LOG("args1 reset=%d cleanups=%d", reset, ct_cleanups());
}

void ct_args(FutoInAsyncSteps* root) { ct_add(root, NULL, args1, NULL); }

static void args2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    const FutoInBinaryValue* a = in->args;
    LOG("args2 %d:%d %d:%.*s/%u %d:%u:%s,%s %d",
        a[0].type->flags, a[0].i32,
        a[1].type->flags, (int)a[1].length, a[1].cstr, a[1].length,
        a[2].type->flags, a[2].length, ((const char* const*)a[2].p)[0], ((const char* const*)a[2].p)[1],
        a[3].type->flags);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0 = a[3]; // the Go value comes back as itself
    ct_passed_on(in, 3);
    out.arg1.type = &t_u8;
    out.arg1.u8 = 200;
    out.arg2.type = &t_double;
    out.arg2.d = 1.5;
    out.arg3.type = &t_bool;
    out.arg3.b = true;
    ct_success(bsi, &out);
}

void ct_go_value(FutoInAsyncSteps* root) { ct_add(root, NULL, args2, NULL); }

// empty1 succeeds with an empty first slot; empty2 logs what it gets.
static void empty1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg1.type = &t_u8;
    out.arg1.u8 = 5;
    ct_success(bsi, &out);
}

static void empty2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("empty2 arg0=%s arg1=%d:%u", in->arg0.type ? "typed" : "NULL", in->arg1.type->flags, in->arg1.u8);
    ct_success(bsi, NULL);
}

void ct_empty_slot(FutoInAsyncSteps* root) { ct_add(root, NULL, empty1, NULL); }
void ct_empty_slot_back(FutoInAsyncSteps* root) { ct_add(root, NULL, empty2, NULL); }

// ---- custom objects ------------------------------------------------------------------

static void custom1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    int* p = malloc(sizeof(int));
    *p = 5;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_custom;
    out.arg0.p = p;
    out.arg0.custom_data = (void*)&t_custom;
    ct_success(bsi, &out);
    LOG("custom1 reset=%d cleanups=%d", out.arg0.type == NULL, ct_cleanups());
}

static void custom2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("custom2 %d same=%d cleanups=%d", *(const int*)in->arg0.p, in->arg0.type == &t_custom, ct_cleanups());
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0 = in->arg0; // passed on: no cleanup for this step
    ct_passed_on(in, 0);
    ct_success(bsi, &out);
}

static void custom3(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("custom3 %d cleanups=%d", *(const int*)in->arg0.p, ct_cleanups());
}

static void custom4(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("custom4 cleanups=%d", ct_cleanups());
}

void ct_custom(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, custom1, NULL);
    ct_add(root, NULL, custom2, NULL);
    ct_add(root, NULL, custom3, NULL);
    ct_add(root, NULL, custom4, NULL);
    ct_add(root, NULL, custom1, NULL); // dropped by the Go side: cleaned up by the GC
}

// ---- errors ---------------------------------------------------------

static void err1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("err1 last_exception=%s", (const char*)bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL));
    char code[] = "MyError", info[] = "my info";
    bsi->api->handle_error(bsi, code, info);
    strcpy(code, "xxxxxxx"); // copied
    strcpy(info, "xxxxxxx");
    LOG("err1 returns");
}

static void err1_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("err1_eh %s info=%s last_exception=%s unknown=%p", code,
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL),
        (const char*)bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL),
        bsi->api->stateVariable(bsi, NULL, "unknown", NULL, NULL));
}

void ct_errors(FutoInAsyncSteps* root) { ct_add(root, NULL, err1, err1_eh); }

// err_twice fails its step, then calls handle_error again (mode 0), or
// completes it with success and then calls handle_error (mode 1).
static void err_twice(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    if (*(const char*)data == '0') {
        bsi->api->handle_error(bsi, "First", "first info");
    } else {
        ct_success(bsi, NULL);
    }
    bsi->api->handle_error(bsi, "Second", "second info");
    LOG("err_twice returns");
}

static void err_twice_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("err_twice_eh %s info=%s last_exception=%s", code,
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL),
        (const char*)bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL));
}

static void err_twice_next(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("err_twice_next info=%s",
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL));
}

// err_twice_body succeeds, then calls handle_error, in a loop's body.
static void err_twice_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    enter(bsi);
    ct_success(bsi, NULL);
    bsi->api->handle_error(bsi, "Second", "second info");
    LOG("err_twice_body %zu returns", i);
}

static void err_twice_loop(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    ct_repeat(bsi, NULL, 2, err_twice_body, NULL);
}

void ct_error_twice(FutoInAsyncSteps* root, int mode)
{
    if (mode == 2) {
        ct_add(root, NULL, err_twice_loop, err_twice_eh);
    } else {
        ct_add(root, (void*)(mode == 0 ? "0" : "1"), err_twice, err_twice_eh);
    }
    ct_add(root, NULL, err_twice_next, NULL);
}

static void misuse_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    LOG("VIOLATION: sub-step ran after success after add");
    (void)bsi;
}

static void misuse1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    ct_add(bsi, data, misuse_sub, NULL);
    ct_success(bsi, NULL);
    LOG("misuse1 returns");
}

static void misuse_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("misuse_eh %s: %s", code, (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL));
    ct_success(bsi, NULL);
}

void ct_misuse(FutoInAsyncSteps* root) { ct_add(root, NULL, misuse1, misuse_eh); }

// ---- state variables -------------------------------------------------------

static void* var_alloc(void* data)
{
    LOG("alloc %s", (const char*)data);
    return calloc(1, sizeof(int));
}

static void var_cleanup(void* data, void* value)
{
    LOG("cleanup %s=%d", (const char*)data, *(int*)value);
    free(value);
}

// A step that takes a received string over: it moves the value out of its
// slot (zeroing the slot), waits, and uses the string later, from
// ct_finish_taken on the caller's thread, then resets its copy.
static FutoInAsyncSteps* taker;
static FutoInBinaryValue taken;

static void take_string1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    FutoInBinaryValue* slot = (FutoInBinaryValue*)&in->arg0;
    taken = *slot;
    memset(slot, 0, sizeof(*slot)); /* moved out */
    bsi->api->waitExternal(bsi);
    taker = bsi;
    LOG("taken");
}

void ct_take_string(FutoInAsyncSteps* root) { ct_add(root, NULL, take_string1, NULL); }

void ct_finish_taken(void)
{
    LOG("later: %.*s", (int)taken.length, taken.cstr);
    futoin_reset_binval(&taken);
    taker->api->success(taker, NULL);
}


static void state1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    int* v = bsi->api->stateVariable(bsi, "counter", "counter", var_alloc, var_cleanup);
    *v += 1;
    LOG("state1 missing=%p", bsi->api->stateVariable(bsi, NULL, "missing", NULL, NULL));
}

static void state2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    int* v = bsi->api->stateVariable(bsi, "counter", "counter", var_alloc, var_cleanup);
    *v += 1;
    // The RI passes allocate on every access: an existing variable is
    // returned as is, allocate not called again.
    int* w = is_strict() ? bsi->api->stateVariable(bsi, "counter", "counter", var_alloc, var_cleanup)
                         : bsi->api->stateVariable(bsi, NULL, "counter", NULL, NULL);
    LOG("state2 counter=%d same=%d", *v, v == w);
}

void ct_state(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, state1, NULL);
    ct_add(root, NULL, state2, NULL);
}

// A step that keeps its state variable while it waits, as a step may for
// the life of its flow, and a step after it that reads it through the
// pointer kept.
static int* kept_var;

static void kept1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    int* v = bsi->api->stateVariable(bsi, "counter", "counter", var_alloc, var_cleanup);
    *v += 1;
    kept_var = v;
    held1(bsi, data, in); // waits until ct_succeed_held
    LOG("kept counter=%d", *v);
}

static void kept2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("kept later counter=%d", *kept_var);
}

void ct_state_kept(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, kept1, NULL);
    ct_add(root, NULL, kept2, NULL);
}

// A state variable whose allocate returns NULL.
static int null_allocs;

static void* null_alloc(void* data)
{
    (void)data;
    ++null_allocs;
    return NULL;
}

static void null_cleanup(void* data, void* value)
{
    LOG("cleanup %s value=%p", (const char*)data, value);
}

static void state_null(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    void* v = bsi->api->stateVariable(bsi, "none", "none", null_alloc, null_cleanup);
    LOG("%s value=%p allocs=%d existing=%p", (const char*)data, v, null_allocs,
        bsi->api->stateVariable(bsi, NULL, "none", NULL, NULL));
}

// ct_state_null adds two steps that ask for the state variable "none",
// whose allocate returns NULL.
void ct_state_null(FutoInAsyncSteps* root)
{
    null_allocs = 0;
    ct_add(root, "null1", state_null, NULL);
    ct_add(root, "null2", state_null, NULL);
}

// ct_state_idle allocates the state variable "counter" through the idle
// root itself, before any execute.
void ct_state_idle(FutoInAsyncSteps* root)
{
    int* v = root->api->stateVariable(root, "counter", "counter", var_alloc, var_cleanup);
    *v = 5;
}

// ---- stack ------------------------------------------------------------------

static void stack_cleanup(void* p)
{
    LOG("stack cleanup %d", *(int*)p);
}

static void stack_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("stack sub");
}

static int* stack_mem; // the failing step's stack memory, read by its handlers

static void stack_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("stack eh %s mem=%d", code, *stack_mem);
    ct_success(bsi, NULL);
}

static void stack_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    enter(bsi);
    LOG("stack cancel");
}

static void stack1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    int mode = (int)(intptr_t)data;
    unsigned char* p = bsi->api->stack(bsi, 64, stack_cleanup);
    int zeroed = 1;
    for (int i = 0; i < 64; ++i) {
        zeroed &= p[i] == 0;
    }
    void* q = bsi->api->stack(bsi, 3, NULL); // NULL cleanup: only freed
    LOG("stack1 zeroed=%d aligned=%d", zeroed,
        (uintptr_t)p % alignof(max_align_t) == 0 && (uintptr_t)q % alignof(max_align_t) == 0);
    *(int*)p = mode;
    stack_mem = (int*)p;
    switch (mode) {
    case 0:
        ct_success(bsi, NULL);
        break;
    case 1:
        ct_add(bsi, data, stack_sub, NULL);
        break;
    case 2:
        bsi->api->handle_error(bsi, "Fail", NULL);
        break;
    case 3:
        bsi->api->setCancel(bsi, data, stack_cancel);
        LOG("waiting");
        break;
    }
    LOG("stack1 returns");
}

static void stack_data_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    LOG("stack data sub mem=%d", *(int*)data);
}

// ct_stack_data takes stack memory of the step of bsi, whose cleanup logs
// "stack cleanup 7", and adds a sub-step that reads it through its data:
// the memory must live until the sub-steps of the step have ended.
void ct_stack_data(FutoInAsyncSteps* bsi)
{
    int* p = bsi->api->stack(bsi, sizeof(int), stack_cleanup);
    *p = 7;
    ct_add(bsi, p, stack_data_sub, NULL);
}

static void stack2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("stack2");
}

void ct_stack(FutoInAsyncSteps* root, int mode)
{
    ct_add(root, (void*)(intptr_t)mode, stack1, stack_eh);
    ct_add(root, NULL, stack2, NULL);
}

// ---- timeout, setCancel -----------------------------------

static void to_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    enter(bsi);
    LOG("timeout cancel");
}

static void to_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("timeout eh %s mem=%d", code, *stack_mem);
    ct_success(bsi, NULL);
}

static void to1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    int* p = bsi->api->stack(bsi, sizeof(int), stack_cleanup);
    *p = 8;
    stack_mem = p;
    bsi->api->setCancel(bsi, data, to_cancel);
    bsi->api->setTimeout(bsi, 20);
}

static void to2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("after timeout");
}

void ct_timeout(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, to1, to_eh);
    ct_add(root, NULL, to2, NULL);
}

// ---- waitExternal and other threads ------------------------------------------

static FutoInAsyncSteps* stale;

// wait1 blocks until its thread has completed the step, so the completion
// always comes while the callback still runs (no sleeps).
static pthread_cond_t wait_cond = PTHREAD_COND_INITIALIZER;
static int wait_succeeded;

static void* wait_thread(void* arg)
{
    FutoInAsyncSteps* bsi = arg;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_i32;
    out.arg0.i32 = 7;
    LOG("thread: is_same_thread=%d", bsi->api->is_same_thread(bsi));
    ct_success(bsi, &out);
    out.arg0.type = &t_i32; // a second completion is ignored, its value still cleaned up
    out.arg0.i32 = 8;
    ct_success(bsi, &out);
    bsi->api->handle_error(bsi, "Late", NULL);
    pthread_mutex_lock(&mu);
    wait_succeeded = 1;
    pthread_cond_signal(&wait_cond);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void wait1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    bsi->api->waitExternal(bsi);
    pthread_mutex_lock(&mu);
    wait_succeeded = 0;
    pthread_mutex_unlock(&mu);
    pthread_t t;
    pthread_create(&t, NULL, wait_thread, bsi);
    pthread_mutex_lock(&mu);
    while (!wait_succeeded) {
        pthread_cond_wait(&wait_cond, &mu);
    }
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    LOG("wait1 returns");
}

static void wait2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("wait2 %d cleanups=%d", in->arg0.i32, ct_cleanups());
}

void ct_wait(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, wait1, NULL);
    ct_add(root, NULL, wait2, NULL);
}

// ---- loops -------------------------------------------------------------------

static int outer_i;

static void inner_body(FutoInAsyncSteps* bsi, void* data, size_t j)
{
    (void)data;
    enter(bsi);
    LOG("inner %d.%zu", outer_i, j);
    if (j == 0) {
        ct_continue(bsi, ""); // "" == NULL: the innermost loop
        return; // C has no exceptions: return after raising (spec 2.7.2)
    }
    if (outer_i == 1 && j == 1) {
        ct_continue(bsi, "outer");
    }
    if (outer_i == 2 && j == 1) {
        ct_break(bsi, "outer");
    }
}

static void outer_body(FutoInAsyncSteps* bsi, void* data)
{
    enter(bsi);
    LOG("outer %d", ++outer_i);
    ct_repeat(bsi, data, 3, inner_body, NULL);
}

static void loops1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    outer_i = 0;
    ct_loop(bsi, data, outer_body, "outer");
}

static void loops2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("after loops args=%d", in->arg0.type != NULL);
}

void ct_loops(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, loops1, NULL);
    ct_add(root, NULL, loops2, NULL);
}

// ---- parallel and rootId ------------------------------------------------

static ptrdiff_t root_id, step_id, branch_ids[3];

static void nested(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    int i = (int)(intptr_t)data;
    LOG("nested %d same=%d", i, bsi->api->rootId(bsi) == branch_ids[i]);
}

static void branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    enter(bsi);
    int i = (int)(intptr_t)data;
    LOG("branch %d args=%d", i, in->arg0.type != NULL);
    branch_ids[i] = bsi->api->rootId(bsi);
    ct_add(bsi, data, nested, NULL);
}

static void par1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    step_id = bsi->api->rootId(bsi);
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    for (int i = 0; i < 3; ++i) {
        ct_add(p, (void*)(intptr_t)i, branch, NULL);
    }
}

static void par2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    int distinct = branch_ids[0] != branch_ids[1] && branch_ids[1] != branch_ids[2] && branch_ids[0] != branch_ids[2];
    for (int i = 0; i < 3; ++i) {
        distinct &= branch_ids[i] != root_id;
    }
    LOG("par2 flow same=%d step same=%d branches distinct=%d", bsi->api->rootId(bsi) == root_id, step_id == root_id, distinct);
}

void ct_parallel(FutoInAsyncSteps* root)
{
    root_id = root->api->rootId(root);
    ct_add(root, NULL, par1, NULL);
    ct_add(root, NULL, par2, NULL);
}

// ---- a parallel made on an idle root --------------------------------------

static FutoInAsyncSteps* idle_par;

static void idle_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    int* v = bsi->api->stateVariable(bsi, NULL, "counter", NULL, NULL);
    LOG("branch counter=%d", v != NULL ? *v : -1);
}

// ct_parallel_idle makes a parallel on the idle root from the calling
// thread, as a C++ wrapper builds a flow before executing it: its add keeps
// each step's functor in the parallel's stack memory and reads the state
// through the parallel. The branch it adds logs the state variable
// "counter", set to 7 here.
void ct_parallel_idle(FutoInAsyncSteps* root)
{
    idle_par = root->api->parallel(root, NULL, NULL);
    void* mem = idle_par->api->stack(idle_par, 16, NULL);
    int* v = idle_par->api->stateVariable(idle_par, "counter", "counter", var_alloc, var_cleanup);
    if (v != NULL) {
        *v = 7;
    }
    LOG("idle parallel stack=%d state=%d", mem != NULL, v != NULL);
    ct_add(idle_par, NULL, idle_branch, NULL);
}

// ct_stack_idle_par and ct_state_idle_par call stack and stateVariable on
// the parallel of ct_parallel_idle from the calling thread and report
// whether they gave memory.
int ct_stack_idle_par(void) { return idle_par->api->stack(idle_par, 16, NULL) != NULL; }
int ct_state_idle_par(void) { return idle_par->api->stateVariable(idle_par, NULL, "counter", NULL, NULL) != NULL; }

// ---- sched_* -------------------------------------------------------------------

static FutoInAsyncSteps* sched_step;
static FutoInHandle h_imm, h_def, h_cancelled;

static void from_thread_cb(void* data)
{
    (void)data;
    enter(sched_step);
    LOG("sched from thread");
    ct_success(sched_step, NULL);
}

static void* sched_thread(void* arg)
{
    (void)arg;
    FutoInHandle h = sched_step->api->sched_immediate(sched_step, NULL, from_thread_cb);
    (void)h;
    return NULL;
}

static void sched_cb(void* data)
{
    enter(sched_step);
    FutoInAsyncSteps* b = sched_step;
    LOG("sched %s imm=%d def=%d cancelled=%d", (const char*)data,
        b->api->sched_is_valid(b, &h_imm), b->api->sched_is_valid(b, &h_def), b->api->sched_is_valid(b, &h_cancelled));
    if (strcmp((const char*)data, "def") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, sched_thread, NULL);
        pthread_detach(t);
    }
}

static void cancelled_cb(void* data)
{
    (void)data;
    LOG("VIOLATION: a cancelled callback ran");
}

static void sched1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    sched_step = bsi;
    h_def = bsi->api->sched_deferred(bsi, 10, "def", sched_cb);
    h_imm = bsi->api->sched_immediate(bsi, "imm", sched_cb);
    h_cancelled = bsi->api->sched_deferred(bsi, 5, NULL, cancelled_cb);
    LOG("sched1 valid=%d%d%d", bsi->api->sched_is_valid(bsi, &h_imm), bsi->api->sched_is_valid(bsi, &h_def),
        bsi->api->sched_is_valid(bsi, &h_cancelled));
    bsi->api->sched_cancel(bsi, &h_cancelled);
    bsi->api->sched_cancel(bsi, &h_cancelled); // harmless
    LOG("sched1 cancelled valid=%d", bsi->api->sched_is_valid(bsi, &h_cancelled));
    bsi->api->waitExternal(bsi);
}

void ct_sched(FutoInAsyncSteps* root) { ct_add(root, NULL, sched1, NULL); }

// ---- addSync -------------------------------------------------------------------

typedef struct {
    FutoInAsyncSteps* bsi;
    const char* name;
    int fail;
} sync_step;

static void sync_leave(void* data)
{
    sync_step* s = data;
    enter(s->bsi);
    LOG("%s leave", s->name);
    if (s->fail) {
        s->bsi->api->handle_error(s->bsi, "Fail", NULL);
    } else {
        ct_success(s->bsi, NULL);
    }
}

static void sync_f(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    sync_step* s = bsi->api->stack(bsi, sizeof(sync_step), NULL);
    *s = *(sync_step*)data;
    s->bsi = bsi;
    LOG("%s enter", s->name);
    bsi->api->waitExternal(bsi);
    bsi->api->sched_deferred(bsi, 5, s, sync_leave);
}

static void sync_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    enter(bsi);
    LOG("%s eh %s", ((sync_step*)data)->name, code);
    ct_success(bsi, NULL);
}

static sync_step sync_steps[8];
static int nsync;

void ct_sync(FutoInAsyncSteps* root, FutoInSync* sync, const char* name, int fail)
{
    sync_step* s = &sync_steps[nsync++ % 8];
    s->name = name;
    s->fail = fail;
    ct_add_sync(root, sync, s, sync_f, sync_eh);
}

// A foreign FutoInSync: lock waits for a scheduled callback, unlock logs.
static FutoInAsyncSteps* lock_bsi;

static void fake_locked(void* data)
{
    (void)data;
    enter(lock_bsi);
    LOG("locked");
    ct_success(lock_bsi, NULL);
}

static void fake_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    (void)sync;
    enter(bsi);
    LOG("lock");
    lock_bsi = bsi;
    bsi->api->waitExternal(bsi);
    bsi->api->sched_immediate(bsi, NULL, fake_locked);
}

static void fake_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    (void)sync;
    enter(bsi);
    LOG("unlock");
}

static const FutoInSyncAPI fake_sync_api = {{{fake_lock, fake_unlock}}};

FutoInSync* ct_fake_sync(void)
{
    static struct {
        const FutoInSyncAPI* api;
    } s = {&fake_sync_api};
    return (FutoInSync*)&s;
}

// A foreign FutoInSync that C flows of several roots and loops share: lock
// returns with the lock held if it is free, else fails the step with
// DefenseRejected; unlock frees it. Neither checks its thread: the free of
// a root whose loop has stopped unlocks on another one.
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static int shared_locked;
static int shared_wait;                // lock waits for ct_shared_grant
static FutoInAsyncSteps* shared_waiter; // the step that waits

static void shared_lock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    (void)sync;
    if (shared_wait) {
        shared_waiter = bsi;
        bsi->api->waitExternal(bsi);
        LOG("shared lock wait");
        return;
    }
    pthread_mutex_lock(&shared_mu);
    int busy = shared_locked;
    shared_locked = 1;
    pthread_mutex_unlock(&shared_mu);
    if (busy) {
        LOG("shared lock busy");
        bsi->api->handle_error(bsi, "DefenseRejected", "the shared lock is held");
        return;
    }
    LOG("shared lock");
}

static void shared_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync)
{
    (void)sync;
    pthread_mutex_lock(&shared_mu);
    int was = shared_locked;
    shared_locked = 0;
    pthread_mutex_unlock(&shared_mu);
    LOG("shared unlock held=%d same_thread=%d", was, bsi->api->is_same_thread(bsi));
}

static const FutoInSyncAPI shared_sync_api = {{{shared_lock, shared_unlock}}};

FutoInSync* ct_shared_sync(int wait)
{
    static struct {
        const FutoInSyncAPI* api;
    } s = {&shared_sync_api};
    pthread_mutex_lock(&shared_mu);
    shared_locked = 0;
    pthread_mutex_unlock(&shared_mu);
    shared_wait = wait;
    return (FutoInSync*)&s;
}

// ct_shared_grant gives the lock to the step that waits for it, by
// success from the calling thread.
void ct_shared_grant(void)
{
    pthread_mutex_lock(&shared_mu);
    shared_locked = 1;
    pthread_mutex_unlock(&shared_mu);
    LOG("shared grant");
    ct_success(shared_waiter, NULL);
}

// ct_shared_locked reports whether the shared sync counts itself locked.
int ct_shared_locked(void)
{
    pthread_mutex_lock(&shared_mu);
    int locked = shared_locked;
    pthread_mutex_unlock(&shared_mu);
    return locked;
}

// ct_sync_held adds a step that enters sync and, inside, waits as the
// step of ct_held_with_cancel does.
void ct_sync_held(FutoInAsyncSteps* root, FutoInSync* sync)
{
    ct_add_sync(root, sync, NULL, held_with_cancel, NULL);
}

// ---- stale pointers ------------------------------------------------------------

static void stale_added(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    LOG("VIOLATION: a step added on a stale pointer ran");
}

static void stale1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    stale = bsi;
    LOG("stale1 valid=%d", bsi->api->isValid(bsi));
}

void ct_stale_call(void)
{
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_i32;
    out.arg0.i32 = 1;
    ct_success(stale, &out);
    stale->api->handle_error(stale, "Stale", NULL);
    ct_add(stale, NULL, stale_added, NULL);
    stale->api->setTimeout(stale, 1);
    stale->api->waitExternal(stale);
    LOG("stale valid=%d reset=%d", stale->api->isValid(stale), out.arg0.type == NULL);
}

static void stale2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    ct_stale_call();
    LOG("stale2 cleanups=%d", ct_cleanups());
}

void ct_stale(FutoInAsyncSteps* root)
{
    ct_add(root, NULL, stale1, NULL);
    ct_add(root, NULL, stale2, NULL);
}

// ---- values taken over by the receiver ---------------------------------------------

static void counted_custom_cleanup(FutoInBinaryValue* v)
{
    LOG("taken cleanup %d", *(const int*)v->p);
    count_cleanup(v);
}
static const FutoInType t_counted_custom = {FTN_TYPE_CUSTOM_OBJECT, counted_custom_cleanup};
static const int taken_value = 9;

static void take1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_counted_custom;
    out.arg0.p = &taken_value;
    ct_success(bsi, &out);
}

// take2 takes the custom object over as the C++ reference implementation
// does with every value it receives: moved out, then the slot reset (which
// calls the cleanup: the value is the receiver's).
static void take2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    enter(bsi);
    FutoInArgs* args = (FutoInArgs*)in;
    for (int i = 0; i < 4; ++i) {
        futoin_reset_binval(&args->args[i]);
    }
    LOG("take2 cleanups=%d", ct_cleanups());
    if (data != NULL) {
        bsi->api->waitExternal(bsi); // completed later: still nothing to clean up
        held = bsi;
    }
}

static void take3(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("take3 cleanups=%d", ct_cleanups());
    mark_done();
}

void ct_take_over(FutoInAsyncSteps* root, int wait)
{
    ct_add(root, NULL, take1, NULL);
    ct_add(root, wait ? (void*)1 : NULL, take2, NULL);
    ct_add(root, NULL, take3, NULL);
}

void ct_succeed_held(void) { ct_success(held, NULL); }

// ---- success then breakLoop in one loop callback (the C++ RI's await) -----------------------------

static void await_body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    enter(bsi);
    LOG("await body %zu", i);
    if (i == 1) {
        FutoInArgs out;
        memset(&out, 0, sizeof(out));
        out.arg0.type = &t_u8;
        out.arg0.u8 = 5;
        ct_success(bsi, &out);
        ct_break(bsi, NULL); // wins: the loop ends, with the args
    }
}

static void await_after(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    enter(bsi);
    LOG("after await %s %u", in->arg0.type != NULL ? "typed" : "NULL", in->arg0.u8);
    mark_done();
}

void ct_await_like(FutoInAsyncSteps* root)
{
    ct_repeat(root, NULL, 5, await_body, NULL);
    ct_add(root, NULL, await_after, NULL);
}

// ---- isValid of a running root -----------------------------------------------------

static void running1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    FutoInAsyncSteps* root = data;
    LOG("running root valid=%d step valid=%d", root->api->isValid(root), bsi->api->isValid(bsi));
    mark_done();
}

void ct_running(FutoInAsyncSteps* root) { ct_add(root, root, running1, NULL); }

static void same_root1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    FutoInAsyncSteps* root = data;
    LOG("same rootId as the root=%d", bsi->api->rootId(bsi) == root->api->rootId(root));
}

static void same_root2(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    bsi->api->handle_error(bsi, "Boom", NULL);
}

static void same_root2_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    enter(bsi);
    FutoInAsyncSteps* root = data;
    LOG("%s handler: same rootId as the root=%d", code, bsi->api->rootId(bsi) == root->api->rootId(root));
    ct_success(bsi, NULL);
}

// ct_same_root adds a step that logs whether its rootId is root's, and a
// step that fails with Boom, whose error handler logs the same and
// recovers.
void ct_same_root(FutoInAsyncSteps* root)
{
    ct_add(root, root, same_root1, NULL);
    ct_add(root, root, same_root2, same_root2_eh);
}

// ---- a model root and its copy on another loop at once ------------------------------
//
// The steps below run in a root and in a Go copy of it (CopyFrom) on another
// loop at the same time. They tell the two apart by thread, not by rootId
// (which the tests check): the first loop thread to run one is the model's.
// They do not call enter, which expects a single loop thread.

static int have_model_thread;
static pthread_t model_thread;
static pthread_cond_t model_cv = PTHREAD_COND_INITIALIZER;
static int model_released;
static FutoInAsyncSteps* model_inside;
static FutoInSync* copy_sync;
static ptrdiff_t model_branch_id; // the rootId of the model's branch in ct_copy_sync

static void copy_reset(void)
{
    pthread_mutex_lock(&mu);
    have_model_thread = 0;
    model_released = 0;
    model_inside = NULL;
    pthread_mutex_unlock(&mu);
}

// in_model reports whether the caller runs on the model's loop thread.
static int in_model(void)
{
    pthread_mutex_lock(&mu);
    if (!have_model_thread) {
        have_model_thread = 1;
        model_thread = pthread_self();
    }
    int model = pthread_equal(model_thread, pthread_self());
    pthread_mutex_unlock(&mu);
    return model;
}

static const char* who(int model) { return model ? "model" : "copy"; }

// ct_release_model lets the model go on: its loop body blocked after
// breakLoop (ct_copy_carry), or its step inside the section (ct_copy_sync).
void ct_release_model(void)
{
    pthread_mutex_lock(&mu);
    model_released = 1;
    pthread_cond_broadcast(&model_cv);
    FutoInAsyncSteps* inside = model_inside;
    model_inside = NULL;
    pthread_mutex_unlock(&mu);
    if (inside != NULL) {
        ct_success(inside, NULL);
    }
}

static void carry_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    int model = in_model();
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_u8;
    out.arg0.u8 = model ? 1 : 2;
    ct_success(bsi, &out);
    ct_break(bsi, NULL); // wins: the args go past the loop
    if (!model) {
        return;
    }
    LOG("model broke");
    pthread_mutex_lock(&mu);
    while (!model_released) {
        pthread_cond_wait(&model_cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}

static void carry_after(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    LOG("%s after the loop: %s %u", who(in_model()), in->arg0.type != NULL ? "typed" : "NULL", in->arg0.u8);
}

void ct_copy_carry(FutoInAsyncSteps* root)
{
    copy_reset();
    ct_loop(root, NULL, carry_body, NULL);
    ct_add(root, NULL, carry_after, NULL);
}

static void sync_lock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    LOG("%s locks", who(in_model()));
    copy_sync->api->lock(bsi, copy_sync);
}

static void sync_lock_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    LOG("%s lock: %s", who(in_model()), code);
}

static void sync_inside(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    int model = in_model();
    if (model) {
        pthread_mutex_lock(&mu);
        model_inside = bsi;
        model_branch_id = bsi->api->rootId(bsi);
        pthread_mutex_unlock(&mu);
        bsi->api->waitExternal(bsi);
    }
    LOG("%s inside", who(model));
}

static void sync_unlock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    copy_sync->api->unlock(bsi, copy_sync);
    LOG("%s left", who(in_model()));
}

static void sync_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    ct_add(bsi, NULL, sync_lock, sync_lock_eh);
    ct_add(bsi, NULL, sync_inside, NULL);
    ct_add(bsi, NULL, sync_unlock, NULL);
}

void ct_copy_sync(FutoInAsyncSteps* root, FutoInSync* sync)
{
    copy_reset();
    copy_sync = sync;
    FutoInAsyncSteps* p = root->api->parallel(root, NULL, NULL);
    ct_add(p, NULL, sync_branch, NULL);
}

static int* model_stack; // the stack memory of the model's step in ct_copy_link

static void link_cleanup(void* p) { LOG("stack of %s cleaned up", who(*(int*)p)); }

static void link_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    int model = in_model();
    int* m = bsi->api->stack(bsi, sizeof(int), link_cleanup);
    *m = model;
    if (model) {
        model_stack = m;
    }
    bsi->api->handle_error(bsi, "Fail", NULL);
}

static void link_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    (void)code;
    if (!in_model()) {
        LOG("copy eh");
        ct_success(bsi, NULL);
        return;
    }
    LOG("model eh waits");
    pthread_mutex_lock(&mu);
    while (!model_released) {
        pthread_cond_wait(&model_cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    LOG("model eh: stack of %s", who(*model_stack));
    ct_success(bsi, NULL);
}

void ct_copy_link(FutoInAsyncSteps* root)
{
    copy_reset();
    ct_add(root, NULL, link_step, link_eh);
}

// A step of another implementation of the table whose flow has the rootId
// of the model's branch in ct_copy_sync: it has only what the lock function
// of our syncs calls.
typedef struct {
    const FutoInAsyncStepsAPI* api;
    ptrdiff_t id;
} other_step;

static ptrdiff_t other_root_id(FutoInAsyncSteps* bsi) { return ((other_step*)bsi)->id; }
static void other_wait(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("other table waits");
}
static void other_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    (void)bsi;
    (void)data;
    (void)ch;
}
static void other_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    LOG("other table locked");
}
static void other_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    (void)bsi;
    (void)info;
    LOG("other table lock: %s", code);
}
static const FutoInAsyncStepsAPI other_api = {{{
    .rootId = other_root_id,
    .waitExternal = other_wait,
    .setCancel = other_set_cancel,
    .success = other_success,
    .handle_error = other_error,
}}};
static other_step other = {&other_api, 0};

// ct_other_lock calls the lock function of sync for a step of another
// table with the rootId of the model's branch in ct_copy_sync.
void ct_other_lock(FutoInSync* sync)
{
    pthread_mutex_lock(&mu);
    other.id = model_branch_id;
    pthread_mutex_unlock(&mu);
    LOG("other table locks");
    sync->api->lock((FutoInAsyncSteps*)&other, sync);
}

// ---- reserved state variable names -------------------------------------------------

static void* reserved_alloc(void* data)
{
    LOG("alloc %s", (const char*)data);
    int* p = calloc(1, sizeof(int));
    *p = 40;
    return p;
}

static void reserved_cleanup(void* data, void* value)
{
    LOG("cleanup %s=%d", (const char*)data, *(int*)value);
    free(value);
}

static void reserved1(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    // With allocate, the reserved names are ordinary variables, used as the
    // caller's own objects (the C++ reference implementation does so).
    int* a = bsi->api->stateVariable(bsi, "error_info", "error_info", reserved_alloc, reserved_cleanup);
    int* b = bsi->api->stateVariable(bsi, "last_exception", "last_exception", reserved_alloc, reserved_cleanup);
    *a += 1;
    *b += 2;
    int* again = bsi->api->stateVariable(bsi, "error_info", "error_info", reserved_alloc, reserved_cleanup);
    LOG("reserved error_info=%d last_exception=%d same=%d", *a, *b, a == again);
    bsi->api->handle_error(bsi, "Reserved", "the info");
}

static void reserved_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    // Without allocate, they are still the error's info and code.
    LOG("reserved eh %s info=%s last_exception=%s", code,
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL),
        (const char*)bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL));
    ct_success(bsi, NULL);
}

void ct_reserved(FutoInAsyncSteps* root) { ct_add(root, NULL, reserved1, reserved_eh); }

// ---- a strict foreign table ----------------------------------------------------
//
// A small FutoInAsyncSteps implementation of its own, synchronous (no
// waiting), that behaves as the FutoIn C++ reference implementation does
// where the spec is silent: it takes over every value it is given in
// success (moves it out, resets the caller's slots) and dereferences args;
// it hands every step all four slots, the unused ones filled with
// placeholder custom objects of its own, and never cleans up what a step
// leaves in them (the receiver owns what it is given); it keeps loop label
// pointers for the loop's life and compares them at every iteration, break
// and continue; it implements state variables only through allocate (no
// reserved names); a running root is not valid.

typedef struct {
    FutoInAsyncSteps_execute_callback f;
    FutoInAsyncSteps_error_callback eh;
    void (*repeat)(FutoInAsyncSteps*, void*, size_t);
    void (*loop)(FutoInAsyncSteps*, void*); // repeat's count is then unbounded
    size_t count;
    void* data;
    const char* label; // kept as given, read at every iteration
    char label_copy[64];
} fk_step;

typedef struct {
    char name[128];
    void* value;
    void* data;
    void (*cleanup)(void*, void*);
} fk_var;

typedef struct fk fk;
struct fk {
    const FutoInAsyncStepsAPI* api;
    fk* root;
    fk_step subs[8];
    int nsubs;
    int completed, failed, waiting, running;
    char code[64];
    char info[64];
    FutoInArgs result;
    FutoInAsyncSteps_cancel_callback cancel; // setCancel's, if any
    void* cancel_data;
    // root only
    const FutoInAsyncStepsAPI* step_api; // the table of its steps: api but for ct_table_root
    fk_var vars[8];
    int nvars;
    FutoInArgs input;
    int cancel_on_error; // a failed step's cancel handler runs (see ct_cancel_on_error)
    int time_out_waiting; // a waiting step times out (see ct_time_out_waiting)
};

static int fk_placeholders; // placeholder objects alive

static void fk_init(fk* f, const FutoInAsyncStepsAPI* api, fk* root)
{
    memset(f, 0, sizeof(*f));
    f->api = api;
    f->root = root ? root : f;
    f->step_api = api;
}

static fk_step* fk_new_step(fk* self)
{
    if (self->completed) {
        LOG("VIOLATION: add after completion");
    }
    if (self->nsubs == 8) {
        LOG("VIOLATION: too many sub-steps for the fake");
        self->nsubs = 7;
    }
    fk_step* s = &self->subs[self->nsubs++];
    memset(s, 0, sizeof(*s));
    return s;
}

static void fk_add(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    if (f == NULL || eh == NULL) {
        LOG("VIOLATION: NULL callback given to add");
    }
    fk_step* s = fk_new_step((fk*)bsi);
    s->f = f;
    s->eh = eh;
    s->data = data;
}

static void fk_repeat(FutoInAsyncSteps* bsi, void* data, size_t count, void (*f)(FutoInAsyncSteps*, void*, size_t), const char* label)
{
    if (f == NULL) {
        LOG("VIOLATION: NULL callback given to repeat");
    }
    LOG("fake: repeat %zu label=%s", count, label ? label : "NULL");
    fk_step* s = fk_new_step((fk*)bsi);
    s->repeat = f;
    s->count = count;
    s->data = data;
    s->label = label;
    snprintf(s->label_copy, sizeof(s->label_copy), "%s", label ? label : "");
}

static void fk_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    fk* self = (fk*)bsi;
    if (args == NULL) {
        LOG("VIOLATION: success with NULL args (the C++ reference implementation dereferences it)");
        return;
    }
    if (self->nsubs > 0) {
        LOG("VIOLATION: success after add (a real implementation aborts here)");
    }
    if (self->completed) {
        LOG("VIOLATION: completed twice");
    }
    self->completed = 1;
    self->result = *args; // taken over
    memset(args, 0, sizeof(*args));
}

static void fk_fail(fk* self, const char* code, const char* info)
{
    if (self->completed) {
        LOG("VIOLATION: completed twice");
    }
    self->completed = 1;
    self->failed = 1;
    snprintf(self->code, sizeof(self->code), "%s", code);
    snprintf(self->info, sizeof(self->info), "%s", info ? info : "");
}

static void fk_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    LOG("fake: handle_error %s: %s", code, info ? info : "NULL");
    fk_fail((fk*)bsi, code, info);
}

static void fk_break(FutoInAsyncSteps* bsi, const char* label) { fk_fail((fk*)bsi, "LoopBreak", label); }
static void fk_continue(FutoInAsyncSteps* bsi, const char* label) { fk_fail((fk*)bsi, "LoopCont", label); }

static void* fk_state_variable(FutoInAsyncSteps* bsi, void* data, const char* name, void* (*allocate)(void*), void (*cleanup)(void*, void*))
{
    pthread_mutex_lock(&mu);
    ++state_variable_calls;
    pthread_mutex_unlock(&mu);
    fk* root = ((fk*)bsi)->root;
    for (int i = 0; i < root->nvars; ++i) {
        if (strcmp(root->vars[i].name, name) == 0) {
            return root->vars[i].value;
        }
    }
    if (allocate == NULL || root->nvars == 8) {
        return NULL;
    }
    if (cleanup == NULL) {
        LOG("VIOLATION: NULL cleanup given to stateVariable");
    }
    fk_var* v = &root->vars[root->nvars++];
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->data = data;
    v->value = allocate(data);
    v->cleanup = cleanup;
    return v->value;
}

static void fk_wait(FutoInAsyncSteps* bsi)
{
    ((fk*)bsi)->waiting = 1;
    LOG("fake: waitExternal");
}

static ptrdiff_t fk_root_id(FutoInAsyncSteps* bsi) { return (ptrdiff_t)((fk*)bsi)->root; }
static int fk_is_valid(FutoInAsyncSteps* bsi)
{
    fk* self = (fk*)bsi;
    return self == self->root ? !self->running : !self->completed;
}
static int fk_same_thread(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    return 1;
}

// The fake's event loop: one pending callback, run by ct_fake_run_sched.
static void (*fk_sched_cb)(void*);
static void* fk_sched_data;

static FutoInHandle fk_sched_immediate(FutoInAsyncSteps* bsi, void* data, void (*cb)(void* data))
{
    (void)bsi;
    fk_sched_cb = cb;
    fk_sched_data = data;
    FutoInHandle h = {NULL, NULL, 1};
    return h;
}

int ct_fake_run_sched(void)
{
    void (*cb)(void*) = fk_sched_cb;
    fk_sched_cb = NULL;
    if (cb == NULL) {
        return 0;
    }
    cb(fk_sched_data);
    LOG("fake: sched callback returned");
    return 1;
}

static const FutoInAsyncStepsAPI fk_api = {{{
    .add = fk_add,
    .stateVariable = fk_state_variable,
    .success = fk_success,
    .handle_error = fk_handle_error,
    .waitExternal = fk_wait,
    .repeat = fk_repeat,
    .breakLoop = fk_break,
    .continueLoop = fk_continue,
    .rootId = fk_root_id,
    .isValid = fk_is_valid,
    .is_same_thread = fk_same_thread,
    .sched_immediate = fk_sched_immediate,
}}};

static void placeholder_cleanup(FutoInBinaryValue* v)
{
    free(v->custom_data);
    pthread_mutex_lock(&mu);
    --fk_placeholders;
    pthread_mutex_unlock(&mu);
}
static const FutoInType t_placeholder = {FTN_TYPE_CUSTOM_OBJECT, placeholder_cleanup};

// fk_fill fills the unused slots of args with placeholder objects.
static void fk_fill(FutoInArgs* args)
{
    for (int k = 0; k < 4; ++k) {
        if (args->args[k].type == NULL) {
            args->args[k].type = &t_placeholder;
            args->args[k].custom_data = malloc(16);
            pthread_mutex_lock(&mu);
            ++fk_placeholders;
            pthread_mutex_unlock(&mu);
        }
    }
}

static void fk_run(fk* self, FutoInArgs* in);

// fk_settle looks at a finished step: 0 on success (its result in *out), 1 on error.
static int fk_settle(fk* child, fk_step* s, FutoInArgs* out)
{
    if (!child->failed && child->nsubs > 0) {
        fk_run(child, NULL);
        if (!child->failed) {
            *out = child->result;
            return 0;
        }
    }
    if (child->waiting && !child->completed && child->root->time_out_waiting) {
        LOG("fake: the waiting step times out");
        if (child->cancel != NULL) {
            FutoInAsyncSteps_cancel_callback ch = child->cancel;
            child->cancel = NULL;
            ch((FutoInAsyncSteps*)child, child->cancel_data);
            LOG("fake: cancel handler returned");
        }
        fk_fail(child, "Timeout", "");
    }
    if (child->failed) {
        if (child->root->cancel_on_error && child->cancel != NULL) {
            FutoInAsyncSteps_cancel_callback ch = child->cancel;
            child->cancel = NULL;
            ch((FutoInAsyncSteps*)child, child->cancel_data);
            LOG("fake: cancel handler returned");
        }
        if (s->eh == NULL) {
            return 1;
        }
        fk h;
        fk_init(&h, child->root->step_api, child->root);
        s->eh((FutoInAsyncSteps*)&h, s->data, child->code);
        if (h.nsubs > 0 && !h.failed) { // a failed handler's sub-steps never run
            fk_run(&h, NULL);
        }
        if (h.completed && !h.failed) {
            *out = h.result;
            return 0;
        }
        if (h.failed) {
            snprintf(child->code, sizeof(child->code), "%s", h.code);
            snprintf(child->info, sizeof(child->info), "%s", h.info);
        }
        return 1;
    }
    if (child->waiting && !child->completed) {
        // Given up, as a cancel of the flow would: its cancel handler runs.
        LOG("fake: the step waits: not supported");
        if (child->cancel != NULL) {
            child->cancel((FutoInAsyncSteps*)child, child->cancel_data);
            LOG("fake: cancel handler returned");
        }
        return 1;
    }
    if (!child->completed) {
        LOG("VIOLATION: a step returned without completing (no implicit success here)");
        return 1;
    }
    *out = child->result;
    return 0;
}

// fk_loop_ends reports whether the error of an iteration ends the loop s
// (0: go on with the next iteration, 1: stop it, 2: the error goes on).
static int fk_loop_ends(fk_step* s, fk* child)
{
    if (strcmp(s->label ? s->label : "", s->label_copy) != 0) {
        LOG("VIOLATION: the loop's label changed under it");
    }
    int brk = strcmp(child->code, "LoopBreak") == 0, cont = strcmp(child->code, "LoopCont") == 0;
    if (!brk && !cont) {
        return 2;
    }
    if (child->info[0] != 0 && (s->label == NULL || strcmp(child->info, s->label) != 0)) {
        return 2; // another loop's
    }
    return brk ? 1 : 0;
}

static void fk_run(fk* self, FutoInArgs* in)
{
    FutoInArgs args;
    memset(&args, 0, sizeof(args));
    if (in != NULL) {
        args = *in;
    }
    for (int i = 0; i < self->nsubs; ++i) {
        fk_step* s = &self->subs[i];
        FutoInArgs out;
        memset(&out, 0, sizeof(out));
        if (s->repeat != NULL || s->loop != NULL) {
            for (size_t j = 0; s->loop != NULL || j < s->count; ++j) {
                if (s->loop != NULL && j == 100) {
                    LOG("VIOLATION: a loop of the fake ran 100 times");
                    break;
                }
                fk child;
                fk_init(&child, self->root->step_api, self->root);
                if (s->loop != NULL) {
                    s->loop((FutoInAsyncSteps*)&child, s->data);
                } else {
                    s->repeat((FutoInAsyncSteps*)&child, s->data, j);
                }
                FutoInArgs ignored;
                memset(&ignored, 0, sizeof(ignored));
                if (fk_settle(&child, s, &ignored)) {
                    int r = fk_loop_ends(s, &child);
                    if (r == 0) {
                        continue;
                    }
                    if (r == 1) {
                        break;
                    }
                    fk_fail(self, child.code, child.info);
                    return;
                }
                for (int k = 0; k < 4; ++k) {
                    futoin_reset_binval(&ignored.args[k]);
                }
            }
        } else {
            fk child;
            fk_init(&child, self->root->step_api, self->root);
            fk_fill(&args);
            s->f((FutoInAsyncSteps*)&child, s->data, &args);
            // What the step left in args is its own: not cleaned up here.
            int failed = fk_settle(&child, s, &out);
            if (failed) {
                self->completed = 0;
                fk_fail(self, child.code, child.info);
                return;
            }
        }
        args = out;
    }
    self->result = args;
}

FutoInAsyncSteps* ct_fake_root(void)
{
    fk* r = malloc(sizeof(fk));
    fk_init(r, &fk_api, NULL);
    return (FutoInAsyncSteps*)r;
}

// ---- a fake event loop for the Tool of a foreign table -------------------------

// The event loop of ct_table_root's tables: a queue of callbacks that
// ct_sched_run runs in order, the handle of each valid until it runs or is
// cancelled; is_same_thread is 1 in those callbacks only. Delays are not
// kept: a deferred callback is queued as an immediate one.
#define FS_MAX 64
static pthread_mutex_t fs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void (*cb)(void*);
    void* data;
    int live;
} fs_queue[FS_MAX];
static int fs_len;
static __thread int fs_running;

static FutoInHandle fs_push(void* data, void (*cb)(void*))
{
    FutoInHandle h = {NULL, NULL, 0};
    pthread_mutex_lock(&fs_mu);
    if (cb != NULL && fs_len < FS_MAX) {
        fs_queue[fs_len].cb = cb;
        fs_queue[fs_len].data = data;
        fs_queue[fs_len].live = 1;
        h.data3 = ++fs_len; // the entry's index + 1
    }
    pthread_mutex_unlock(&fs_mu);
    return h;
}

static FutoInHandle fs_immediate(FutoInAsyncSteps* bsi, void* data, void (*cb)(void*))
{
    (void)bsi;
    return fs_push(data, cb);
}

static FutoInHandle fs_deferred(FutoInAsyncSteps* bsi, uint32_t ms, void* data, void (*cb)(void*))
{
    (void)bsi;
    LOG("fake sched: deferred %u ms", ms);
    return fs_push(data, cb);
}

static void fs_cancel(FutoInAsyncSteps* bsi, FutoInHandle* h)
{
    (void)bsi;
    pthread_mutex_lock(&fs_mu);
    if (h != NULL && h->data3 > 0 && h->data3 <= fs_len) {
        fs_queue[h->data3 - 1].live = 0;
    }
    pthread_mutex_unlock(&fs_mu);
}

static int fs_is_valid(FutoInAsyncSteps* bsi, FutoInHandle* h)
{
    (void)bsi;
    pthread_mutex_lock(&fs_mu);
    int live = h != NULL && h->data3 > 0 && h->data3 <= fs_len && fs_queue[h->data3 - 1].live;
    pthread_mutex_unlock(&fs_mu);
    return live;
}

static int fs_same_thread(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    return fs_running;
}

// ct_sched_run runs the queued callbacks, those they queue included, and
// returns how many ran (a cancelled one does not run).
int ct_sched_run(void)
{
    int ran = 0;
    pthread_mutex_lock(&fs_mu);
    for (int i = 0; i < fs_len; ++i) {
        if (!fs_queue[i].live) {
            continue;
        }
        fs_queue[i].live = 0;
        void (*cb)(void*) = fs_queue[i].cb;
        void* data = fs_queue[i].data;
        pthread_mutex_unlock(&fs_mu);
        fs_running = 1;
        cb(data);
        fs_running = 0;
        ++ran;
        pthread_mutex_lock(&fs_mu);
    }
    fs_len = 0;
    pthread_mutex_unlock(&fs_mu);
    return ran;
}

// ---- a foreign table with every function, or all but some -----------------------

// The entries fk_api leaves NULL. setTimeout and setCancel make the step
// wait, as waitExternal does (setCancel keeps its handler, which runs if
// the fake gives the step up); loop is run by fk_run. The library never
// calls the others on a foreign table: its parallel is not supported here
// (it gives NULL), and a call of stack, execute, cancel, addSync,
// newInstance or free is a VIOLATION.
static void fk_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms)
{
    LOG("fake: setTimeout %u ms", ms);
    ((fk*)bsi)->waiting = 1;
}

static void fk_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    fk* self = (fk*)bsi;
    LOG("fake: setCancel");
    self->waiting = 1;
    self->cancel = ch;
    self->cancel_data = data;
}

static void fk_loop(FutoInAsyncSteps* bsi, void* data, void (*f)(FutoInAsyncSteps*, void*), const char* label)
{
    if (f == NULL) {
        LOG("VIOLATION: NULL callback given to loop");
    }
    LOG("fake: loop label=%s", label ? label : "NULL");
    fk_step* s = fk_new_step((fk*)bsi);
    s->loop = f;
    s->data = data;
    s->label = label;
    snprintf(s->label_copy, sizeof(s->label_copy), "%s", label ? label : "");
}

static FutoInAsyncSteps* fk_parallel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback eh)
{
    (void)bsi;
    (void)data;
    (void)eh;
    LOG("fake: parallel: not supported");
    return NULL;
}

static void* fk_stack(FutoInAsyncSteps* bsi, size_t size, void (*cleanup)(void*))
{
    (void)bsi;
    (void)size;
    (void)cleanup;
    LOG("VIOLATION: stack called");
    return NULL;
}

static void fk_execute(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback unhandled)
{
    (void)bsi;
    (void)data;
    (void)unhandled;
    LOG("VIOLATION: execute called");
}

static void fk_cancel(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("VIOLATION: cancel called");
}

static void fk_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    (void)bsi;
    (void)sync;
    (void)data;
    (void)f;
    (void)eh;
    LOG("VIOLATION: addSync called");
}

static FutoInAsyncSteps* fk_new_instance(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("VIOLATION: newInstance called");
    return NULL;
}

static void fk_free_root(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("VIOLATION: free called");
}

// The roots of ct_table_root and the tables they own: the root's table,
// and the one its steps are given.
typedef struct {
    fk root;
    FutoInAsyncStepsAPI api;
    FutoInAsyncStepsAPI step_api;
} ft_root;

static void ft_fill(FutoInAsyncStepsAPI* api, uint32_t missing)
{
    *api = fk_api;
    api->parallel = fk_parallel;
    api->stack = fk_stack;
    api->setTimeout = fk_set_timeout;
    api->setCancel = fk_set_cancel;
    api->loop = fk_loop;
    api->execute = fk_execute;
    api->cancel = fk_cancel;
    api->addSync = fk_add_sync;
    api->newInstance = fk_new_instance;
    api->free = fk_free_root;
    api->sched_immediate = fs_immediate;
    api->sched_deferred = fs_deferred;
    api->sched_cancel = fs_cancel;
    api->sched_is_valid = fs_is_valid;
    api->is_same_thread = fs_same_thread;
    for (int i = 0; i < 25; ++i) {
        if (missing & (UINT32_C(1) << i)) {
            api->funcs[i] = NULL;
        }
    }
}

FutoInAsyncSteps* ct_table_root(uint32_t missing, int steps_only)
{
    ft_root* r = malloc(sizeof(ft_root));
    ft_fill(&r->api, steps_only ? 0 : missing);
    ft_fill(&r->step_api, missing);
    fk_init(&r->root, &r->api, NULL);
    r->root.step_api = &r->step_api;
    return (FutoInAsyncSteps*)r; // its first member: ct_fake_free frees it all
}

// ct_cancel_on_error makes a root of ct_table_root run the cancel handler
// of a step that fails, once its callback has returned and before its
// error handler, as the C++ reference implementation does.
void ct_cancel_on_error(FutoInAsyncSteps* root) { ((fk*)root)->cancel_on_error = 1; }

// ct_time_out_waiting makes a root of ct_table_root time out a step that
// waits once its callback has returned, as if its timeout passed at once:
// its cancel handler runs, then its error handler, with Timeout.
void ct_time_out_waiting(FutoInAsyncSteps* root) { ((fk*)root)->time_out_waiting = 1; }

// ---- a C step of the fake that calls Go --------------------------------------------

extern void ctFakeCGo(FutoInAsyncSteps* bsi);

static void fake_c_go_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    LOG("fake: C step calls Go");
    // The receiver owns what it is given: cleaned up as it is taken over.
    for (int k = 0; k < 4; ++k) {
        futoin_reset_binval((FutoInBinaryValue*)&in->args[k]);
    }
    ctFakeCGo(bsi);
}

static void fake_c_go_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    LOG("fake: C error handler %s", code);
}

void ct_fake_c_go(FutoInAsyncSteps* root)
{
    fk_add(root, NULL, fake_c_go_step, fake_c_go_error);
}

void ct_log(const char* s) { LOG("%s", s); }

static int string_cleanups;
static void counted_string_cleanup(FutoInBinaryValue* v)
{
    free((void*)v->p);
    pthread_mutex_lock(&mu);
    ++string_cleanups;
    pthread_mutex_unlock(&mu);
}
static const FutoInType t_fake_string = {FTN_TYPE_STRING, counted_string_cleanup};

void ct_fake_run(FutoInAsyncSteps* root)
{
    fk* r = (fk*)root;
    pthread_mutex_lock(&mu);
    string_cleanups = 0; // this run's (go test -count=N runs it again)
    pthread_mutex_unlock(&mu);
    FutoInArgs in;
    memset(&in, 0, sizeof(in));
    in.arg0.type = &t_fake_string;
    in.arg0.cstr = strdup("from the fake");
    in.arg0.length = 13;
    r->running = 1;
    LOG("fake: running root valid=%d", fk_is_valid(root));
    fk_run(r, &in);
    r->running = 0;
    LOG("fake: end failed=%d %s string cleanups=%d", r->failed, r->failed ? r->code : "", string_cleanups);
    for (int k = 0; k < 4; ++k) {
        futoin_reset_binval(&r->result.args[k]);
    }
}

int ct_fake_placeholders(void)
{
    pthread_mutex_lock(&mu);
    int n = fk_placeholders;
    pthread_mutex_unlock(&mu);
    return n;
}

void ct_fake_free(FutoInAsyncSteps* root)
{
    fk* r = (fk*)root;
    for (int i = 0; i < r->nvars; ++i) {
        r->vars[i].cleanup(r->vars[i].data, r->vars[i].value);
    }
    free(r);
}

// Foreign FutoInSyncs that cannot lock: without a table (which 0), with a
// table whose lock is NULL (1), or whose unlock is NULL (2).
static const FutoInSyncAPI no_lock_api = {{{NULL, fake_unlock}}};
static const FutoInSyncAPI no_unlock_api = {{{fake_lock, NULL}}};

FutoInSync* ct_broken_sync(int which)
{
    static struct {
        const FutoInSyncAPI* api;
    } s[3] = {{NULL}, {&no_lock_api}, {&no_unlock_api}};
    return (FutoInSync*)&s[which];
}

// ct_handle_error calls handle_error on bsi, as a C library handed a Go
// step does.
void ct_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    bsi->api->handle_error(bsi, code, info);
}

// ---- a sync's lock function from Go steps of parallel branches ----------------------
//
// Branch i's Go step is given to C (cabi.Binary); ct_branch_lock adds on it
// C steps that lock a sync through its lock function, wait inside (the
// first branch in: until a second one is in, or it is cancelled) and
// unlock it.

typedef struct {
    const char* name;
    ptrdiff_t go_id; // the rootId of the Go step given to C
} branch_lock;

static branch_lock branch_locks[2] = {{"A", 0}, {"B", 0}};
static FutoInSync* branch_sync;
static FutoInAsyncSteps* branch_inside; // the first branch in, waiting there

static void bl_lock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    branch_lock* b = data;
    enter(bsi);
    LOG("%s locks, same rootId as its Go step=%d", b->name, bsi->api->rootId(bsi) == b->go_id);
    branch_sync->api->lock(bsi, branch_sync);
}

static void bl_lock_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    LOG("%s lock: %s", ((branch_lock*)data)->name, code);
}

static void bl_cancel(FutoInAsyncSteps* bsi, void* data)
{
    LOG("%s cancelled", ((branch_lock*)data)->name);
    branch_inside = NULL;
    branch_sync->api->unlock(bsi, branch_sync);
}

static void bl_inside(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    branch_lock* b = data;
    enter(bsi);
    LOG("%s inside", b->name);
    FutoInAsyncSteps* first = branch_inside;
    if (first == NULL) {
        branch_inside = bsi;
        bsi->api->setCancel(bsi, data, bl_cancel);
        bsi->api->waitExternal(bsi);
        return;
    }
    branch_inside = NULL;
    first->api->success(first, NULL);
}

static void bl_unlock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    branch_sync->api->unlock(bsi, branch_sync);
    LOG("%s left", ((branch_lock*)data)->name);
}

void ct_branch_lock(FutoInAsyncSteps* bsi, FutoInSync* sync, int i)
{
    branch_lock* b = &branch_locks[i];
    b->go_id = bsi->api->rootId(bsi);
    branch_sync = sync;
    if (i == 0) {
        branch_inside = NULL;
    }
    ct_add(bsi, b, bl_lock, bl_lock_eh);
    ct_add(bsi, b, bl_inside, NULL);
    ct_add(bsi, b, bl_unlock, NULL);
}

ptrdiff_t ct_root_id(FutoInAsyncSteps* bsi) { return bsi->api->rootId(bsi); }

// ---- a sync's lock function for a table without rootId ------------------------------
//
// Each anon_step is a step of a flow of its own, of a table that has no
// rootId function: the lock function of our syncs cannot tell its flows
// apart.

typedef struct {
    const FutoInAsyncStepsAPI* api;
    int n;
} anon_step;

static void anon_wait(FutoInAsyncSteps* bsi) { LOG("anon %d waits", ((anon_step*)bsi)->n); }
static void anon_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    (void)args;
    LOG("anon %d locked", ((anon_step*)bsi)->n);
}
static void anon_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    (void)info;
    LOG("anon %d lock: %s", ((anon_step*)bsi)->n, code);
}
static const FutoInAsyncStepsAPI anon_api = {{{
    .waitExternal = anon_wait,
    .setCancel = other_set_cancel,
    .success = anon_success,
    .handle_error = anon_error,
}}};
static anon_step anon_steps[3] = {{&anon_api, 1}, {&anon_api, 2}, {&anon_api, 3}};

// ct_anon_lock calls the lock function of sync for step n (1 to 3) of
// such a table ("anon N locks").
void ct_anon_lock(FutoInSync* sync, int n)
{
    LOG("anon %d locks", n);
    sync->api->lock((FutoInAsyncSteps*)&anon_steps[n - 1], sync);
}

// ct_anon_unlock calls the unlock function of sync for step n.
void ct_anon_unlock(FutoInSync* sync, int n)
{
    LOG("anon %d unlocks", n);
    sync->api->unlock((FutoInAsyncSteps*)&anon_steps[n - 1], sync);
}

// ---- a Go step in the branch of a C parallel ----------------------------------------

extern void ctGoInBranch(FutoInAsyncSteps* bsi);

static ptrdiff_t c_branch_id; // the rootId of the C branch's step

static void c_branch_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    pthread_mutex_lock(&mu);
    c_branch_id = bsi->api->rootId(bsi);
    pthread_mutex_unlock(&mu);
    ctGoInBranch(bsi);
}

void ct_c_branch_go(FutoInAsyncSteps* root)
{
    FutoInAsyncSteps* p = root->api->parallel(root, NULL, NULL);
    ct_add(p, NULL, c_branch_step, NULL);
}

// ct_sync_go adds a step that enters sync and, inside, calls the Go
// function of ct_c_branch_go with its pointer, then returns.
void ct_sync_go(FutoInAsyncSteps* root, FutoInSync* sync) { ct_add_sync(root, sync, NULL, c_branch_step, NULL); }

ptrdiff_t ct_c_branch_id(void)
{
    pthread_mutex_lock(&mu);
    ptrdiff_t id = c_branch_id;
    pthread_mutex_unlock(&mu);
    return id;
}

// ---- success from another thread passing on the step's own input -------------------

// pass_make succeeds with a custom object; pass_async hands it, still in
// its slot, to a thread that passes it on in success while the callback
// returns (it waits only until the thread is about to call success);
// pass_end leaves it to the library, which cleans it up once.
typedef struct {
    FutoInAsyncSteps* bsi;
    FutoInBinaryValue v;
} pass_job;

static int pass_started;

static void pass_make(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    int* p = malloc(sizeof(int));
    *p = 7;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &t_custom;
    out.arg0.p = p;
    bsi->api->success(bsi, &out);
}

static void* pass_thread(void* arg)
{
    pass_job* j = arg;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0 = j->v;
    __atomic_store_n(&pass_started, 1, __ATOMIC_SEQ_CST);
    j->bsi->api->success(j->bsi, &out);
    free(j);
    return NULL;
}

static void pass_async(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    pass_job* j = malloc(sizeof(*j));
    j->bsi = bsi;
    j->v = in->arg0;
    bsi->api->waitExternal(bsi);
    __atomic_store_n(&pass_started, 0, __ATOMIC_SEQ_CST);
    pthread_t t;
    pthread_create(&t, NULL, pass_thread, j);
    pthread_detach(t);
    while (!__atomic_load_n(&pass_started, __ATOMIC_SEQ_CST)) {
    }
}

static void pass_end(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    if (in->arg0.type != &t_custom || *(const int*)in->arg0.p != 7) {
        LOG("pass_end got no custom object");
    }
    bsi->api->success(bsi, NULL);
}

void ct_pass_async(FutoInAsyncSteps* step)
{
    step->api->add(step, NULL, pass_make, NULL);
    step->api->add(step, NULL, pass_async, NULL);
    step->api->add(step, NULL, pass_end, NULL);
}

// ---- a step that frees its own root ---------------------------------------------

static FutoInAsyncSteps* free_own_root;

static void free_own(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("free own root");
    free_own_root->api->free(free_own_root);
}

// ct_free_own adds to root a step that frees root ("free own root").
void ct_free_own(FutoInAsyncSteps* root)
{
    free_own_root = root;
    ct_add(root, NULL, free_own, NULL);
}

// ---- a sync's lock function for a step of another table that is cancelled ---------
//
// The cancel_step is a step of another implementation of the table that
// calls the lock function of our sync, and is then cancelled: once its
// cancel handler has returned, the step is gone (its memory freed, in a
// real implementation), and a success or handle_error on it is a use
// after free, logged here.

typedef struct {
    const FutoInAsyncStepsAPI* api;
    void* data;
    FutoInAsyncSteps_cancel_callback cancel;
    int gone; // its cancel handler has returned
} cancel_step;

static cancel_step cancelled_step;

// cancel_unwinds: the cancel_step's handle_error unwinds the step as an
// implementation of FTN12 does, calling the step's cancel handler before
// it returns (ct_cancel_step_unwinds).
static int cancel_unwinds;

static int cancel_gone(void) { return __atomic_load_n(&cancelled_step.gone, __ATOMIC_SEQ_CST); }
static ptrdiff_t cancel_root_id(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    return 77;
}
static void cancel_wait(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("cancelled step waits");
}
static void cancel_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    (void)bsi;
    pthread_mutex_lock(&mu);
    cancelled_step.data = data;
    cancelled_step.cancel = ch;
    pthread_mutex_unlock(&mu);
}
// cancel_races: the cancel_step's success has another thread call its
// cancel handler meanwhile, as a cancel of its flow that comes while the
// success runs (ct_cancel_step_races); race_returned is set once that
// cancel handler has returned.
static int cancel_races, race_returned;
static pthread_t race_thread;
static int race_started;

static void* race_cancel(void* arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    void* data = cancelled_step.data;
    FutoInAsyncSteps_cancel_callback ch = cancelled_step.cancel;
    pthread_mutex_unlock(&mu);
    if (ch != NULL) {
        ch((FutoInAsyncSteps*)&cancelled_step, data);
    }
    __atomic_store_n(&race_returned, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void cancel_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    LOG(cancel_gone() ? "cancelled step: success after its cancel handler" : "cancelled step locked");
    if (!__atomic_load_n(&cancel_races, __ATOMIC_SEQ_CST)) {
        return;
    }
    __atomic_store_n(&race_returned, 0, __ATOMIC_SEQ_CST);
    race_started = pthread_create(&race_thread, NULL, race_cancel, NULL) == 0;
    // A cancel handler that waits for the success under way returns only
    // after it; one that does not returns meanwhile, here within 200 ms.
    for (int i = 0; i < 200 && !__atomic_load_n(&race_returned, __ATOMIC_SEQ_CST); i++) {
        usleep(1000);
    }
    if (__atomic_load_n(&race_returned, __ATOMIC_SEQ_CST)) {
        LOG("cancelled step: its cancel handler returned during its success");
    }
}

// ct_cancel_step_races sets whether the cancel_step's success has another
// thread call its cancel handler meanwhile.
void ct_cancel_step_races(int on) { __atomic_store_n(&cancel_races, on, __ATOMIC_SEQ_CST); }

// ct_cancel_race_wait waits until the cancel handler that the success
// had called on another thread has returned.
void ct_cancel_race_wait(void)
{
    if (race_started) {
        pthread_join(race_thread, NULL);
        race_started = 0;
    }
}
static void cancel_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    (void)bsi;
    (void)info;
    LOG(cancel_gone() ? "cancelled step: %s after its cancel handler" : "cancelled step lock: %s", code);
    if (__atomic_load_n(&cancel_unwinds, __ATOMIC_SEQ_CST) && !cancel_gone()) {
        ct_cancel_locker();
    }
}
static const FutoInAsyncStepsAPI cancel_api = {{{
    .rootId = cancel_root_id,
    .waitExternal = cancel_wait,
    .setCancel = cancel_set_cancel,
    .success = cancel_success,
    .handle_error = cancel_error,
}}};

// ct_cancel_step_unwinds sets whether the cancel_step's handle_error
// calls its cancel handler, as the unwinding of a real implementation.
void ct_cancel_step_unwinds(int on) { __atomic_store_n(&cancel_unwinds, on, __ATOMIC_SEQ_CST); }

// ct_cancel_lock calls the lock function of sync for the cancel_step
// ("cancelled step locks").
void ct_cancel_lock(FutoInSync* sync)
{
    pthread_mutex_lock(&mu);
    cancelled_step.api = &cancel_api;
    cancelled_step.data = NULL;
    cancelled_step.cancel = NULL;
    pthread_mutex_unlock(&mu);
    __atomic_store_n(&cancelled_step.gone, 0, __ATOMIC_SEQ_CST);
    LOG("cancelled step locks");
    sync->api->lock((FutoInAsyncSteps*)&cancelled_step, sync);
}

// ct_cancel_locker cancels the cancel_step: it calls the cancel handler
// the step was given, if any ("cancelled step cancelled"), after which
// the step is gone.
void ct_cancel_locker(void)
{
    pthread_mutex_lock(&mu);
    void* data = cancelled_step.data;
    FutoInAsyncSteps_cancel_callback ch = cancelled_step.cancel;
    pthread_mutex_unlock(&mu);
    LOG("cancelled step cancelled");
    if (ch != NULL) {
        ch((FutoInAsyncSteps*)&cancelled_step, data);
    }
    __atomic_store_n(&cancelled_step.gone, 1, __ATOMIC_SEQ_CST);
}

// ---- a sync's lock function for a table that lacks some functions ------------------
//
// The bare_step is a step of another implementation of the table that has
// only what the lock function of our syncs may call (rootId, waitExternal,
// setCancel, success, handle_error), but for the entries whose bit is set
// in the missing of ct_bare_lock (bit i for index i), which are NULL. Each
// call logs; success and handle_error may come from another thread.
//
// The success of a lock step may come from the hidden flow's loop before
// or after lock returns on the caller's thread: nothing orders the two.
// ct_bare_order forces one order (CT_BARE_LOCKED_FIRST,
// CT_BARE_RETURNED_FIRST), so that a test sees each deterministically:
// the side that is to come second waits, before it logs, until the first
// one has logged (5 s at most: a bound on a hang, the trace then shows it).

typedef struct {
    const FutoInAsyncStepsAPI* api;
    FutoInAsyncStepsAPI own;
    void* cancel_data;
    FutoInAsyncSteps_cancel_callback cancel;
} bare_step;

static bare_step bare;
static int bare_succeeded; // the bare step's success has logged
static int bare_returned;  // ct_bare_lock has logged the return of lock
static pthread_cond_t bare_cond = PTHREAD_COND_INITIALIZER;

void ct_bare_order(int order)
{
    pthread_mutex_lock(&mu);
    bare_order = order;
    pthread_mutex_unlock(&mu);
}

// bare_await waits, if order is the one forced, until *first is set.
static void bare_await(int order, const int* first)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&mu);
    while (bare_order == order && !*first) {
        if (pthread_cond_timedwait(&bare_cond, &mu, &deadline) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&mu);
}

// bare_done sets *flag, once its side has logged, and wakes bare_await.
static void bare_done(int* flag)
{
    pthread_mutex_lock(&mu);
    *flag = 1;
    pthread_cond_broadcast(&bare_cond);
    pthread_mutex_unlock(&mu);
}

static ptrdiff_t bare_root_id(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    return 1;
}
static void bare_wait(FutoInAsyncSteps* bsi)
{
    (void)bsi;
    LOG("bare waits");
}
static void bare_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    (void)bsi;
    pthread_mutex_lock(&mu);
    bare.cancel = ch;
    bare.cancel_data = data;
    pthread_mutex_unlock(&mu);
    LOG("bare setCancel");
}
static void bare_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    bare_await(CT_BARE_RETURNED_FIRST, &bare_returned);
    LOG("bare locked");
    bare_done(&bare_succeeded);
}
static void bare_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    (void)bsi;
    LOG("bare lock: %s: %s", code, info ? info : "NULL");
}
static const FutoInAsyncStepsAPI bare_api = {{{
    .rootId = bare_root_id,
    .waitExternal = bare_wait,
    .setCancel = bare_set_cancel,
    .success = bare_success,
    .handle_error = bare_error,
}}};

void ct_bare_lock(FutoInSync* sync, uint32_t missing)
{
    pthread_mutex_lock(&mu);
    bare.own = bare_api;
    for (int i = 0; i < 25; ++i) {
        if (missing & (UINT32_C(1) << i)) {
            bare.own.funcs[i] = NULL;
        }
    }
    bare.api = &bare.own;
    bare.cancel = NULL;
    bare.cancel_data = NULL;
    bare_succeeded = 0;
    bare_returned = 0;
    pthread_mutex_unlock(&mu);
    LOG("bare locks");
    sync->api->lock((FutoInAsyncSteps*)&bare, sync);
    bare_await(CT_BARE_LOCKED_FIRST, &bare_succeeded);
    LOG("bare lock returned");
    bare_done(&bare_returned);
}

void ct_bare_cancel(void)
{
    pthread_mutex_lock(&mu);
    void* data = bare.cancel_data;
    FutoInAsyncSteps_cancel_callback ch = bare.cancel;
    bare.cancel = NULL;
    pthread_mutex_unlock(&mu);
    LOG("bare cancelled");
    if (ch != NULL) {
        ch((FutoInAsyncSteps*)&bare, data);
    }
}

void ct_bare_unlock(FutoInSync* sync)
{
    LOG("bare unlocks");
    sync->api->unlock((FutoInAsyncSteps*)&bare, sync);
}

// ---- an integer as data --------------------------------------------------------

extern void ctGrowStack(void);

static void int_data_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    ctGrowStack();
    LOG("int data cancel %d", (int)(intptr_t)data);
}

static void int_data_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    ctGrowStack();
    LOG("int data step %d", (int)(intptr_t)data);
}

static void int_data_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    enter(bsi);
    ctGrowStack();
    LOG("int data eh %s %d", code, (int)(intptr_t)data);
    ct_success(bsi, NULL);
}

static void int_data_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    enter(bsi);
    bsi->api->setCancel(bsi, (void*)(intptr_t)5, int_data_cancel);
    bsi->api->setTimeout(bsi, 1);
    ctGrowStack();
    LOG("int data wait %d", (int)(intptr_t)data);
}

// ct_int_data adds steps whose data is a small integer, as C code often
// passes: a step that logs it, and one that waits with a cancel handler
// until its timeout, whose error handler logs it; each makes Go grow the goroutine's stack meanwhile, which
// checks every Go frame below for pointers that are not.
void ct_int_data(FutoInAsyncSteps* root)
{
    ct_add(root, (void*)(intptr_t)3, int_data_step, NULL);
    ct_add(root, (void*)(intptr_t)4, int_data_wait, int_data_eh);
}

// ---- calls that only a step's own callback may make ------------------------------
//
// ct_own_call: a repeat(3, "outer") whose body, the step P, gets call (an
// OC_* below) on its pointer from elsewhere (where): 0 from a C sub-step of
// P, 1 from a C sub-step of a step of a parallel branch that a sub-step of
// P added, 2 from a callback of the tool (sched_immediate) once P waits
// with a cancel handler (logging "body cancel handler"), 3
// from a C thread that P's callback starts and joins once P waits (the
// call reaches the loop after P's callback); 4 from the callback of the
// second branch of a parallel made in the body, on the first branch's
// step, which is then P: its callback has returned, waiting with a cancel
// handler (logging "body cancel handler"). From 2, 3 and 4, a completion
// of P follows the call: a success, as a waiting step usually gets, or
// after breakLoop and continueLoop, which complete P themselves, an error
// Late; the second branch then succeeds.
// A step after the loop logs "after the loop".

enum {
    OC_ADD,
    OC_PARALLEL,
    OC_LOOP,
    OC_REPEAT,
    OC_SYNC,
    OC_TIMEOUT,
    OC_CANCEL,
    OC_WAIT,
    OC_SUCCESS,
    OC_ERROR,
    OC_BREAK,
    OC_CONTINUE, // with the label "outer"
};

static int oc_call, oc_where;
static FutoInAsyncSteps* oc_body; // P, of the running iteration

static void oc_added(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    LOG("added");
    ct_success(bsi, NULL);
}

static void oc_added_loop(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    LOG("added");
    ct_break(bsi, NULL);
}

static void oc_added_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)bsi;
    (void)data;
    (void)i;
    LOG("added");
}

static void oc_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    LOG("cancel handler");
}

static void oc_body_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    LOG("%s", (const char*)data);
}

static void oc_make_call(FutoInAsyncSteps* p)
{
    switch (oc_call) {
    case OC_ADD:
        ct_add(p, NULL, oc_added, NULL);
        break;
    case OC_PARALLEL: {
        FutoInAsyncSteps* par = p->api->parallel(p, NULL, NULL);
        if (par != NULL) {
            LOG("parallel returned a pointer");
            ct_add(par, NULL, oc_added, NULL);
        }
        break;
    }
    case OC_LOOP:
        ct_loop(p, NULL, oc_added_loop, NULL);
        break;
    case OC_REPEAT:
        ct_repeat(p, NULL, 1, oc_added_repeat, NULL);
        break;
    case OC_SYNC:
        ct_add_sync(p, ct_fake_sync(), NULL, oc_added, NULL);
        break;
    case OC_TIMEOUT:
        p->api->setTimeout(p, 1000);
        break;
    case OC_CANCEL:
        p->api->setCancel(p, NULL, oc_cancel);
        break;
    case OC_WAIT:
        p->api->waitExternal(p);
        break;
    case OC_SUCCESS:
        ct_success(p, NULL);
        break;
    case OC_ERROR:
        p->api->handle_error(p, "Lost", NULL);
        break;
    case OC_BREAK:
        ct_break(p, NULL);
        break;
    case OC_CONTINUE:
        ct_continue(p, "outer");
        break;
    }
}

static void oc_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    oc_make_call(oc_body);
    LOG("sub returns"); // C cannot be unwound: the abort comes after
}

static void oc_sibling(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("sibling");
    ct_success(bsi, NULL);
}

static void oc_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    ct_add(bsi, NULL, oc_sub, NULL);
}

static void oc_host(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    FutoInAsyncSteps* par = bsi->api->parallel(bsi, NULL, NULL);
    ct_add(par, NULL, oc_sibling, NULL);
    ct_add(par, NULL, oc_branch, NULL);
}

static void oc_next(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("next sub-step");
}

static void oc_late(void)
{
    oc_make_call(oc_body);
    LOG("late returns");
    if (oc_call == OC_BREAK || oc_call == OC_CONTINUE) {
        oc_body->api->handle_error(oc_body, "Late", NULL);
        return;
    }
    ct_success(oc_body, NULL);
}

static void oc_late_cb(void* data)
{
    (void)data;
    enter(oc_body);
    oc_late();
}

static void* oc_late_thread(void* arg)
{
    (void)arg;
    oc_late();
    return NULL;
}

static void oc_waiting_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    oc_body = bsi;
    bsi->api->setCancel(bsi, "body cancel handler", oc_body_cancel);
}

static void oc_late_sibling(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    oc_late();
    ct_success(bsi, NULL);
}

static void oc_iteration(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    enter(bsi);
    LOG("iteration %d", (int)i);
    oc_body = bsi;
    switch (oc_where) {
    case 0:
        ct_add(bsi, NULL, oc_sub, NULL);
        ct_add(bsi, NULL, oc_next, NULL);
        break;
    case 1:
        ct_add(bsi, NULL, oc_host, NULL);
        ct_add(bsi, NULL, oc_next, NULL);
        break;
    case 2:
        bsi->api->setCancel(bsi, "body cancel handler", oc_body_cancel);
        bsi->api->sched_immediate(bsi, NULL, oc_late_cb);
        break;
    case 4: {
        FutoInAsyncSteps* par = bsi->api->parallel(bsi, NULL, NULL);
        ct_add(par, NULL, oc_waiting_branch, NULL);
        ct_add(par, NULL, oc_late_sibling, NULL);
        break;
    }
    default: {
        bsi->api->waitExternal(bsi);
        pthread_t t;
        pthread_create(&t, NULL, oc_late_thread, NULL);
        pthread_join(t, NULL);
        break;
    }
    }
}

static void oc_after(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    enter(bsi);
    LOG("after the loop");
}

void ct_own_call(FutoInAsyncSteps* root, int call, int where)
{
    oc_call = call;
    oc_where = where;
    ct_repeat(root, NULL, 3, oc_iteration, "outer");
    ct_add(root, NULL, oc_after, NULL);
}

static void oc_sub_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    enter(bsi);
    LOG("sub handler %s: %s", code, (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL));
}

// ct_late_call_held makes call (an OC_*) on the step of ct_held (or
// ct_held_with_cancel) from the calling thread: once the step's callback
// has returned, a call only that callback may make.
void ct_late_call_held(int call)
{
    oc_call = call;
    oc_make_call(held);
}

// ct_own_call_sub adds to parent, in its callback, a C sub-step with an
// error handler that makes call (an OC_*) on parent's pointer, then logs
// "sub returns"; the handler logs its code and error_info.
void ct_own_call_sub(FutoInAsyncSteps* parent, int call)
{
    oc_call = call;
    oc_body = parent;
    ct_add(parent, NULL, oc_sub, oc_sub_eh);
}

// ct_succeed_step calls success with no args on bsi, from the calling
// thread, as a C library handed a step does.
void ct_succeed_step(FutoInAsyncSteps* bsi) { ct_success(bsi, NULL); }
