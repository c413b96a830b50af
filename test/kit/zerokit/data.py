"""Data the drivers share.

gpl3_split(work): the GNU GPL v3 as Debian ships it (GPL3) as byte tokens
(uint16), every tenth 2 KiB chunk held out: writes WORK/train.bin and
WORK/held.bin and returns (train tokens, held tokens, train path, held path), or
None when the text is missing.

token_window(seed, step, row, count): the first token of row `row` of step `step`
among `count` window starts, as zero-run --tokens draws it (TokenData.h's
tokenWindow, written from its description: mix64, then a 128-bit multiply).
"""
import os

GPL3 = "/usr/share/common-licenses/GPL-3"


def gpl3_split(work):
    if not os.path.exists(GPL3):
        return None
    import numpy as np
    text = np.frombuffer(open(GPL3, "rb").read(), np.uint8).astype(np.uint16)
    held = np.arange(len(text)) // 2048 % 10 == 9
    paths = os.path.join(work, "train.bin"), os.path.join(work, "held.bin")
    text[~held].tofile(paths[0])
    text[held].tofile(paths[1])
    return text[~held], text[held], paths[0], paths[1]


M64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def token_window(seed, step, row, count):
    key = mix64(mix64(seed) ^ mix64((step + 0x8CB92BA72F3D8DD7) & M64))
    v = mix64((key + row * 0x9E3779B97F4A7C15) & M64)
    return (v * count) >> 64
