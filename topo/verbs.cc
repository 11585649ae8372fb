#include "topo/verbs.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#ifdef THUB_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace thub::topo {

double verbs_rate_gbps(int active_speed, int active_width) {
  double lane = 0;
  switch (active_speed) {  // IBV_SPEED_*: per-lane data rate after encoding
    case 1: lane = 2.0; break;       // SDR 2.5 Gbaud, 8b/10b
    case 2: lane = 4.0; break;       // DDR
    case 4: lane = 8.0; break;       // QDR
    case 8: lane = 10.0; break;      // FDR10 (64b/66b)
    case 16: lane = 13.64; break;    // FDR
    case 32: lane = 25.0; break;     // EDR
    case 64: lane = 50.0; break;     // HDR
    case 128: lane = 100.0; break;   // NDR
    case 256: lane = 200.0; break;   // XDR
    default: return 0;
  }
  int lanes = 0;
  switch (active_width) {  // IBV_WIDTH_*
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return lane * lanes;
}

std::vector<PortFacts> probe_verbs(std::string* why) {
  std::vector<PortFacts> out;
#ifdef THUB_HAVE_IBVERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (why) *why = "no RDMA device (libibverbs lists none)";
    if (list) ibv_free_device_list(list);
    return out;
  }
  for (int i = 0; i < n; ++i) {
    const char* name = ibv_get_device_name(list[i]);
    ibv_context* ctx = ibv_open_device(list[i]);
    if (name == nullptr || ctx == nullptr) continue;
    ibv_device_attr dev{};
    if (ibv_query_device(ctx, &dev) == 0) {
      for (uint8_t p = 1; p <= dev.phys_port_cnt; ++p) {
        ibv_port_attr attr{};
        if (ibv_query_port(ctx, p, &attr) != 0) continue;
        PortFacts f;
        f.device = name;
        f.port = p;
        f.active = attr.state == IBV_PORT_ACTIVE;
        f.gbps = verbs_rate_gbps(attr.active_speed, attr.active_width);
        f.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
                       : attr.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
                                                                     : "";
        out.push_back(std::move(f));
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (out.empty() && why) *why = "no RDMA port could be queried";
#else
  if (why) *why = "built without libibverbs";
#endif
  return out;
}

void apply_port_facts(MachineModel& m, const std::vector<PortFacts>& facts) {
  for (Nic& nic : m.nics) {
    if (!nic.rdma) continue;
    const PortFacts* first = nullptr;
    bool known = false;
    for (const PortFacts& f : facts) {
      if (f.device != nic.name) continue;
      known = true;
      if (f.active && (first == nullptr || f.port < first->port)) first = &f;
    }
    if (!known) continue;
    nic.active = first != nullptr;
    if (first == nullptr) continue;
    nic.port = first->port;
    nic.gbps = first->gbps;
    nic.link_layer = first->link_layer;
  }
}

}  // namespace thub::topo
