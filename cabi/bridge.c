// The C side of package cabi: the API tables, which forward to the Go
// exports in _cgo_export.h, the calls of user callbacks, and the calls on
// foreign tables. No logic lives here.

#include "bridge.h"
#include "_cgo_export.h"

// ---- the table of our FutoInAsyncSteps --------------------------------------

static void t_add(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    cabiAdd(bsi, (uintptr_t)data, (void*)f, (void*)eh);
}
static FutoInAsyncSteps* t_parallel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback eh)
{
    return cabiParallel(bsi, (uintptr_t)data, (void*)eh);
}
static void* t_state_variable(FutoInAsyncSteps* bsi, void* data, const char* name, void* (*allocate)(void*), void (*cleanup)(void*, void*))
{
    return cabiStateVariable(bsi, (uintptr_t)data, (char*)name, (void*)allocate, (void*)cleanup);
}
static void* t_stack(FutoInAsyncSteps* bsi, size_t size, void (*cleanup)(void*))
{
    return cabiStack(bsi, size, (void*)cleanup);
}
static void t_success(FutoInAsyncSteps* bsi, FutoInArgs* args) { cabiSuccess(bsi, args); }
static void t_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    cabiHandleError(bsi, (char*)code, (char*)info);
}
static void t_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms) { cabiSetTimeout(bsi, ms); }
static void t_set_cancel(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_cancel_callback ch)
{
    cabiSetCancel(bsi, (uintptr_t)data, (void*)ch);
}
static void t_wait_external(FutoInAsyncSteps* bsi) { cabiWaitExternal(bsi); }
static void t_loop(FutoInAsyncSteps* bsi, void* data, void (*f)(FutoInAsyncSteps*, void*), const char* label)
{
    cabiLoop(bsi, (uintptr_t)data, (void*)f, (char*)label);
}
static void t_repeat(FutoInAsyncSteps* bsi, void* data, size_t count, void (*f)(FutoInAsyncSteps*, void*, size_t), const char* label)
{
    cabiRepeat(bsi, (uintptr_t)data, count, (void*)f, (char*)label);
}
static void t_break(FutoInAsyncSteps* bsi, const char* label) { cabiBreak(bsi, (char*)label); }
static void t_continue(FutoInAsyncSteps* bsi, const char* label) { cabiContinue(bsi, (char*)label); }
static void t_execute(FutoInAsyncSteps* bsi, void* data, FutoInAsyncSteps_error_callback unhandled)
{
    cabiExecute(bsi, (uintptr_t)data, (void*)unhandled);
}
static void t_cancel(FutoInAsyncSteps* bsi) { cabiCancel(bsi); }
static void t_add_sync(FutoInAsyncSteps* bsi, FutoInSync* sync, void* data, FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps_error_callback eh)
{
    cabiAddSync(bsi, sync, (uintptr_t)data, (void*)f, (void*)eh);
}
static ptrdiff_t t_root_id(FutoInAsyncSteps* bsi) { return (ptrdiff_t)cabiRootID(bsi); }
static int t_is_valid(FutoInAsyncSteps* bsi) { return cabiIsValid(bsi); }
static FutoInAsyncSteps* t_new_instance(FutoInAsyncSteps* bsi) { return cabiNewInstance(bsi); }
static void t_free(FutoInAsyncSteps* bsi) { cabiFree(bsi); }

static char cabi_handle_tag;

static FutoInHandle make_handle(int64_t id)
{
    FutoInHandle h;
    h.data1 = id ? &cabi_handle_tag : NULL;
    h.data2 = NULL;
    h.data3 = (ptrdiff_t)id;
    return h;
}
static int64_t handle_id(const FutoInHandle* h)
{
    if (h == NULL || h->data1 != &cabi_handle_tag) {
        return 0;
    }
    return (int64_t)h->data3;
}
static FutoInHandle t_sched_immediate(FutoInAsyncSteps* bsi, void* data, void (*cb)(void*))
{
    return make_handle(cabiSched(bsi, 0, 0, (uintptr_t)data, (void*)cb));
}
static FutoInHandle t_sched_deferred(FutoInAsyncSteps* bsi, uint32_t ms, void* data, void (*cb)(void*))
{
    return make_handle(cabiSched(bsi, 1, ms, (uintptr_t)data, (void*)cb));
}
static void t_sched_cancel(FutoInAsyncSteps* bsi, FutoInHandle* h) { cabiSchedCancel(bsi, handle_id(h)); }
static int t_sched_is_valid(FutoInAsyncSteps* bsi, FutoInHandle* h) { return cabiSchedIsValid(bsi, handle_id(h)); }
static int t_is_same_thread(FutoInAsyncSteps* bsi) { return cabiIsSameThread(bsi); }

const FutoInAsyncStepsAPI cabi_api = {{{
    t_add,
    t_parallel,
    t_state_variable,
    t_stack,
    t_success,
    t_handle_error,
    t_set_timeout,
    t_set_cancel,
    t_wait_external,
    t_loop,
    t_repeat,
    t_break,
    t_continue,
    t_execute,
    t_cancel,
    t_add_sync,
    t_root_id,
    t_is_valid,
    t_new_instance,
    t_free,
    t_sched_immediate,
    t_sched_deferred,
    t_sched_cancel,
    t_sched_is_valid,
    t_is_same_thread,
}}};

static void s_lock(FutoInAsyncSteps* bsi, FutoInSync* sync) { cabiSyncLock(bsi, sync); }
static void s_unlock(FutoInAsyncSteps* bsi, FutoInSync* sync) { cabiSyncUnlock(bsi, sync); }

const FutoInSyncAPI cabi_sync_api = {{{ s_lock, s_unlock }}};

cabi_bsi* cabi_bsi_new(void)
{
    cabi_bsi* b = (cabi_bsi*)calloc(1, sizeof(cabi_bsi));
    if (b != NULL) {
        const FutoInAsyncStepsAPI* api = &cabi_api;
        memcpy((void*)&b->base, &api, sizeof(api)); // api is a const member
    }
    return b;
}

cabi_sync* cabi_sync_new(uint64_t id)
{
    cabi_sync* s = (cabi_sync*)calloc(1, sizeof(cabi_sync));
    if (s != NULL) {
        const FutoInSyncAPI* api = &cabi_sync_api;
        memcpy((void*)&s->base, &api, sizeof(api));
        s->id = id;
    }
    return s;
}

// ---- values -----------------------------------------------------------------

void cabi_read_value(const FutoInBinaryValue* v, cabi_flat* out)
{
    memset(out, 0, sizeof(*out));
    out->type = v->type;
    if (v->type == NULL) {
        return;
    }
    out->flags = v->type->flags;
    out->custom_data = (uintptr_t)v->custom_data;
    out->length = v->length;
    if (out->flags & FTN_TYPE_ARRAY) {
        out->p = v->p;
        return;
    }
    switch (out->flags & FTN_BASE_TYPE_MASK) {
    case FTN_TYPE_BOOL: out->i = v->b; break;
    case FTN_TYPE_INT8: out->i = v->i8; break;
    case FTN_TYPE_INT16: out->i = v->i16; break;
    case FTN_TYPE_INT32: out->i = v->i32; break;
    case FTN_TYPE_INT64: out->i = v->i64; break;
    case FTN_TYPE_UINT8: out->u = v->u8; break;
    case FTN_TYPE_UINT16: out->u = v->u16; break;
    case FTN_TYPE_UINT32: out->u = v->u32; break;
    case FTN_TYPE_UINT64: out->u = v->u64; break;
    case FTN_TYPE_FLOAT: out->d = v->f; break;
    case FTN_TYPE_DOUBLE: out->d = v->d; break;
    default: out->p = v->p; break;
    }
}

void cabi_write_value(FutoInBinaryValue* v, const cabi_flat* in)
{
    v->type = in->type;
    v->u64 = 0;
    v->custom_data = (void*)in->custom_data;
    v->length = in->length;
    if (in->flags & FTN_TYPE_ARRAY) {
        v->p = in->p;
        return;
    }
    switch (in->flags & FTN_BASE_TYPE_MASK) {
    case FTN_TYPE_BOOL: v->b = in->i != 0; break;
    case FTN_TYPE_INT8: v->i8 = (int8_t)in->i; break;
    case FTN_TYPE_INT16: v->i16 = (int16_t)in->i; break;
    case FTN_TYPE_INT32: v->i32 = (int32_t)in->i; break;
    case FTN_TYPE_INT64: v->i64 = in->i; break;
    case FTN_TYPE_UINT8: v->u8 = (uint8_t)in->u; break;
    case FTN_TYPE_UINT16: v->u16 = (uint16_t)in->u; break;
    case FTN_TYPE_UINT32: v->u32 = (uint32_t)in->u; break;
    case FTN_TYPE_UINT64: v->u64 = in->u; break;
    case FTN_TYPE_FLOAT: v->f = (float)in->d; break;
    case FTN_TYPE_DOUBLE: v->d = in->d; break;
    default: v->p = in->p; break;
    }
}

void cabi_reset_value(FutoInBinaryValue* v, int cleanup)
{
    if (cleanup) {
        futoin_reset_binval(v);
        return;
    }
    v->type = 0;
    v->u64 = 0;
    v->custom_data = 0;
    v->length = 0;
}

void cabi_cleanup_flat(const cabi_flat* in)
{
    if (in->type == NULL || in->type->cleanup == NULL) {
        return;
    }
    FutoInBinaryValue v;
    memset(&v, 0, sizeof(v));
    cabi_write_value(&v, in);
    in->type->cleanup(&v);
}

static void free_payload(FutoInBinaryValue* v)
{
    uint8_t flags = v->type->flags;
    if (flags & FTN_TYPE_ARRAY) {
        uint8_t base = flags & FTN_BASE_TYPE_MASK;
        if (base == FTN_TYPE_STRING || base == FTN_TYPE_STRING16 || base == FTN_TYPE_STRING32) {
            void** items = (void**)v->p;
            for (uint32_t i = 0; i < v->length; ++i) {
                free(items[i]);
            }
        }
        free((void*)v->p);
        return;
    }
    switch (flags & FTN_BASE_TYPE_MASK) {
    case FTN_TYPE_STRING:
    case FTN_TYPE_STRING16:
    case FTN_TYPE_STRING32:
        free((void*)v->p);
        break;
    default:
        break;
    }
}

static void release_go_value(FutoInBinaryValue* v) { cabiReleaseGoValue((uint64_t)(uintptr_t)v->custom_data); }

#define T4(n) {n, NULL}, {n + 1, NULL}, {n + 2, NULL}, {n + 3, NULL}
#define O4(n) {n, free_payload}, {n + 1, free_payload}, {n + 2, free_payload}, {n + 3, free_payload}
static const FutoInType input_types[32] = {
    T4(0), T4(4), T4(8), T4(12), T4(16), T4(20), T4(24), T4(28),
};
static const FutoInType owned_types[32] = {
    O4(0), O4(4), O4(8), O4(12), O4(16), O4(20), O4(24), O4(28),
};
const FutoInType cabi_go_value_type = {FTN_TYPE_CUSTOM_OBJECT, NULL};
const FutoInType cabi_owned_go_value_type = {FTN_TYPE_CUSTOM_OBJECT, release_go_value};

const FutoInType* cabi_type(uint8_t flags) { return &input_types[flags & 31]; }
const FutoInType* cabi_owned_type(uint8_t flags) { return &owned_types[flags & 31]; }

// ---- calls of user callbacks --------------------------------------------------

void cabi_call_exec(FutoInAsyncSteps_execute_callback f, FutoInAsyncSteps* bsi, uintptr_t data, const FutoInArgs* args) { f(bsi, (void*)data, args); }
void cabi_call_error(FutoInAsyncSteps_error_callback f, FutoInAsyncSteps* bsi, uintptr_t data, const char* code) { f(bsi, (void*)data, code); }
void cabi_call_cancel(FutoInAsyncSteps_cancel_callback f, FutoInAsyncSteps* bsi, uintptr_t data) { f(bsi, (void*)data); }
void cabi_call_loop(cabi_loop_fn f, FutoInAsyncSteps* bsi, uintptr_t data) { f(bsi, (void*)data); }
void cabi_call_repeat(cabi_repeat_fn f, FutoInAsyncSteps* bsi, uintptr_t data, size_t i) { f(bsi, (void*)data, i); }
void cabi_call_sched(cabi_sched_fn f, uintptr_t data) { f((void*)data); }
void* cabi_call_alloc(cabi_alloc_fn f, uintptr_t data) { return f((void*)data); }
void cabi_call_var_cleanup(cabi_var_cleanup_fn f, uintptr_t data, void* value) { f((void*)data, value); }
void cabi_call_stack_cleanup(cabi_stack_cleanup_fn f, void* value) { f(value); }

int cabi_sync_usable(const FutoInSync* s)
{
    return s->api != NULL && s->api->lock != NULL && s->api->unlock != NULL;
}
void cabi_sync_lock(FutoInSync* s, FutoInAsyncSteps* bsi)
{
    if (s->api != NULL && s->api->lock != NULL) {
        s->api->lock(bsi, s);
    }
}
void cabi_sync_unlock(FutoInSync* s, FutoInAsyncSteps* bsi)
{
    if (s->api != NULL && s->api->unlock != NULL) {
        s->api->unlock(bsi, s);
    }
}

// ---- calls on foreign tables ----------------------------------------------------

// The trampolines given to a foreign table: never NULL, they forward to Go
// with the record id in data.
static void fx_exec(FutoInAsyncSteps* bsi, void* data, const FutoInArgs* args)
{
    cabiForeignExec(bsi, (uint64_t)(uintptr_t)data, (FutoInArgs*)args);
}
static void fx_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    cabiForeignError(bsi, (uint64_t)(uintptr_t)data, (char*)code);
}
static void fx_no_error(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    (void)code;
}
static void fx_cancel(FutoInAsyncSteps* bsi, void* data) { cabiForeignCancel(bsi, (uint64_t)(uintptr_t)data); }
static void fx_loop(FutoInAsyncSteps* bsi, void* data) { cabiForeignLoop(bsi, (uint64_t)(uintptr_t)data, 0); }
static void fx_repeat(FutoInAsyncSteps* bsi, void* data, size_t i) { cabiForeignLoop(bsi, (uint64_t)(uintptr_t)data, (uint64_t)i); }
static void fx_sched(void* data) { cabiForeignSched((uint64_t)(uintptr_t)data); }
static void* fx_alloc(void* data)
{
    (void)data;
    return calloc(1, sizeof(uint64_t));
}
static void fx_state_cleanup(void* data, void* value)
{
    (void)data;
    if (value != NULL) {
        cabiReleaseFlowVar(*(uint64_t*)value);
        free(value);
    }
}
static void fx_unhandled(FutoInAsyncSteps* bsi, void* data, const char* code)
{
    (void)bsi;
    (void)data;
    (void)code;
}

#define API(bsi) ((bsi) != NULL && (bsi)->api != NULL ? (bsi)->api : (const FutoInAsyncStepsAPI*)NULL)
#define REC(r) ((void*)(uintptr_t)(r))

int cabi_f_add(FutoInAsyncSteps* bsi, uint64_t rec, int with_eh)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->add == NULL) {
        return 0;
    }
    api->add(bsi, REC(rec), fx_exec, with_eh ? fx_error : fx_no_error);
    return 1;
}
FutoInAsyncSteps* cabi_f_parallel(FutoInAsyncSteps* bsi, uint64_t rec, int with_eh)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->parallel == NULL) {
        return NULL;
    }
    return api->parallel(bsi, REC(rec), with_eh ? fx_error : fx_no_error);
}
void* cabi_f_state_variable(FutoInAsyncSteps* bsi, const char* name, int allocate)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->stateVariable == NULL) {
        return NULL;
    }
    return api->stateVariable(bsi, NULL, name, allocate ? fx_alloc : NULL, fx_state_cleanup);
}
int cabi_f_success(FutoInAsyncSteps* bsi, FutoInArgs* args)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->success == NULL) {
        return 0;
    }
    // Never NULL: some tables dereference args unconditionally.
    FutoInArgs none;
    if (args == NULL) {
        memset(&none, 0, sizeof(none));
        args = &none;
    }
    api->success(bsi, args);
    return 1;
}
int cabi_f_handle_error(FutoInAsyncSteps* bsi, const char* code, const char* info)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->handle_error == NULL) {
        return 0;
    }
    api->handle_error(bsi, code, info);
    return 1;
}
int cabi_f_set_timeout(FutoInAsyncSteps* bsi, uint32_t ms)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->setTimeout == NULL) {
        return 0;
    }
    api->setTimeout(bsi, ms);
    return 1;
}
int cabi_f_set_cancel(FutoInAsyncSteps* bsi, uint64_t rec)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->setCancel == NULL) {
        return 0;
    }
    api->setCancel(bsi, REC(rec), fx_cancel);
    return 1;
}
int cabi_f_wait_external(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->waitExternal == NULL) {
        return 0;
    }
    api->waitExternal(bsi);
    return 1;
}
int cabi_f_loop(FutoInAsyncSteps* bsi, uint64_t rec, const char* label)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->loop == NULL) {
        return 0;
    }
    api->loop(bsi, REC(rec), fx_loop, label);
    return 1;
}
int cabi_f_repeat(FutoInAsyncSteps* bsi, uint64_t rec, size_t count, const char* label)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->repeat == NULL) {
        return 0;
    }
    api->repeat(bsi, REC(rec), count, fx_repeat, label);
    return 1;
}
int cabi_f_break(FutoInAsyncSteps* bsi, const char* label)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->breakLoop == NULL) {
        return 0;
    }
    api->breakLoop(bsi, label);
    return 1;
}
int cabi_f_continue(FutoInAsyncSteps* bsi, const char* label)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->continueLoop == NULL) {
        return 0;
    }
    api->continueLoop(bsi, label);
    return 1;
}
int cabi_f_execute(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->execute == NULL) {
        return 0;
    }
    api->execute(bsi, NULL, fx_unhandled);
    return 1;
}
int cabi_f_cancel(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->cancel == NULL) {
        return 0;
    }
    api->cancel(bsi);
    return 1;
}
ptrdiff_t cabi_f_root_id(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->rootId == NULL) {
        return 0;
    }
    return api->rootId(bsi);
}
int cabi_f_is_valid(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->isValid == NULL) {
        return 0;
    }
    return api->isValid(bsi);
}
FutoInAsyncSteps* cabi_f_new_instance(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->newInstance == NULL) {
        return NULL;
    }
    return api->newInstance(bsi);
}
const char* cabi_f_sched(FutoInAsyncSteps* bsi, uint32_t delay_ms, int deferred, uint64_t rec, FutoInHandle* out)
{
    const char* missing = cabi_f_sched_missing(bsi, deferred);
    if (missing != NULL) {
        return missing;
    }
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (deferred) {
        *out = api->sched_deferred(bsi, delay_ms, REC(rec), fx_sched);
    } else {
        *out = api->sched_immediate(bsi, REC(rec), fx_sched);
    }
    return NULL;
}
void cabi_f_sched_cancel(FutoInAsyncSteps* bsi, FutoInHandle* h)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api != NULL && api->sched_cancel != NULL) {
        api->sched_cancel(bsi, h);
    }
}
int cabi_f_sched_is_valid(FutoInAsyncSteps* bsi, FutoInHandle* h)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->sched_is_valid == NULL) {
        return -1;
    }
    return api->sched_is_valid(bsi, h);
}
const char* cabi_f_sched_missing(FutoInAsyncSteps* bsi, int deferred)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->sched_immediate == NULL) {
        return "sched_immediate";
    }
    if (api->is_same_thread == NULL) {
        return "is_same_thread";
    }
    if (deferred && api->sched_deferred == NULL) {
        return "sched_deferred";
    }
    return NULL;
}
int cabi_f_is_same_thread(FutoInAsyncSteps* bsi)
{
    const FutoInAsyncStepsAPI* api = API(bsi);
    if (api == NULL || api->is_same_thread == NULL) {
        return -1;
    }
    return api->is_same_thread(bsi);
}
