// The C side of FuzzCFlows (package cabi): an interpreter of generated
// programs of C steps, with counters of everything C allocates, so that
// the test can check that each allocation was released exactly once.
//
// A program is a tree of cf_node, given by the test through cf_load. Each
// node is one step (see the kinds in cflow.h); the test's Go side runs the
// kinds that involve Go (CF_GO, CF_GOFAIL, CF_GOWAIT, CF_WAIT_GO,
// CF_TRIGGER's action) through the hooks in cflow.go.
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cflow.h"

// Implemented in Go (cflow.go).
extern void cfGoHook(FutoInAsyncSteps* bsi, int node);

static cf_node* prog;
static int prog_len;

// A step's data is its node's index, an integer passed as void*, as C
// code often does: cabi must never hold it as a Go pointer.
#define CF_MAXNODES 64

static atomic_int state_allocs, state_cleanups;
static atomic_int stack_allocs, stack_cleanups;
static atomic_int threads_live;
static atomic_int cancels;
static atomic_int violations;
static atomic_int values_made, values_cleaned;
static atomic_int outcome_set; // 0: none yet
static char outcome[64];
static atomic_int outcomes; // how many outcomes were reported
// close_may_end: a Loop.Close may come while the end step runs, and the
// loop then stops the flow where it is, with InternalError, after that
// step reported OK.
static atomic_int close_may_end;
static pthread_mutex_t outcome_mu = PTHREAD_MUTEX_INITIALIZER;

static void violation(const char* what)
{
    fprintf(stderr, "cflow VIOLATION: %s\n", what);
    atomic_fetch_add(&violations, 1);
}

void cf_load(const cf_node* nodes, int n)
{
    if (n > CF_MAXNODES) {
        violation("program too long");
        n = CF_MAXNODES;
    }
    free(prog);
    prog = malloc(sizeof(cf_node) * (size_t)n);
    memcpy(prog, nodes, sizeof(cf_node) * (size_t)n);
    prog_len = n;
    outcome[0] = 0;
    atomic_store(&outcome_set, 0);
    atomic_store(&outcomes, 0);
    atomic_store(&close_may_end, 0);
}

void cf_close_may_end(void) { atomic_store(&close_may_end, 1); }

void cf_counters(int* out)
{
    out[0] = atomic_load(&state_allocs);
    out[1] = atomic_load(&state_cleanups);
    out[2] = atomic_load(&stack_allocs);
    out[3] = atomic_load(&stack_cleanups);
    out[4] = atomic_load(&threads_live);
    out[5] = atomic_load(&cancels);
    out[6] = atomic_load(&violations);
    out[7] = atomic_load(&outcomes);
    out[8] = atomic_load(&values_made);
    out[9] = atomic_load(&values_cleaned);
}

// cf_outcome copies the first outcome reported ("" if none) into buf.
void cf_outcome(char* buf, int size)
{
    pthread_mutex_lock(&outcome_mu);
    if (atomic_load(&outcome_set)) {
        snprintf(buf, (size_t)size, "%s", outcome);
    } else {
        buf[0] = 0;
    }
    pthread_mutex_unlock(&outcome_mu);
}

// report records the outcome before it counts it: a reader that sees
// the count sees the outcome.
static void report(const char* what)
{
    pthread_mutex_lock(&outcome_mu);
    int first = atomic_load(&outcomes) == 0;
    int closed_after_end = atomic_load(&close_may_end) && atomic_load(&outcomes) == 1 &&
                           strcmp(outcome, "OK") == 0 && strcmp(what, "InternalError") == 0;
    if (first) {
        snprintf(outcome, sizeof outcome, "%s", what);
        atomic_store(&outcome_set, 1);
    }
    atomic_fetch_add(&outcomes, 1);
    pthread_mutex_unlock(&outcome_mu);
    if (!first && !closed_after_end) {
        violation("a second outcome of one execution");
    }
}

static void add_node(FutoInAsyncSteps* bsi, int i);


// ---- activations -----------------------------------------------------------------

// act is the stack memory of a step that waits: the cancel handler and the
// completing thread get it, and its cleanup checks that the cancel
// handler ran at most once and never after the cleanup.
typedef struct {
    int magic;
    int node;
    int cancelled;
    int iter;
    int ended; // cf_go_ended: Go completed the step, which no cancel handler may follow
} act;

#define ACT_MAGIC 0x5eed

static void act_cleanup(void* p)
{
    act* a = p;
    if (a->magic != ACT_MAGIC) {
        violation("stack memory cleaned up twice or never initialized");
    }
    if (a->cancelled > 1) {
        violation("a cancel handler ran more than once");
    }
    a->magic = 0;
    atomic_fetch_add(&stack_cleanups, 1);
}

static act* new_act(FutoInAsyncSteps* bsi, int node)
{
    act* a = bsi->api->stack(bsi, sizeof(act), act_cleanup);
    if (a == NULL) {
        violation("stack gave no memory");
        return NULL;
    }
    atomic_fetch_add(&stack_allocs, 1);
    a->magic = ACT_MAGIC;
    a->node = node;
    return a;
}

static void on_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    act* a = data;
    if (a->magic != ACT_MAGIC) {
        violation("a cancel handler ran after its stack memory was cleaned up");
        return;
    }
    if (a->ended) {
        violation("a cancel handler ran after its step completed");
    }
    a->cancelled++;
    atomic_fetch_add(&cancels, 1);
}

// ---- values -----------------------------------------------------------------------

static void int_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    atomic_fetch_add(&values_cleaned, 1);
}

static void str_cleanup(FutoInBinaryValue* v)
{
    free((void*)v->cstr);
    v->cstr = NULL;
    atomic_fetch_add(&values_cleaned, 1);
}

static const FutoInType cf_i32 = {FTN_TYPE_INT32, int_cleanup};
static const FutoInType cf_str = {FTN_TYPE_STRING, str_cleanup};

// succeed calls success with an INT32 i and a STRING made for it.
static void succeed(FutoInAsyncSteps* bsi, int i)
{
    FutoInArgs out;
    memset(&out, 0, sizeof out);
    out.arg0.type = &cf_i32;
    out.arg0.i32 = i;
    char* s = malloc(16);
    snprintf(s, 16, "v%d", i);
    out.arg1.type = &cf_str;
    out.arg1.cstr = s;
    out.arg1.length = (uint32_t)strlen(s);
    atomic_fetch_add(&values_made, 2);
    bsi->api->success(bsi, &out);
    if (out.arg0.type != NULL || out.arg1.type != NULL) {
        violation("success did not reset the slots it took over");
    }
}

// ---- completion from another thread ----------------------------------------------

typedef struct {
    FutoInAsyncSteps* bsi;
    int code;
    int delay_us;
} completion;

static void complete(FutoInAsyncSteps* bsi, int code)
{
    if (code == 0) {
        succeed(bsi, 1000);
    } else {
        char c[16];
        snprintf(c, sizeof c, "E%d", code);
        bsi->api->handle_error(bsi, c, "from a thread");
    }
}

static void* completer(void* p)
{
    completion* c = p;
    if (c->delay_us > 0) {
        usleep((useconds_t)c->delay_us);
    }
    complete(c->bsi, c->code);
    free(c);
    atomic_fetch_sub(&threads_live, 1);
    return NULL;
}

static void spawn_completion(FutoInAsyncSteps* bsi, int code, int delay_us)
{
    completion* c = malloc(sizeof *c);
    c->bsi = bsi;
    c->code = code;
    c->delay_us = delay_us;
    atomic_fetch_add(&threads_live, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, completer, c) != 0) {
        violation("pthread_create");
        atomic_fetch_sub(&threads_live, 1);
        free(c);
        return;
    }
    pthread_detach(t);
}

// cf_guard takes stack memory on bsi, a Go step's pointer given by Binary,
// in the step's callback, and sets a cancel handler on it; it returns the
// memory, for cf_go_ended.
void* cf_guard(FutoInAsyncSteps* bsi, int i)
{
    act* a = new_act(bsi, i);
    if (a != NULL) {
        bsi->api->setCancel(bsi, a, on_cancel);
    }
    return a;
}

// cf_go_ended notes that Go completes, in its callback, the step whose
// memory cf_guard gave: its cancel handler must not run from now on.
void cf_go_ended(void* a)
{
    if (a != NULL) {
        ((act*)a)->ended = 1;
    }
}

// cf_stack takes stack memory on bsi, in its step's callback, and
// returns it, for cf_live and cf_cancelled: the Go side's memory of a C
// step whose life Go drives through Wrap.
void* cf_stack(FutoInAsyncSteps* bsi, int i) { return new_act(bsi, i); }

// cf_live checks, from a sub-step of the step bsi was given to or while
// it waits, that the step is live: its pointer is not stale (a stale one
// has no rootId) and its stack memory a is not cleaned up.
void cf_live(FutoInAsyncSteps* bsi, void* a)
{
    if (bsi->api->rootId(bsi) == 0) {
        violation("the pointer of a live step is stale");
    }
    if (a != NULL && ((act*)a)->magic != ACT_MAGIC) {
        violation("the stack memory of a live step was cleaned up");
    }
}

// cf_cancelled is a Go cancel handler's call of on_cancel for the step
// whose memory cf_stack gave.
void cf_cancelled(void* a) { on_cancel(NULL, a); }

// cf_complete completes bsi (0: success, else error E<code>) from the
// calling thread: the Go side's completion of CF_WAIT_GO.
void cf_complete(FutoInAsyncSteps* bsi, int code) { complete(bsi, code); }

// ---- state variables ---------------------------------------------------------------

static void* var_alloc(void* data)
{
    (void)data;
    atomic_fetch_add(&state_allocs, 1);
    int* v = malloc(sizeof(int));
    *v = 0;
    return v;
}

static void var_cleanup(void* data, void* value)
{
    (void)data;
    free(value);
    atomic_fetch_add(&state_cleanups, 1);
}

static const char* var_names[] = {"v0", "v1", "v2"};

// ---- steps -------------------------------------------------------------------------

static void add_kids(FutoInAsyncSteps* bsi, int i)
{
    for (int k = 0; k < prog[i].nkids; k++) {
        add_node(bsi, prog[i].kids[k]);
    }
}

static void eh(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    int i = (int)(intptr_t)data;
    (void)code;
    switch (prog[i].b) {
    case CF_EH_RECOVER:
        bsi->api->success(bsi, NULL);
        return;
    case CF_EH_RETHROW: {
        char c[16];
        snprintf(c, sizeof c, "R%d", i);
        bsi->api->handle_error(bsi, c, "rethrown");
        return;
    }
    default:
        return; // the error goes on
    }
}

static FutoInAsyncSteps_error_callback eh_of(int i) { return prog[i].b == CF_EH_NONE ? NULL : eh; }

static void loop_body(FutoInAsyncSteps* bsi, void* data)
{
    act* a = data;
    int i = a->node;
    int it = a->iter++;
    if (it >= prog[i].a) {
        bsi->api->breakLoop(bsi, NULL);
        return;
    }
    if (it % 2 == 1 && prog[i].c) {
        bsi->api->continueLoop(bsi, NULL);
        return;
    }
    add_kids(bsi, i);
}

static void repeat_body(FutoInAsyncSteps* bsi, void* data, size_t n)
{
    (void)n;
    add_kids(bsi, ((act*)data)->node);
}

static void sync_body(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    add_kids(bsi, (int)(intptr_t)data);
}

static FutoInSync* syncs[2];

void cf_set_syncs(FutoInSync* a, FutoInSync* b)
{
    syncs[0] = a;
    syncs[1] = b;
}

static void step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    int i = (int)(intptr_t)data;
    cf_node* n = &prog[i];
    switch (n->kind) {
    case CF_OK:
        succeed(bsi, i);
        return;
    case CF_FAIL: {
        char c[16];
        snprintf(c, sizeof c, "E%d", n->a);
        bsi->api->handle_error(bsi, c, "failed");
        return;
    }
    case CF_SEQ:
        add_kids(bsi, i);
        return;
    case CF_PAR: {
        FutoInAsyncSteps* p = bsi->api->parallel(bsi, data, eh_of(i));
        add_kids(p, i);
        return;
    }
    case CF_WAIT_THREAD: {
        act* a = new_act(bsi, i);
        if (n->c) {
            bsi->api->setCancel(bsi, a, on_cancel);
        } else {
            bsi->api->waitExternal(bsi);
        }
        spawn_completion(bsi, n->a, n->b % 3 == 0 ? 0 : 200 * n->b);
        return;
    }
    case CF_TIMEOUT: {
        act* a = new_act(bsi, i);
        bsi->api->setCancel(bsi, a, on_cancel);
        bsi->api->setTimeout(bsi, (uint32_t)n->a);
        return;
    }
    case CF_TRIGGER: {
        act* a = new_act(bsi, i);
        bsi->api->setCancel(bsi, a, on_cancel);
        cfGoHook(bsi, i);
        return;
    }
    case CF_LOOP: {
        act* a = new_act(bsi, i);
        if (n->c == 2) {
            bsi->api->repeat(bsi, a, (size_t)n->a, repeat_body, "r");
        } else {
            bsi->api->loop(bsi, a, loop_body, n->a % 2 ? "l" : NULL);
        }
        return;
    }
    case CF_STATE: {
        int* v = bsi->api->stateVariable(bsi, NULL, var_names[n->a % 3], var_alloc, var_cleanup);
        if (v == NULL) {
            violation("stateVariable gave NULL");
            return;
        }
        ++*v;
        return;
    }
    case CF_STACK:
        new_act(bsi, i);
        return;
    case CF_SYNC:
        bsi->api->addSync(bsi, syncs[n->a % 2], data, sync_body, eh_of(i));
        return;
    case CF_GO:
    case CF_GOFAIL:
    case CF_GOWAIT:
    case CF_WAIT_GO:
        if (n->kind == CF_WAIT_GO && n->c == 0) {
            act* a = new_act(bsi, i);
            bsi->api->setCancel(bsi, a, on_cancel);
        }
        cfGoHook(bsi, i);
        return;
    }
    violation("unknown node kind");
}

static void add_node(FutoInAsyncSteps* bsi, int i)
{
    if (i < 0 || i >= prog_len) {
        violation("node out of range");
        return;
    }
    // A step's error handler catches the errors of its sub-steps: CF_SEQ
    // and CF_GO have theirs on the step; CF_PAR gives its to parallel and
    // CF_SYNC to addSync, each a sub-step added in the step's callback.
    FutoInAsyncSteps_error_callback h = NULL;
    if (prog[i].kind == CF_SEQ || prog[i].kind == CF_GO) {
        h = eh_of(i);
    }
    bsi->api->add(bsi, (void*)(intptr_t)i, step, h);
}

// cf_add adds node i to bsi (a root, or a step in its callback).
void cf_add(FutoInAsyncSteps* bsi, int i) { add_node(bsi, i); }

// ---- roots -----------------------------------------------------------------------

static void end_step(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    (void)args;
    report("OK");
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    report(code);
}

// cf_execute adds an end step that reports "OK" to root and executes it
// with an unhandled_error that reports the code.
void cf_execute(FutoInAsyncSteps* root)
{
    root->api->add(root, NULL, end_step, NULL);
    root->api->execute(root, NULL, unhandled);
}

static void* free_thread(void* p)
{
    FutoInAsyncSteps* root = p;
    root->api->free(root);
    atomic_fetch_sub(&threads_live, 1);
    return NULL;
}

static void* cancel_thread(void* p)
{
    FutoInAsyncSteps* root = p;
    root->api->cancel(root);
    atomic_fetch_sub(&threads_live, 1);
    return NULL;
}

static void on_thread(void* (*f)(void*), FutoInAsyncSteps* root)
{
    atomic_fetch_add(&threads_live, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, f, root) != 0) {
        violation("pthread_create");
        atomic_fetch_sub(&threads_live, 1);
        return;
    }
    pthread_detach(t);
}

// cf_free_on_thread frees root from a new C thread.
void cf_free_on_thread(FutoInAsyncSteps* root) { on_thread(free_thread, root); }

// cf_cancel_on_thread cancels root through its table from a new C thread.
void cf_cancel_on_thread(FutoInAsyncSteps* root) { on_thread(cancel_thread, root); }

// cf_free frees root through its table, on the calling thread.
void cf_free(FutoInAsyncSteps* root) { root->api->free(root); }

// cf_cancel cancels root through its table, on the calling thread.
void cf_cancel(FutoInAsyncSteps* root) { root->api->cancel(root); }
