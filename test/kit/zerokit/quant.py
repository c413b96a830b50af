"""ZeRO++'s quantized weight gather (qwZ), written out for the drivers' references.

quantize_dequantize(x, bits, block): one flat shard through blockwise symmetric
  quantization and back, in float64 (the scale rounded to float32 as the
  runtime keeps it).
sharded_qdq(w, ranks, bits, block): a parameter as every rank sees it after a
  qwZ gather: flattened, zero-padded to a multiple of ranks, each rank's shard
  quantized on its own, the padding dropped.
"""
import numpy as np


def quantize_dequantize(x, bits, block):
    qmax = 127 if bits == 8 else 7
    out = np.empty(x.shape, np.float32)
    for b in range(0, x.size, block):
        blk = x[b:b + block].astype(np.float64)
        scale = np.float32(np.abs(blk).max() / qmax)
        if scale == 0:
            out[b:b + block] = 0
            continue
        q = np.clip(np.rint(blk / np.float64(scale)), -qmax, qmax)
        out[b:b + block] = (q * np.float64(scale)).astype(np.float32)
    return out


def sharded_qdq(w, ranks, bits, block):
    flat = w.reshape(-1)
    s = -(-flat.size // ranks)
    padded = np.zeros(s * ranks, np.float32)
    padded[:flat.size] = flat
    deq = np.concatenate([quantize_dequantize(padded[r * s:(r + 1) * s], bits, block)
                          for r in range(ranks)])
    return deq[:flat.size].reshape(w.shape)
