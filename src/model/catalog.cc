#include "model/catalog.h"

#include <array>

namespace mle::model {
namespace {

using F = MachineFamily;
constexpr int64_t kGiB = 1024;

// vCPUs and memory follow Compute Engine's published shapes; legacy types map
// to the Compute Engine machine AI Platform used for them.
constexpr MachineType kMachineTypes[] = {
    // Legacy.
    {"standard", F::kLegacy, 4, 15 * kGiB, "", 0, "", 0},
    {"large_model", F::kLegacy, 8, 52 * kGiB, "", 0, "", 0},
    {"complex_model_s", F::kLegacy, 8, 7 * kGiB, "", 0, "", 0},
    {"complex_model_m", F::kLegacy, 16, 14 * kGiB, "", 0, "", 0},
    {"complex_model_l", F::kLegacy, 32, 28 * kGiB, "", 0, "", 0},
    {"standard_gpu", F::kLegacy, 8, 30 * kGiB, "NVIDIA_TESLA_K80", 1, "", 0},
    {"complex_model_m_gpu", F::kLegacy, 16, 60 * kGiB, "NVIDIA_TESLA_K80", 4, "", 0},
    {"complex_model_l_gpu", F::kLegacy, 32, 120 * kGiB, "NVIDIA_TESLA_K80", 8, "", 0},
    {"standard_p100", F::kLegacy, 8, 30 * kGiB, "NVIDIA_TESLA_P100", 1, "", 0},
    {"complex_model_m_p100", F::kLegacy, 16, 60 * kGiB, "NVIDIA_TESLA_P100", 4, "", 0},
    {"standard_v100", F::kLegacy, 8, 30 * kGiB, "NVIDIA_TESLA_V100", 1, "", 0},
    {"large_model_v100", F::kLegacy, 8, 52 * kGiB, "NVIDIA_TESLA_V100", 1, "", 0},
    {"complex_model_m_v100", F::kLegacy, 16, 60 * kGiB, "NVIDIA_TESLA_V100", 4, "", 0},
    {"complex_model_l_v100", F::kLegacy, 32, 120 * kGiB, "NVIDIA_TESLA_V100", 8, "", 0},
    // A TPU host; the TPU cores come from acceleratorConfig (default TPU_V2 x 8).
    {"cloud_tpu", F::kCloudTpu, 4, 15 * kGiB, "", 0, "", 0},
    // Compute Engine.
    {"n1-standard-4", F::kComputeEngine, 4, 15 * kGiB, "", 0, "", 0},
    {"n1-standard-8", F::kComputeEngine, 8, 30 * kGiB, "", 0, "", 0},
    {"n1-standard-16", F::kComputeEngine, 16, 60 * kGiB, "", 0, "", 0},
    {"n1-standard-32", F::kComputeEngine, 32, 120 * kGiB, "", 0, "", 0},
    {"n1-standard-64", F::kComputeEngine, 64, 240 * kGiB, "", 0, "", 0},
    {"n1-standard-96", F::kComputeEngine, 96, 360 * kGiB, "", 0, "", 0},
    {"n1-highmem-2", F::kComputeEngine, 2, 13 * kGiB, "", 0, "", 0},
    {"n1-highmem-4", F::kComputeEngine, 4, 26 * kGiB, "", 0, "", 0},
    {"n1-highmem-8", F::kComputeEngine, 8, 52 * kGiB, "", 0, "", 0},
    {"n1-highmem-16", F::kComputeEngine, 16, 104 * kGiB, "", 0, "", 0},
    {"n1-highmem-32", F::kComputeEngine, 32, 208 * kGiB, "", 0, "", 0},
    {"n1-highmem-64", F::kComputeEngine, 64, 416 * kGiB, "", 0, "", 0},
    {"n1-highmem-96", F::kComputeEngine, 96, 624 * kGiB, "", 0, "", 0},
    {"n1-highcpu-16", F::kComputeEngine, 16, 14 * kGiB, "", 0, "", 0},
    {"n1-highcpu-32", F::kComputeEngine, 32, 28 * kGiB, "", 0, "", 0},
    {"n1-highcpu-64", F::kComputeEngine, 64, 57 * kGiB, "", 0, "", 0},
    {"n1-highcpu-96", F::kComputeEngine, 96, 86 * kGiB, "", 0, "", 0},
    {"a2-highgpu-1g", F::kComputeEngine, 12, 85 * kGiB, "", 0, "NVIDIA_TESLA_A100", 1},
    {"a2-highgpu-2g", F::kComputeEngine, 24, 170 * kGiB, "", 0, "NVIDIA_TESLA_A100", 2},
    {"a2-highgpu-4g", F::kComputeEngine, 48, 340 * kGiB, "", 0, "NVIDIA_TESLA_A100", 4},
    {"a2-highgpu-8g", F::kComputeEngine, 96, 680 * kGiB, "", 0, "NVIDIA_TESLA_A100", 8},
};

constexpr std::string_view kRegions[] = {
    "asia-east1",   "asia-northeast1", "asia-southeast1", "australia-southeast1",
    "europe-west1", "europe-west2",    "europe-west3",    "europe-west4",
    "northamerica-northeast1", "us-central1", "us-east1", "us-east4", "us-west1",
};
constexpr std::string_view kTpuRegions[] = {"us-central1", "europe-west4"};

constexpr PytorchXlaImage kPytorchXla[] = {
    {"gcr.io/cloud-ml-public/training/pytorch-xla.1-11", "pytorch-1.11"},
    {"gcr.io/cloud-ml-public/training/pytorch-xla.1-10", "pytorch-1.10"},
    {"gcr.io/cloud-ml-public/training/pytorch-xla.1-9", "pytorch-1.9"},
    {"gcr.io/cloud-ml-public/training/pytorch-xla.1-7", "pytorch-1.7"},
    {"gcr.io/cloud-ml-public/training/pytorch-xla.1-6", "pytorch-1.6"},
};

}  // namespace

std::span<const MachineType> MachineTypes() { return kMachineTypes; }

const MachineType* FindMachineType(std::string_view name) {
  for (const auto& m : kMachineTypes) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::span<const AcceleratorType> AcceleratorTypes() {
  static const std::vector<AcceleratorType>* types = new std::vector<AcceleratorType>{
      {"NVIDIA_TESLA_K80", AcceleratorKind::kGpu, {1, 2, 4, 8}},
      {"NVIDIA_TESLA_P100", AcceleratorKind::kGpu, {1, 2, 4}},
      {"NVIDIA_TESLA_V100", AcceleratorKind::kGpu, {1, 2, 4, 8}},
      {"NVIDIA_TESLA_P4", AcceleratorKind::kGpu, {1, 2, 4}},
      {"NVIDIA_TESLA_T4", AcceleratorKind::kGpu, {1, 2, 4}},
      {"NVIDIA_TESLA_A100", AcceleratorKind::kGpu, {1, 2, 4, 8}},
      {"TPU_V2", AcceleratorKind::kTpu, {8}},
      {"TPU_V3", AcceleratorKind::kTpu, {8}},
      {"TPU_V2_POD", AcceleratorKind::kTpuPod, {32, 128, 256, 512}},
      {"TPU_V3_POD", AcceleratorKind::kTpuPod, {32, 128, 256}},
  };
  return *types;
}

const AcceleratorType* FindAcceleratorType(std::string_view name) {
  for (const auto& a : AcceleratorTypes()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const std::vector<RuntimeVersion>& AiPlatformRuntimeVersions() {
  static const std::vector<RuntimeVersion>* versions = [] {
    auto* v = new std::vector<RuntimeVersion>;
    // 1.0 .. 1.3: Python 2.7 only; 1.4 .. 1.14: 2.7 or 3.5; 1.15: 2.7 or 3.7.
    for (int minor = 0; minor <= 3; ++minor) {
      v->push_back({"1." + std::to_string(minor), {"2.7"}, false});
    }
    for (int minor = 4; minor <= 14; ++minor) {
      v->push_back({"1." + std::to_string(minor), {"2.7", "3.5"}, false});
    }
    v->push_back({"1.15", {"2.7", "3.7"}, true});
    // 2.1 .. 2.11 (there was no 2.10 on AI Platform Training): Python 3.7.
    for (int minor = 1; minor <= 11; ++minor) {
      if (minor == 10) continue;
      v->push_back({"2." + std::to_string(minor), {"3.7"}, minor <= 9 || minor == 11});
    }
    return v;
  }();
  return *versions;
}

std::span<const PytorchXlaImage> PytorchXlaImages() { return kPytorchXla; }
std::span<const std::string_view> DefaultRegions() { return kRegions; }
std::span<const std::string_view> DefaultTpuRegions() { return kTpuRegions; }

}  // namespace mle::model
