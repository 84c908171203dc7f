// C programs of a plugin author's review of package cabi, each the
// smallest that showed a fault, with a trace of their own.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "review.h"

static pthread_mutex_t rv_mu = PTHREAD_MUTEX_INITIALIZER;
static char rv_buf[1 << 14];
static size_t rv_len;

void rv_reset(void)
{
    pthread_mutex_lock(&rv_mu);
    rv_buf[0] = 0;
    rv_len = 0;
    pthread_mutex_unlock(&rv_mu);
}

static void rv_log(const char* fmt, ...)
{
    pthread_mutex_lock(&rv_mu);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(rv_buf + rv_len, sizeof(rv_buf) - rv_len - 1, fmt, ap);
    va_end(ap);
    if (n > 0 && rv_len + n < sizeof(rv_buf) - 2) {
        rv_len += n;
        rv_buf[rv_len++] = '\n';
        rv_buf[rv_len] = 0;
    }
    pthread_mutex_unlock(&rv_mu);
}

char* rv_trace(void)
{
    pthread_mutex_lock(&rv_mu);
    char* t = strdup(rv_buf);
    pthread_mutex_unlock(&rv_mu);
    return t;
}

static void rv_on_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    rv_log("b%d error %s", (int)(intptr_t)data, code);
}

// ---- the table's lock and addSync of one Mutex in one flow or branch ----------

static FutoInSync* rv_sync;

static void lk_lock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d lock", (int)(intptr_t)data);
    rv_sync->api->lock(bsi, rv_sync);
}

static void lk_unlock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d unlock", (int)(intptr_t)data);
    rv_sync->api->unlock(bsi, rv_sync);
    bsi->api->success(bsi, NULL);
}

static void lk_inner(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d inside addSync", (int)(intptr_t)data);
    bsi->api->success(bsi, NULL);
}

static void lk_add_sync(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d addSync", (int)(intptr_t)data);
    bsi->api->addSync(bsi, rv_sync, data, lk_inner, rv_on_error);
}

static void lk_section(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d inside addSync", (int)(intptr_t)data);
    bsi->api->add(bsi, data, lk_lock, rv_on_error);
    bsi->api->add(bsi, data, lk_unlock, rv_on_error);
}

static void lk_after(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d after", (int)(intptr_t)data);
    bsi->api->success(bsi, NULL);
}

// rv_lock_and_add_sync adds to root, as branch 0: the table's lock, an
// addSync of the same sync, the table's unlock (lock_first); or an addSync
// whose section calls the table's lock and unlock.
void rv_lock_and_add_sync(FutoInAsyncSteps* root, FutoInSync* sync, int lock_first)
{
    rv_sync = sync;
    if (lock_first) {
        root->api->add(root, NULL, lk_lock, rv_on_error);
        root->api->add(root, NULL, lk_add_sync, rv_on_error);
        root->api->add(root, NULL, lk_unlock, rv_on_error);
    } else {
        root->api->addSync(root, sync, NULL, lk_section, rv_on_error);
    }
    root->api->add(root, NULL, lk_after, NULL);
}

static void lk_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->add(bsi, data, lk_lock, rv_on_error);
    bsi->api->add(bsi, data, lk_add_sync, rv_on_error);
    bsi->api->add(bsi, data, lk_unlock, rv_on_error);
}

// rv_branches_lock adds a parallel of n branches, each of which does what
// rv_lock_and_add_sync does with lock_first.
void rv_branches_lock(FutoInAsyncSteps* root, FutoInSync* sync, int n)
{
    rv_sync = sync;
    FutoInAsyncSteps* p = root->api->parallel(root, NULL, rv_on_error);
    for (int i = 1; i <= n; i++) {
        void* d = (void*)(intptr_t)i;
        p->api->add(p, d, lk_branch, rv_on_error);
    }
    root->api->add(root, NULL, lk_after, NULL);
}

// ---- stack memory of an idle root ----------------------------------------------

static int rv_stack_cleaned;

static void rv_stack_cleanup(void* value)
{
    (void)value;
    pthread_mutex_lock(&rv_mu);
    rv_stack_cleaned++;
    pthread_mutex_unlock(&rv_mu);
}

// rv_idle_stack takes stack memory, with a cleanup, on root, idle, or on a
// parallel made on it (on_parallel), as a C++ wrapper builds a flow.
int rv_idle_stack(FutoInAsyncSteps* root, int on_parallel)
{
    rv_stack_cleaned = 0;
    FutoInAsyncSteps* at = root;
    if (on_parallel) {
        at = root->api->parallel(root, NULL, NULL);
    }
    return at->api->stack(at, 32, rv_stack_cleanup) != NULL;
}

int rv_stack_cleanups(void)
{
    pthread_mutex_lock(&rv_mu);
    int n = rv_stack_cleaned;
    pthread_mutex_unlock(&rv_mu);
    return n;
}

// ---- isValid from another thread -----------------------------------------------

// The worker completes the step from its own thread, then polls isValid
// until the loop has settled the step: the loop releases the step's
// pointer meanwhile.
static void* rv_valid_worker(void* p)
{
    FutoInAsyncSteps* bsi = p;
    bsi->api->success(bsi, NULL);
    while (bsi->api->isValid(bsi)) {
        usleep(100);
    }
    rv_log("worker: isValid 0");
    return NULL;
}

static pthread_t rv_worker;

static void rv_valid_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->waitExternal(bsi);
    pthread_create(&rv_worker, NULL, rv_valid_worker, bsi);
}

// rv_valid_from_thread adds a step that a thread of its own completes and
// then watches with isValid; rv_join_worker waits for that thread.
void rv_valid_from_thread(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, rv_valid_step, NULL);
}

void rv_join_worker(void) { pthread_join(rv_worker, NULL); }

// ---- a BOOL array ---------------------------------------------------------------

static void rv_free_cleanup(FutoInBinaryValue* v) { free((void*)v->p); }

static const FutoInType rv_bool_array = {
    FTN_TYPE_ARRAY | FTN_TYPE_BOOL,
    rv_free_cleanup,
};

static void rv_bools_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    unsigned char* p = malloc(3);
    p[0] = 2; // true, as C's bool conversion of 2 gives
    p[1] = 1;
    p[2] = 0;
    out.arg0.type = &rv_bool_array;
    out.arg0.p = p;
    out.arg0.length = 3;
    bsi->api->success(bsi, &out);
}

// rv_bools adds a step that succeeds with the BOOL array {2, 1, 0}.
void rv_bools(FutoInAsyncSteps* root) { root->api->add(root, NULL, rv_bools_step, NULL); }

// ---- an array with a NULL p and a nonzero length ------------------------------

#define RV_NULL_ARRAY(base) {FTN_TYPE_ARRAY | (base), NULL}

// Indexed by base type; a NULL p has nothing to clean up.
static const FutoInType rv_null_arrays[FTN_BASE_TYPE_MASK + 1] = {
    [FTN_TYPE_STRING] = RV_NULL_ARRAY(FTN_TYPE_STRING),
    [FTN_TYPE_STRING16] = RV_NULL_ARRAY(FTN_TYPE_STRING16),
    [FTN_TYPE_STRING32] = RV_NULL_ARRAY(FTN_TYPE_STRING32),
    [FTN_TYPE_BOOL] = RV_NULL_ARRAY(FTN_TYPE_BOOL),
    [FTN_TYPE_INT8] = RV_NULL_ARRAY(FTN_TYPE_INT8),
    [FTN_TYPE_INT16] = RV_NULL_ARRAY(FTN_TYPE_INT16),
    [FTN_TYPE_INT32] = RV_NULL_ARRAY(FTN_TYPE_INT32),
    [FTN_TYPE_INT64] = RV_NULL_ARRAY(FTN_TYPE_INT64),
    [FTN_TYPE_UINT8] = RV_NULL_ARRAY(FTN_TYPE_UINT8),
    [FTN_TYPE_UINT16] = RV_NULL_ARRAY(FTN_TYPE_UINT16),
    [FTN_TYPE_UINT32] = RV_NULL_ARRAY(FTN_TYPE_UINT32),
    [FTN_TYPE_UINT64] = RV_NULL_ARRAY(FTN_TYPE_UINT64),
    [FTN_TYPE_FLOAT] = RV_NULL_ARRAY(FTN_TYPE_FLOAT),
    [FTN_TYPE_DOUBLE] = RV_NULL_ARRAY(FTN_TYPE_DOUBLE),
};

static void rv_null_array_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &rv_null_arrays[(intptr_t)data & FTN_BASE_TYPE_MASK];
    out.arg0.p = NULL;
    out.arg0.length = 3;
    bsi->api->success(bsi, &out);
}

// rv_null_array adds a step that succeeds with an array of base type base
// whose p is NULL and whose length is 3.
void rv_null_array(FutoInAsyncSteps* root, int base)
{
    root->api->add(root, (void*)(intptr_t)base, rv_null_array_step, NULL);
}

// ---- an array of strings with a NULL item -------------------------------------

static const char* const rv_items8[3] = {"ab", NULL, ""};
static const char16_t rv_ab16[] = {'a', 'b', 0}, rv_empty16[] = {0};
static const char16_t* const rv_items16[3] = {rv_ab16, NULL, rv_empty16};
static const char32_t rv_ab32[] = {'a', 'b', 0}, rv_empty32[] = {0};
static const char32_t* const rv_items32[3] = {rv_ab32, NULL, rv_empty32};

// Static items: nothing to clean up.
static const FutoInType rv_item_arrays[] = {
    [FTN_TYPE_STRING] = {FTN_TYPE_ARRAY | FTN_TYPE_STRING, NULL},
    [FTN_TYPE_STRING16] = {FTN_TYPE_ARRAY | FTN_TYPE_STRING16, NULL},
    [FTN_TYPE_STRING32] = {FTN_TYPE_ARRAY | FTN_TYPE_STRING32, NULL},
};

static void rv_null_item_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    int base = (int)(intptr_t)data;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &rv_item_arrays[base];
    switch (base) {
    case FTN_TYPE_STRING16:
        out.arg0.p = rv_items16;
        break;
    case FTN_TYPE_STRING32:
        out.arg0.p = rv_items32;
        break;
    default:
        out.arg0.p = rv_items8;
    }
    out.arg0.length = 3;
    bsi->api->success(bsi, &out);
}

// rv_null_item adds a step that succeeds with the array of strings of
// base type base (STRING, STRING16 or STRING32) {"ab", NULL, ""}.
void rv_null_item(FutoInAsyncSteps* root, int base)
{
    root->api->add(root, (void*)(intptr_t)base, rv_null_item_step, NULL);
}

// ---- an array of one string longer than the array ---------------------------

static const char* const rv_long8[1] = {"abcdef"};
static const char16_t rv_long16_0[] = {'a', 'b', 'c', 'd', 'e', 'f', 0};
static const char16_t* const rv_long16[1] = {rv_long16_0};
static const char32_t rv_long32_0[] = {'a', 'b', 'c', 'd', 'e', 'f', 0};
static const char32_t* const rv_long32[1] = {rv_long32_0};

static void rv_long_item_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    int base = (int)(intptr_t)data;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &rv_item_arrays[base];
    switch (base) {
    case FTN_TYPE_STRING16:
        out.arg0.p = rv_long16;
        break;
    case FTN_TYPE_STRING32:
        out.arg0.p = rv_long32;
        break;
    default:
        out.arg0.p = rv_long8;
    }
    out.arg0.length = 1;
    bsi->api->success(bsi, &out);
}

// rv_long_item adds a step that succeeds with the array of strings of
// base type base (STRING, STRING16 or STRING32) {"abcdef"}.
void rv_long_item(FutoInAsyncSteps* root, int base)
{
    root->api->add(root, (void*)(intptr_t)base, rv_long_item_step, NULL);
}

// ---- an execution that its closed loop ends ------------------------------------

static void rv_waits(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->waitExternal(bsi);
    rv_log("waits");
}

static void rv_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    const char* exc = bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL);
    rv_log("unhandled %s error_info=%s last_exception=%s", code, info ? info : "(null)", exc ? exc : "(null)");
}

// rv_execute_waiting adds a step that waits for ever and executes root
// with an unhandled_error that logs the code, "error_info" and
// "last_exception".
void rv_execute_waiting(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, rv_waits, NULL);
    root->api->execute(root, NULL, rv_unhandled);
}

// ---- root functions on a step's pointer ----------------------------------------

static void rv_root_call(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    int which = (int)(intptr_t)data;
    switch (which) {
    case 0:
        bsi->api->free(bsi);
        break;
    case 1:
        bsi->api->execute(bsi, NULL, NULL);
        break;
    default:
        bsi->api->cancel(bsi);
        break;
    }
    rv_log("returned valid=%d", bsi->api->isValid(bsi));
}

static void rv_root_call_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    rv_log("eh %s %s", code, info ? info : "(null)");
    bsi->api->success(bsi, NULL);
}

// rv_root_call_on_step adds a step that calls free (which 0), execute (1)
// or cancel (2) on its own pointer, with an error handler that logs.
void rv_root_call_on_step(FutoInAsyncSteps* root, int which)
{
    root->api->add(root, (void*)(intptr_t)which, rv_root_call, rv_root_call_eh);
    root->api->add(root, (void*)(intptr_t)-1, lk_after, NULL);
}

// ---- cancel of the root, then handle_error, in one step's callback -------------

static void rv_cf_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    rv_log("cancel %s", (const char*)data);
}

static void rv_cf_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    rv_log("eh step %s", code);
    bsi->api->success(bsi, NULL);
}

static void rv_cf_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    FutoInAsyncSteps* root = data;
    bsi->api->setCancel(bsi, "step", rv_cf_cancel);
    root->api->cancel(root);
    bsi->api->handle_error(bsi, "Failed", "after the cancel");
    rv_log("returned");
}

static void rv_cf_outer(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->setCancel(bsi, "outer", rv_cf_cancel);
    bsi->api->add(bsi, data, rv_cf_step, rv_cf_eh);
}

static void rv_cf_outer_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    rv_log("eh outer %s", code);
    bsi->api->success(bsi, NULL);
}

// rv_cancel_then_fail adds a step (cancel handler "cancel outer", error
// handler "eh outer") whose sub-step sets a cancel handler ("cancel
// step"), cancels root and then calls handle_error, with an error handler
// ("eh step") that recovers; then a step that logs "b-1 after".
void rv_cancel_then_fail(FutoInAsyncSteps* root)
{
    root->api->add(root, root, rv_cf_outer, rv_cf_outer_eh);
    root->api->add(root, (void*)(intptr_t)-1, lk_after, NULL);
}

// ---- isValid after handle_error or breakLoop in the same callback --------------

static void rv_fail_then_valid(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->handle_error(bsi, "Fail", "info");
    rv_log("after handle_error valid=%d", bsi->api->isValid(bsi));
}

static void rv_break_then_valid(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    bsi->api->breakLoop(bsi, NULL);
    rv_log("after breakLoop valid=%d", bsi->api->isValid(bsi));
}

static void rv_recover(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    rv_log("eh %s valid=%d", code, bsi->api->isValid(bsi));
    bsi->api->success(bsi, NULL);
}

// rv_valid_after_error adds a step that fails and then logs isValid, with
// a handler that recovers, and a loop whose body breaks it and then logs
// isValid.
void rv_valid_after_error(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, rv_fail_then_valid, rv_recover);
    root->api->loop(root, NULL, rv_break_then_valid, NULL);
    root->api->add(root, (void*)(intptr_t)-1, lk_after, NULL);
}

// ---- a table lock left by a flow that fails before its unlock -------------------

static FutoInAsyncSteps* lf_sibling;

static void lf_lock_fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    lk_lock(bsi, data, in);
    bsi->api->handle_error(bsi, "MyError", "after lock");
}

static void lf_fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d fail", (int)(intptr_t)data);
    bsi->api->handle_error(bsi, "MyError", "held");
}

static void lf_time_out(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d time out", (int)(intptr_t)data);
    bsi->api->setTimeout(bsi, 1);
}

static void lf_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d wait", (int)(intptr_t)data);
    bsi->api->waitExternal(bsi);
}

// lf_fail_sibling fails the waiting sibling branch, then waits: the
// parallel cancels this branch, which holds the lock.
static void lf_fail_sibling(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d fail sibling", (int)(intptr_t)data);
    bsi->api->waitExternal(bsi);
    lf_sibling->api->handle_error(lf_sibling, "MyError", "sibling");
}

static void lf_sibling_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("b%d wait", (int)(intptr_t)data);
    lf_sibling = bsi;
    bsi->api->waitExternal(bsi);
}

static void lf_branch_lock(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->add(bsi, data, lk_lock, NULL);
    bsi->api->add(bsi, data, lf_fail_sibling, NULL);
    bsi->api->add(bsi, data, lk_unlock, NULL);
}

static void lf_branch_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->add(bsi, data, lf_sibling_wait, NULL);
}

// rv_lock_fail adds to root, as branch 0, the table's lock of sync and,
// before the unlock, what fails: how 0, an error in the lock's own step;
// 1, an error in the next step; 2, the next step's timeout; 3, a next step
// that waits for ever (for a cancel); 4, a parallel whose branch 1 locks
// and then fails branch 2, which cancels branch 1 before its unlock.
void rv_lock_fail(FutoInAsyncSteps* root, FutoInSync* sync, int how)
{
    rv_sync = sync;
    void* d = NULL;
    switch (how) {
    case 0:
        root->api->add(root, d, lf_lock_fail, rv_on_error);
        break;
    case 4: {
        FutoInAsyncSteps* p = root->api->parallel(root, NULL, rv_on_error);
        p->api->add(p, (void*)1, lf_branch_lock, NULL);
        p->api->add(p, (void*)2, lf_branch_wait, NULL);
        return;
    }
    default:
        root->api->add(root, d, lk_lock, rv_on_error);
        root->api->add(root, d, how == 1 ? lf_fail : how == 2 ? lf_time_out : lf_wait, rv_on_error);
    }
    root->api->add(root, d, lk_unlock, rv_on_error);
}

// rv_lock_unlock adds to root, as branch 9, the table's lock of sync, a
// step that waits and the table's unlock.
void rv_lock_unlock(FutoInAsyncSteps* root, FutoInSync* sync)
{
    rv_sync = sync;
    void* d = (void*)9;
    root->api->add(root, d, lk_lock, rv_on_error);
    root->api->add(root, d, lk_unlock, rv_on_error);
}

// ---- root functions on a parent step's pointer, from a sub-step ----------------

static void rv_parent_call(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    FutoInAsyncSteps* parent = data;
    parent->api->free(parent);
    rv_log("sub: free on the parent returned");
    bsi->api->success(bsi, NULL);
}

static void rv_parent_call_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    rv_log("sub eh %s %s", code, info ? info : "(null)");
}

// rv_free_on_parent adds to step a sub-step that calls free on step's
// pointer, with an error handler that logs.
void rv_free_on_parent(FutoInAsyncSteps* step)
{
    step->api->add(step, step, rv_parent_call, rv_parent_call_eh);
}

static void rv_c_parent(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    rv_free_on_parent(bsi);
}

// rv_c_parent_free adds a C step that does rv_free_on_parent on itself.
void rv_c_parent_free(FutoInAsyncSteps* root) { root->api->add(root, NULL, rv_c_parent, NULL); }

// ---- a parallel's pointer from another thread, while its step's callback runs --

static void pt_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    rv_log("branch %d", (int)(intptr_t)data);
    bsi->api->success(bsi, NULL);
}

static void pt_body(FutoInAsyncSteps* bsi, void* data)
{
    rv_log("branch %d", (int)(intptr_t)data);
    bsi->api->breakLoop(bsi, NULL);
}

static void pt_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)bsi;
    rv_log("branch %d", (int)(intptr_t)data + (int)i);
}

struct pt_call {
    FutoInAsyncSteps* p;
    int which;
};

static void* pt_thread(void* arg)
{
    struct pt_call* c = arg;
    FutoInAsyncSteps* p = c->p;
    void* d = (void*)2;
    switch (c->which) {
    case 0:
        p->api->add(p, d, pt_branch, NULL);
        break;
    case 1:
        p->api->loop(p, d, pt_body, NULL);
        break;
    default:
        p->api->repeat(p, d, 1, pt_repeat, NULL);
    }
    return NULL;
}

static void pt_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, rv_on_error);
    p->api->add(p, (void*)1, pt_branch, NULL);
    struct pt_call c = {p, (int)(intptr_t)data};
    pthread_t t;
    pthread_create(&t, NULL, pt_thread, &c);
    pthread_join(t, NULL);
    rv_log("joined");
}

static void pt_after(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    rv_log("after");
    bsi->api->success(bsi, NULL);
}

// rv_parallel_from_thread adds a step that makes a parallel with branch 1
// and, before it returns, has another thread add branch 2 on the
// parallel's pointer (which 0: add, 1: loop, 2: repeat of one); then a
// step that logs "after".
void rv_parallel_from_thread(FutoInAsyncSteps* root, int which)
{
    root->api->add(root, (void*)(intptr_t)which, pt_step, rv_on_error);
    root->api->add(root, NULL, pt_after, NULL);
}

// ---- success or handle_error on a parallel's pointer from another thread -----

struct pf_call {
    FutoInAsyncSteps* par;  // the parallel's pointer
    FutoInAsyncSteps* wait; // a branch that waits, completed after the call; or NULL
    int which;              // 0 success, 1 handle_error
};

static void* pf_thread(void* arg)
{
    struct pf_call* c = arg;
    if (c->which == 0) {
        c->par->api->success(c->par, NULL);
    } else {
        c->par->api->handle_error(c->par, "FromThread", "on the parallel");
    }
    rv_log("thread called");
    if (c->wait != NULL) {
        c->wait->api->success(c->wait, NULL);
    }
    return NULL;
}

static void pf_run_thread(struct pf_call* c)
{
    pthread_t t;
    pthread_create(&t, NULL, pf_thread, c);
    pthread_join(t, NULL);
}

static struct pf_call pf_late;

static void pf_waiting_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    rv_log("branch waits");
    bsi->api->waitExternal(bsi);
    pf_late.wait = bsi;
    pf_run_thread(&pf_late);
}

static void pf_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    int which = (int)(intptr_t)data & 1, late = (int)(intptr_t)data >> 1;
    FutoInAsyncSteps* par = bsi->api->parallel(bsi, NULL, NULL);
    if (late) {
        pf_late = (struct pf_call){par, NULL, which};
        par->api->add(par, NULL, pf_waiting_branch, NULL);
        rv_log("step returns");
        return;
    }
    par->api->add(par, (void*)1, pt_branch, NULL);
    struct pf_call c = {par, NULL, which};
    pf_run_thread(&c);
    rv_log("step returns");
}

static void pf_step_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    rv_log("step error %s: %s", code, info ? info : "(null)");
}

// rv_parallel_complete_from_thread adds a step that makes a parallel, and
// a step that logs "after". Another thread calls success (which 0) or
// handle_error(FromThread, "on the parallel") (which 1) on the
// parallel's pointer and logs "thread called": with late 0 while the
// step's callback runs (the parallel has a branch logging "branch 1",
// and the step joins the thread before it returns); with late 1 once it
// has returned, from the parallel's only branch, which waits, joins the
// thread, and which the thread completes (success) after its call. The
// step's error handler logs its code and error_info.
void rv_parallel_complete_from_thread(FutoInAsyncSteps* root, int which, int late)
{
    root->api->add(root, (void*)(intptr_t)(which | late << 1), pf_step, pf_step_eh);
    root->api->add(root, NULL, pt_after, NULL);
}

// ---- setCancel on a Go parent's pointer, from its C sub-step -------------------

static void pc_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    rv_log("cancel parent");
}

static void pc_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)in;
    FutoInAsyncSteps* parent = data;
    parent->api->setCancel(parent, NULL, pc_cancel);
    rv_log("sub: setCancel returned");
}

static void pc_sub_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    rv_log("sub eh %s", code);
    bsi->api->success(bsi, NULL);
}

static void pc_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->waitExternal(bsi);
    rv_log("wait");
}

static void pc_root_cleanup(void* value)
{
    (void)value;
    rv_log("root stack cleanup");
}

// rv_root_stack_log takes stack memory on root, idle, whose cleanup logs
// "root stack cleanup": the free of the root runs it last.
void rv_root_stack_log(FutoInAsyncSteps* root) { root->api->stack(root, 8, pc_root_cleanup); }

// rv_parent_cancel_from_sub adds to step, from its own callback, a
// sub-step that calls setCancel on step's pointer (a cancel handler that
// logs "cancel parent"), with an error handler that logs and recovers,
// then a sub-step that waits for ever.
void rv_parent_cancel_from_sub(FutoInAsyncSteps* step)
{
    step->api->add(step, step, pc_sub, pc_sub_eh);
    step->api->add(step, NULL, pc_wait, NULL);
}

// ---- two calls on a Go parent's pointer, from its C sub-steps ------------------

static void tc_success(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)in;
    FutoInAsyncSteps* parent = data;
    parent->api->success(parent, NULL);
    rv_log("first returns");
}

static void tc_error(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)in;
    FutoInAsyncSteps* parent = data;
    parent->api->handle_error(parent, "Lost", NULL);
    rv_log("second returns");
}

static void tc_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    rv_log("eh %s %s", code, info ? info : "(null)");
    bsi->api->success(bsi, NULL);
}

// rv_two_parent_calls adds to step, from its own callback, a sub-step
// that calls success on step's pointer, then one that calls handle_error
// (Lost) on it; each has an error handler that logs the code and
// "error_info" and recovers.
void rv_two_parent_calls(FutoInAsyncSteps* step)
{
    step->api->add(step, step, tc_success, tc_eh);
    step->api->add(step, step, tc_error, tc_eh);
}

// ---- a success from another thread while the callback adds sub-steps -----------

static void os_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    rv_log("cancel");
}

static void os_sub(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->handle_error(bsi, "Boom", NULL);
}

static void* os_thread(void* arg)
{
    FutoInAsyncSteps* step = arg;
    step->api->success(step, NULL);
    return NULL;
}

static void os_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->setCancel(bsi, NULL, os_cancel);
    if (data == NULL) {
        bsi->api->add(bsi, NULL, os_sub, NULL);
    }
    pthread_t t;
    pthread_create(&t, NULL, os_thread, bsi);
    pthread_join(t, NULL);
    rv_log("joined");
    if (data != NULL) {
        bsi->api->handle_error(bsi, "Boom", NULL);
    }
}

static void os_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    rv_log("eh %s", code);
    bsi->api->success(bsi, NULL);
}

// rv_outside_success_then_fail adds a step that sets a cancel handler
// (logs "cancel"), has another thread call success on its pointer before
// it returns ("joined"), and fails with Boom: by a sub-step it adds first
// (own 0), or by its own handle_error after the join (own 1); its error
// handler logs "eh" and the code, and recovers.
void rv_outside_success_then_fail(FutoInAsyncSteps* root, int own)
{
    root->api->add(root, (void*)(intptr_t)own, os_step, os_eh);
}
