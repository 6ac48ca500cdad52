#!/usr/bin/env python3
"""The safetensors reader of the Python package (python/rumor/safetensors.py, installed as
rumor.safetensors), importable from the source tree without the built package:

    sys.path.insert(0, "tools"); import safetensors_torch
    state_dict, metadata = safetensors_torch.load("model.safetensors")

    tools/safetensors_torch.py MODEL.safetensors [-o OUT.pt]
"""
import importlib.util
import os
import sys

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "rumor", "safetensors.py")
_spec = importlib.util.spec_from_file_location("safetensors_torch_impl", _path)
_impl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_impl)
globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})

if __name__ == "__main__":
    sys.exit(_impl.main())
