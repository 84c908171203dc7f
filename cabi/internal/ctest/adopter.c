/* The "C library" of an adopting team: a checksum over a payload that
 * completes the Go step it is given (cabi.Binary) with the sum, or fails
 * it with ChecksumError and an info naming both sums; at once, or from a
 * pthread of its own after a delay. */
#define _DEFAULT_SOURCE /* usleep */
#include "adopter.h"
#include "ctest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct verify_job {
    FutoInAsyncSteps* step;
    uint32_t sum;
    uint32_t want;
};

static void complete(const struct verify_job* job)
{
    FutoInAsyncSteps* bsi = job->step;
    if (job->sum != job->want) {
        char info[64];
        snprintf(info, sizeof(info), "sum 0x%x != 0x%x", job->sum, job->want);
        bsi->api->handle_error(bsi, "ChecksumError", info);
        return;
    }
    static const FutoInType u32 = {FTN_TYPE_UINT32, NULL};
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &u32;
    out.arg0.u32 = job->sum;
    bsi->api->success(bsi, &out);
}

static int free_how;
static pthread_t worker;
static int worker_started;

static void* verify_later(void* arg)
{
    struct verify_job* job = (struct verify_job*)arg;
    usleep(5000);
    complete(job);
    free(job);
    return NULL;
}

void ad_verify(FutoInAsyncSteps* step, const char* payload, uint32_t want, int on_thread)
{
    struct verify_job job = {step, 0, want};
    for (const unsigned char* c = (const unsigned char*)payload; *c; ++c) {
        job.sum = (job.sum * 31 + *c) & 0xffff;
    }
    if (!on_thread) {
        complete(&job);
        return;
    }
    struct verify_job* copy = (struct verify_job*)malloc(sizeof(job));
    *copy = job;
    step->api->waitExternal(step);
    worker_started = 1;
    pthread_create(&worker, NULL, verify_later, copy);
}

void ad_join(void)
{
    if (worker_started) {
        pthread_join(worker, NULL);
        worker_started = 0;
    }
}

/* ad_free_in_step: the first step ends the request, releasing the root
 * (how 0: free; 1: cancel, then free later; 2: nothing); the second
 * logs if it runs. */
static void free_own_root(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    FutoInAsyncSteps* root = (FutoInAsyncSteps*)data;
    static const char* const names[] = {"free", "cancel", "first"};
    ct_log(names[free_how]);
    switch (free_how) {
    case 0:
        root->api->free(root);
        break;
    case 1:
        root->api->cancel(root);
        break;
    default:
        break;
    }
}

static void after_free(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    ct_log("next step ran");
}

void ad_free_in_step(FutoInAsyncSteps* root, int how)
{
    free_how = how;
    root->api->add(root, root, free_own_root, NULL);
    root->api->add(root, NULL, after_free, NULL);
}

/* ad_hold adds a step that waits, keeps its pointer and signals (a C
 * condition, which the Go race detector does not see: as C code of
 * another thread, it orders nothing for Go); ad_wait_held waits for it and
 * ad_release_held completes it. ad_add_on_running then calls, from the
 * caller's thread, add (which 0), loop (1), repeat (2) or parallel (3) on
 * the root while its flow runs; what it adds logs "late step ran". */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static FutoInAsyncSteps* held;

static void hold_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->waitExternal(bsi);
    pthread_mutex_lock(&held_mu);
    held = bsi;
    pthread_cond_signal(&held_cv);
    pthread_mutex_unlock(&held_mu);
}

void ad_hold(FutoInAsyncSteps* root)
{
    held = NULL;
    root->api->add(root, NULL, hold_step, NULL);
}

void ad_wait_held(void)
{
    pthread_mutex_lock(&held_mu);
    while (held == NULL) {
        pthread_cond_wait(&held_cv, &held_mu);
    }
    pthread_mutex_unlock(&held_mu);
}

void ad_release_held(void) { held->api->success(held, NULL); }

static void late_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    ct_log("late step ran");
}

static void late_body(FutoInAsyncSteps* bsi, void* data)
{
    (void)data;
    ct_log("late step ran");
    bsi->api->breakLoop(bsi, NULL);
}

static void late_repeat(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)bsi;
    (void)data;
    (void)i;
    ct_log("late step ran");
}

void ad_add_on_running(FutoInAsyncSteps* root, int which)
{
    switch (which) {
    case 0:
        root->api->add(root, NULL, late_step, NULL);
        break;
    case 1:
        root->api->loop(root, NULL, late_body, NULL);
        break;
    case 2:
        root->api->repeat(root, NULL, 1, late_repeat, NULL);
        break;
    default: {
        FutoInAsyncSteps* p = root->api->parallel(root, NULL, NULL);
        if (p != NULL) {
            p->api->add(p, NULL, late_step, NULL);
        }
    }
    }
}

/* ad_add_sync_on_running calls addSync of sync on root, from the
 * caller's thread, while its flow runs; ad_parallel_idle makes a
 * parallel on the idle root, and ad_add_on_idle_parallel adds a branch
 * to that parallel from the caller's thread, while the flow runs. What
 * they add logs "late step ran". */
static FutoInAsyncSteps* idle_parallel;

void ad_add_sync_on_running(FutoInAsyncSteps* root, FutoInSync* sync)
{
    root->api->addSync(root, sync, NULL, late_step, NULL);
}

void ad_parallel_idle(FutoInAsyncSteps* root) { idle_parallel = root->api->parallel(root, NULL, NULL); }

void ad_add_on_idle_parallel(void) { idle_parallel->api->add(idle_parallel, NULL, late_step, NULL); }

/* ad_sched_outlives schedules two deferred callbacks on root, frees root,
 * then, through the stale pointer, logs their validity and cancels the
 * second: the first runs on the loop later, the root gone. */
static void sched_cb(void* data) { ct_log((const char*)data); }

void ad_sched_outlives(FutoInAsyncSteps* root)
{
    const FutoInAsyncStepsAPI* api = root->api;
    FutoInHandle kept = api->sched_deferred(root, 10, "kept ran", sched_cb);
    FutoInHandle dropped = api->sched_deferred(root, 10, "cancelled ran", sched_cb);
    api->free(root);
    char line[64];
    snprintf(line, sizeof(line), "after free: valid %d %d", api->sched_is_valid(root, &kept),
             api->sched_is_valid(root, &dropped));
    ct_log(line);
    api->sched_cancel(root, &dropped);
    snprintf(line, sizeof(line), "after cancel: valid %d %d", api->sched_is_valid(NULL, &kept),
             api->sched_is_valid(NULL, &dropped));
    ct_log(line);
}

/* ad_cancel_twice adds a step that sets two cancel handlers, "one" then
 * "two" (or NULL, with null_last), and a timeout of 5 ms; its error
 * handler logs the code. */
static void log_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    ct_log((const char*)data);
}

static void cancel_twice(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->setCancel(bsi, "cancel one", log_cancel);
    bsi->api->setCancel(bsi, "cancel two", data ? NULL : log_cancel);
    bsi->api->setTimeout(bsi, 5);
}

static void cancel_twice_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    ct_log(code);
}

void ad_cancel_twice(FutoInAsyncSteps* root, int null_last)
{
    root->api->add(root, null_last ? (void*)1 : NULL, cancel_twice, cancel_twice_error);
}

/* ad_drop_on_thread makes, from a new pthread that it joins, the call of
 * ad_add_on_running (which 0 to 3), addSync of sync (which 4) on root, or
 * ad_add_on_idle_parallel (which 5) while its flow runs. ad_execute_reporting adds a step that logs "next
 * step ran" and executes root with an unhandled_error that logs
 * "unhandled CODE: INFO". */
struct drop_args {
    FutoInAsyncSteps* root;
    FutoInSync* sync;
    int which;
};

static void* drop_thread(void* p)
{
    struct drop_args* a = p;
    if (a->which == 4) {
        ad_add_sync_on_running(a->root, a->sync);
    } else if (a->which == 5) {
        ad_add_on_idle_parallel();
    } else {
        ad_add_on_running(a->root, a->which);
    }
    return NULL;
}

void ad_drop_on_thread(FutoInAsyncSteps* root, FutoInSync* sync, int which)
{
    struct drop_args a = {root, sync, which};
    pthread_t t;
    if (pthread_create(&t, NULL, drop_thread, &a) != 0) {
        ct_log("pthread_create failed");
        return;
    }
    pthread_join(t, NULL);
}

static void next_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    ct_log("next step ran");
}

static void report_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    char line[256];
    snprintf(line, sizeof line, "unhandled %s: %s", code,
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL));
    ct_log(line);
}

void ad_execute_reporting(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, next_step, NULL);
    root->api->execute(root, NULL, report_unhandled);
}

/* ad_idle_call makes call (AD_* in adopter.h) on p, a root or a parallel
 * made on one (ad_idle_parallel). The cancel handler that setCancel gives
 * logs "idle cancel handler ran". */
static void idle_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    (void)data;
    ct_log("idle cancel handler ran");
}

void ad_idle_call(FutoInAsyncSteps* p, int call)
{
    switch (call) {
    case AD_SET_TIMEOUT:
        p->api->setTimeout(p, 1000);
        break;
    case AD_SET_CANCEL:
        p->api->setCancel(p, NULL, idle_cancel);
        break;
    case AD_WAIT_EXTERNAL:
        p->api->waitExternal(p);
        break;
    case AD_SUCCESS:
        p->api->success(p, NULL);
        break;
    case AD_BREAK_LOOP:
        p->api->breakLoop(p, NULL);
        break;
    case AD_CONTINUE_LOOP:
        p->api->continueLoop(p, NULL);
        break;
    default:
        p->api->handle_error(p, "Idle", "on an idle root");
    }
}

FutoInAsyncSteps* ad_idle_parallel(void) { return idle_parallel; }

/* ad_step_call adds to root a step that makes call (AD_*) on its own
 * pointer (or, with on_parallel, on that of a parallel it makes), keeps
 * it for ad_called_step and logs "step called"; its error handler logs
 * "step error CODE: INFO". */
static FutoInAsyncSteps* called_step;
static int call_on_parallel;

static void step_call(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    called_step = bsi;
    FutoInAsyncSteps* p = bsi;
    if (call_on_parallel) {
        p = bsi->api->parallel(bsi, NULL, NULL);
    }
    ad_idle_call(p, (int)(intptr_t)data);
    ct_log("step called");
}

static void step_call_eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    char line[256];
    snprintf(line, sizeof line, "step error %s: %s", code,
        (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL));
    ct_log(line);
}

void ad_step_call(FutoInAsyncSteps* root, int call, int on_parallel)
{
    call_on_parallel = on_parallel;
    root->api->add(root, (void*)(intptr_t)call, step_call, step_call_eh);
}

FutoInAsyncSteps* ad_called_step(void) { return called_step; }
