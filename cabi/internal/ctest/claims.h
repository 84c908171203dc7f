/* C steps that check the claims of the header one by one, as tests. */
#ifndef CTEST_CLAIMS_H
#define CTEST_CLAIMS_H
#include "futoin_asyncsteps.h"

void cl_reset(void);
char* cl_trace(void);
void cl_stale_table(FutoInAsyncSteps* root);
void cl_null_args(FutoInAsyncSteps* root, FutoInSync* sync);
void cl_timeout_twice(FutoInAsyncSteps* root, uint32_t first, uint32_t second);
void cl_fail_unhandled(FutoInAsyncSteps* root);
void cl_branch_kinds(FutoInAsyncSteps* root, FutoInSync* sync);
void cl_new_instance(FutoInAsyncSteps* root);
FutoInAsyncSteps* cl_instance_root(void);
void cl_cancel_nested(FutoInAsyncSteps* root);
void cl_cancelled_late(void);
void cl_fail_waiting(FutoInAsyncSteps* root);
void cl_fail_it(void);
void cl_cancel_calling(FutoInAsyncSteps* root, const char* call, FutoInSync* sync, int in);

#endif
