/**
 * @file tensorhub.hpp
 * @brief C++ interface to TensorHub: header-only, over the C API of tensorhub.h.
 *
 * Every call here is one call of the C API (there is no second implementation), wrapped so
 * that handles are owned objects and failures are exceptions:
 *  - tensorhub::Context, tensorhub::Model, tensorhub::Request and tensorhub::Info own a
 *    THUB_Context, THUB_Model, THUB_Request and THUB_Info (RAII). They are move-only; a
 *    moved-from object holds the null handle and is inert: its destructor does nothing and
 *    its methods throw tensorhub::Error with code THUB_ERR_ARG.
 *  - A failed call throws tensorhub::Error, which carries the status (code()) and the
 *    detail of THUB_Last_error (detail()). THUB_NOT_UPDATED is not a failure: update()
 *    returns std::nullopt instead.
 *  - Destructors never throw. ~Model closes the model (THUB_Close), ~Context finalizes
 *    (THUB_Finalize), ~Info frees the info; their errors are dropped. Call close(),
 *    finalize() explicitly to see them. ~Request of a request still running waits for it
 *    (THUB_Wait) and drops its outcome, so no operation writes into buffers after the
 *    request that owned it is gone; detach() lets one run on unobserved instead. Destroy
 *    requests and models before their context (declare the context first): THUB_Finalize
 *    refuses while an operation of the context is outstanding, and the context then stays.
 *
 * Needs C++17; the std::span overloads are there when the standard library has std::span
 * (C++20). Thread-safety is the C API's: a Context may be used from several threads, one
 * Model (and its requests) by one thread at a time.
 *
 * Nothing in this file holds state of its own: no globals, no threads, no caches.
 */
#ifndef TENSORHUB_TENSORHUB_HPP
#define TENSORHUB_TENSORHUB_HPP

#include <tensorhub/tensorhub.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#endif

namespace tensorhub {

// The C header's handle and version macros are C casts; the same values are spelled here in
// C++ (nullptr, -1) so that including this header is clean under -Wold-style-cast.

/** The newest available version (THUB_LATEST). */
inline constexpr int64_t latest = -1;
/** The k-th version before the newest (THUB_LATEST_MINUS(k)). */
constexpr int64_t latest_minus(int64_t k) noexcept { return -1 - k; }

/** Where a registered tensor lives (THUB_MEM_HOST, THUB_MEM_CUDA). */
enum class Memory : int { host = THUB_MEM_HOST, cuda = THUB_MEM_CUDA };

/** A failed TensorHub call. */
class Error : public std::runtime_error {
 public:
  /**
   * @param code   the THUB status (a THUB_ERR_* value)
   * @param what   the call that failed, e.g. "THUB_Publish"
   * @param detail the context's THUB_Last_error text (may be empty)
   */
  Error(int code, const std::string& what, const std::string& detail)
      : std::runtime_error(what + ": " + THUB_Error_string(code) + (detail.empty() ? "" : " | " + detail)),
        code_(code),
        detail_(detail) {}
  /** The THUB status code (THUB_ERR_ARG, THUB_ERR_NOT_FOUND, ...). */
  int code() const noexcept { return code_; }
  /** The detail text of THUB_Last_error at the time of the failure (may be empty). */
  const std::string& detail() const noexcept { return detail_; }

 private:
  int code_;
  std::string detail_;
};

namespace detail {

inline std::string last_error(THUB_Context ctx) {
  char buf[1024];
  if (THUB_Last_error(ctx, buf, sizeof buf) != THUB_SUCCESS) return std::string();
  return buf;
}

/** Throws Error for a negative status, with the context's detail; returns the others
 *  (THUB_SUCCESS, THUB_NOT_UPDATED, ...). A null context (a moved-from object) has no detail. */
inline int check(int status, THUB_Context ctx, const char* what) {
  if (status < 0) throw Error(status, what, ctx == nullptr ? std::string() : last_error(ctx));
  return status;
}

/** Info calls have no context: their failures carry no detail. */
inline int check_info(int status, const char* what) {
  if (status < 0) throw Error(status, what, "");
  return status;
}

}  // namespace detail

/** A library version. */
struct Version {
  int major; /**< THUB_VERSION_MAJOR of the library */
  int minor; /**< THUB_VERSION_MINOR of the library */
  int patch; /**< THUB_VERSION_PATCH of the library */
};
/** The version of the library that runs, which may differ from the header's (THUB_Get_version). */
inline Version version() {
  Version v{};
  detail::check_info(THUB_Get_version(&v.major, &v.minor, &v.patch), "THUB_Get_version");
  return v;
}
/** A one-line description of the library: version, UCX, CUDA (THUB_Get_library_version). */
inline std::string library_version() {
  char buf[512];
  detail::check_info(THUB_Get_library_version(buf, sizeof buf), "THUB_Get_library_version");
  return buf;
}

/** Key/value hints (THUB_Info, like MPI_Info). */
class Info {
 public:
  /** An empty info object. */
  Info() { detail::check_info(THUB_Info_create(&info_), "THUB_Info_create"); }
  /** An info object with these keys: `Info{{"registry", addr}, {"retain", "1"}}`. */
  Info(std::initializer_list<std::pair<std::string, std::string>> kv) : Info() {
    for (const auto& p : kv) set(p.first, p.second);
  }
  ~Info() {
    if (info_ != nullptr) (void)THUB_Info_free(&info_);
  }
  /** Take @p o's info; @p o becomes null. */
  Info(Info&& o) noexcept : info_(std::exchange(o.info_, nullptr)) {}
  /** Free this info, take @p o's; @p o becomes null. */
  Info& operator=(Info&& o) noexcept {
    if (this != &o) {
      Info old(std::exchange(info_, nullptr));
      info_ = std::exchange(o.info_, nullptr);
    }
    return *this;
  }
  Info(const Info&) = delete;
  Info& operator=(const Info&) = delete;

  /** Set or replace a key (THUB_Info_set). */
  Info& set(const std::string& key, const std::string& value) {
    detail::check_info(THUB_Info_set(info_, key.c_str(), value.c_str()), "THUB_Info_set");
    return *this;
  }
  /** The value of a key, std::nullopt when unset (THUB_Info_get_valuelen, THUB_Info_get). */
  std::optional<std::string> get(const std::string& key) const {
    size_t len = 0;
    int flag = 0;
    detail::check_info(THUB_Info_get_valuelen(info_, key.c_str(), &len, &flag), "THUB_Info_get_valuelen");
    if (!flag) return std::nullopt;
    std::string value(len + 1, '\0');
    detail::check_info(THUB_Info_get(info_, key.c_str(), value.size(), &value[0], &flag), "THUB_Info_get");
    value.resize(len);
    return value;
  }
  /** Remove a key (THUB_Info_delete); Error THUB_ERR_NOT_FOUND when it is not set. */
  void erase(const std::string& key) { detail::check_info(THUB_Info_delete(info_, key.c_str()), "THUB_Info_delete"); }
  /** The number of keys (THUB_Info_get_nkeys). */
  int size() const {
    int n = 0;
    detail::check_info(THUB_Info_get_nkeys(info_, &n), "THUB_Info_get_nkeys");
    return n;
  }
  /** The n-th key in lexicographic order (THUB_Info_get_nthkey). */
  std::string key(int n) const {
    char buf[256];
    detail::check_info(THUB_Info_get_nthkey(info_, n, buf, sizeof buf), "THUB_Info_get_nthkey");
    return buf;
  }
  /** A copy with the same keys (THUB_Info_dup). */
  Info dup() const {
    THUB_Info copy = nullptr;
    detail::check_info(THUB_Info_dup(info_, &copy), "THUB_Info_dup");
    return Info(copy);
  }
  /** The C handle, still owned by this object. */
  THUB_Info get() const noexcept { return info_; }

 private:
  explicit Info(THUB_Info adopted) noexcept : info_(adopted) {}
  THUB_Info info_ = nullptr;
};

/** A nonblocking operation (THUB_Request) of Model::ireplicate, iupdate or iunpublish. */
class Request {
 public:
  /** A null request (nothing to wait for). */
  Request() noexcept = default;
  /** Adopt a C request of context @p ctx (its failures' detail comes from there). */
  Request(THUB_Request req, THUB_Context ctx) noexcept : req_(req), ctx_(ctx) {}
  /** Waits for a request still running and drops its outcome (see the file's comment). */
  ~Request() {
    if (req_ != nullptr) (void)THUB_Wait(&req_, nullptr);
  }
  /** Take @p o's request (and result); @p o becomes null. */
  Request(Request&& o) noexcept
      : req_(std::exchange(o.req_, nullptr)),
        ctx_(std::exchange(o.ctx_, nullptr)),
        done_(std::exchange(o.done_, false)),
        version_(std::exchange(o.version_, std::nullopt)),
        error_(std::exchange(o.error_, std::nullopt)) {}
  /** Wait for this request if it runs, take @p o's; @p o becomes null. */
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      Request old(std::exchange(req_, nullptr), ctx_);  // waits for a request still running
      req_ = std::exchange(o.req_, nullptr);
      ctx_ = std::exchange(o.ctx_, nullptr);
      done_ = std::exchange(o.done_, false);
      version_ = std::exchange(o.version_, std::nullopt);
      error_ = std::exchange(o.error_, std::nullopt);
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  /**
   * Wait for the operation (THUB_Wait). Returns the version held afterwards, std::nullopt
   * when an iupdate found nothing newer (THUB_NOT_UPDATED); throws Error on failure.
   * Waiting again on a completed request gives the same result (or throws the same Error).
   */
  std::optional<int64_t> wait() {
    if (error_) throw *error_;
    if (done_) return version_;
    int64_t got = -1;
    int st = THUB_Wait(&req_, &got);  // before finish() reads got
    finish(st, got, "THUB_Wait");
    return version_;
  }
  /** Whether the operation has finished (THUB_Test); throws Error if it failed. */
  bool test() {
    if (error_) throw *error_;
    if (done_) return true;
    int flag = 0;
    int64_t got = -1;
    int st = THUB_Test(&req_, &flag, &got);
    if (st >= 0 && !flag) return false;
    finish(st, got, "THUB_Test");
    return true;
  }
  /** After completion: what wait() returns. */
  std::optional<int64_t> version() const noexcept { return version_; }
  /** Ask for cancellation (THUB_Cancel); the request must still be waited for or tested. */
  void cancel() { detail::check(THUB_Cancel(&req_), ctx_, "THUB_Cancel"); }
  /** Let the operation run on unobserved (THUB_Request_free); this object becomes null. */
  void detach() { detail::check(THUB_Request_free(&req_), ctx_, "THUB_Request_free"); }
  /** Whether the request is still to be completed. */
  bool active() const noexcept { return req_ != nullptr; }
  /** The C handle, still owned by this object. */
  THUB_Request get() const noexcept { return req_; }

  friend std::vector<std::optional<int64_t>> wait_all(std::vector<Request>& reqs);

 private:
  void finish(int st, int64_t got, const char* what) {
    if (st < 0 && req_ == nullptr) {  // the operation failed (and the C request is freed): remember it
      error_ = Error(st, what, ctx_ == nullptr ? std::string() : detail::last_error(ctx_));
      throw *error_;
    }
    detail::check(st, ctx_, what);  // a bad handle: nothing completed
    done_ = true;
    version_ = st == THUB_NOT_UPDATED ? std::nullopt : std::optional<int64_t>(got);
  }

  THUB_Request req_ = nullptr;
  THUB_Context ctx_ = nullptr;
  bool done_ = false;
  std::optional<int64_t> version_;
  std::optional<Error> error_;  // the operation's failure, once it completed with one
};

/**
 * Wait for every request (THUB_Waitall): each one's result, as Request::wait gives it.
 * Every request is completed even when some fail; then the first failure in order is
 * thrown. Requests already completed keep their result; null ones give std::nullopt.
 */
inline std::vector<std::optional<int64_t>> wait_all(std::vector<Request>& reqs) {
  std::vector<THUB_Request> raw(reqs.size());
  std::vector<int64_t> gots(reqs.size(), -1);
  std::vector<int> statuses(reqs.size(), THUB_SUCCESS);
  for (size_t i = 0; i < reqs.size(); ++i) raw[i] = reqs[i].req_;
  int st = THUB_Waitall(static_cast<int>(raw.size()), raw.data(), gots.data(), statuses.data());
  bool completed_any = false;
  for (size_t i = 0; i < reqs.size(); ++i) completed_any = completed_any || raw[i] != reqs[i].req_;
  if (st < 0 && !completed_any) detail::check(st, nullptr, "THUB_Waitall");  // an invalid entry: nothing waited for
  std::vector<std::optional<int64_t>> out(reqs.size());
  size_t first_failed = reqs.size();
  for (size_t i = 0; i < reqs.size(); ++i) {
    Request& r = reqs[i];
    if (r.req_ != nullptr) {
      r.req_ = raw[i];  // nullptr now: completed and freed
      if (statuses[i] < 0) {
        r.error_ = Error(statuses[i], "THUB_Waitall", r.ctx_ == nullptr ? std::string() : detail::last_error(r.ctx_));
        if (first_failed == reqs.size()) first_failed = i;
      } else {
        r.done_ = true;
        r.version_ = statuses[i] == THUB_NOT_UPDATED ? std::nullopt : std::optional<int64_t>(gots[i]);
      }
    }
    out[i] = r.version_;
  }
  if (first_failed < reqs.size()) throw *reqs[first_failed].error_;
  return out;
}

class Context;

/** This process's shard of one replica of one model (THUB_Model). */
class Model {
 public:
  /** A null model. */
  Model() noexcept = default;
  /** Open a shard (THUB_Open). */
  Model(const Context& ctx, const std::string& model, const std::string& replica, int shard = 0,
        int num_shards = 1);
  /** Open a shard with info keys such as `retain` (THUB_Open). */
  Model(const Context& ctx, const std::string& model, const std::string& replica, int shard, int num_shards,
        const Info& info);
  /** Closes the model (THUB_Close); errors are dropped. */
  ~Model() {
    if (m_ != nullptr) (void)THUB_Close(&m_);
  }
  /** Take @p o's model; @p o becomes null. */
  Model(Model&& o) noexcept
      : m_(std::exchange(o.m_, nullptr)), ctx_(std::exchange(o.ctx_, nullptr)) {}
  /** Close this model, take @p o's; @p o becomes null. */
  Model& operator=(Model&& o) noexcept {
    if (this != &o) {
      if (m_ != nullptr) (void)THUB_Close(&m_);
      m_ = std::exchange(o.m_, nullptr);
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /** Register a tensor from a pointer and a size in bytes (THUB_Register). */
  Model& register_tensor(const std::string& name, void* addr, size_t bytes, Memory mem = Memory::host) {
    detail::check(THUB_Register(m_, name.c_str(), addr, bytes, static_cast<int>(mem)), ctx_, "THUB_Register");
    return *this;
  }
#if defined(__cpp_lib_span)
  /** Register a tensor from its bytes. */
  Model& register_tensor(const std::string& name, std::span<std::byte> bytes, Memory mem = Memory::host) {
    return register_tensor(name, bytes.data(), bytes.size(), mem);
  }
  /** Register a tensor from a span of elements (its bytes, std::as_writable_bytes). */
  template <class T, size_t N>
  Model& register_tensor(const std::string& name, std::span<T, N> elements, Memory mem = Memory::host) {
    return register_tensor(name, std::as_writable_bytes(elements), mem);
  }
#endif
  /** "My tensors hold @p version and will not change until unpublish()" (THUB_Publish). */
  void publish(int64_t version) { detail::check(THUB_Publish(m_, version), ctx_, "THUB_Publish"); }
  /** Fetch a version (absolute, latest or latest_minus(k)); returns it (THUB_Replicate). */
  int64_t replicate(int64_t version = latest) {
    int64_t got = -1;
    detail::check(THUB_Replicate(m_, version, &got), ctx_, "THUB_Replicate");
    return got;
  }
  /** Move to something newer (THUB_Update): the version now held, std::nullopt when nothing is newer. */
  std::optional<int64_t> update(int64_t version = latest) {
    int64_t got = -1;
    if (detail::check(THUB_Update(m_, version, &got), ctx_, "THUB_Update") == THUB_NOT_UPDATED) return std::nullopt;
    return got;
  }
  /** Withdraw the publish; returns once no peer reads the tensors (THUB_Unpublish). */
  void unpublish() { detail::check(THUB_Unpublish(m_), ctx_, "THUB_Unpublish"); }
  /** Nonblocking replicate (THUB_Ireplicate). */
  Request ireplicate(int64_t version = latest) {
    THUB_Request r = nullptr;
    detail::check(THUB_Ireplicate(m_, version, &r), ctx_, "THUB_Ireplicate");
    return Request(r, ctx_);
  }
  /** Nonblocking update (THUB_Iupdate); its wait() gives std::nullopt when nothing was newer. */
  Request iupdate(int64_t version = latest) {
    THUB_Request r = nullptr;
    detail::check(THUB_Iupdate(m_, version, &r), ctx_, "THUB_Iupdate");
    return Request(r, ctx_);
  }
  /** Nonblocking unpublish (THUB_Iunpublish). */
  Request iunpublish() {
    THUB_Request r = nullptr;
    detail::check(THUB_Iunpublish(m_, &r), ctx_, "THUB_Iunpublish");
    return Request(r, ctx_);
  }
  /** One counter of the model, e.g. stat("held_version") (THUB_Model_stat). */
  int64_t stat(const std::string& key) const {
    int64_t value = 0;
    detail::check(THUB_Model_stat(m_, key.c_str(), &value), ctx_, "THUB_Model_stat");
    return value;
  }
  /** Close now (THUB_Close), seeing its errors; the object becomes null. */
  void close() { detail::check(THUB_Close(&m_), ctx_, "THUB_Close"); }
  /** The C handle, still owned by this object. */
  THUB_Model get() const noexcept { return m_; }
  /** Whether the object holds a model. */
  explicit operator bool() const noexcept { return m_ != nullptr; }

 private:
  void open(const std::string& model, const std::string& replica, int shard, int num_shards, THUB_Info info) {
    detail::check(THUB_Open(ctx_, model.c_str(), replica.c_str(), shard, num_shards, info, &m_), ctx_, "THUB_Open");
  }
  THUB_Model m_ = nullptr;
  THUB_Context ctx_ = nullptr;
};

/** One per process (or per GPU): the data plane and the registry connection (THUB_Context). */
class Context {
 public:
  /**
   * Initialize (THUB_Init) with these info keys; without `registry` (and without
   * TENSORHUB_REGISTRY) the context starts an embedded registry.
   */
  Context() { init(nullptr); }
  /** With info keys: `Context ctx({{"registry", "host:port"}})`. */
  explicit Context(const Info& info) { init(info.get()); }
  /** Finalizes (THUB_Finalize); errors are dropped. */
  ~Context() {
    if (ctx_ != nullptr) (void)THUB_Finalize(&ctx_);
  }
  /** Take @p o's context; @p o becomes null. Models opened through @p o keep working. */
  Context(Context&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
  /** Finalize this context, take @p o's; @p o becomes null. */
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      if (ctx_ != nullptr) (void)THUB_Finalize(&ctx_);
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /** The registry's `host:port` (THUB_Registry_address). */
  std::string registry_address() const {
    char buf[1024];
    detail::check(THUB_Registry_address(ctx_, buf, sizeof buf), ctx_, "THUB_Registry_address");
    return buf;
  }
  /** Open a shard of a model (THUB_Open). */
  Model open(const std::string& model, const std::string& replica, int shard = 0, int num_shards = 1) const {
    return Model(*this, model, replica, shard, num_shards);
  }
  /** Open a shard of a model with info keys such as `retain` (THUB_Open). */
  Model open(const std::string& model, const std::string& replica, int shard, int num_shards, const Info& info) const {
    return Model(*this, model, replica, shard, num_shards, info);
  }
  /** Host memory that same-host readers map themselves (THUB_Alloc_mem). */
  void* alloc_mem(size_t bytes) const {
    void* p = nullptr;
    detail::check(THUB_Alloc_mem(ctx_, bytes, nullptr, &p), ctx_, "THUB_Alloc_mem");
    return p;
  }
  /** Free memory of alloc_mem (THUB_Free_mem). */
  void free_mem(void* base) const { detail::check(THUB_Free_mem(ctx_, base), ctx_, "THUB_Free_mem"); }
  /** The detail of this context's last failure (THUB_Last_error). */
  std::string last_error() const { return detail::last_error(ctx_); }
  /** Finalize now (THUB_Finalize), seeing its errors; the object becomes null. */
  void finalize() { detail::check(THUB_Finalize(&ctx_), ctx_, "THUB_Finalize"); }
  /** The C handle, still owned by this object. */
  THUB_Context get() const noexcept { return ctx_; }
  /** Whether the object holds a context. */
  explicit operator bool() const noexcept { return ctx_ != nullptr; }

 private:
  void init(THUB_Info info) {
    int st = THUB_Init(info, &ctx_);
    if (st < 0) throw Error(st, "THUB_Init", detail::last_error(nullptr));  // this thread's last THUB_Init
  }
  THUB_Context ctx_ = nullptr;
};

inline Model::Model(const Context& ctx, const std::string& model, const std::string& replica, int shard,
                    int num_shards)
    : ctx_(ctx.get()) {
  open(model, replica, shard, num_shards, nullptr);
}

inline Model::Model(const Context& ctx, const std::string& model, const std::string& replica, int shard,
                    int num_shards, const Info& info)
    : ctx_(ctx.get()) {
  open(model, replica, shard, num_shards, info.get());
}

}  // namespace tensorhub

#endif  // TENSORHUB_TENSORHUB_HPP
