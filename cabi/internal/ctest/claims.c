// C steps that check the header's claims one by one: what each function
// of the table does on a stale pointer, and on NULL arguments.
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"

static pthread_mutex_t cl_mu = PTHREAD_MUTEX_INITIALIZER;
static char cl_buf[1 << 13];
static size_t cl_len;

void cl_reset(void)
{
    pthread_mutex_lock(&cl_mu);
    cl_buf[0] = 0;
    cl_len = 0;
    pthread_mutex_unlock(&cl_mu);
}

static void cl_log(const char* fmt, ...)
{
    pthread_mutex_lock(&cl_mu);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cl_buf + cl_len, sizeof(cl_buf) - cl_len - 1, fmt, ap);
    va_end(ap);
    if (n > 0 && cl_len + n < sizeof(cl_buf) - 2) {
        cl_len += n;
        cl_buf[cl_len++] = '\n';
        cl_buf[cl_len] = 0;
    }
    pthread_mutex_unlock(&cl_mu);
}

char* cl_trace(void)
{
    pthread_mutex_lock(&cl_mu);
    char* t = strdup(cl_buf);
    pthread_mutex_unlock(&cl_mu);
    return t;
}

static const char* null_or_not(const void* p) { return p == NULL ? "NULL" : "not NULL"; }

// ---- every function of the table on a stale pointer ------------------------------

static FutoInAsyncSteps* cl_kept;

static void cl_keep(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    cl_kept = bsi;
}

static void cl_never(void* data)
{
    (void)data;
    cl_log("VIOLATION: a callback given through a stale pointer ran");
}

static void cl_never_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    cl_never(NULL);
}

static void cl_never_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    cl_never(data);
}

static void cl_never_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)bsi;
    (void)i;
    cl_never(data);
}

static void* cl_never_alloc(void* data)
{
    cl_never(data);
    return NULL;
}

static void cl_after(void* data)
{
    // Posted after the stale pointer's sched_* calls: any of theirs that the
    // loop had accepted would have run before this one.
    FutoInAsyncSteps* bsi = data;
    cl_log("own immediate ran");
    bsi->api->success(bsi, NULL);
}

static void cl_call_stale(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    FutoInAsyncSteps* s = cl_kept;
    const FutoInAsyncStepsAPI* api = s->api;
    cl_log("rootId=%d isValid=%d is_same_thread=%d own is_same_thread=%d", (int)api->rootId(s), api->isValid(s),
           api->is_same_thread(s), bsi->api->is_same_thread(bsi));
    cl_log("stack=%s stateVariable=%s parallel=%s newInstance=%s", null_or_not(api->stack(s, 8, NULL)),
           null_or_not(api->stateVariable(s, NULL, "v", cl_never_alloc, NULL)),
           null_or_not(api->parallel(s, NULL, NULL)), null_or_not(api->newInstance(s)));
    FutoInHandle hi = api->sched_immediate(s, NULL, cl_never);
    FutoInHandle hd = api->sched_deferred(s, 0, NULL, cl_never);
    cl_log("sched_is_valid immediate=%d deferred=%d", bsi->api->sched_is_valid(bsi, &hi),
           bsi->api->sched_is_valid(bsi, &hd));
    api->add(s, NULL, cl_never_step, NULL);
    api->loop(s, NULL, cl_never_body, NULL);
    api->repeat(s, NULL, 1, cl_never_repeat, NULL);
    api->setCancel(s, NULL, NULL);
    api->setTimeout(s, 1);
    api->waitExternal(s);
    api->breakLoop(s, NULL);
    api->continueLoop(s, NULL);
    api->execute(s, NULL, NULL);
    api->cancel(s);
    api->free(s);
    cl_log("own isValid=%d", bsi->api->isValid(bsi));
    bsi->api->waitExternal(bsi);
    bsi->api->sched_immediate(bsi, bsi, cl_after);
}

void cl_stale_table(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, cl_keep, NULL);
    root->api->add(root, NULL, cl_call_stale, NULL);
}

// ---- NULL arguments -----------------------------------------------------------------

static FutoInSync* cl_sync;

static void cl_recover(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    const char* info = bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    cl_log("%s: %s %s", (const char*)data, code, info);
    bsi->api->success(bsi, NULL);
}

static void cl_null_call(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    const char* call = data;
    const FutoInAsyncStepsAPI* api = bsi->api;
    if (strcmp(call, "add") == 0) {
        api->add(bsi, NULL, NULL, NULL);
    } else if (strcmp(call, "loop") == 0) {
        api->loop(bsi, NULL, NULL, NULL);
    } else if (strcmp(call, "repeat") == 0) {
        api->repeat(bsi, NULL, 1, NULL, NULL);
    } else if (strcmp(call, "addSync sync") == 0) {
        api->addSync(bsi, NULL, NULL, cl_never_step, NULL);
    } else if (strcmp(call, "addSync f") == 0) {
        api->addSync(bsi, cl_sync, NULL, NULL, NULL);
    } else if (strcmp(call, "handle_error code") == 0) {
        api->handle_error(bsi, NULL, "dropped");
    } else if (strcmp(call, "sched cb") == 0) {
        FutoInHandle hi = api->sched_immediate(bsi, NULL, NULL);
        FutoInHandle hd = api->sched_deferred(bsi, 0, NULL, NULL);
        cl_log("%s: valid=%d%d", call, api->sched_is_valid(bsi, &hi), api->sched_is_valid(bsi, &hd));
        api->sched_cancel(bsi, NULL);
        cl_log("%s: NULL handle valid=%d", call, api->sched_is_valid(bsi, NULL));
    } else if (strcmp(call, "stateVariable name") == 0) {
        cl_log("%s: %s", call, null_or_not(api->stateVariable(bsi, NULL, NULL, cl_never_alloc, NULL)));
    }
    cl_log("%s: returned", call); // the failure comes once the callback returns
}

void cl_null_args(FutoInAsyncSteps* root, FutoInSync* sync)
{
    static const char* calls[] = {"add",
                                  "loop",
                                  "repeat",
                                  "addSync sync",
                                  "addSync f",
                                  "handle_error code",
                                  "sched cb",
                                  "stateVariable name"};
    cl_sync = sync;
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); ++i) {
        root->api->add(root, (void*)calls[i], cl_null_call, cl_recover);
    }
}

// ---- setTimeout twice ---------------------------------------------------------------

static uint32_t cl_timeouts[2];

static void cl_timed(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->setTimeout(bsi, cl_timeouts[0]);
    bsi->api->setTimeout(bsi, cl_timeouts[1]);
}

static void cl_timed_out(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    cl_log("timed: %s", code);
    bsi->api->success(bsi, NULL);
}

void cl_timeout_twice(FutoInAsyncSteps* root, uint32_t first, uint32_t second)
{
    cl_timeouts[0] = first;
    cl_timeouts[1] = second;
    root->api->add(root, NULL, cl_timed, cl_timed_out);
}

// ---- an unhandled error with no unhandled_error -----------------------------------

static void cl_fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->handle_error(bsi, "Unhandled", "nobody handles it");
}

void cl_fail_unhandled(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, cl_fail, NULL);
    root->api->execute(root, NULL, NULL);
}

// ---- loop, repeat and addSync on a parallel's pointer --------------------------------

static ptrdiff_t cl_flow_id;
static ptrdiff_t cl_branch_ids[3]; // loop, repeat, addSync

static void cl_branch_seen(FutoInAsyncSteps* bsi, int b, const char* what)
{
    ptrdiff_t id = bsi->api->rootId(bsi);
    if (cl_branch_ids[b] == 0) {
        cl_branch_ids[b] = id;
    }
    cl_log("%s same branch=%d", what, id == cl_branch_ids[b]);
}

static void cl_loop_branch(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    static int iterations;
    cl_branch_seen(bsi, 0, "loop body");
    if (++iterations == 2) {
        iterations = 0;
        bsi->api->breakLoop(bsi, NULL);
    }
}

static void cl_repeat_branch(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    char what[32];
    snprintf(what, sizeof(what), "repeat body %zu", i);
    cl_branch_seen(bsi, 1, what);
}

static void cl_sync_branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    cl_branch_seen(bsi, 2, "sync body");
}

static void cl_make_branches(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    cl_flow_id = bsi->api->rootId(bsi);
    memset(cl_branch_ids, 0, sizeof(cl_branch_ids));
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    p->api->loop(p, NULL, cl_loop_branch, NULL);
    p->api->repeat(p, NULL, 2, cl_repeat_branch, NULL);
    p->api->addSync(p, data, NULL, cl_sync_branch, NULL);
}

static void cl_branches_done(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    int distinct = cl_branch_ids[0] != cl_branch_ids[1] && cl_branch_ids[1] != cl_branch_ids[2] &&
                   cl_branch_ids[0] != cl_branch_ids[2];
    int own = 1;
    for (int b = 0; b < 3; ++b) {
        own = own && cl_branch_ids[b] != 0 && cl_branch_ids[b] != cl_flow_id;
    }
    cl_log("after: branches distinct=%d none the flow's=%d", distinct, own);
}

void cl_branch_kinds(FutoInAsyncSteps* root, FutoInSync* sync)
{
    root->api->add(root, sync, cl_make_branches, NULL);
    root->api->add(root, NULL, cl_branches_done, NULL);
}

// ---- newInstance from a step ----------------------------------------------------------

static pthread_t cl_step_thread;
static FutoInAsyncSteps* cl_instance;
static FutoInAsyncSteps* cl_waiting;

static void cl_instance_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    cl_log("instance step: same thread=%d is_same_thread=%d rootId new=%d", pthread_equal(cl_step_thread, pthread_self()),
           bsi->api->is_same_thread(bsi), bsi->api->rootId(bsi) != cl_flow_id);
    cl_waiting->api->success(cl_waiting, NULL);
}

static void cl_instance_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    cl_log("VIOLATION: instance unhandled %s", code);
}

static void cl_make_instance(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    cl_step_thread = pthread_self();
    cl_flow_id = bsi->api->rootId(bsi);
    cl_waiting = bsi;
    FutoInAsyncSteps* r = bsi->api->newInstance(bsi);
    cl_instance = r;
    cl_log("instance: %s isValid=%d", r == NULL ? "NULL" : "made", r == NULL ? -1 : r->api->isValid(r));
    if (r == NULL) {
        return;
    }
    r->api->add(r, NULL, cl_instance_step, NULL);
    r->api->execute(r, NULL, cl_instance_unhandled);
    bsi->api->waitExternal(bsi);
}

static void cl_instance_done(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    cl_log("after: instance isValid=%d", cl_instance->api->isValid(cl_instance));
}

void cl_new_instance(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, cl_make_instance, NULL);
    root->api->add(root, NULL, cl_instance_done, NULL);
}

FutoInAsyncSteps* cl_instance_root(void) { return cl_instance; }

// ---- what the steps of a cancelled flow see -------------------------------------------

static FutoInAsyncSteps* cl_inner;

static void cl_late_cleanup(FutoInBinaryValue* v)
{
    cl_log("late value cleaned up: %d", (int)v->i32);
}
static const FutoInType cl_t_i32 = {FTN_TYPE_INT32, cl_late_cleanup};

static int cl_var;
static void* cl_alloc_var(void* data)
{
    (void)data;
    return &cl_var;
}
static void cl_free_var(void* data, void* value)
{
    (void)data;
    (void)value;
    cl_log("var cleanup");
}

static void cl_stack_cleanup(void* value)
{
    (void)value;
    cl_log("stack cleanup");
}

static void cl_cancel_handler(FutoInAsyncSteps* bsi, void* data)
{
    cl_log("%s cancel: isValid=%d rootId=%d stack=%s state=%s same=%d", (const char*)data, bsi->api->isValid(bsi),
           bsi->api->rootId(bsi) != 0, null_or_not(bsi->api->stack(bsi, 4, cl_stack_cleanup)),
           null_or_not(bsi->api->stateVariable(bsi, NULL, "cv", cl_alloc_var, cl_free_var)), bsi->api->is_same_thread(bsi));
    bsi->api->handle_error(bsi, "InCancel", NULL);
    bsi->api->success(bsi, NULL);
    bsi->api->add(bsi, NULL, cl_never_step, NULL);
}

static void cl_no_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    cl_log("VIOLATION: %s error handler ran: %s", (const char*)data, code);
}

static void cl_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    cl_log("VIOLATION: unhandled_error ran: %s", code);
}

static void cl_inner_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    cl_inner = bsi;
    bsi->api->setCancel(bsi, data, cl_cancel_handler);
    cl_log("inner waits");
}

static void cl_outer_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    bsi->api->add(bsi, "inner", cl_inner_step, cl_no_eh);
    bsi->api->setCancel(bsi, "outer", cl_cancel_handler);
}

void cl_cancel_nested(FutoInAsyncSteps* root)
{
    root->api->add(root, "outer", cl_outer_step, cl_no_eh);
    root->api->add(root, "next", cl_never_step, cl_no_eh);
    root->api->execute(root, NULL, cl_unhandled);
}

void cl_cancelled_late(void)
{
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &cl_t_i32;
    out.arg0.i32 = 5;
    cl_inner->api->success(cl_inner, &out);
    cl_inner->api->handle_error(cl_inner, "Late", NULL);
    cl_log("late: isValid=%d slot reset=%d", cl_inner->api->isValid(cl_inner), out.arg0.type == NULL);
}

static void cl_failing_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    cl_inner = bsi;
    bsi->api->setCancel(bsi, data, cl_cancel_handler);
}

static void cl_failing_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    cl_log("%s error handler: %s", (const char*)data, code);
    bsi->api->success(bsi, NULL);
}

static void cl_end(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    cl_log("end");
}

void cl_fail_waiting(FutoInAsyncSteps* root)
{
    root->api->add(root, "failing", cl_failing_step, cl_failing_eh);
    root->api->add(root, NULL, cl_end, NULL);
    root->api->execute(root, NULL, cl_unhandled);
}

void cl_fail_it(void) { cl_inner->api->handle_error(cl_inner, "Outside", NULL); }

static void cl_never_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    cl_never(data);
}

static char cl_call_name[32];
static FutoInSync* cl_call_sync;

static void cl_value_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    cl_log("value cleaned up");
}
static const FutoInType cl_t_custom = {FTN_TYPE_CUSTOM_OBJECT, cl_value_cleanup};
static const int cl_value = 7;

/* Makes the call named cl_call_name on the pointer of the cancelled step,
   then logs that the handler went on. */
static void cl_calling_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    const FutoInAsyncStepsAPI* api = bsi->api;
    const char* c = cl_call_name;
    if (strcmp(c, "add") == 0) {
        api->add(bsi, NULL, cl_never_step, NULL);
    } else if (strcmp(c, "parallel") == 0) {
        api->parallel(bsi, NULL, NULL);
    } else if (strcmp(c, "loop") == 0) {
        api->loop(bsi, NULL, cl_never_body, NULL);
    } else if (strcmp(c, "repeat") == 0) {
        api->repeat(bsi, NULL, 1, cl_never_repeat, NULL);
    } else if (strcmp(c, "addSync") == 0) {
        api->addSync(bsi, cl_call_sync, NULL, cl_never_step, NULL);
    } else if (strcmp(c, "setTimeout") == 0) {
        api->setTimeout(bsi, 1000);
    } else if (strcmp(c, "setCancel") == 0) {
        api->setCancel(bsi, NULL, cl_never_cancel);
    } else if (strcmp(c, "waitExternal") == 0) {
        api->waitExternal(bsi);
    } else if (strcmp(c, "success") == 0) {
        api->success(bsi, NULL);
    } else if (strcmp(c, "success value") == 0) {
        FutoInArgs out;
        memset(&out, 0, sizeof(out));
        out.arg0.type = &cl_t_custom;
        out.arg0.p = &cl_value;
        api->success(bsi, &out);
    } else if (strcmp(c, "handle_error") == 0) {
        api->handle_error(bsi, "InCancel", NULL);
    } else if (strcmp(c, "breakLoop") == 0) {
        api->breakLoop(bsi, NULL);
    } else if (strcmp(c, "continueLoop") == 0) {
        api->continueLoop(bsi, NULL);
    }
    cl_log("%s cancel went on", c);
}

static void cl_calling_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)in;
    bsi->api->setCancel(bsi, data, cl_calling_cancel);
}

static void cl_calling_body(FutoInAsyncSteps* bsi, void* data) { bsi->api->setCancel(bsi, data, cl_calling_cancel); }

static void cl_calling_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)i;
    bsi->api->setCancel(bsi, data, cl_calling_cancel);
}

void cl_cancel_calling(FutoInAsyncSteps* root, const char* call, FutoInSync* sync, int in)
{
    cl_call_sync = sync;
    snprintf(cl_call_name, sizeof(cl_call_name), "%s", call);
    const FutoInAsyncStepsAPI* api = root->api;
    switch (in) {
    case 1:
        api->loop(root, NULL, cl_calling_body, NULL);
        break;
    case 2:
        api->repeat(root, NULL, 3, cl_calling_repeat, NULL);
        break;
    default:
        api->add(root, NULL, cl_calling_step, cl_no_eh);
    }
    api->execute(root, NULL, cl_unhandled);
}
