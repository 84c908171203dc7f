/* The receiver owns what it is given: a step that takes a custom object over
 * (futoin_reset_binval on its slot, as the C++ reference implementation does
 * with every value it receives) has its cleanup called once. Built with
 * -fsanitize=address and run by TestCProgramsUnderASan. */
#define _DEFAULT_SOURCE /* usleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "futoin_asyncsteps.h"

static void cleanup(FutoInBinaryValue* v) { free(v->custom_data); puts("cleanup"); }
static const FutoInType object = {FTN_TYPE_CUSTOM_OBJECT, cleanup};
static volatile int done;

static void give(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)data;
    (void)in;
    FutoInArgs out;
    memset(&out, 0, sizeof(out));
    out.arg0.type = &object;
    out.arg0.custom_data = malloc(16);
    bsi->api->success(bsi, &out);
}

static void take(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    futoin_reset_binval((FutoInBinaryValue*)&in->arg0); /* taken over */
}

static void end(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* in)
{
    (void)bsi;
    (void)data;
    (void)in;
    done = 1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    FutoInAsyncSteps* root = futoin_asyncsteps_new();
    root->api->add(root, NULL, give, NULL);
    root->api->add(root, NULL, take, NULL);
    root->api->add(root, NULL, end, NULL);
    root->api->execute(root, NULL, NULL);
    while (!done) {
        usleep(1000);
    }
    futoin_asyncsteps_free_wait(root); /* returns once the cleanups have run */
    puts("done");
    return 0;
}
