#include "bench/transfer/ucx_get.h"

#include <algorithm>
#include <stdexcept>

namespace thub::bench {

namespace {
void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(st));
}

struct Window {
  int inflight = 0;
  ucs_status_t error = UCS_OK;
};

void get_done(void* request, ucs_status_t status, void* user_data) {
  auto* w = static_cast<Window*>(user_data);
  w->inflight--;
  if (status != UCS_OK) w->error = status;
  ucp_request_free(request);
}
}  // namespace

UcxGetBaseline::UcxGetBaseline() {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  ucs_status_t st = ucp_init(&params, config, &ctx_);
  ucp_config_release(config);
  check(st, "ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(ctx_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(ctx_);
    check(st, "ucp_worker_create");
  }
  ucp_address_t* a = nullptr;
  size_t alen = 0;
  check(ucp_worker_get_address(worker_, &a, &alen), "ucp_worker_get_address");
  address_.assign(reinterpret_cast<const char*>(a), alen);
  ucp_worker_release_address(worker_, a);
}

UcxGetBaseline::~UcxGetBaseline() {
  destroy_rkeys();
  if (ep_) {
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* r = ucp_ep_close_nbx(ep_, &prm);
    if (UCS_PTR_IS_PTR(r)) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
      ucp_request_free(r);
    }
  }
  unmap_all();
  ucp_worker_destroy(worker_);
  ucp_cleanup(ctx_);
}

std::string UcxGetBaseline::map(void* addr, size_t len) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = addr;
  mp.length = len;
  ucp_mem_h memh = nullptr;
  check(ucp_mem_map(ctx_, &mp, &memh), "ucp_mem_map");
  memh_.push_back(memh);
  void* rb = nullptr;
  size_t rlen = 0;
  check(ucp_rkey_pack(ctx_, memh, &rb, &rlen), "ucp_rkey_pack");
  std::string packed(static_cast<const char*>(rb), rlen);
  ucp_rkey_buffer_release(rb);
  return packed;
}

void* UcxGetBaseline::alloc(size_t len, std::string* rkey) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = nullptr;
  mp.length = len;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  check(ucp_mem_map(ctx_, &mp, &memh), "ucp_mem_map (allocate)");
  memh_.push_back(memh);
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  check(ucp_mem_query(memh, &attr), "ucp_mem_query");
  void* rb = nullptr;
  size_t rlen = 0;
  check(ucp_rkey_pack(ctx_, memh, &rb, &rlen), "ucp_rkey_pack");
  rkey->assign(static_cast<const char*>(rb), rlen);
  ucp_rkey_buffer_release(rb);
  return attr.address;
}

void UcxGetBaseline::unmap_all() {
  for (ucp_mem_h m : memh_) ucp_mem_unmap(ctx_, m);
  memh_.clear();
}

void UcxGetBaseline::connect(const std::string& worker_address, bool peer_errors) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(worker_address.data());
  if (peer_errors) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void*, ucp_ep_h, ucs_status_t) {};  // a failed get reports it
    ep.err_handler.arg = nullptr;
  }
  check(ucp_ep_create(worker_, &ep, &ep_), "ucp_ep_create");
}

ucp_rkey_h UcxGetBaseline::unpack(const std::string& packed_rkey) {
  ucp_rkey_h r = nullptr;
  check(ucp_ep_rkey_unpack(ep_, packed_rkey.data(), &r), "ucp_ep_rkey_unpack");
  rkeys_.push_back(r);
  return r;
}

void UcxGetBaseline::destroy_rkeys() {
  for (ucp_rkey_h r : rkeys_) ucp_rkey_destroy(r);
  rkeys_.clear();
}

uint64_t UcxGetBaseline::get_all(const std::vector<GetRegion>& regions, size_t chunk, int window) {
  Window w;
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = get_done;
  prm.user_data = &w;
  uint64_t gets = 0;
  for (const GetRegion& r : regions) {
    size_t step = chunk == 0 ? r.len : chunk;
    for (size_t off = 0; off < r.len; off += step) {
      while (w.inflight >= window) ucp_worker_progress(worker_);
      size_t len = std::min(step, r.len - off);
      ucs_status_ptr_t req =
          ucp_get_nbx(ep_, static_cast<char*>(r.local) + off, len, r.remote + off, r.rkey, &prm);
      if (UCS_PTR_IS_ERR(req)) check(UCS_PTR_STATUS(req), "ucp_get_nbx");
      if (req != nullptr) w.inflight++;
      gets++;
    }
  }
  while (w.inflight > 0) ucp_worker_progress(worker_);
  check(w.error, "ucp_get_nbx completion");
  // A get's completion means the data is in local memory (no extra flush needed).
  return gets;
}

}  // namespace thub::bench
