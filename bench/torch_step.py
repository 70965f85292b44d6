#!/usr/bin/python3
"""PyTorch's side of bench/compare_torch_step.py: trains the model that `tandem-bench-step --dump`
wrote, on the same tokens, with the same AdamW, and times every step as tandem-bench-step does
(forward + backward + gradient clipping + AdamW update).

The model is written as a PyTorch user would write it (nanoGPT's layout, without its fused
attention, which PyTorch 1.13 lacks): F.linear, F.layer_norm, F.gelu(approximate="tanh"), a
masked softmax over the full (T, T) scores, F.cross_entropy; the output layer tied to wte.

Needs Debian's python3-torch (1.13) on the CPU. Threads: torch.set_num_threads(--threads); which
BLAS PyTorch calls is chosen by the caller through LD_LIBRARY_PATH (see compare_torch_step.py).
With --device cuda it trains on GPU 0 in fp32 with TF32 off (Tandem's CUDA backend uses none) and
times each step between two synchronisations.

Dimensions: B batch, T sequence, C channels, NH heads, hs = C / NH, V vocab, Vp padded vocab.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F


def load_parameters(dump_dir, device):
    """{name: leaf tensor} from layout.tsv and parameters.f32 (tandem's flat buffer)."""
    flat = np.fromfile(os.path.join(dump_dir, "parameters.f32"), dtype="<f4")
    tensors = {}
    with open(os.path.join(dump_dir, "layout.tsv")) as table:
        for line in table:
            name, offset, *shape = line.split("\t")
            shape = [int(d) for d in shape]
            begin = int(offset)
            values = flat[begin:begin + math.prod(shape)].reshape(shape)
            tensors[name] = torch.tensor(values, device=device, requires_grad=True)
    return tensors


def forward(p, inputs, targets, layers, heads, vocab, sdpa=False):
    """Mean cross-entropy loss. inputs, targets (B,T) int64."""
    B, T = inputs.shape
    wte = p["wte"]  # (Vp, C)
    C = wte.shape[1]
    hs = C // heads
    x = wte[inputs] + p["wpe"][:T]  # (B,T,C)
    mask = torch.ones(T, T, dtype=torch.bool, device=inputs.device).tril()
    for layer in range(layers):
        b = f"blocks.{layer}."
        h = F.layer_norm(x, (C, ), p[b + "ln1.weight"], p[b + "ln1.bias"], 1e-5)
        qkv = F.linear(h, p[b + "attn.qkv.weight"], p[b + "attn.qkv.bias"])  # (B,T,3C)
        q, k, v = (t.view(B, T, heads, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        if sdpa:  # PyTorch 2's fused attention, as nanoGPT uses it
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B,NH,T,T)
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, p[b + "attn.proj.weight"], p[b + "attn.proj.bias"])
        h = F.layer_norm(x, (C, ), p[b + "ln2.weight"], p[b + "ln2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p[b + "mlp.fc.weight"], p[b + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[b + "mlp.proj.weight"], p[b + "mlp.proj.bias"])
    x = F.layer_norm(x, (C, ), p["lnf.weight"], p["lnf.bias"], 1e-5)
    logits = F.linear(x, wte[:vocab])  # (B,T,V): the padded rows are never predicted
    return F.cross_entropy(logits.view(-1, vocab), targets.reshape(-1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", required=True, help="tandem-bench-step --dump DIR")
    parser.add_argument("--run", required=True, help="tandem-bench-step --json FILE of that run")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--json", required=True, help="where to write losses and step times")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--sdpa", action="store_true",
                        help="attention through F.scaled_dot_product_attention (PyTorch 2)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    torch.set_num_threads(args.threads)
    run = json.load(open(args.run))["runs"][0]
    B, T, vocab = run["batch"], run["seqLen"], run["vocab"]
    total_steps = run["warmup"] + run["steps"]
    tokens = np.fromfile(os.path.join(args.dump, "tokens.i32"), dtype="<i4")
    tokens = torch.from_numpy(tokens.astype(np.int64).reshape(total_steps, 2, B, T)).to(device)

    p = load_parameters(args.dump, device)
    # tandem's AdamWConfig defaults and tandem-bench-step's lr; decay on matrices only.
    decays = [t for t in p.values() if t.dim() >= 2]
    others = [t for t in p.values() if t.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decays, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}],
                                  lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    params = list(p.values())
    losses, step_ms, cpu_ms = [], [], []
    for step in range(total_steps):
        inputs, targets = tokens[step, 0], tokens[step, 1]
        sync()
        cpu_start, start = time.process_time(), time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = forward(p, inputs, targets, run["layers"], run["heads"], vocab, args.sdpa)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        sync()
        end, cpu_end = time.perf_counter(), time.process_time()
        losses.append(loss.item())
        if step >= run["warmup"]:
            step_ms.append(1e3 * (end - start))
            cpu_ms.append(1e3 * (cpu_end - cpu_start))
    with open(args.json, "w") as out:
        json.dump({"backend": f"pytorch {torch.__version__} {device.type}" + (" sdpa" if args.sdpa else ""), "threads": torch.get_num_threads(),
                   "losses": losses, "stepMs": step_ms, "cpuMs": cpu_ms}, out)


if __name__ == "__main__":
    main()
