// The --ucx section of tensorhub-info: the UCX library in use, the transports and devices
// a TensorHub worker gets here, the memory types UCX can move, and the CUDA staging path.
#pragma once

#include <ostream>
#include <string>

namespace thub::info {

// Starts a worker like THUB_Init does (`tls` as the info key, "" = UCX chooses) and prints
// what it reports. Returns false (and prints why to `err`) when UCX cannot start.
bool print_ucx(std::ostream& out, std::ostream& err, const std::string& tls);

}  // namespace thub::info
