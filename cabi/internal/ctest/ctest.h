/* C steps and a fake foreign table for the tests of package cabi. */
#ifndef CTEST_H
#define CTEST_H
#include "futoin_asyncsteps.h"

void ct_reset(void);
char* ct_trace(void);
int ct_done(void);
int ct_cleanups(void);
int ct_state_variable_calls(void);
void ct_set_strict(int on);
int ct_strict_alive(void);

void ct_args(FutoInAsyncSteps* root);
void ct_custom(FutoInAsyncSteps* root);
void ct_pass_async(FutoInAsyncSteps* step);
void ct_errors(FutoInAsyncSteps* root);
void ct_error_twice(FutoInAsyncSteps* root, int mode);
void ct_state(FutoInAsyncSteps* root);
void ct_state_kept(FutoInAsyncSteps* root);
void ct_stack(FutoInAsyncSteps* root, int mode);
void ct_stack_data(FutoInAsyncSteps* bsi);
void ct_int_data(FutoInAsyncSteps* root);
void ct_state_idle(FutoInAsyncSteps* root);
void ct_state_null(FutoInAsyncSteps* root);
void ct_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info);
void ct_succeed_step(FutoInAsyncSteps* bsi);
void ct_parallel_idle(FutoInAsyncSteps* root);
int ct_stack_idle_par(void);
int ct_state_idle_par(void);
void ct_timeout(FutoInAsyncSteps* root);
void ct_wait(FutoInAsyncSteps* root);
void ct_threads(FutoInAsyncSteps* root);
void ct_loops(FutoInAsyncSteps* root);
void ct_parallel(FutoInAsyncSteps* root);
void ct_sched(FutoInAsyncSteps* root);
void ct_sync(FutoInAsyncSteps* root, FutoInSync* sync, const char* name, int fail);
FutoInSync* ct_fake_sync(void);
FutoInSync* ct_broken_sync(int which);
FutoInSync* ct_shared_sync(int wait);
void ct_shared_grant(void);
int ct_shared_locked(void);
void ct_sync_held(FutoInAsyncSteps* root, FutoInSync* sync);
void ct_stale(FutoInAsyncSteps* root);
void ct_stale_call(void);
void ct_misuse(FutoInAsyncSteps* root);
void ct_execute(FutoInAsyncSteps* root, const char* data);
void ct_cancel(FutoInAsyncSteps* root);
int ct_is_valid(FutoInAsyncSteps* root);
void ct_free(FutoInAsyncSteps* root);
void ct_go_value(FutoInAsyncSteps* root);
void ct_empty_slot(FutoInAsyncSteps* root);
void ct_execute_only(FutoInAsyncSteps* root, const char* data, int which);
void ct_held(FutoInAsyncSteps* root);
void ct_held_with_cancel(FutoInAsyncSteps* root);
void ct_guard(FutoInAsyncSteps* bsi);
void ct_fail_held(void);
FutoInAsyncSteps* ct_held_step(void);
int ct_stack_held(void);
int ct_state_held(void);
void ct_empty_slot_back(FutoInAsyncSteps* root);
void ct_take_over(FutoInAsyncSteps* root, int wait);
void ct_succeed_held(void);
void ct_running(FutoInAsyncSteps* root);
void ct_same_root(FutoInAsyncSteps* root);
void ct_copy_carry(FutoInAsyncSteps* root);
void ct_copy_sync(FutoInAsyncSteps* root, FutoInSync* sync);
void ct_release_model(void);
void ct_copy_link(FutoInAsyncSteps* root);
void ct_other_lock(FutoInSync* sync);
void ct_branch_lock(FutoInAsyncSteps* bsi, FutoInSync* sync, int i);
ptrdiff_t ct_root_id(FutoInAsyncSteps* bsi);
void ct_anon_lock(FutoInSync* sync, int n);
void ct_anon_unlock(FutoInSync* sync, int n);
void ct_c_branch_go(FutoInAsyncSteps* root);
void ct_sync_go(FutoInAsyncSteps* root, FutoInSync* sync);
ptrdiff_t ct_c_branch_id(void);
void ct_await_like(FutoInAsyncSteps* root);
void ct_reserved(FutoInAsyncSteps* root);
void ct_free_own(FutoInAsyncSteps* root);
void ct_cancel_lock(FutoInSync* sync);
void ct_cancel_locker(void);
void ct_cancel_step_unwinds(int on);
void ct_cancel_step_races(int on);
void ct_cancel_race_wait(void);
void ct_own_call(FutoInAsyncSteps* root, int call, int where);
void ct_own_call_sub(FutoInAsyncSteps* parent, int call);
void ct_late_call_held(int call);
/* A step of a table that has only rootId (1), waitExternal, setCancel,
 * success and handle_error, but for the entries whose bit is set in
 * missing: ct_bare_lock calls sync's lock with it, ct_bare_cancel runs the
 * cancel handler it was given, ct_bare_unlock calls sync's unlock. */
void ct_bare_lock(FutoInSync* sync, uint32_t missing);
/* ct_bare_order forces the order of the bare step's success, called from
 * the hidden flow's loop, and the return of ct_bare_lock's lock call;
 * ct_reset sets CT_BARE_ANY_ORDER. */
enum { CT_BARE_ANY_ORDER, CT_BARE_LOCKED_FIRST, CT_BARE_RETURNED_FIRST };
void ct_bare_order(int order);
void ct_bare_cancel(void);
void ct_bare_unlock(FutoInSync* sync);

FutoInAsyncSteps* ct_fake_root(void);
void ct_fake_run(FutoInAsyncSteps* root);
void ct_fake_free(FutoInAsyncSteps* root);
int ct_fake_run_sched(void);
/* A fake root whose table has all 25 functions, an event loop of its own
 * among them, but for the entries whose bit is set in missing (bit i for
 * index i), which are NULL; with steps_only, the root's table has them all
 * and only the table its steps are given lacks them. ct_sched_run runs
 * what the event loop queued. Free it with ct_fake_free. */
FutoInAsyncSteps* ct_table_root(uint32_t missing, int steps_only);
void ct_cancel_on_error(FutoInAsyncSteps* root);
void ct_time_out_waiting(FutoInAsyncSteps* root);
int ct_sched_run(void);
/* Adds to a fake root a C step that calls ctFakeCGo with its pointer (and
 * has an error handler that logs the code). */
void ct_fake_c_go(FutoInAsyncSteps* root);
void ct_log(const char* s);
void ct_take_string(FutoInAsyncSteps* root);
void ct_finish_taken(void);
int ct_fake_placeholders(void);
#endif
