#include "suite/gpu_hold.h"

#include "base/printable.h"
#include "gpu/device_info.h"

namespace kg {

std::unique_ptr<gpu_hold> take_gpu(const clock_policy& policy, const std::string& no_gpu_prefix,
                                   std::ostream& err) {
  const device_info dev = query_device(0);
  if (!dev.available) {
    err << "kernelgate: " << no_gpu_prefix << ": " << dev.reason << "\n";
    return nullptr;
  }
  try {
    return std::make_unique<gpu_hold>(policy);
  } catch (const clock_policy_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return nullptr;
  }
}

} // namespace kg
