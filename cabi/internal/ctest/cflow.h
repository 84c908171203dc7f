/* The C side of FuzzCFlows: an interpreter of generated step programs. */
#ifndef CFLOW_H
#define CFLOW_H
#include "futoin_asyncsteps.h"

/* The kinds of steps (cf_node.kind). */
enum {
    CF_OK,          /* success with an INT32 */
    CF_FAIL,        /* handle_error("E<a>") */
    CF_SEQ,         /* adds its kids as sub-steps; error handler b */
    CF_PAR,         /* parallel with a branch per kid; error handler b */
    CF_WAIT_THREAD, /* waits (c: with a cancel handler); a C thread completes it: a 0 success, else E<a> */
    CF_TIMEOUT,     /* setTimeout(a ms) with a cancel handler; never completed */
    CF_TRIGGER,     /* waits with a cancel handler and calls the Go hook, which fires the run's action */
    CF_LOOP,        /* a loop of a iterations over its kids (c 1: continueLoop on odd ones, c 2: repeat) */
    CF_STATE,       /* increments the state variable v<a%3> */
    CF_STACK,       /* takes stack memory and succeeds */
    CF_SYNC,        /* addSync(sync a%2) with its kids inside; error handler b */
    CF_GO,          /* the Go hook takes stack memory and adds, through Wrap, a Go step per kid that adds the kid on
                       Binary of itself (c 1: a parallel branch per kid; c 2: a Repeat(1) whose body adds them),
                       then a Go step that checks that the C step is live */
    CF_GOFAIL,      /* the Go hook adds, through Wrap, a Go step that fails with G<a> */
    CF_GOWAIT,      /* the Go hook adds, through Wrap, a Go step that waits for a goroutine: a 0 success, else G<a>
                       (c 1: completed through the C table; c 2: with a C cancel handler, completed in its callback,
                       for a != 0 and b odd through the C table: E<a>) */
    CF_WAIT_GO,     /* waits (c 0: C's cancel handler; through Wrap, with stack memory the Go hook takes, c 1: a Go
                       cancel handler, c 2: WaitExternal, or SetTimeout of an hour for b >= 2); the Go hook completes
                       it from a goroutine (b even: through the C table, odd: through Wrap): a 0 success, else E<a> */
};

/* Error handlers (cf_node.b of CF_SEQ, CF_PAR, CF_SYNC, CF_GO). */
enum { CF_EH_NONE, CF_EH_RECOVER, CF_EH_RETHROW, CF_EH_PASS };

#define CF_MAXKIDS 4

typedef struct {
    int kind, a, b, c, nkids;
    int kids[CF_MAXKIDS];
} cf_node;

void cf_load(const cf_node* nodes, int n);
void cf_counters(int* out);
void cf_outcome(char* buf, int size);
void cf_close_may_end(void);
void cf_set_syncs(FutoInSync* a, FutoInSync* b);
void cf_add(FutoInAsyncSteps* bsi, int i);
void cf_complete(FutoInAsyncSteps* bsi, int code);
void* cf_guard(FutoInAsyncSteps* bsi, int i);
void cf_go_ended(void* a);
void* cf_stack(FutoInAsyncSteps* bsi, int i);
void cf_live(FutoInAsyncSteps* bsi, void* a);
void cf_cancelled(void* a);
void cf_execute(FutoInAsyncSteps* root);
void cf_free_on_thread(FutoInAsyncSteps* root);
void cf_cancel_on_thread(FutoInAsyncSteps* root);
void cf_free(FutoInAsyncSteps* root);
void cf_cancel(FutoInAsyncSteps* root);
#endif
