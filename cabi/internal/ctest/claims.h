/* C steps that check the claims of the header one by one, as tests. */
#ifndef CTEST_CLAIMS_H
#define CTEST_CLAIMS_H
#include "futoin_asyncsteps.h"

void cl_reset(void);
char* cl_trace(void);
void cl_stale_table(FutoInAsyncSteps* root);
void cl_null_args(FutoInAsyncSteps* root, FutoInSync* sync);

#endif
