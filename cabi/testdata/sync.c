/* A C program on the synchronization objects of libfutoin_asyncsteps: run
 * by TestCProgram, which compares its output with sync.out. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

static FutoInAsyncSteps* holder; /* the step of the flow inside the limiter */

static void hold(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)args;
    printf("%s: inside\n", (const char*)data);
    holder = bsi;
    bsi->api->waitExternal(bsi);
    signal_event();
}

static void enter(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    printf("%s: inside\n", (const char*)data);
}

static void rejected(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    printf("%s: %s\n", (const char*)data, code);
    bsi->api->success(bsi, NULL); /* handled: the flow goes on */
}

static void left(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    (void)bsi;
    (void)args;
    printf("%s: done\n", (const char*)data);
    signal_event();
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("mutex max 0: %s\n", futoin_mutex_new(0, 0) == NULL ? "NULL" : "made");
    printf("throttle max 0: %s\n", futoin_throttle_new(0, 10, 0) == NULL ? "NULL" : "made");
    printf("throttle period 0: %s\n", futoin_throttle_new(1, 0, 0) == NULL ? "NULL" : "made");

    /* One flow at a time, none waiting: a second is rejected while the
     * first is inside, and a third gets in once the first has left. */
    FutoInSync* limiter = futoin_limiter_new(1, 0, 0, 0, 0);
    FutoInAsyncSteps* a = futoin_asyncsteps_new();
    const FutoInAsyncStepsAPI* api = a->api;
    api->addSync(a, limiter, "A", hold, NULL);
    api->add(a, "A", left, NULL);
    api->execute(a, NULL, NULL);
    wait_events(1);

    FutoInAsyncSteps* b = api->newInstance(a);
    api->addSync(b, limiter, "B", enter, rejected);
    api->add(b, "B", left, NULL);
    api->execute(b, NULL, NULL);
    wait_events(2);

    holder->api->success(holder, NULL); /* A leaves, from this thread */
    wait_events(3);

    FutoInAsyncSteps* c = api->newInstance(a);
    api->addSync(c, limiter, "C", enter, NULL);
    api->add(c, "C", left, NULL);
    api->execute(c, NULL, NULL);
    wait_events(4);

    api->free(c);
    api->free(b);
    api->free(a);
    futoin_sync_free(limiter);
    return 0;
}
