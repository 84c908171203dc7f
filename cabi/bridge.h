/*
 * Internal declarations of package cabi: the C side of the bridge between
 * the binary interface and the Go engine. Not part of the public header.
 */
#ifndef CABI_BRIDGE_H
#define CABI_BRIDGE_H

#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "futoin_asyncsteps.h"

/*
 * Every FutoInAsyncSteps this library hands out is a cabi_bsi: the api
 * pointer, then the id of the Go object it stands for. The id is written
 * and read atomically by Go; 0 means the pointer is stale, and every call
 * on it is ignored.
 */
typedef struct {
    FutoInAsyncSteps base;
    uint64_t id;
} cabi_bsi;

/* Our synchronization objects: the api pointer and a Go id. */
typedef struct {
    FutoInSync base;
    uint64_t id;
} cabi_sync;

typedef void* (*cabi_alloc_fn)(void* data);
typedef void (*cabi_var_cleanup_fn)(void* data, void* value);
typedef void (*cabi_stack_cleanup_fn)(void* value);
typedef void (*cabi_loop_fn)(FutoInAsyncSteps* bsi, void* data);
typedef void (*cabi_repeat_fn)(FutoInAsyncSteps* bsi, void* data, size_t i);
typedef void (*cabi_sched_fn)(void* data);

extern const FutoInAsyncStepsAPI cabi_api;
extern const FutoInSyncAPI cabi_sync_api;

cabi_bsi* cabi_bsi_new(void);
cabi_sync* cabi_sync_new(uint64_t id);
static inline int cabi_is_ours(const FutoInAsyncSteps* bsi) { return bsi != NULL && bsi->api == &cabi_api; }
static inline int cabi_sync_is_ours(const FutoInSync* s) { return s != NULL && s->api == &cabi_sync_api; }
static inline uint64_t* cabi_bsi_id(FutoInAsyncSteps* bsi) { return &((cabi_bsi*)bsi)->id; }
static inline uint64_t* cabi_sync_id(FutoInSync* s) { return &((cabi_sync*)s)->id; }

/* Values: a flat view of a FutoInBinaryValue that Go reads and writes. */
typedef struct {
    const FutoInType* type;
    uint8_t flags;
    int64_t i;
    uint64_t u;
    double d;
    const void* p;
    uintptr_t custom_data; /* an integer for Go: it may hold an id */
    uint32_t length;
} cabi_flat;

static inline void* cabi_ptr(uintptr_t x) { return (void*)x; }

void cabi_read_value(const FutoInBinaryValue* v, cabi_flat* out);
void cabi_write_value(FutoInBinaryValue* v, const cabi_flat* in);
/* Empties v; with cleanup, calls its type's cleanup first. */
void cabi_reset_value(FutoInBinaryValue* v, int cleanup);
/* Calls the type's cleanup of a value rebuilt from flat, if it has one. */
void cabi_cleanup_flat(const cabi_flat* in);

/* Our types: input args (no cleanup) and values handed over (cleanup frees). */
const FutoInType* cabi_type(uint8_t flags);
const FutoInType* cabi_owned_type(uint8_t flags);
extern const FutoInType cabi_go_value_type;
extern const FutoInType cabi_owned_go_value_type;

/* Calls of user callbacks. */
void cabi_call_exec(FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps* bsi, uintptr_t data, const FutoInArgs* args);
void cabi_call_error(FutoInAsyncSteps_error_callback f, FutoInAsyncSteps* bsi, uintptr_t data, const char* code);
void cabi_call_cancel(FutoInAsyncSteps_cancel_callback f, FutoInAsyncSteps* bsi, uintptr_t data);
void cabi_call_loop(cabi_loop_fn f, FutoInAsyncSteps* bsi, uintptr_t data);
void cabi_call_repeat(cabi_repeat_fn f, FutoInAsyncSteps* bsi, uintptr_t data, size_t i);
void cabi_call_sched(cabi_sched_fn f, uintptr_t data);
void* cabi_call_alloc(cabi_alloc_fn f, uintptr_t data);
void cabi_call_var_cleanup(cabi_var_cleanup_fn f, uintptr_t data, void* value);
void cabi_call_stack_cleanup(cabi_stack_cleanup_fn f, void* value);
/* Calls on a synchronization object's table; a NULL entry is skipped. */
int cabi_sync_usable(const FutoInSync* s);
void cabi_sync_lock(FutoInSync* s, FutoInAsyncSteps* bsi);
void cabi_sync_unlock(FutoInSync* s, FutoInAsyncSteps* bsi);

/*
 * Calls on a foreign table (cabi.Wrap). Each checks the entry for NULL and
 * reports with its return value whether it could call.
 */
int cabi_f_add(FutoInAsyncSteps* bsi, uint64_t rec, int with_eh);
FutoInAsyncSteps* cabi_f_parallel(FutoInAsyncSteps* bsi, uint64_t rec, int with_eh);
void* cabi_f_state_variable(FutoInAsyncSteps* bsi, const char* name, int allocate);
int cabi_f_success(FutoInAsyncSteps* bsi, FutoInArgs* args);
int cabi_f_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info);
int cabi_f_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms);
int cabi_f_set_cancel(FutoInAsyncSteps* bsi, uint64_t rec);
int cabi_f_wait_external(FutoInAsyncSteps* bsi);
int cabi_f_loop(FutoInAsyncSteps* bsi, uint64_t rec, const char* label);
int cabi_f_repeat(FutoInAsyncSteps* bsi, uint64_t rec, size_t count, const char* label);
int cabi_f_break(FutoInAsyncSteps* bsi, const char* label);
int cabi_f_continue(FutoInAsyncSteps* bsi, const char* label);
int cabi_f_execute(FutoInAsyncSteps* bsi);
int cabi_f_cancel(FutoInAsyncSteps* bsi);
ptrdiff_t cabi_f_root_id(FutoInAsyncSteps* bsi);
int cabi_f_is_valid(FutoInAsyncSteps* bsi);
FutoInAsyncSteps* cabi_f_new_instance(FutoInAsyncSteps* bsi);
/* Schedules rec's callback, and returns NULL; or, calling nothing, the
 * name of the first entry the table lacks for it (see
 * cabi_f_sched_missing): one call, as the check costs one. */
const char* cabi_f_sched(FutoInAsyncSteps* bsi, uint32_t delay_ms, int deferred, uint64_t rec, FutoInHandle* out);
void cabi_f_sched_cancel(FutoInAsyncSteps* bsi, FutoInHandle* h);
/* -1 for a table without sched_is_valid (the caller tells by its own
 * record), as for is_same_thread. */
int cabi_f_sched_is_valid(FutoInAsyncSteps* bsi, FutoInHandle* h);
/* The name of the first entry the table's event loop lacks to run a
 * callback (sched_immediate, is_same_thread) or, with deferred, to time
 * one (sched_deferred); NULL when it has them. */
const char* cabi_f_sched_missing(FutoInAsyncSteps* bsi, int deferred);
int cabi_f_is_same_thread(FutoInAsyncSteps* bsi);

#endif
