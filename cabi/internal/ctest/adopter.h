/* C code of an adopting team's Go flows: a step handed to C through
 * cabi.Binary. */
#ifndef CTEST_ADOPTER_H
#define CTEST_ADOPTER_H
#include "futoin_asyncsteps.h"

void ad_verify(FutoInAsyncSteps* step, const char* payload, uint32_t want, int on_thread);
void ad_join(void);
void ad_free_in_step(FutoInAsyncSteps* root, int how);
void ad_hold(FutoInAsyncSteps* root);
void ad_wait_held(void);
void ad_add_on_running(FutoInAsyncSteps* root, int which);
void ad_release_held(void);
void ad_add_sync_on_running(FutoInAsyncSteps* root, FutoInSync* sync);
void ad_parallel_idle(FutoInAsyncSteps* root);
void ad_add_on_idle_parallel(void);
void ad_sched_outlives(FutoInAsyncSteps* root);
void ad_cancel_twice(FutoInAsyncSteps* root, int null_last);
void ad_drop_on_thread(FutoInAsyncSteps* root, FutoInSync* sync, int which);
void ad_execute_reporting(FutoInAsyncSteps* root);
enum { AD_SET_TIMEOUT, AD_SET_CANCEL, AD_WAIT_EXTERNAL, AD_SUCCESS, AD_HANDLE_ERROR, AD_BREAK_LOOP, AD_CONTINUE_LOOP };
void ad_idle_call(FutoInAsyncSteps* p, int call);
FutoInAsyncSteps* ad_idle_parallel(void);
void ad_step_call(FutoInAsyncSteps* root, int call, int on_parallel);
FutoInAsyncSteps* ad_called_step(void);

#endif
