#include "tools/info/print_ucx.h"

#include <exception>

#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::info {

bool print_ucx(std::ostream& out, std::ostream& err, const std::string& tls) {
  out << "UCX " << transport::ucx_version() << "\n";
  std::unique_ptr<transport::Worker> w;
  try {
    transport::WorkerOptions wo;
    wo.tls = tls;
    w = transport::Worker::create(wo);
  } catch (const std::exception& e) {
    err << "tensorhub-info: UCX could not start: " << e.what() << "\n";
    return false;
  }
  out << w->describe();
  std::string why;
  bool cuda = transport::cuda_usable(&why);
  out << "# CUDA memory through UCX (direct mode): " << (w->can_map_cuda() ? "yes" : "no (needs a CUDA-enabled UCX >= 1.16)")
      << "\n";
  out << "# CUDA staging through pinned host memory (copy mode): " << (cuda ? "yes" : "no: " + why) << "\n";
  return true;
}

}  // namespace thub::info
