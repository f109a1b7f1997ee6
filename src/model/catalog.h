// The catalog of what AI Platform Training offered: machine types (legacy and
// Compute Engine) with their resources, accelerator types, runtime versions
// with the Python versions they support, and regions. Static data, read-only,
// thread-safe. Validation and the scheduler both read it; operators extend
// runtimes and regions through server configuration (validate::Config).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mle::model {

enum class MachineFamily {
  kLegacy,          // standard, complex_model_m, ... (GPUs implied by the name)
  kComputeEngine,   // n1-standard-4, a2-highgpu-1g, ...
  kCloudTpu,        // cloud_tpu: a TPU host; pairs with either family
};

struct MachineType {
  std::string_view name;
  MachineFamily family;
  int32_t vcpus;
  int64_t memory_mib;
  // GPUs that come with a legacy type (acceleratorConfig is not allowed there).
  std::string_view implied_accelerator;  // e.g. "NVIDIA_TESLA_K80"; empty = none
  int32_t implied_accelerator_count;
  // For Compute Engine types: the GPU type the machine requires, if it is a
  // GPU-only family (a2-* needs A100); empty = any n1-compatible GPU.
  std::string_view required_gpu;
  int32_t required_gpu_count;  // a2-highgpu-Ng carries exactly N
};

std::span<const MachineType> MachineTypes();
const MachineType* FindMachineType(std::string_view name);

inline constexpr std::string_view kCloudTpuMachine = "cloud_tpu";

enum class AcceleratorKind { kNone, kGpu, kTpu, kTpuPod };

struct AcceleratorType {
  std::string_view name;  // the AcceleratorConfig.type enum value
  AcceleratorKind kind;
  std::vector<int64_t> allowed_counts;
};

std::span<const AcceleratorType> AcceleratorTypes();
const AcceleratorType* FindAcceleratorType(std::string_view name);

// TPU cores on one TPU host (v2-8 / v3-8).
inline constexpr int64_t kTpuCoresPerHost = 8;

struct RuntimeVersion {
  std::string name;                          // "2.11"
  std::vector<std::string> python_versions;  // {"3.7"}
  bool tpu_capable = false;
};

// AI Platform's runtime versions, 1.0 .. 2.11.
const std::vector<RuntimeVersion>& AiPlatformRuntimeVersions();

// pytorch-xla prebuilt images and the tpuTfVersion each needs.
struct PytorchXlaImage {
  std::string_view image;           // gcr.io/cloud-ml-public/training/pytorch-xla.1-11
  std::string_view tpu_tf_version;  // pytorch-1.11
};
std::span<const PytorchXlaImage> PytorchXlaImages();

inline constexpr std::string_view kScaleTiers[] = {
    "BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM"};

// gcloud's ml regions (constants.py).
std::span<const std::string_view> DefaultRegions();
// Regions with TPUs per the TPU guide.
std::span<const std::string_view> DefaultTpuRegions();

}  // namespace mle::model
