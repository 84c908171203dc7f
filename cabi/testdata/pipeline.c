/* A request pipeline in C on libfutoin_asyncsteps, as an adopting team
 * writes one: run by TestCProgram (and under AddressSanitizer by
 * TestCProgramsUnderASan), which compares its output with pipeline.out.
 *
 * parse (a state variable, a malloc'd string handed to success, taken
 *   over by checksum and released by report)
 *   -> checksum (fails; its error handler reads the info and recovers)
 *   -> guarded (setCancel + setTimeout: the timeout runs the cancel
 *      handler, then the error handler sees Timeout and recovers)
 *   -> a parallel of two branches
 *   -> a loop with a break
 *   -> a call into a "C library" that completes on a pthread of its own
 *   -> report.
 * Then a second root whose waiting step main cancels, and the frees. */
#define _DEFAULT_SOURCE /* usleep */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "futoin_asyncsteps.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int events;

static void signal_event(void)
{
    pthread_mutex_lock(&mu);
    ++events;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_events(int n)
{
    pthread_mutex_lock(&mu);
    while (events < n) {
        pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}

/* The values the steps give each other: strings malloc'd by the sender,
 * freed by the library through the type's cleanup once it has copied them. */
static int string_frees;
static void free_string(FutoInBinaryValue* v)
{
    free((void*)v->p);
    ++string_frees;
}
static const FutoInType owned_string = {FTN_TYPE_STRING, free_string};
static const FutoInType plain_int32 = {FTN_TYPE_INT32, NULL};

static void set_string(FutoInBinaryValue* v, const char* s)
{
    v->type = &owned_string;
    v->cstr = strdup(s);
    v->length = (uint32_t)strlen(s);
}

/* The flow's state: a request context, allocated on first use, freed
 * when the root is. */
struct request {
    int steps;
    int branches;
};
static int state_frees;
static void* new_request(void* data)
{
    (void)data;
    return calloc(1, sizeof(struct request));
}
static void free_request(void* data, void* value)
{
    (void)data;
    free(value);
    ++state_frees;
}
static struct request* request_of(FutoInAsyncSteps* bsi)
{
    return (struct request*)bsi->api->stateVariable(bsi, NULL, "request", new_request, free_request);
}

static void parse(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    struct request* req = request_of(bsi);
    ++req->steps;
    printf("parse: step %d\n", req->steps);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    set_string(&out.arg0, "GET /items");
    out.arg1.type = &plain_int32;
    out.arg1.i32 = 3;
    bsi->api->success(bsi, &out);
}

static void checksum_fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    char info[32];
    snprintf(info, sizeof(info), "sum %d != %d", 17, 42);
    bsi->api->handle_error(bsi, "ChecksumError", info);
    memset(info, 0, sizeof(info)); /* copied by handle_error */
}

static void checksum_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    const char* last = (const char*)bsi->api->stateVariable(bsi, NULL, "last_exception", NULL, NULL);
    printf("checksum error: %s (%s), last_exception %s\n", code, info, last);
    bsi->api->success(bsi, NULL);
}

/* The request line, taken over by checksum: moved out of its slot, whose
 * type is zeroed without a cleanup, and released by report. */
static FutoInBinaryValue request_line;

static void checksum(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    ++request_of(bsi)->steps;
    printf("checksum: \"%.*s\" x%d\n", (int)args->arg0.length, args->arg0.cstr, args->arg1.i32);
    FutoInBinaryValue* slot = (FutoInBinaryValue*)&args->arg0;
    request_line = *slot;
    slot->type = NULL;
    bsi->api->add(bsi, data, checksum_fail, checksum_error);
}

static int stack_cleanups;
static void stack_cleanup(void* value)
{
    printf("guarded: stack cleanup \"%s\"\n", (const char*)value);
    ++stack_cleanups;
}

static void guarded_cancel(FutoInAsyncSteps* bsi, void* data)
{
    printf("guarded: cancel handler, %s, valid %d\n", (const char*)data, bsi->api->isValid(bsi));
}

static void guarded_wait(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    char* mem = (char*)bsi->api->stack(bsi, 16, stack_cleanup);
    strcpy(mem, "scratch");
    bsi->api->setCancel(bsi, data, guarded_cancel);
    bsi->api->setTimeout(bsi, 20);
    printf("guarded: waiting\n");
}

static void guarded_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    printf("guarded error: %s, stack cleanups %d\n", code, stack_cleanups);
    bsi->api->success(bsi, NULL);
}

static void guarded(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ++request_of(bsi)->steps;
    bsi->api->add(bsi, "the slow dependency", guarded_wait, guarded_error);
}

static void branch(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    ++request_of(bsi)->branches;
    printf("branch %s\n", (const char*)data);
}

static void fan_out(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ++request_of(bsi)->steps;
    FutoInAsyncSteps* p = bsi->api->parallel(bsi, NULL, NULL);
    p->api->add(p, "a", branch, NULL);
    p->api->add(p, "b", branch, NULL);
}

static void body(FutoInAsyncSteps* bsi, void* data)
{
    int* i = (int*)data;
    printf("loop: %d\n", *i);
    if (++*i == 3) {
        bsi->api->breakLoop(bsi, "retry");
    }
}

static int iterations;
static void retry(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ++request_of(bsi)->steps;
    bsi->api->loop(bsi, &iterations, body, "retry");
}

/* The "C library": a call that completes on a thread of its own. */
static pthread_t lib_thread;
static int lib_args_reset;
static void* lib_worker(void* arg)
{
    FutoInAsyncSteps* bsi = (FutoInAsyncSteps*)arg;
    usleep(20000);
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &plain_int32;
    out.arg0.i32 = 200;
    set_string(&out.arg1, "OK");
    printf("lib: on the loop thread %d\n", bsi->api->is_same_thread(bsi));
    bsi->api->success(bsi, &out);
    lib_args_reset = out.arg0.type == NULL && out.arg1.type == NULL; /* read after the join */
    return NULL;
}

static void call_lib(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    ++request_of(bsi)->steps;
    bsi->api->setTimeout(bsi, 5000); /* far off: the thread wins */
    pthread_create(&lib_thread, NULL, lib_worker, bsi);
}

static void report(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    struct request* req = request_of(bsi);
    printf("report: %d \"%.*s\" for \"%.*s\", steps %d, branches %d\n", args->arg0.i32, (int)args->arg1.length,
           args->arg1.cstr, (int)request_line.length, request_line.cstr, req->steps, req->branches);
    futoin_reset_binval(&request_line);
    signal_event();
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    printf("unhandled: %s (%s)\n", code, info);
    signal_event();
}

/* The second root: a step that waits until main cancels the flow. */
static void stuck_cancel(FutoInAsyncSteps* bsi, void* data)
{
    (void)bsi;
    printf("stuck: cancelled (%s)\n", (const char*)data);
    signal_event();
}

static void stuck(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->setCancel(bsi, data, stuck_cancel);
    printf("stuck: waiting\n");
    signal_event();
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    FutoInAsyncSteps* root = futoin_asyncsteps_new();
    const FutoInAsyncStepsAPI* api = root->api;
    api->add(root, NULL, parse, NULL);
    api->add(root, NULL, checksum, NULL);
    api->add(root, NULL, guarded, NULL);
    api->add(root, NULL, fan_out, NULL);
    api->add(root, NULL, retry, NULL);
    api->add(root, NULL, call_lib, NULL);
    api->add(root, NULL, report, NULL);
    api->execute(root, NULL, unhandled);
    wait_events(1);
    pthread_join(lib_thread, NULL);
    printf("lib: args reset %d\n", lib_args_reset);

    FutoInAsyncSteps* other = futoin_asyncsteps_new();
    api->add(other, "by main", stuck, NULL);
    api->execute(other, NULL, unhandled);
    wait_events(2);
    api->cancel(other);
    wait_events(3);

    futoin_asyncsteps_free_wait(other);
    futoin_asyncsteps_free_wait(root);
    printf("string frees %d, state frees %d, stack cleanups %d\n", string_frees, state_frees, stack_cleanups);
    return 0;
}
