#!/usr/bin/env python3
"""export_mlp.py - writes the PyTorch-exported test model of tests/onnx: a small MLP with a
LayerNorm, exported by torch.onnx.export (opset 17) with a symbolic batch axis, and the
exporter's own outputs at batch sizes 1, 8 and 32 (inputs and outputs as .npy).

Not run by CI (CI never installs PyTorch); a developer regenerates the files with Debian's
python3-torch:  /usr/bin/python3 tests/onnx/torch_export/export_mlp.py tests/onnx/torch_export
"""
import os
import sys

import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.fc1(x)))
        return torch.softmax(self.fc2(h), dim=-1)


def main(out_dir):
    torch.manual_seed(7)
    model = Mlp().eval()
    x = torch.randn(8, 16)
    torch.onnx.export(model, (x,), os.path.join(out_dir, "mlp.onnx"), opset_version=17,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    gen = torch.Generator().manual_seed(11)
    for batch in (1, 8, 32):
        xb = torch.randn(batch, 16, generator=gen)
        with torch.no_grad():
            yb = model(xb)
        np.save(os.path.join(out_dir, f"x_{batch}.npy"), xb.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, f"y_{batch}.npy"), yb.numpy().astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
