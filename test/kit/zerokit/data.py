"""Data the drivers share.

gpl3_split(work): the GNU GPL v3 as Debian ships it (GPL3) as byte tokens
(uint16), every tenth 2 KiB chunk held out: writes WORK/train.bin and
WORK/held.bin and returns (train tokens, held tokens, train path, held path), or
None when the text is missing.
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
