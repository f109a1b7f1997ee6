"""What a replica sees of the machine's GPUs, for tests/e2e/test_gpu_host.py:
one line "REPORT {json}" with its identity, the NVIDIA device nodes of its
/dev, CUDA_VISIBLE_DEVICES and, where torch is importable, whether CUDA
works and a float64 matrix product on the GPU against the CPU's."""

import json
import os


def main():
    report = {
        "uid": os.getuid(),
        "devices": sorted(d for d in os.listdir("/dev") if d.startswith("nvidia")),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    try:
        import torch
        report["cuda"] = torch.cuda.is_available()
        if report["cuda"]:
            report["count"] = torch.cuda.device_count()
            report["name"] = torch.cuda.get_device_name(0)
            g = torch.Generator().manual_seed(7)
            a = torch.randn(512, 512, generator=g, dtype=torch.float64)
            b = torch.randn(512, 512, generator=g, dtype=torch.float64)
            report["matmul_max_error"] = float(((a.cuda() @ b.cuda()).cpu() - a @ b).abs().max())
    except Exception as e:  # reported, not raised: the test says what failed
        report["error"] = repr(e)
    print("REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
