// The C API: maps handles and status codes onto the C++ core. Every exception is caught
// here; nothing C++ crosses include/tensorhub/tensorhub.h.
#include <tensorhub/tensorhub.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <thread>
#include <utility>
#include <vector>

#include "src/capi/handle_table.h"
#include "src/client/context.h"
#include "src/client/model.h"
#include "src/common/info.h"
#include "src/common/info_keys.h"
#include "src/common/stat_keys.h"
#include "src/common/status.h"
#include "src/transport/worker.h"

namespace {

// The objects behind the handles (handle_table.h). Every entry point looks its handles up;
// nothing here dereferences a pointer the caller handed in as a handle.
struct InfoObj {
  thub::InfoMap map;
};

struct CtxObj {
  std::shared_mutex life;  // shared while a call uses ctx; unique to destroy it
  std::unique_ptr<thub::client::Context> ctx;
  std::mutex mu;
  std::set<uintptr_t> models;  // handles of the models open on it
  std::atomic<bool> finalizing{false};
};

struct ModelObj {
  std::shared_ptr<CtxObj> owner;
  std::shared_mutex life;  // shared while a call uses model; unique to destroy it
  std::unique_ptr<thub::client::Model> model;
  std::mutex busy;  // held by a blocking call on the model (close and finalize refuse then)
  std::mutex inflight_mu;
  std::vector<std::shared_ptr<thub::client::Request>> inflight;  // nonblocking, freed ones too
  // True while a nonblocking request started on the model has not ended.
  bool has_inflight() {
    std::lock_guard<std::mutex> lk(inflight_mu);
    inflight.erase(std::remove_if(inflight.begin(), inflight.end(), [](const auto& r) { return r->done(); }),
                   inflight.end());
    return !inflight.empty();
  }
  // THUB_Cancel of each (a replicate still waiting at the registry is withdrawn; what is
  // under way completes): THUB_Finalize does not wait on another client's lease or drain.
  void cancel_inflight() {
    std::vector<std::shared_ptr<thub::client::Request>> rs;
    {
      std::lock_guard<std::mutex> lk(inflight_mu);
      rs = inflight;
    }
    std::shared_lock<std::shared_mutex> lk(life);
    if (!model) return;
    for (auto& r : rs) {
      if (!r->done()) model->cancel(*r);
    }
  }
  void wait_inflight() {
    std::vector<std::shared_ptr<thub::client::Request>> rs;
    {
      std::lock_guard<std::mutex> lk(inflight_mu);
      rs = inflight;
    }
    for (auto& r : rs) r->wait();
  }
};

// A nonblocking operation (THUB_Request): the model's request, carried out by the context's
// engine; this object only names it for the caller.
struct ReqObj {
  std::shared_ptr<ModelObj> m;
  std::shared_ptr<thub::client::Request> r;
};

thub::capi::HandleTable<InfoObj, 1> g_infos;
thub::capi::HandleTable<CtxObj, 2> g_contexts;
thub::capi::HandleTable<ModelObj, 3> g_models;
thub::capi::HandleTable<ReqObj, 4> g_requests;

uintptr_t raw(const void* h) { return reinterpret_cast<uintptr_t>(h); }
template <typename H>
H handle(uintptr_t v) {
  return reinterpret_cast<H>(v);
}

thread_local std::string t_init_error;  // THUB_Last_error(THUB_CONTEXT_NULL)

void record(CtxObj* c, const std::string& s) {
  if (c) {
    std::shared_lock<std::shared_mutex> lk(c->life);
    if (c->ctx) {
      c->ctx->set_last_error(s);
      return;
    }
  }
  t_init_error = s;
}

// Runs `f`, mapping exceptions to status codes and recording their detail on `c`.
template <typename F>
int guard(CtxObj* c, F&& f) {
  try {
    return f();
  } catch (const thub::Error& e) {
    record(c, std::string(thub::code_name(static_cast<int>(e.code()))) + ": " + e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    record(c, "THUB_ERR_NO_MEMORY: out of memory");
    return THUB_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    record(c, std::string("THUB_ERR_INTERNAL: ") + e.what());
    return THUB_ERR_INTERNAL;
  } catch (...) {
    record(c, "THUB_ERR_INTERNAL: unknown exception");
    return THUB_ERR_INTERNAL;
  }
}

int arg_error(CtxObj* c, const std::string& why) {
  record(c, "THUB_ERR_ARG: " + why);
  return THUB_ERR_ARG;
}

int state_error(CtxObj* c, const std::string& why) {
  record(c, "THUB_ERR_STATE: " + why);
  return THUB_ERR_STATE;
}

// One operation at a time per model; a second concurrent one, or one on a model whose
// context is being finalized, is a usage error.
template <typename F>
int model_op(THUB_Model h, const char* what, F&& f) {
  std::shared_ptr<ModelObj> m = g_models.find(raw(h));
  if (!m) return arg_error(nullptr, std::string(what) + ": invalid model handle");
  CtxObj* c = m->owner.get();
  std::unique_lock<std::mutex> lk(m->busy, std::try_to_lock);
  if (!lk.owns_lock() || m->has_inflight()) {
    return state_error(c, std::string(what) + ": another operation is in progress on this model");
  }
  if (c->finalizing) return state_error(c, std::string(what) + ": the model's context is being finalized");
  std::shared_lock<std::shared_mutex> life(m->life);
  if (!m->model) return arg_error(c, std::string(what) + ": invalid model handle (closed)");
  return guard(c, [&] { return f(*m); });
}

// A finished request's outcome, for the caller; frees its handle.
int finish_request(uintptr_t h, const std::shared_ptr<ReqObj>& q, int64_t* got) {
  if (!g_requests.remove(h)) return THUB_ERR_ARG;  // another thread finished it meanwhile
  int st = static_cast<int>(q->r->code());
  if (got && st >= 0) *got = q->r->version();
  return st;
}

// Waits for a model's request and maps its outcome (blocking calls).
int outcome(const std::shared_ptr<thub::client::Request>& r, int64_t* got) {
  r->wait();
  int st = static_cast<int>(r->code());
  if (got && st >= 0) *got = r->version();
  return st;
}

// Unpublishes, forgets the model at the registry and frees it (busy held by the caller).
int close_model(uintptr_t h, ModelObj& m) {
  CtxObj* c = m.owner.get();
  int st = guard(c, [&] { return outcome(m.model->close(), nullptr); });
  // The handle goes away even if the registry could not be told (it forgets us on disconnect).
  g_models.remove(h);
  {
    std::lock_guard<std::mutex> lk(c->mu);
    c->models.erase(h);
  }
  {
    std::unique_lock<std::shared_mutex> life(m.life);  // waits for THUB_Model_stat calls
    m.model.reset();
  }
  return st == THUB_ERR_REGISTRY ? THUB_SUCCESS : st;
}

// Every row of the status table (src/common/status.h) is a public THUB_* of the same number:
// a row without its #define does not compile, and the header's list is generated from the
// table (tools/vocabulary/), so a #define without a row fails the GeneratedListsAreCurrent test.
#define THUB_PUBLIC_CODE_IS_THE_TABLES(code, name, number, message, hint) \
  static_assert((name) == (number), #name " differs from the status table");
THUB_STATUS_TABLE(THUB_PUBLIC_CODE_IS_THE_TABLES)
#undef THUB_PUBLIC_CODE_IS_THE_TABLES

}  // namespace

namespace {

// Starts a nonblocking operation: its request handle, counted on the model until it ends.
template <typename Start>
int start_request(THUB_Model m, THUB_Request* req, const char* what, Start&& start) {
  std::shared_ptr<ModelObj> self = g_models.find(raw(m));
  return model_op(m, what, [&](ModelObj& h) {
    if (!req) throw thub::Error(thub::Code::kArg, std::string(what) + ": req is NULL");
    auto q = std::make_shared<ReqObj>();
    q->m = self;
    q->r = start(h);
    {
      std::lock_guard<std::mutex> lk(h.inflight_mu);
      h.inflight.push_back(q->r);
    }
    *req = handle<THUB_Request>(g_requests.insert(std::move(q)));
    return THUB_SUCCESS;
  });
}
}  // namespace

extern "C" {

// A constant of the status table (no buffer, no allocation): valid for ever, from any thread.
const char* THUB_Error_string(int status) { return thub::code_string(status); }

int THUB_Last_error(THUB_Context ctx, char* buf, size_t len) {
  if (!buf || len == 0) return THUB_ERR_ARG;
  std::string s;
  if (ctx == THUB_CONTEXT_NULL) {
    s = t_init_error;
  } else {
    std::shared_ptr<CtxObj> c = g_contexts.find(raw(ctx));
    if (!c) return THUB_ERR_ARG;
    std::shared_lock<std::shared_mutex> lk(c->life);
    if (!c->ctx) return THUB_ERR_ARG;
    s = c->ctx->last_error();
  }
  size_t n = s.size() < len - 1 ? s.size() : len - 1;
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
  return THUB_SUCCESS;
}

int THUB_Info_create(THUB_Info* info) {
  if (!info) return THUB_ERR_ARG;
  return guard(nullptr, [&] {
    *info = handle<THUB_Info>(g_infos.insert(std::make_shared<InfoObj>()));
    return THUB_SUCCESS;
  });
}

int THUB_Info_set(THUB_Info info, const char* key, const char* value) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i) return arg_error(nullptr, "THUB_Info_set: invalid info handle");
  if (!key || !*key || !value) return arg_error(nullptr, "THUB_Info_set: key must be non-empty, value non-NULL");
  return guard(nullptr, [&] {
    thub::check_info_text(key, value);
    i->map.set(key, value);
    return THUB_SUCCESS;
  });
}

namespace {
void copy_out(const std::string& s, char* buf, size_t len) {
  size_t n = s.size() < len - 1 ? s.size() : len - 1;
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}
}  // namespace

int THUB_Info_get(THUB_Info info, const char* key, size_t len, char* value, int* flag) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !key || !value || !flag || len == 0) return arg_error(nullptr, "THUB_Info_get: invalid argument");
  auto it = i->map.entries().find(key);
  *flag = it != i->map.entries().end();
  if (*flag) copy_out(it->second, value, len);
  return THUB_SUCCESS;
}

int THUB_Info_get_valuelen(THUB_Info info, const char* key, size_t* valuelen, int* flag) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !key || !valuelen || !flag) return arg_error(nullptr, "THUB_Info_get_valuelen: invalid argument");
  auto it = i->map.entries().find(key);
  *flag = it != i->map.entries().end();
  if (*flag) *valuelen = it->second.size();
  return THUB_SUCCESS;
}

int THUB_Info_delete(THUB_Info info, const char* key) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !key) return arg_error(nullptr, "THUB_Info_delete: invalid argument");
  if (!i->map.erase(key)) {
    record(nullptr, std::string("THUB_ERR_NOT_FOUND: THUB_Info_delete: key '") + key + "' is not set");
    return THUB_ERR_NOT_FOUND;
  }
  return THUB_SUCCESS;
}

int THUB_Info_dup(THUB_Info info, THUB_Info* newinfo) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !newinfo) return arg_error(nullptr, "THUB_Info_dup: invalid argument");
  return guard(nullptr, [&] {
    auto copy = std::make_shared<InfoObj>();
    copy->map = i->map;
    *newinfo = handle<THUB_Info>(g_infos.insert(std::move(copy)));
    return THUB_SUCCESS;
  });
}

int THUB_Info_get_nkeys(THUB_Info info, int* nkeys) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !nkeys) return arg_error(nullptr, "THUB_Info_get_nkeys: invalid argument");
  *nkeys = static_cast<int>(i->map.entries().size());
  return THUB_SUCCESS;
}

int THUB_Info_get_nthkey(THUB_Info info, int n, char* key, size_t len) {
  std::shared_ptr<InfoObj> i = g_infos.find(raw(info));
  if (!i || !key || len == 0 || n < 0 || static_cast<size_t>(n) >= i->map.entries().size()) {
    return arg_error(nullptr, "THUB_Info_get_nthkey: invalid argument");
  }
  copy_out(std::next(i->map.entries().begin(), n)->first, key, len);
  return THUB_SUCCESS;
}

int THUB_Get_version(int* major, int* minor, int* patch) {
  if (!major || !minor || !patch) return arg_error(nullptr, "THUB_Get_version: NULL argument");
  *major = THUB_VERSION_MAJOR;
  *minor = THUB_VERSION_MINOR;
  *patch = THUB_VERSION_PATCH;
  return THUB_SUCCESS;
}

int THUB_Get_library_version(char* buf, size_t len) {
  if (!buf || len == 0) return arg_error(nullptr, "THUB_Get_library_version: invalid argument");
  std::string s = "TensorHub " + std::to_string(THUB_VERSION_MAJOR) + "." + std::to_string(THUB_VERSION_MINOR) + "." +
                  std::to_string(THUB_VERSION_PATCH) + " (UCX " + thub::transport::ucx_version() +
#ifdef THUB_HAVE_CUDA
                  ", CUDA staging built in)";
#else
                  ", built without CUDA)";
#endif
  copy_out(s, buf, len);
  return THUB_SUCCESS;
}

int THUB_Info_free(THUB_Info* info) {
  if (!info || !g_infos.remove(raw(*info))) return arg_error(nullptr, "THUB_Info_free: invalid info handle");
  *info = THUB_INFO_NULL;
  return THUB_SUCCESS;
}

int THUB_Init(THUB_Info info, THUB_Context* ctx) {
  if (!ctx) return arg_error(nullptr, "THUB_Init: ctx is NULL");
  std::shared_ptr<InfoObj> i;
  if (info != THUB_INFO_NULL && !(i = g_infos.find(raw(info)))) {
    return arg_error(nullptr, "THUB_Init: invalid info handle");
  }
  return guard(nullptr, [&] {
    thub::InfoMap empty;
    const thub::InfoMap& map = i ? i->map : empty;
    thub::check_info_keys(map, thub::InfoScope::kContext, "THUB_Init");
    auto c = std::make_shared<CtxObj>();
    c->ctx = std::make_unique<thub::client::Context>(map);
    *ctx = handle<THUB_Context>(g_contexts.insert(std::move(c)));
    return THUB_SUCCESS;
  });
}

int THUB_Finalize(THUB_Context* ctx) {
  if (!ctx) return arg_error(nullptr, "THUB_Finalize: ctx is NULL");
  const uintptr_t ch = raw(*ctx);
  std::shared_ptr<CtxObj> c = g_contexts.find(ch);
  if (!c) return arg_error(nullptr, "THUB_Finalize: invalid context handle");
  if (c->finalizing.exchange(true)) return state_error(c.get(), "THUB_Finalize: already running on this context");
  std::vector<uintptr_t> handles;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    handles.assign(c->models.begin(), c->models.end());
  }
  // Nonblocking requests of ours finish first; then every model must be idle: an operation
  // another thread runs on one of them makes this a usage error, and nothing is freed.
  std::vector<std::pair<uintptr_t, std::shared_ptr<ModelObj>>> models;
  std::vector<std::unique_lock<std::mutex>> locks;
  for (uintptr_t h : handles) {
    std::shared_ptr<ModelObj> m = g_models.find(h);
    if (!m) continue;
    m->cancel_inflight();  // nonblocking requests of ours are canceled and end first (their
    m->wait_inflight();    // handles stay valid to test)
    std::unique_lock<std::mutex> lk(m->busy, std::try_to_lock);
    if (!lk.owns_lock()) {
      c->finalizing = false;
      return state_error(c.get(), "THUB_Finalize: another thread is in an operation on a model of this context");
    }
    locks.push_back(std::move(lk));
    models.emplace_back(h, std::move(m));
  }
  for (auto& [h, m] : models) (void)close_model(h, *m);
  locks.clear();
  g_contexts.remove(ch);
  int st = guard(nullptr, [&] {
    std::unique_lock<std::shared_mutex> life(c->life);  // waits for calls still using it
    c->ctx.reset();
    return THUB_SUCCESS;
  });
  *ctx = THUB_CONTEXT_NULL;
  return st;
}

int THUB_Registry_address(THUB_Context ctx, char* buf, size_t len) {
  std::shared_ptr<CtxObj> c = g_contexts.find(raw(ctx));
  if (!c || !buf) return arg_error(nullptr, "THUB_Registry_address: invalid argument");
  std::string a;
  {
    std::shared_lock<std::shared_mutex> lk(c->life);
    if (!c->ctx) return arg_error(nullptr, "THUB_Registry_address: invalid context handle");
    a = c->ctx->registry_address();
  }
  if (a.size() + 1 > len) return arg_error(c.get(), "THUB_Registry_address: buffer too small for '" + a + "'");
  std::memcpy(buf, a.c_str(), a.size() + 1);
  return THUB_SUCCESS;
}

int THUB_Alloc_mem(THUB_Context ctx, size_t bytes, THUB_Info info, void** baseptr) {
  std::shared_ptr<CtxObj> c = g_contexts.find(raw(ctx));
  if (!c) return arg_error(nullptr, "THUB_Alloc_mem: invalid context handle");
  if (!baseptr) return arg_error(c.get(), "THUB_Alloc_mem: baseptr is NULL");
  std::shared_ptr<InfoObj> i;
  if (info != THUB_INFO_NULL && !(i = g_infos.find(raw(info)))) {
    return arg_error(c.get(), "THUB_Alloc_mem: invalid info handle");
  }
  return guard(c.get(), [&] {
    if (i) thub::check_info_keys(i->map, thub::InfoScope::kMemory, "THUB_Alloc_mem");
    std::shared_lock<std::shared_mutex> lk(c->life);
    if (!c->ctx) throw thub::Error(thub::Code::kArg, "THUB_Alloc_mem: invalid context handle");
    *baseptr = c->ctx->alloc_mem(bytes);
    return THUB_SUCCESS;
  });
}

int THUB_Free_mem(THUB_Context ctx, void* base) {
  std::shared_ptr<CtxObj> c = g_contexts.find(raw(ctx));
  if (!c) return arg_error(nullptr, "THUB_Free_mem: invalid context handle");
  return guard(c.get(), [&] {
    std::shared_lock<std::shared_mutex> lk(c->life);
    if (!c->ctx) throw thub::Error(thub::Code::kArg, "THUB_Free_mem: invalid context handle");
    c->ctx->free_mem(base);
    return THUB_SUCCESS;
  });
}

int THUB_Open(THUB_Context ctx, const char* model, const char* replica, int shard, int num_shards, THUB_Info info,
              THUB_Model* m) {
  std::shared_ptr<CtxObj> c = g_contexts.find(raw(ctx));
  if (!c) return arg_error(nullptr, "THUB_Open: invalid context handle");
  if (!model || !replica || !m) return arg_error(c.get(), "THUB_Open: model, replica and m must not be NULL");
  std::shared_ptr<InfoObj> i;
  if (info != THUB_INFO_NULL && !(i = g_infos.find(raw(info)))) {
    return arg_error(c.get(), "THUB_Open: invalid info handle");
  }
  if (c->finalizing) return state_error(c.get(), "THUB_Open: the context is being finalized");
  return guard(c.get(), [&] {
    thub::InfoMap empty;
    const thub::InfoMap& map = i ? i->map : empty;
    thub::check_info_keys(map, thub::InfoScope::kModel, "THUB_Open");
    auto h = std::make_shared<ModelObj>();
    h->owner = c;
    {
      std::shared_lock<std::shared_mutex> lk(c->life);
      if (!c->ctx) throw thub::Error(thub::Code::kArg, "THUB_Open: invalid context handle");
      h->model = std::make_unique<thub::client::Model>(*c->ctx, model, replica, shard, num_shards, map);
    }
    uintptr_t v = g_models.insert(h);
    {
      std::lock_guard<std::mutex> lk(c->mu);
      c->models.insert(v);
    }
    *m = handle<THUB_Model>(v);
    return THUB_SUCCESS;
  });
}

int THUB_Register(THUB_Model m, const char* tensor, void* addr, size_t bytes, int memtype) {
  return model_op(m, "THUB_Register", [&](ModelObj& h) {
    if (!tensor) throw thub::Error(thub::Code::kArg, "THUB_Register: tensor name is NULL");
    h.model->register_tensor(tensor, addr, bytes, memtype);
    return THUB_SUCCESS;
  });
}

int THUB_Publish(THUB_Model m, int64_t version) {
  return model_op(m, "THUB_Publish", [&](ModelObj& h) { return outcome(h.model->publish(version), nullptr); });
}

int THUB_Replicate(THUB_Model m, int64_t version, int64_t* got) {
  return model_op(m, "THUB_Replicate", [&](ModelObj& h) { return outcome(h.model->replicate(version, false), got); });
}

int THUB_Update(THUB_Model m, int64_t version, int64_t* got) {
  return model_op(m, "THUB_Update", [&](ModelObj& h) { return outcome(h.model->replicate(version, true), got); });
}

int THUB_Unpublish(THUB_Model m) {
  return model_op(m, "THUB_Unpublish", [&](ModelObj& h) { return outcome(h.model->unpublish(), nullptr); });
}

int THUB_Ireplicate(THUB_Model m, int64_t version, THUB_Request* req) {
  return start_request(m, req, "THUB_Ireplicate", [&](ModelObj& h) { return h.model->replicate(version, false); });
}

int THUB_Iupdate(THUB_Model m, int64_t version, THUB_Request* req) {
  return start_request(m, req, "THUB_Iupdate", [&](ModelObj& h) { return h.model->replicate(version, true); });
}

int THUB_Iunpublish(THUB_Model m, THUB_Request* req) {
  return start_request(m, req, "THUB_Iunpublish", [&](ModelObj& h) { return h.model->unpublish(); });
}

int THUB_Close(THUB_Model* m) {
  if (!m) return arg_error(nullptr, "THUB_Close: m is NULL");
  const uintptr_t h = raw(*m);
  std::shared_ptr<ModelObj> obj = g_models.find(h);
  if (!obj) return arg_error(nullptr, "THUB_Close: invalid model handle");
  CtxObj* c = obj->owner.get();
  if (obj->has_inflight()) {
    return state_error(c, "THUB_Close: a nonblocking request is still outstanding; wait for it first");
  }
  std::unique_lock<std::mutex> lk(obj->busy, std::try_to_lock);
  if (!lk.owns_lock() || obj->has_inflight()) {
    return state_error(c, "THUB_Close: another operation is in progress on this model");
  }
  if (c->finalizing) return state_error(c, "THUB_Close: the model's context is being finalized");
  int st = close_model(h, *obj);
  *m = THUB_MODEL_NULL;
  return st;
}

int THUB_Test(THUB_Request* req, int* done, int64_t* got) {
  if (!req || !done) return arg_error(nullptr, "THUB_Test: invalid argument");
  std::shared_ptr<ReqObj> q = g_requests.find(raw(*req));
  if (!q) return arg_error(nullptr, "THUB_Test: invalid request handle");
  if (!q->r->done()) {
    *done = 0;
    return THUB_SUCCESS;
  }
  int st = finish_request(raw(*req), q, got);
  if (st == THUB_ERR_ARG && !g_requests.find(raw(*req))) {
    // (finished by another thread meanwhile: that one reports it)
  }
  *done = 1;
  *req = THUB_REQUEST_NULL;
  return st;
}

int THUB_Wait(THUB_Request* req, int64_t* got) {
  if (!req) return arg_error(nullptr, "THUB_Wait: req is NULL");
  std::shared_ptr<ReqObj> q = g_requests.find(raw(*req));
  if (!q) return arg_error(nullptr, "THUB_Wait: invalid request handle");
  q->r->wait();
  int st = finish_request(raw(*req), q, got);
  *req = THUB_REQUEST_NULL;
  return st;
}

int THUB_Waitall(int count, THUB_Request* reqs, int64_t* gots, int* statuses) {
  if (count < 0 || (count > 0 && !reqs)) return arg_error(nullptr, "THUB_Waitall: invalid argument");
  std::unordered_map<decltype(raw(reqs[0])), int> seen;  // a request twice would be waited for once, then fail
  for (int i = 0; i < count; ++i) {
    if (reqs[i] == THUB_REQUEST_NULL) continue;
    if (!g_requests.find(raw(reqs[i]))) {
      return arg_error(nullptr, "THUB_Waitall: request " + std::to_string(i) + " is not a valid request handle");
    }
    auto [it, fresh] = seen.emplace(raw(reqs[i]), i);
    if (!fresh) {
      return arg_error(nullptr, "THUB_Waitall: requests " + std::to_string(it->second) + " and " + std::to_string(i) +
                                    " are the same request");
    }
  }
  int first_error = THUB_SUCCESS;
  for (int i = 0; i < count; ++i) {
    int64_t got = -1;
    int st = reqs[i] == THUB_REQUEST_NULL ? THUB_SUCCESS : THUB_Wait(&reqs[i], &got);
    if (gots) gots[i] = st >= 0 ? got : -1;
    if (statuses) statuses[i] = st;
    if (st < 0 && first_error == THUB_SUCCESS) first_error = st;
  }
  return first_error;
}

int THUB_Testany(int count, THUB_Request* reqs, int* index, int* done, int64_t* got) {
  if (count < 0 || (count > 0 && !reqs) || !index || !done) return arg_error(nullptr, "THUB_Testany: invalid argument");
  bool any = false;
  for (int i = 0; i < count; ++i) {
    if (reqs[i] == THUB_REQUEST_NULL) continue;
    std::shared_ptr<ReqObj> q = g_requests.find(raw(reqs[i]));
    if (!q) return arg_error(nullptr, "THUB_Testany: request " + std::to_string(i) + " is not a valid request handle");
    any = true;
    if (!q->r->done()) continue;
    int st = finish_request(raw(reqs[i]), q, got);
    reqs[i] = THUB_REQUEST_NULL;
    *index = i;
    *done = 1;
    return st;
  }
  *index = -1;
  *done = any ? 0 : 1;  // MPI: no active request counts as done, with no index
  return THUB_SUCCESS;
}

int THUB_Request_free(THUB_Request* req) {
  if (!req) return arg_error(nullptr, "THUB_Request_free: req is NULL");
  std::shared_ptr<ReqObj> q = g_requests.find(raw(*req));
  if (!q || !g_requests.remove(raw(*req))) return arg_error(nullptr, "THUB_Request_free: invalid request handle");
  *req = THUB_REQUEST_NULL;  // the operation goes on; its outcome is not reported
  return THUB_SUCCESS;
}

int THUB_Cancel(THUB_Request* req) {
  if (!req) return arg_error(nullptr, "THUB_Cancel: req is NULL");
  std::shared_ptr<ReqObj> q = g_requests.find(raw(*req));
  if (!q) return arg_error(nullptr, "THUB_Cancel: invalid request handle");
  std::shared_lock<std::shared_mutex> life(q->m->life);
  if (q->m->model) q->m->model->cancel(*q->r);
  return THUB_SUCCESS;  // complete it with THUB_Wait/THUB_Test as usual
}

int THUB_Model_stat(THUB_Model m, const char* key, int64_t* value) {
  std::shared_ptr<ModelObj> h = g_models.find(raw(m));
  if (!h || !key || !value) return arg_error(nullptr, "THUB_Model_stat: invalid argument");
  return guard(h->owner.get(), [&] {
    const thub::StatKey k = thub::find_stat_key(key);  // unknown: THUB_ERR_ARG naming the nearest key
    int64_t v = 0;
    {
      std::shared_lock<std::shared_mutex> life(h->life);
      if (!h->model) throw thub::Error(thub::Code::kArg, "THUB_Model_stat: invalid model handle");
      v = h->model->stat(k);
    }
    *value = v;
    return THUB_SUCCESS;
  });
}

}  // extern "C"
