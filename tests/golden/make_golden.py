#!/usr/bin/python3
"""Golden values for Tandem's GPT + AdamW, computed by an independent PyTorch implementation.

Run by hand (not in CI); needs Debian's python3-torch and python3-numpy:

    /usr/bin/python3 tests/golden/make_golden.py          # (re)writes tests/golden/data/
    /usr/bin/python3 tests/golden/make_golden.py --check  # also prints how far float32 rounding
                                                          # and deliberate mistakes move results

The model is written from the description in DESIGN.md §4 with torch.nn building blocks, not
translated from kernels/: token + position embeddings, pre-LayerNorm blocks (eps 1e-5), causal
multi-head attention with one fused qkv Linear (3C, C) whose output splits into q, k, v in that
order and into heads along channels, output projection, GELU (tanh) MLP of width 4C, final
LayerNorm, logits through the token embedding (tied), mean cross-entropy.

Everything runs in float64 from float32 starting weights, so the expected values are as exact as
float32 files allow. The optimizer is torch.optim.AdamW after torch.nn.utils.clip_grad_norm_,
with two parameter groups (weight decay on tensors of two or more dimensions only).
"""

import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the case ----------------------------------------------------------------------------------
CONFIG = dict(layers=2, heads=2, channels=16, maxSeqLen=8, vocabSize=256)
BATCH = 2
SEQ = 8  # t of every forward; equals maxSeqLen so every position embedding is used
SEED = 5  # chosen for small float32 rounding effects through AdamW (see README.md)
ADAMW = dict(beta1=0.9, beta2=0.95, eps=1e-8, weightDecay=0.1, clipNorm=1.0)
# One learning rate per step, all three on the same batch; large enough that parameters move
# visibly. The gradient norm is above clipNorm in all three steps (about 3.9, 2.5, 1.7), so
# clipping acts, with a different factor each step.
LRS = [1e-2, 5e-2, 2e-2]
# A second run from the same start whose clipping threshold no step reaches: the unclipped path.
NOCLIP_NORM = 100.0
# Scales of the random starting weights: larger than GPT-2's 0.02 so that attention is far from
# uniform, GELU works in its curved region, and biases and LayerNorm affine terms are not trivial.
SCALES = {
    "wte": 0.3, "wpe": 0.3,
    "ln.weight": 0.2, "ln.bias": 0.1,  # LayerNorm weight = 1 + scale * N(0, 1)
    "attn.qkv.weight": 0.35, "attn.qkv.bias": 0.1,
    "attn.proj.weight": 0.25, "attn.proj.bias": 0.1,
    "mlp.fc.weight": 0.35, "mlp.fc.bias": 0.1,
    "mlp.proj.weight": 0.15, "mlp.proj.bias": 0.1,
}
LN_EPS = 1e-5

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")


# ---- the model ---------------------------------------------------------------------------------
# The keyword "variant" arguments exist only for --check, which shows that the committed values
# tell the right model from a subtly wrong one.
class Block(nn.Module):
    def __init__(self, C, NH, gelu="tanh", head_split="contiguous", qkv_order="qkv"):
        super().__init__()
        self.ln1 = nn.LayerNorm(C, eps=LN_EPS)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=LN_EPS)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        self.act = nn.GELU(approximate=gelu)
        self.NH = NH
        self.head_split = head_split
        self.qkv_order = qkv_order

    def heads(self, x):  # (B,T,C) -> (B,NH,T,hs)
        B, T, C = x.shape
        if self.head_split == "contiguous":  # head h owns channels [h*hs, (h+1)*hs)
            return x.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        return x.view(B, T, C // self.NH, self.NH).permute(0, 3, 1, 2)  # h, h+NH, h+2NH, ...

    def unheads(self, y):  # (B,NH,T,hs) -> (B,T,C)
        B, NH, T, hs = y.shape
        if self.head_split == "contiguous":
            return y.transpose(1, 2).reshape(B, T, NH * hs)
        return y.permute(0, 2, 3, 1).reshape(B, T, NH * hs)

    def attention(self, x):
        B, T, C = x.shape
        parts = dict(zip(self.qkv_order, self.qkv(x).split(C, dim=2)))
        q, k, v = self.heads(parts["q"]), self.heads(parts["k"]), self.heads(parts["v"])
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        return self.proj(self.unheads(F.softmax(scores, dim=-1) @ v))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fcproj(self.act(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, cfg, **variant):
        super().__init__()
        C = cfg["channels"]
        self.wte = nn.Embedding(cfg["vocabSize"], C)
        self.wpe = nn.Embedding(cfg["maxSeqLen"], C)
        self.blocks = nn.ModuleList(
            Block(C, cfg["heads"], **variant) for _ in range(cfg["layers"]))
        self.lnf = nn.LayerNorm(C, eps=LN_EPS)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied output layer
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))

    def ordered(self):
        """(our name, torch parameter) in the order of Tandem's ParameterLayout."""
        out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
        for l, b in enumerate(self.blocks):
            p = f"blocks.{l}."
            out += [(p + "ln1.weight", b.ln1.weight), (p + "ln1.bias", b.ln1.bias),
                    (p + "attn.qkv.weight", b.qkv.weight), (p + "attn.qkv.bias", b.qkv.bias),
                    (p + "attn.proj.weight", b.proj.weight), (p + "attn.proj.bias", b.proj.bias),
                    (p + "ln2.weight", b.ln2.weight), (p + "ln2.bias", b.ln2.bias),
                    (p + "mlp.fc.weight", b.fc.weight), (p + "mlp.fc.bias", b.fc.bias),
                    (p + "mlp.proj.weight", b.fcproj.weight),
                    (p + "mlp.proj.bias", b.fcproj.bias)]
        out += [("lnf.weight", self.lnf.weight), ("lnf.bias", self.lnf.bias)]
        return out


def scale_for(name):
    short = name.split(".", 2)[-1] if name.startswith("blocks.") else name
    if short in ("ln1.weight", "ln2.weight", "lnf.weight"):
        return "ln.weight"
    if short in ("ln1.bias", "ln2.bias", "lnf.bias"):
        return "ln.bias"
    return short


def make_inputs():
    """Starting weights (float32, by our name), inputs and targets (BATCH, SEQ)."""
    rng = np.random.default_rng(SEED)
    init = {}
    for name, p in Gpt(CONFIG).ordered():
        kind = scale_for(name)
        values = SCALES[kind] * rng.standard_normal(tuple(p.shape))
        if kind == "ln.weight":
            values = 1.0 + values
        init[name] = values.astype(np.float32)
    stream = rng.integers(0, CONFIG["vocabSize"], size=(BATCH, SEQ + 1))
    return init, stream[:, :-1].astype(np.int64), stream[:, 1:].astype(np.int64)


def flat(model, what):
    return torch.cat([(p.grad if what == "grad" else p).detach().reshape(-1)
                      for _, p in model.ordered()])


def run(init, inputs, targets, clip_norm=ADAMW["clipNorm"], dtype=torch.float64,
        decay_biases=False, **variant):
    """Loss and gradients at the start, then len(LRS) AdamW steps on the same batch."""
    model = Gpt(CONFIG, **variant).to(dtype)
    with torch.no_grad():
        for name, p in model.ordered():
            p.copy_(torch.from_numpy(init[name]))
    params = [p for _, p in model.ordered()]
    decays = [p.dim() >= 2 or decay_biases for p in params]
    opt = torch.optim.AdamW(
        [{"params": [p for p, d in zip(params, decays) if d],
          "weight_decay": ADAMW["weightDecay"]},
         {"params": [p for p, d in zip(params, decays) if not d], "weight_decay": 0.0}],
        lr=LRS[0], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"])
    idx, tgt = torch.from_numpy(inputs), torch.from_numpy(targets)
    result = dict(losses=[], gradNorms=[], params=[])
    for step, lr in enumerate(LRS):
        opt.zero_grad(set_to_none=False)
        loss = model(idx, tgt)
        loss.backward()
        if step == 0:
            result["grads"] = flat(model, "grad").clone()
        # Returns the norm before clipping; scales by clip_norm / (norm + 1e-6) when above.
        norm = nn.utils.clip_grad_norm_(params, clip_norm) if clip_norm else \
            torch.sqrt(sum((p.grad ** 2).sum() for p in params))
        result["losses"].append(float(loss))
        result["gradNorms"].append(float(norm))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        result["params"].append(flat(model, "param").clone())
    with torch.no_grad():
        result["finalLoss"] = float(model(idx, tgt))
    return result


def write_f32(path, tensor):
    np.asarray(tensor, dtype="<f4").tofile(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="also print how far float32 rounding and deliberate mistakes move "
                             "the results, in the test's metric")
    args = parser.parse_args()

    init, inputs, targets = make_inputs()
    named = Gpt(CONFIG).ordered()
    names = [n for n, _ in named]
    shapes = {n: list(p.shape) for n, p in named}
    C = CONFIG["channels"]
    p0 = torch.cat([torch.from_numpy(init[n]).double().reshape(-1) for n in names])
    ref = run(init, inputs, targets)
    noclip = run(init, inputs, targets, clip_norm=NOCLIP_NORM)
    assert all(n > ADAMW["clipNorm"] for n in ref["gradNorms"])
    assert all(n < NOCLIP_NORM for n in noclip["gradNorms"])

    os.makedirs(DATA, exist_ok=True)
    files = dict(params0="params0.bin", grads0="grads0.bin",
                 params=[f"params{k + 1}.bin" for k in range(len(LRS))],
                 noclipParams="noclip_params%d.bin" % len(LRS))
    write_f32(os.path.join(DATA, files["params0"]), p0.numpy())
    write_f32(os.path.join(DATA, files["grads0"]), ref["grads"].numpy())
    for name, p in zip(files["params"], ref["params"]):
        write_f32(os.path.join(DATA, name), p.numpy())
    write_f32(os.path.join(DATA, files["noclipParams"]), noclip["params"][-1].numpy())
    meta = {
        "about": "Written by tests/golden/make_golden.py with PyTorch %s in float64; "
                 "see tests/golden/README.md" % torch.__version__,
        "config": CONFIG,
        "batch": BATCH,
        "seq": SEQ,
        "inputs": inputs.reshape(-1).tolist(),  # (batch, seq) row-major
        "targets": targets.reshape(-1).tolist(),
        "adamw": ADAMW,
        "lrs": LRS,
        "losses": ref["losses"],  # loss before step k, on params k
        "finalLoss": ref["finalLoss"],  # loss on the params after the last step
        "gradNorms": ref["gradNorms"],  # global gradient norm before clipping, step k
        "noclipNorm": NOCLIP_NORM,
        "noclipLosses": noclip["losses"],
        "noclipGradNorms": noclip["gradNorms"],
        "tensors": [{"name": n, "shape": shapes[n]} for n in names],
        # The gradient of the key bias is zero in exact arithmetic (a constant added to all
        # scores of one query cancels in the softmax), so after AdamW's normalisation its update
        # is float32 rounding noise of size up to lr: compare gradients there, not updates.
        "updateExclusions": [{"tensor": f"blocks.{l}.attn.qkv.bias", "begin": C, "end": 2 * C}
                             for l in range(CONFIG["layers"])],
        "files": files,
    }
    with open(os.path.join(DATA, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print("parameters:", p0.numel())
    print("losses:", " ".join("%.9f" % x for x in ref["losses"]), "final %.9f" % ref["finalLoss"])
    print("grad norms:", " ".join("%.6f" % x for x in ref["gradNorms"]))

    if args.check:
        check(init, inputs, targets, ref, noclip, p0, names, shapes, meta)


def check(init, inputs, targets, ref, noclip, p0, names, shapes, meta):
    """Errors in the C++ test's metric: per tensor max|x - ref| / max|ref|, worst tensor; for
    the steps the same on the updates (params k - params 0), without the excluded ranges."""
    tensors, start = [], 0
    for n in names:
        size = int(np.prod(shapes[n]))
        keep = torch.ones(size, dtype=torch.bool)
        for ex in meta["updateExclusions"]:
            if ex["tensor"] == n:
                keep[ex["begin"]:ex["end"]] = False
        tensors.append((start, size, keep))
        start += size

    def error(x, y, keep_all=False):
        worst = 0.0
        for start, size, keep in tensors:
            a, b = x[start:start + size].double(), y[start:start + size]
            if not keep_all:
                a, b = a[keep], b[keep]
            worst = max(worst, float((a - b).abs().max() / b.abs().max()))
        return worst

    def show(label, other, other_noclip):
        loss = max(abs(a - b) / abs(b) for a, b in zip(other["losses"], ref["losses"]))
        grads = error(other["grads"], ref["grads"], keep_all=True)
        steps = [error(p.double() - p0, r - p0) for p, r in zip(other["params"], ref["params"])]
        nc = error(other_noclip["params"][-1].double() - p0, noclip["params"][-1] - p0)
        print("%-26s loss %.1e  grads %.1e  steps %s  noclip %.1e" % (
            label, loss, grads, " ".join("%.1e" % s for s in steps), nc))

    def both(**kw):
        return run(init, inputs, targets, **kw), \
            run(init, inputs, targets, clip_norm=NOCLIP_NORM, **kw)

    show("torch float32 (rounding)", *both(dtype=torch.float32))
    show("GELU erf form", *both(gelu="none"))
    show("heads interleaved", *both(head_split="interleaved"))
    show("q and k swapped", *both(qkv_order="kqv"))
    show("weight decay on biases", *both(decay_biases=True))
    no = run(init, inputs, targets, clip_norm=None)
    show("no clipping", no, no)


if __name__ == "__main__":
    main()
