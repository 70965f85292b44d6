#!/usr/bin/python3
"""Independent check of Tandem's model export (no Tandem code; numpy only).

Runs export_logits_tool (argv[1]) into a scratch folder (argv[2]), then:
- parses hf/model.safetensors by the safetensors rules (8-byte little-endian header length,
  JSON header, dtype/shape/data_offsets covering the buffer exactly) and hf/config.json,
  runs a GPT-2 forward written with Hugging Face's names and Conv1D convention (x @ W + b),
  GELU and LayerNorm epsilon as config.json says;
- parses llmc/model.bin by llm.c's layout (256 int32 header, magic 20240326, version 3, then
  the 16 tensors in llm.c's order, Linear (out, in) weights, layer dimension outermost) and runs
  the same forward on those tensors;
and compares both with the logits Tandem's cpu-reference backend wrote (max |diff| <= 1e-4).
Exit 0 on success, 1 with a message on failure.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

TOL = 1e-4
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
               "U8": 1, "BOOL": 1}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    if n > 100_000_000 or 8 + n > len(data):
        fail(f"header length {n} is invalid for a {len(data)}-byte file")
    if n % 8 != 0:
        fail(f"header length {n} is not a multiple of 8 (the buffer would be unaligned)")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    buf = data[8 + n:]
    meta = header.pop("__metadata__", None)
    if meta is not None and not all(isinstance(v, str) for v in meta.values()):
        fail("__metadata__ values must be strings")
    ranges = []
    tensors = {}
    for name, info in header.items():
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype != "F32":
            fail(f"{name}: dtype {dtype}, expected F32")
        if end - begin != int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES[dtype]:
            fail(f"{name}: offsets [{begin}, {end}] do not match shape {shape}")
        ranges.append((begin, end, name))
        tensors[name] = np.frombuffer(buf[begin:end], dtype="<f4").reshape(shape).astype(np.float64)
    ranges.sort()
    pos = 0
    for begin, end, name in ranges:
        if begin != pos:
            fail(f"{name}: starts at {begin}, expected {pos} (hole or overlap)")
        pos = end
    if pos != len(buf):
        fail(f"tensors cover {pos} of {len(buf)} buffer bytes")
    return tensors


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu_new(x):  # Hugging Face's NewGELUActivation
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv, n_head):
    T, three_c = qkv.shape
    C = three_c // 3
    hs = C // n_head
    q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
    out = np.zeros((T, C))
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for h in range(n_head):
        sl = slice(h * hs, (h + 1) * hs)
        scores = q[:, sl] @ k[:, sl].T / np.sqrt(hs)
        scores[mask] = -np.inf
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        out[:, sl] = scores @ v[:, sl]
    return out


def hf_forward(sd, cfg, tokens):
    """GPT2LMHeadModel's forward in Hugging Face's names: Conv1D is x @ W + b, W (in, out)."""
    if cfg["activation_function"] != "gelu_new":
        fail("config.json activation_function " + cfg["activation_function"])
    eps = cfg["layer_norm_epsilon"]
    T = len(tokens)
    x = sd["wte.weight"][tokens] + sd["wpe.weight"][np.arange(T)]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        a = layer_norm(x, sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], eps)
        qkv = a @ sd[p + "attn.c_attn.weight"] + sd[p + "attn.c_attn.bias"]
        x = x + attention(qkv, cfg["n_head"]) @ sd[p + "attn.c_proj.weight"] + sd[p + "attn.c_proj.bias"]
        m = layer_norm(x, sd[p + "ln_2.weight"], sd[p + "ln_2.bias"], eps)
        hdn = gelu_new(m @ sd[p + "mlp.c_fc.weight"] + sd[p + "mlp.c_fc.bias"])
        x = x + hdn @ sd[p + "mlp.c_proj.weight"] + sd[p + "mlp.c_proj.bias"]
    x = layer_norm(x, sd["ln_f.weight"], sd["ln_f.bias"], eps)
    return x @ sd["wte.weight"].T  # tied output layer


def read_llmc(path):
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    if header[0] != 20240326:
        fail(f"llm.c magic {header[0]}")
    if header[1] != 3:
        fail(f"llm.c version {header[1]}, expected 3 (fp32)")
    maxT, V, L, NH, C, Vp = (int(v) for v in header[2:8])
    if any(header[8:]):
        fail("llm.c header words 8..255 must be zero")
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
              ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
              ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
              ("lnfw", (C,)), ("lnfb", (C,))]
    pos = 1024
    t = {}
    for name, shape in shapes:
        n = int(np.prod(shape)) * 4
        t[name] = np.frombuffer(data[pos:pos + n], dtype="<f4").reshape(shape).astype(np.float64)
        pos += n
    if pos != len(data):
        fail(f"llm.c file has {len(data)} bytes, its header describes {pos}")
    return t, dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp)


def llmc_to_hf(t, h):
    """llm.c's Linear (out, in) weights, transposed into Conv1D (in, out)."""
    sd = {"wte.weight": t["wte"][:h["V"]], "wpe.weight": t["wpe"],
          "ln_f.weight": t["lnfw"], "ln_f.bias": t["lnfb"]}
    names = [("ln_1.weight", "ln1w", False), ("ln_1.bias", "ln1b", False),
             ("attn.c_attn.weight", "qkvw", True), ("attn.c_attn.bias", "qkvb", False),
             ("attn.c_proj.weight", "attprojw", True), ("attn.c_proj.bias", "attprojb", False),
             ("ln_2.weight", "ln2w", False), ("ln_2.bias", "ln2b", False),
             ("mlp.c_fc.weight", "fcw", True), ("mlp.c_fc.bias", "fcb", False),
             ("mlp.c_proj.weight", "fcprojw", True), ("mlp.c_proj.bias", "fcprojb", False)]
    for i in range(h["L"]):
        for hf, lc, transpose in names:
            sd[f"h.{i}.{hf}"] = t[lc][i].T if transpose else t[lc][i]
    return sd


def compare(name, ours, expected):
    diff = float(np.max(np.abs(ours - expected)))
    print(f"{name}: max |logit difference| {diff:.3g} over {expected.size} logits")
    if not diff <= TOL:
        fail(f"{name}: logits differ by {diff} > {TOL}")


def main():
    tool, work = sys.argv[1], sys.argv[2]
    subprocess.run([tool, work], check=True)
    sys.stdout.flush()
    tokens = [int(line) for line in open(os.path.join(work, "tokens.txt"))]
    cfg = json.load(open(os.path.join(work, "hf", "config.json")))
    V = cfg["vocab_size"]
    if V not in (300, 256) or cfg["model_type"] != "gpt2" or cfg["architectures"] != ["GPT2LMHeadModel"]:
        fail(f"config.json: {cfg}")
    if cfg["layer_norm_epsilon"] != 1e-5 or cfg["n_inner"] is not None:
        fail("config.json: layer_norm_epsilon must be 1e-5 and n_inner null (4 x n_embd)")
    expected = np.fromfile(os.path.join(work, "logits.f32"), dtype="<f4").reshape(len(tokens), V)
    if not os.path.isfile(os.path.join(work, "hf", "tokenizer.model")):
        fail("the tokenizer was not copied beside the weights")

    sd = read_safetensors(os.path.join(work, "hf", "model.safetensors"))
    want = {"wte.weight": [V, cfg["n_embd"]], "h.0.attn.c_attn.weight": [cfg["n_embd"], 3 * cfg["n_embd"]],
            "h.0.mlp.c_proj.weight": [4 * cfg["n_embd"], cfg["n_embd"]]}
    for name, shape in want.items():
        if list(sd[name].shape) != shape:
            fail(f"{name} has shape {list(sd[name].shape)}, expected {shape}")
    if "lm_head.weight" in sd:
        fail("lm_head.weight must not be written (tied to wte)")
    compare("safetensors", hf_forward(sd, cfg, tokens), expected)

    t, h = read_llmc(os.path.join(work, "llmc", "model.bin"))
    if (h["V"], h["L"], h["NH"], h["C"], h["maxT"]) != (V, cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"]):
        fail(f"llm.c header {h} disagrees with config.json")
    lcfg = dict(cfg, n_layer=h["L"], n_head=h["NH"])
    compare("llm.c", hf_forward(llmc_to_hf(t, h), lcfg, tokens)[:, :V], expected)
    print("PASS")


if __name__ == "__main__":
    main()
