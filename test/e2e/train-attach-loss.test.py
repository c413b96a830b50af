"""Helper of train-attach-loss.test: inputs from a fixture's reference file,
and the comparison of zero-run's loss and gradients with PyTorch's."""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

mode, ref_path = sys.argv[1], sys.argv[2]
ref = load_file(ref_path)
if mode == "inputs":
    save_file({k[len("input."):]: v for k, v in ref.items() if k.startswith("input.")},
              sys.argv[3])
    sys.exit(0)
out = load_file(sys.argv[3])
ok = np.allclose(out["loss"], ref["torch.loss"], rtol=1e-5, atol=1e-6)
print("loss", "matches" if ok else "DIFFERS from", "torch.loss", out["loss"], ref["torch.loss"])
names = sorted(k for k in ref if k.startswith("grad."))
good = [k for k in names
        if k in out and np.allclose(out[k], ref[k], rtol=1e-4, atol=1e-6)]
extra = sorted(k for k in out if k.startswith("grad.") and k not in ref)
print(f"gradients: {len(good)} of {len(names)} match" + (f"; unexpected: {extra}" if extra else ""))
for k in names:
    if k not in good:
        print("  mismatch", k)
sys.exit(0 if ok and len(good) == len(names) and not extra else 1)
