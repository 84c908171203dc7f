/* A C program on libfutoin_asyncsteps: run by TestCProgram, which compares
 * its output with hello.out. */
#define _DEFAULT_SOURCE /* usleep */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "futoin_asyncsteps.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int finished;

static void signal_done(void)
{
    pthread_mutex_lock(&mu);
    ++finished;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_done(int n)
{
    pthread_mutex_lock(&mu);
    while (finished < n) {
        pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
}

static int cleanups;
static void count_cleanup(FutoInBinaryValue* v)
{
    (void)v;
    ++cleanups;
}
static const FutoInType int32_type = {FTN_TYPE_INT32, count_cleanup};
static const FutoInType string_type = {FTN_TYPE_STRING, count_cleanup};

static void greet(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    char buf[16];
    strcpy(buf, "hello");
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &int32_type;
    out.arg0.i32 = 42;
    out.arg1.type = &string_type;
    out.arg1.cstr = buf;
    out.arg1.length = 5;
    printf("greet: on the loop thread: %d\n", bsi->api->is_same_thread(bsi));
    bsi->api->success(bsi, &out);
    memset(buf, 'x', sizeof(buf) - 1); /* success copied it */
    printf("greet: args reset: %d, cleanups: %d\n", out.arg0.type == NULL && out.arg1.type == NULL, cleanups);
}

static void fail(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->handle_error(bsi, "MyError", "something went wrong");
}

static void on_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)data;
    const char* info = (const char*)bsi->api->stateVariable(bsi, NULL, "error_info", NULL, NULL);
    printf("on_error: %s (%s)\n", code, info);
    bsi->api->success(bsi, NULL);
}

static void show(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    printf("show: %d (type %d) \"%.*s\" (length %u)\n", args->arg0.i32, args->arg0.type->flags,
           (int)args->arg1.length, args->arg1.cstr, args->arg1.length);
    bsi->api->add(bsi, data, fail, on_error);
}

static void body(FutoInAsyncSteps* bsi, void* data, size_t i)
{
    (void)data;
    printf("repeat: %zu\n", i);
    if (i == 2) {
        bsi->api->breakLoop(bsi, "outer");
    }
}

static void loops(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    bsi->api->repeat(bsi, data, 10, body, "outer");
}

static void* later(void* bsi)
{
    usleep(10000);
    FutoInAsyncSteps* as = (FutoInAsyncSteps*)bsi;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &int32_type;
    out.arg0.i32 = 7;
    as->api->success(as, &out); /* from another thread */
    return NULL;
}

static pthread_t thread;

static void wait_thread(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->waitExternal(bsi);
    pthread_create(&thread, NULL, later, bsi);
}

static void last(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)data;
    printf("last: %d from another thread\n", args->arg0.i32);
    signal_done();
}

static void boom(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)data;
    (void)args;
    bsi->api->handle_error(bsi, "Boom", NULL);
}

static void unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    printf("unhandled: %s on the loop thread: %d, data %s\n", code, bsi->api->is_same_thread(bsi), (const char*)data);
    signal_done();
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    FutoInAsyncSteps* root = futoin_asyncsteps_new();
    const FutoInAsyncStepsAPI* api = root->api;
    printf("main: on the loop thread: %d, valid: %d\n", api->is_same_thread(root), api->isValid(root));
    api->add(root, NULL, greet, NULL);
    api->add(root, NULL, show, NULL);
    api->add(root, NULL, loops, NULL);
    api->add(root, NULL, wait_thread, NULL);
    api->add(root, NULL, last, NULL);
    api->execute(root, NULL, unhandled);
    wait_done(1);
    pthread_join(thread, NULL);

    FutoInAsyncSteps* other = api->newInstance(root);
    api->add(other, NULL, boom, NULL);
    api->execute(other, "data", unhandled);
    wait_done(2);

    api->free(other);
    /* Returns once the root's cleanups have run: the program exits next. */
    futoin_asyncsteps_free_wait(root);
    printf("cleanups: %d\n", cleanups);
    return 0;
}
