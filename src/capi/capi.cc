// The C API: maps handles and status codes onto the C++ core. Every exception is caught
// here; nothing C++ crosses include/tensorhub/tensorhub.h.
#include <tensorhub/tensorhub.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>

#include "src/client/context.h"
#include "src/client/model.h"
#include "src/common/info.h"
#include "src/common/status.h"

namespace {

// Handles carry a magic number so that a stale or foreign pointer is refused, not used.
constexpr uint32_t kInfoMagic = 0x1f0a11f0, kCtxMagic = 0xc0417e47, kModelMagic = 0x40de1a11,
                   kReqMagic = 0x4e90e577;

thread_local std::string t_init_error;  // THUB_Last_error(THUB_CONTEXT_NULL)

}  // namespace

struct THUB_Info_s {
  uint32_t magic = kInfoMagic;
  thub::InfoMap map;
};

struct THUB_Model_s;

struct THUB_Context_s {
  uint32_t magic = kCtxMagic;
  std::unique_ptr<thub::client::Context> ctx;
  std::mutex mu;
  std::set<THUB_Model_s*> models;
};

struct THUB_Request_s;

struct THUB_Model_s {
  uint32_t magic = kModelMagic;
  THUB_Context_s* owner = nullptr;
  std::unique_ptr<thub::client::Model> model;
  std::atomic<THUB_Request_s*> outstanding{nullptr};
  std::mutex busy;  // one operation at a time per model
};

struct THUB_Request_s {
  uint32_t magic = kReqMagic;
  THUB_Model_s* m = nullptr;
  std::thread thread;
  std::atomic<bool> done{false};
  int status = THUB_SUCCESS;
  int64_t got = -1;
};

namespace {

void record(THUB_Context_s* c, const std::string& s) {
  if (c && c->ctx) c->ctx->set_last_error(s);
  else t_init_error = s;
}

// Runs `f`, mapping exceptions to status codes and recording their detail on `c`.
template <typename F>
int guard(THUB_Context_s* c, F&& f) {
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

bool valid(const THUB_Info_s* i) { return i && i->magic == kInfoMagic; }
bool valid(const THUB_Context_s* c) { return c && c->magic == kCtxMagic && c->ctx; }
bool valid(const THUB_Model_s* m) { return m && m->magic == kModelMagic && m->model; }
bool valid(const THUB_Request_s* r) { return r && r->magic == kReqMagic; }

int arg_error(THUB_Context_s* c, const std::string& why) {
  record(c, "THUB_ERR_ARG: " + why);
  return THUB_ERR_ARG;
}

// One operation at a time per model; a second concurrent one is a usage error.
template <typename F>
int model_op(THUB_Model_s* m, const char* what, F&& f) {
  if (!valid(m)) return arg_error(nullptr, std::string(what) + ": invalid model handle");
  THUB_Context_s* c = m->owner;
  std::unique_lock<std::mutex> lk(m->busy, std::try_to_lock);
  if (!lk.owns_lock() || m->outstanding.load()) {
    record(c, std::string("THUB_ERR_STATE: ") + what + ": another operation is in progress on this model");
    return THUB_ERR_STATE;
  }
  return guard(c, std::forward<F>(f));
}

int finish_request(THUB_Request* req, int64_t* got) {
  THUB_Request_s* r = *req;
  r->thread.join();
  int st = r->status;
  if (got && st >= 0) *got = r->got;
  r->m->outstanding = nullptr;
  r->magic = 0;
  delete r;
  *req = THUB_REQUEST_NULL;
  return st;
}

}  // namespace

extern "C" {

const char* THUB_Error_string(int status) {
  static thread_local std::string text;
  text = std::string(thub::code_name(status)) + ": " + thub::code_hint(status);
  return text.c_str();
}

int THUB_Last_error(THUB_Context ctx, char* buf, size_t len) {
  if (!buf || len == 0) return THUB_ERR_ARG;
  std::string s;
  if (ctx == THUB_CONTEXT_NULL) s = t_init_error;
  else if (valid(ctx)) s = ctx->ctx->last_error();
  else return THUB_ERR_ARG;
  size_t n = s.size() < len - 1 ? s.size() : len - 1;
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
  return THUB_SUCCESS;
}

int THUB_Info_create(THUB_Info* info) {
  if (!info) return THUB_ERR_ARG;
  auto* i = new (std::nothrow) THUB_Info_s;
  if (!i) return THUB_ERR_NO_MEMORY;
  *info = i;
  return THUB_SUCCESS;
}

int THUB_Info_set(THUB_Info info, const char* key, const char* value) {
  if (!valid(info) || !key || !*key || !value) return THUB_ERR_ARG;
  return guard(nullptr, [&] {
    info->map.set(key, value);
    return THUB_SUCCESS;
  });
}

int THUB_Info_free(THUB_Info* info) {
  if (!info || !valid(*info)) return THUB_ERR_ARG;
  (*info)->magic = 0;
  delete *info;
  *info = THUB_INFO_NULL;
  return THUB_SUCCESS;
}

int THUB_Init(THUB_Info info, THUB_Context* ctx) {
  if (!ctx) return arg_error(nullptr, "THUB_Init: ctx is NULL");
  if (info != THUB_INFO_NULL && !valid(info)) return arg_error(nullptr, "THUB_Init: invalid info handle");
  return guard(nullptr, [&] {
    thub::InfoMap empty;
    auto c = std::make_unique<THUB_Context_s>();
    c->ctx = std::make_unique<thub::client::Context>(info ? info->map : empty);
    *ctx = c.release();
    return THUB_SUCCESS;
  });
}

int THUB_Finalize(THUB_Context* ctx) {
  if (!ctx || !valid(*ctx)) return arg_error(nullptr, "THUB_Finalize: invalid context handle");
  THUB_Context_s* c = *ctx;
  std::set<THUB_Model_s*> models;
  {
    std::lock_guard<std::mutex> lk(c->mu);
    models = c->models;
  }
  for (THUB_Model_s* m : models) {
    THUB_Model mm = m;
    if (THUB_Request_s* r = m->outstanding.load()) {
      THUB_Request rr = r;
      (void)finish_request(&rr, nullptr);
    }
    (void)THUB_Close(&mm);
  }
  return guard(nullptr, [&] {
    c->ctx.reset();
    c->magic = 0;
    delete c;
    *ctx = THUB_CONTEXT_NULL;
    return THUB_SUCCESS;
  });
}

int THUB_Registry_address(THUB_Context ctx, char* buf, size_t len) {
  if (!valid(ctx) || !buf) return arg_error(nullptr, "THUB_Registry_address: invalid argument");
  std::string a = ctx->ctx->registry_address();
  if (a.size() + 1 > len) return arg_error(ctx, "THUB_Registry_address: buffer too small for '" + a + "'");
  std::memcpy(buf, a.c_str(), a.size() + 1);
  return THUB_SUCCESS;
}

int THUB_Open(THUB_Context ctx, const char* model, const char* replica, int shard, int num_shards, THUB_Info info,
              THUB_Model* m) {
  if (!valid(ctx)) return arg_error(nullptr, "THUB_Open: invalid context handle");
  if (!model || !replica || !m) return arg_error(ctx, "THUB_Open: model, replica and m must not be NULL");
  if (info != THUB_INFO_NULL && !valid(info)) return arg_error(ctx, "THUB_Open: invalid info handle");
  return guard(ctx, [&] {
    thub::InfoMap empty;
    auto h = std::make_unique<THUB_Model_s>();
    h->owner = ctx;
    h->model = std::make_unique<thub::client::Model>(*ctx->ctx, model, replica, shard, num_shards,
                                                     info ? info->map : empty);
    {
      std::lock_guard<std::mutex> lk(ctx->mu);
      ctx->models.insert(h.get());
    }
    *m = h.release();
    return THUB_SUCCESS;
  });
}

int THUB_Register(THUB_Model m, const char* tensor, void* addr, size_t bytes, int memtype) {
  if (valid(m) && !tensor) return arg_error(m->owner, "THUB_Register: tensor name is NULL");
  return model_op(m, "THUB_Register", [&] {
    m->model->register_tensor(tensor, addr, bytes, memtype);
    return THUB_SUCCESS;
  });
}

int THUB_Publish(THUB_Model m, int64_t version) {
  return model_op(m, "THUB_Publish", [&] {
    m->model->publish(version);
    return THUB_SUCCESS;
  });
}

int THUB_Replicate(THUB_Model m, int64_t version, int64_t* got) {
  return model_op(m, "THUB_Replicate", [&] {
    int64_t v = m->model->replicate(version);
    if (got) *got = v;
    return THUB_SUCCESS;
  });
}

int THUB_Ireplicate(THUB_Model m, int64_t version, THUB_Request* req) {
  if (valid(m) && !req) return arg_error(m->owner, "THUB_Ireplicate: req is NULL");
  return model_op(m, "THUB_Ireplicate", [&] {
    auto r = std::make_unique<THUB_Request_s>();
    r->m = m;
    THUB_Request_s* rp = r.get();
    m->outstanding = rp;
    try {
      rp->thread = std::thread([rp, m, version] {
        int64_t v = -1;
        rp->status = guard(m->owner, [&] {
          v = m->model->replicate(version);
          return THUB_SUCCESS;
        });
        rp->got = v;
        rp->done = true;
      });
    } catch (...) {
      m->outstanding = nullptr;
      throw;
    }
    *req = r.release();
    return THUB_SUCCESS;
  });
}

int THUB_Update(THUB_Model m, int64_t version, int64_t* got) {
  return model_op(m, "THUB_Update", [&] {
    int64_t v = -1;
    thub::Code c = m->model->update(version, &v);
    if (got) *got = v;
    return static_cast<int>(c);
  });
}

int THUB_Unpublish(THUB_Model m) {
  return model_op(m, "THUB_Unpublish", [&] {
    m->model->unpublish();
    return THUB_SUCCESS;
  });
}

int THUB_Close(THUB_Model* m) {
  if (!m || !valid(*m)) return arg_error(nullptr, "THUB_Close: invalid model handle");
  THUB_Model_s* h = *m;
  if (h->outstanding.load()) {
    record(h->owner, "THUB_ERR_STATE: THUB_Close: a nonblocking request is still outstanding; wait for it first");
    return THUB_ERR_STATE;
  }
  int st = model_op(h, "THUB_Close", [&] {
    h->model->close();
    return THUB_SUCCESS;
  });
  // The handle goes away even if the registry could not be told (it forgets us on disconnect).
  {
    std::lock_guard<std::mutex> lk(h->owner->mu);
    h->owner->models.erase(h);
  }
  if (st == THUB_ERR_STATE) return st;
  h->model.reset();
  h->magic = 0;
  delete h;
  *m = THUB_MODEL_NULL;
  return st == THUB_SUCCESS || st == THUB_ERR_REGISTRY ? THUB_SUCCESS : st;
}

int THUB_Test(THUB_Request* req, int* done, int64_t* got) {
  if (!req || !valid(*req) || !done) return arg_error(nullptr, "THUB_Test: invalid request handle");
  if (!(*req)->done.load()) {
    *done = 0;
    return THUB_SUCCESS;
  }
  *done = 1;
  return finish_request(req, got);
}

int THUB_Wait(THUB_Request* req, int64_t* got) {
  if (!req || !valid(*req)) return arg_error(nullptr, "THUB_Wait: invalid request handle");
  return finish_request(req, got);
}

int THUB_Model_stat(THUB_Model m, const char* key, int64_t* value) {
  if (!valid(m) || !key || !value) return arg_error(nullptr, "THUB_Model_stat: invalid argument");
  int64_t v = 0;
  if (!m->model->stat(key, &v)) return arg_error(m->owner, std::string("THUB_Model_stat: unknown key '") + key + "'");
  *value = v;
  return THUB_SUCCESS;
}

}  // extern "C"
