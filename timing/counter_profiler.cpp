#include "timing/counter_profiler.h"

#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "gpu/cuda_raii.h"
#include "timing/gpu_timer.h"
#include "timing/timing_kernels.h"

namespace kg {
namespace {

const std::string unavailable = "timing backend 'counters' unavailable: ";

// CUPTI's parameter structs: zeroed, with their size set (CUPTI reads only the fields a struct of
// that size has).
template <typename T>
T sized(std::size_t size) {
  T p{};
  p.structSize = size;
  return p;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string cupti_failure(const char* call, CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::string out = std::string(call) + ": " + (msg ? msg : "unknown CUPTI error");
  const std::string hint = counter_profiler_hint(r);
  if (!hint.empty()) out += " (" + hint + ")";
  return one_line(out);
}

// Every CUPTI call is checked; a failure names the call. `setup` failures say the backend is
// unavailable (the run never starts); later ones are errors of a sample.
#define KG_CUPTI_CHECK(call, setup)                                                                \
  do {                                                                                             \
    const CUptiResult kg_cupti_status_ = (call);                                                   \
    if (kg_cupti_status_ != CUPTI_SUCCESS)                                                         \
      throw timing_error(((setup) ? unavailable : std::string("counters: ")) +                     \
                         cupti_failure(#call, kg_cupti_status_));                                  \
  } while (0)

// libcuda is never linked (timing/CMakeLists.txt): the one driver call needed, the current
// context that the range profiler attaches to, is looked up through the runtime.
CUcontext current_context() {
  using get_current_fn = CUresult (*)(CUcontext*);
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  // cuCtxGetCurrent arrived with CUDA 4.0 and has one ABI version.
  const auto e =
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 4000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
    throw timing_error(unavailable + "the driver has no cuCtxGetCurrent (" + cudaGetErrorString(e) +
                       ")");
  CUcontext ctx = nullptr;
  if (reinterpret_cast<get_current_fn>(p)(&ctx) != CUDA_SUCCESS || !ctx)
    throw timing_error(unavailable + "no current CUDA context");
  return ctx;
}

} // namespace

std::string counter_profiler_hint(CUptiResult r) {
  switch (r) {
  case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    return "GPU performance counters are restricted to administrators here: run as root, or load "
           "the driver with NVreg_RestrictProfilingToAdminUsers=0";
  case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
    return "the hypervisor does not allow profiling this virtual GPU";
  case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
  case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
    return "another profiler (ncu, nsys, cuda-gdb) or CUPTI client is attached to this process";
  case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    return "confidential computing mode forbids profiling";
  case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
  case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
  case CUPTI_ERROR_NOT_SUPPORTED:
    return "this GPU or its configuration does not support the range profiler";
  default:
    return "";
  }
}

double counter_sample_us(const std::vector<double>& kernel_ns) {
  if (kernel_ns.empty())
    throw timing_error("counters: the timed call launched no kernel; gpu__time_duration is "
                       "measured per kernel (copies and memsets are not counted, as in ncu): "
                       "time it with --backend cupti or events");
  double ns = 0;
  for (double d : kernel_ns) {
    if (!std::isfinite(d) || d < 0)
      throw timing_error("counters: a kernel's gpu__time_duration.sum read " + std::to_string(d));
    ns += d;
  }
  return ns * 1e-3;
}

struct counter_profiler_state {
  std::size_t max_kernels = 0;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* target = nullptr;
  std::vector<std::uint8_t> config;
  std::vector<std::uint8_t> counter_data;
  bool started = false;
};

namespace {
// cuptiProfilerInitialize loads the profiler libraries and hooks the driver, once per process.
void initialize_profiler_api() {
  static std::once_flag once;
  static CUptiResult result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    auto p = sized<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    result = cuptiProfilerInitialize(&p);
  });
  if (result != CUPTI_SUCCESS)
    throw timing_error(unavailable + cupti_failure("cuptiProfilerInitialize", result));
}

// Undoes set-up in reverse; never throws (it runs in a destructor). Results are ignored: there is
// nothing left to do about a failure to tear down, and the process may be exiting.
void release(counter_profiler_state& s) {
  if (s.target) {
    if (s.started) {
      auto stop =
          sized<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      stop.pRangeProfilerObject = s.target;
      (void)cuptiRangeProfilerStop(&stop);
      s.started = false;
    }
    auto dis =
        sized<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    dis.pRangeProfilerObject = s.target;
    (void)cuptiRangeProfilerDisable(&dis);
    s.target = nullptr;
  }
  if (s.host) {
    auto de = sized<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    de.pHostObject = s.host;
    (void)cuptiProfilerHostDeinitialize(&de);
    s.host = nullptr;
  }
}
} // namespace

counter_profiler::counter_profiler(std::size_t max_kernels)
    : s_(std::make_unique<counter_profiler_state>()) {
  s_->max_kernels = max_kernels;
  // A context must exist before the profiler can attach to it; with no GPU this is where it ends.
  if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess)
    throw timing_error(unavailable + "no CUDA context: " + cudaGetErrorString(e));
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess)
    throw timing_error(unavailable + "cudaGetDevice: " + cudaGetErrorString(e));
  const CUcontext ctx = current_context();
  initialize_profiler_api();

  auto chip = sized<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<std::size_t>(device);
  KG_CUPTI_CHECK(cuptiDeviceGetChipName(&chip), true);

  // Which counters this context can read: the first call sizes the image, the second fills it.
  // It fails while another profiling session holds the device.
  auto avail = sized<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = ctx;
  KG_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail), true);
  std::vector<std::uint8_t> availability(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability.data();
  KG_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail), true);

  auto hi = sized<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  hi.pChipName = chip.pChipName;
  hi.pCounterAvailabilityImage = availability.data();
  KG_CUPTI_CHECK(cuptiProfilerHostInitialize(&hi), true);
  s_->host = hi.pHostObject;

  const char* metrics[] = {metric};
  // From here on the destructor does not run if the constructor throws: undo by hand.
  try {
    auto add = sized<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = s_->host;
    add.ppMetricNames = metrics;
    add.numMetrics = 1;
    KG_CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&add), true);
    auto size = sized<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = s_->host;
    KG_CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&size), true);
    s_->config.resize(size.configImageSize);
    auto image = sized<CUpti_Profiler_Host_GetConfigImage_Params>(
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    image.pHostObject = s_->host;
    image.configImageSize = s_->config.size();
    image.pConfigImage = s_->config.data();
    KG_CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&image), true);
    // More than one pass would mean replaying the work (kernel replay saves and restores memory
    // around every kernel, application replay reruns it): not a measurement of one cold call.
    auto passes = sized<CUpti_Profiler_Host_GetNumOfPasses_Params>(
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    passes.configImageSize = s_->config.size();
    passes.pConfigImage = s_->config.data();
    KG_CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&passes), true);
    if (passes.numOfPasses != 1)
      throw timing_error(unavailable + std::string(metric) + " needs " +
                         std::to_string(passes.numOfPasses) +
                         " passes on this GPU; the counters backend never replays work");

    auto en =
        sized<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    en.ctx = ctx;
    KG_CUPTI_CHECK(cuptiRangeProfilerEnable(&en), true);
    s_->target = en.pRangeProfilerObject;

    auto cds = sized<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    cds.pRangeProfilerObject = s_->target;
    cds.pMetricNames = metrics;
    cds.numMetrics = 1;
    cds.maxNumOfRanges = s_->max_kernels;
    cds.maxNumRangeTreeNodes = static_cast<std::uint32_t>(s_->max_kernels);
    KG_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&cds), true);
    s_->counter_data.resize(cds.counterDataSize);

    // Proof that profiling works here (privileges, no other profiler): one tiny kernel, at set-up,
    // so a run that cannot be measured fails before its first sample with the reason.
    cuda_stream probe;
    begin();
    launch_spin_kernel(1, 1, probe.get());
    end();
    if (const cudaError_t e = cudaStreamSynchronize(probe.get()); e != cudaSuccess)
      throw timing_error(unavailable + "calibration kernel: " + cudaGetErrorString(e));
    const auto ns = collect();
    if (ns.size() != 1 || !(ns[0] > 0))
      throw timing_error(unavailable + "a calibration kernel read " + std::to_string(ns.size()) +
                         " ranges" + (ns.empty() ? "" : ", " + std::to_string(ns[0]) + " ns") +
                         "; expected one range of positive duration");
  } catch (const std::exception& e) { // timing_error, or cuda_error from the calibration
    // The destructor does not run for a constructor that throws: release what was set up. A
    // failure inside begin()/collect() reads "counters: ..."; here it is the backend that is
    // unavailable.
    release(*s_);
    const std::string what = e.what();
    const std::string tail = what.rfind("counters: ", 0) == 0 ? what.substr(10) : what;
    throw timing_error(tail.rfind(unavailable, 0) == 0 ? tail : unavailable + tail);
  }
}

counter_profiler::~counter_profiler() {
  release(*s_);
}

void counter_profiler::begin() {
  // A fresh counter data image and configuration for every sample: the image then holds this
  // sample's ranges alone, whether or not CUPTI would have appended to an earlier pass's.
  auto init = sized<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pRangeProfilerObject = s_->target;
  init.counterDataSize = s_->counter_data.size();
  init.pCounterData = s_->counter_data.data();
  KG_CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&init), false);
  auto cfg =
      sized<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  cfg.pRangeProfilerObject = s_->target;
  cfg.configSize = s_->config.size();
  cfg.pConfig = s_->config.data();
  cfg.counterDataImageSize = s_->counter_data.size();
  cfg.pCounterDataImage = s_->counter_data.data();
  // Auto range: each kernel is a range, its duration measured on the GPU around that kernel
  // alone (how ncu measures), so launch gaps and host time never enter a sample. User replay
  // with a one-pass configuration: the work runs once, nothing is saved, restored or replayed.
  cfg.range = CUPTI_AutoRange;
  cfg.replayMode = CUPTI_UserReplay;
  cfg.maxRangesPerPass = s_->max_kernels;
  cfg.numNestingLevels = 1; // auto range has one level
  cfg.minNestingLevel = 1;
  cfg.passIndex = 0;
  cfg.targetNestingLevel = 1;
  KG_CUPTI_CHECK(cuptiRangeProfilerSetConfig(&cfg), false);
  auto start =
      sized<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = s_->target;
  KG_CUPTI_CHECK(cuptiRangeProfilerStart(&start), false);
  s_->started = true;
}

void counter_profiler::end() {
  auto stop = sized<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = s_->target;
  s_->started = false;
  KG_CUPTI_CHECK(cuptiRangeProfilerStop(&stop), false);
  // One pass was checked at set-up; a profiler that still wants another would replay the work.
  if (!stop.isAllPassSubmitted)
    throw timing_error("counters: the range profiler asked for another pass (pass " +
                       std::to_string(stop.passIndex) + "); the counters backend never replays");
}

std::vector<double> counter_profiler::collect() {
  auto decode = sized<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s_->target;
  KG_CUPTI_CHECK(cuptiRangeProfilerDecodeData(&decode), false);
  if (decode.numOfRangeDropped > 0)
    throw timing_error("counters: " + std::to_string(decode.numOfRangeDropped) +
                       " kernels of one call were not profiled (at most " +
                       std::to_string(s_->max_kernels) + " kernels per timed call)");
  auto info = sized<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s_->counter_data.data();
  info.counterDataImageSize = s_->counter_data.size();
  KG_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info), false);
  std::vector<double> ns;
  const char* metrics[] = {metric};
  for (std::size_t i = 0; i < info.numTotalRanges; ++i) {
    double v = 0;
    auto ev = sized<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    ev.pHostObject = s_->host;
    ev.pCounterDataImage = s_->counter_data.data();
    ev.counterDataImageSize = s_->counter_data.size();
    ev.rangeIndex = i;
    ev.ppMetricNames = metrics;
    ev.numMetrics = 1;
    ev.pMetricValues = &v;
    KG_CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&ev), false);
    ns.push_back(v);
  }
  return ns;
}

} // namespace kg
