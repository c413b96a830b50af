"""Writes copies of the mlp_external fixture whose external-data entries are
broken in one way each, for outputs.test / external-data.test.

usage: mutate_external.py MODELS_DIR OUT_DIR
"""
import os
import shutil
import sys

import onnx

models, out = sys.argv[1], sys.argv[2]
src = os.path.join(models, "mlp_external.onnx")
shutil.copy(os.path.join(models, "mlp_external.onnx.data"), os.path.join(out, "mlp_external.onnx.data"))


def mutate(name, fn):
    m = onnx.load(src, load_external_data=False)
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            fn(t)
            break
    onnx.save(m, os.path.join(out, name + ".onnx"))


def set_key(key, value):
    def fn(t):
        for kv in t.external_data:
            if kv.key == key:
                kv.value = value
                return
        kv = t.external_data.add()
        kv.key, kv.value = key, value
    return fn


shutil.copy(src, os.path.join(out, "good.onnx"))
mutate("absolute", set_key("location", "/etc/passwd"))
mutate("escapes", set_key("location", "../mlp_external.onnx.data"))
mutate("offset-text", set_key("offset", "12abc"))
mutate("length-empty", set_key("length", ""))
mutate("length-wrong", set_key("length", "4"))
mutate("offset-past-end", set_key("offset", "99999999"))
