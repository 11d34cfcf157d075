#include "gpu/green_partition.h"

#include <cuda.h>

#include "gpu/cuda_check.h"

namespace kg {
namespace {

// Green contexts arrived with CUDA 12.4; a stream of a green context only with 12.5. Each entry
// point is asked for at the ABI version it arrived with (a newer version may change its signature;
// an older one does not exist and the lookup fails).
constexpr unsigned green_api_version = 12040;
constexpr unsigned green_stream_api_version = 12050;

template <typename F>
F entry(const char* name, std::string* why, unsigned driver_api_version = green_api_version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const auto e =
      cudaGetDriverEntryPointByVersion(name, &p, driver_api_version, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p) {
    if (why && why->empty())
      *why = std::string("driver has no ") + name + " (" + cudaGetErrorString(e) + ")";
    return nullptr;
  }
  return reinterpret_cast<F>(p);
}

using get_dev_resource_fn = CUresult (*)(CUdevice, CUdevResource*, CUdevResourceType);
using split_fn = CUresult (*)(CUdevResource*, unsigned*, const CUdevResource*, CUdevResource*,
                              unsigned, unsigned);
using gen_desc_fn = CUresult (*)(CUdevResourceDesc*, CUdevResource*, unsigned);
using green_create_fn = CUresult (*)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned);
using green_destroy_fn = CUresult (*)(CUgreenCtx);
using green_stream_fn = CUresult (*)(CUstream*, CUgreenCtx, unsigned, int);
using stream_destroy_fn = CUresult (*)(CUstream);
using get_resource_fn = CUresult (*)(CUgreenCtx, CUdevResource*, CUdevResourceType);

std::string cu_error(const char* call, CUresult r) {
  return std::string(call) + " failed (CUresult " + std::to_string(static_cast<int>(r)) + ")";
}

} // namespace

struct green_partition::state {
  unsigned total = 0, first = 0, rest = 0, min_size = 0, align = 0;
  CUgreenCtx ctx[2] = {nullptr, nullptr};
  CUstream stream[2] = {nullptr, nullptr};
  green_destroy_fn destroy = nullptr;
  stream_destroy_fn stream_destroy = nullptr;
  ~state() {
    for (int k = 0; k < 2; ++k) {
      if (stream[k] && stream_destroy) (void)stream_destroy(stream[k]);
      if (ctx[k] && destroy) (void)destroy(ctx[k]);
    }
  }
};

std::optional<green_partition> green_partition::create(int device, unsigned first_sms,
                                                       std::string* why) {
  std::string reason;
  // The runtime initializes the driver and the device's primary context first.
  if (const auto e = cudaSetDevice(device); e != cudaSuccess) {
    if (why) *why = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
    return std::nullopt;
  }
  (void)cudaFree(nullptr);
  const auto get_dev_resource = entry<get_dev_resource_fn>("cuDeviceGetDevResource", &reason);
  const auto split = entry<split_fn>("cuDevSmResourceSplitByCount", &reason);
  const auto gen_desc = entry<gen_desc_fn>("cuDevResourceGenerateDesc", &reason);
  const auto create_ctx = entry<green_create_fn>("cuGreenCtxCreate", &reason);
  const auto destroy = entry<green_destroy_fn>("cuGreenCtxDestroy", &reason);
  const auto make_stream =
      entry<green_stream_fn>("cuGreenCtxStreamCreate", &reason, green_stream_api_version);
  const auto stream_destroy = entry<stream_destroy_fn>("cuStreamDestroy", &reason);
  const auto get_resource = entry<get_resource_fn>("cuGreenCtxGetDevResource", &reason);
  if (!reason.empty()) {
    if (why) *why = reason;
    return std::nullopt;
  }
  auto s = std::make_unique<state>();
  s->destroy = destroy;
  s->stream_destroy = stream_destroy;
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return std::nullopt;
  };
  CUdevResource all{};
  if (const auto r = get_dev_resource(static_cast<CUdevice>(device), &all, CU_DEV_RESOURCE_TYPE_SM);
      r != CUDA_SUCCESS)
    return fail(cu_error("cuDeviceGetDevResource", r));
  s->total = all.sm.smCount;
  s->min_size = all.sm.minSmPartitionSize;
  s->align = all.sm.smCoscheduledAlignment;
  CUdevResource group[1] = {}, rest{};
  unsigned groups = 1;
  if (const auto r = split(group, &groups, &all, &rest, 0, first_sms); r != CUDA_SUCCESS)
    return fail(cu_error("cuDevSmResourceSplitByCount", r));
  if (groups != 1 || rest.sm.smCount == 0)
    return fail("the device cannot give " + std::to_string(first_sms) + " of its " +
                std::to_string(s->total) + " SMs to one group and keep any for the other");
  CUdevResource* parts[2] = {&group[0], &rest};
  for (int k = 0; k < 2; ++k) {
    CUdevResourceDesc desc{};
    if (const auto r = gen_desc(&desc, parts[k], 1); r != CUDA_SUCCESS)
      return fail(cu_error("cuDevResourceGenerateDesc", r));
    if (const auto r = create_ctx(&s->ctx[k], desc, static_cast<CUdevice>(device),
                                  CU_GREEN_CTX_DEFAULT_STREAM);
        r != CUDA_SUCCESS)
      return fail(cu_error("cuGreenCtxCreate", r));
    if (const auto r = make_stream(&s->stream[k], s->ctx[k], CU_STREAM_NON_BLOCKING, 0);
        r != CUDA_SUCCESS)
      return fail(cu_error("cuGreenCtxStreamCreate", r));
    // What the context really holds, not what was asked.
    CUdevResource got{};
    if (const auto r = get_resource(s->ctx[k], &got, CU_DEV_RESOURCE_TYPE_SM); r != CUDA_SUCCESS)
      return fail(cu_error("cuGreenCtxGetDevResource", r));
    (k == 0 ? s->first : s->rest) = got.sm.smCount;
  }
  return green_partition(std::move(s));
}

green_partition::green_partition(std::unique_ptr<state> s) : s_(std::move(s)) {}
green_partition::green_partition(green_partition&&) noexcept = default;
green_partition::~green_partition() = default;

unsigned green_partition::total_sms() const {
  return s_->total;
}
unsigned green_partition::first_sms() const {
  return s_->first;
}
unsigned green_partition::rest_sms() const {
  return s_->rest;
}
unsigned green_partition::min_partition() const {
  return s_->min_size;
}
unsigned green_partition::alignment() const {
  return s_->align;
}
cudaStream_t green_partition::first_stream() const {
  return reinterpret_cast<cudaStream_t>(s_->stream[0]);
}
cudaStream_t green_partition::rest_stream() const {
  return reinterpret_cast<cudaStream_t>(s_->stream[1]);
}

} // namespace kg
