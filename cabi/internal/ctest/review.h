/* C programs of a plugin author's review of package cabi, as tests. */
#ifndef CTEST_REVIEW_H
#define CTEST_REVIEW_H
#include "futoin_asyncsteps.h"

void rv_reset(void);
char* rv_trace(void);
void rv_lock_and_add_sync(FutoInAsyncSteps* root, FutoInSync* sync, int lock_first);
void rv_branches_lock(FutoInAsyncSteps* root, FutoInSync* sync, int n);
int rv_idle_stack(FutoInAsyncSteps* root, int on_parallel);
int rv_stack_cleanups(void);
void rv_valid_from_thread(FutoInAsyncSteps* root);
void rv_join_worker(void);
void rv_bools(FutoInAsyncSteps* root);
void rv_null_array(FutoInAsyncSteps* root, int base);
void rv_null_item(FutoInAsyncSteps* root, int base);
void rv_long_item(FutoInAsyncSteps* root, int base);
void rv_execute_waiting(FutoInAsyncSteps* root);
void rv_root_call_on_step(FutoInAsyncSteps* root, int which);
void rv_valid_after_error(FutoInAsyncSteps* root);
void rv_cancel_then_fail(FutoInAsyncSteps* root);
void rv_lock_fail(FutoInAsyncSteps* root, FutoInSync* sync, int how);
void rv_lock_unlock(FutoInAsyncSteps* root, FutoInSync* sync);
void rv_free_on_parent(FutoInAsyncSteps* step);
void rv_c_parent_free(FutoInAsyncSteps* root);
void rv_parallel_from_thread(FutoInAsyncSteps* root, int which);
void rv_parallel_complete_from_thread(FutoInAsyncSteps* root, int which, int late);
void rv_parent_cancel_from_sub(FutoInAsyncSteps* step);
void rv_root_stack_log(FutoInAsyncSteps* root);
void rv_two_parent_calls(FutoInAsyncSteps* step);
void rv_outside_success_then_fail(FutoInAsyncSteps* root, int own);

#endif
