#!/usr/bin/python3
"""Tandem's fast CPU backend against PyTorch on the same model and data, in the same run.

For every config and thread count it runs tandem-bench-step (which writes its start
parameters and tokens with --dump) and bench/torch_step.py (PyTorch trains that same model on
those tokens), alternately, --rounds times, the order swapped every round so that neither side
always meets the same load. It checks that both report the same loss at every step (fails with
exit code 1 when any differs by more than --loss-tolerance) and prints per side the min and
median over rounds of each run's median step time, the CPU time per step, the ratio of each
round's PyTorch time to its Tandem time, and the load average during the runs.

PyTorch is Debian's python3-torch (1.13) with the OpenMP build of OpenBLAS (libopenblas0-openmp;
it is put first on PyTorch's library path, so the system's default BLAS stays as it is).
Run it with `nice -n 10` on a shared machine.

--baseline-bin runs a second tandem-bench-step (e.g. main's build) in the same rounds, in rotating
order with the other two, and reports its times beside them: a before/after under the same load.
Its losses must match PyTorch's too. --baseline-backend NAME does the same with another backend
of the same (or the baseline) binary, e.g. cpu-openblas: the fast backend with every product on
OpenBLAS, against the own AVX-512 GEMM that `cpu` uses where the CPU has AVX-512.

With --backend cuda both sides train on GPU 0 instead (Tandem's CUDA backend; PyTorch in fp32 with
TF32 off, the python that has a CUDA PyTorch given with --python); --threads is then ignored.
--torch-openblas-core NAME sets OPENBLAS_CORETYPE for PyTorch's OpenBLAS: Debian 12's OpenBLAS
(0.3.21) does not know AMD Zen 5 and runs its AVX2 (Haswell) kernels there; SkylakeX gives
PyTorch the AVX-512 kernels that a newer OpenBLAS would pick.
--sdpa gives PyTorch 2's fused attention (F.scaled_dot_product_attention) instead of the
written-out one.

Usage: compare_torch_step.py --bin BUILD/bench/tandem-bench-step [--baseline-bin OTHER]
       [--baseline-backend cpu-openblas]
       [--configs small,medium] [--threads 1,2] [--batch 8] [--rounds 5] [--steps 5] [--warmup 1] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OPENMP_BLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def has_baseline(args):
    return bool(args.baseline_bin or args.baseline_backend)


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_tandem(args, config, threads, dump_dir, out_json, dump, binary=None, backend=None):
    command = [binary or args.bin, "--backend", backend or args.backend, "--config", config, "--batch", str(args.batch),
               "--threads", str(threads), "--steps", str(args.steps), "--warmup",
               str(args.warmup), "--json", out_json]
    if dump:
        command += ["--dump", dump_dir]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    run = json.load(open(out_json))["runs"][0]
    return {"stepMs": run["stepMs"], "cpuMs": run["cpuMsMedian"], "losses": run["losses"]}


def run_torch(args, threads, dump_dir, tandem_json, out_json):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env["LD_LIBRARY_PATH"] = ":".join(p for p in [args.torch_blas, env.get("LD_LIBRARY_PATH")] if p)
    if args.torch_openblas_core:
        env["OPENBLAS_CORETYPE"] = args.torch_openblas_core
    device = "cuda" if args.backend.startswith("cuda") else "cpu"
    subprocess.run([args.python, os.path.join(HERE, "torch_step.py"), "--dump", dump_dir,
                    "--run", tandem_json, "--threads", str(threads), "--json", out_json,
                    "--device", device] + (["--sdpa"] if args.sdpa else []), check=True, env=env)
    run = json.load(open(out_json))
    return {"stepMs": run["stepMs"], "cpuMs": statistics.median(run["cpuMs"]),
            "losses": run["losses"]}


def compare(args, config, threads, work):
    dump_dir = os.path.join(work, f"{config}-{threads}")
    os.makedirs(dump_dir, exist_ok=True)
    tandem_json = os.path.join(dump_dir, "tandem.json")
    first_json = os.path.join(dump_dir, "tandem-first.json")
    torch_json = os.path.join(dump_dir, "torch.json")
    baseline_json = os.path.join(dump_dir, "baseline.json")
    sides = ["tandem", "torch"] + (["baseline"] if has_baseline(args) else [])
    rounds = []
    for r in range(args.rounds):
        loads = [load_average()]
        # Round 0 starts with Tandem: its --dump writes what PyTorch trains on. Later rounds
        # rotate the order, so that no side always meets the same load.
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        result = {}
        for side in order:
            if side == "tandem":
                result["tandem"] = run_tandem(args, config, threads, dump_dir,
                                              first_json if r == 0 else tandem_json, r == 0)
            elif side == "baseline":
                result["baseline"] = run_tandem(args, config, threads, dump_dir, baseline_json,
                                                False, args.baseline_bin, args.baseline_backend)
            else:
                result["torch"] = run_torch(args, threads, dump_dir, first_json, torch_json)
            loads.append(load_average())
        result["load"] = max(loads)
        rounds.append(result)
        t = statistics.median(result["tandem"]["stepMs"])
        p = statistics.median(result["torch"]["stepMs"])
        line = (f"  {config} {threads} thread(s) round {r + 1}: tandem {t:.1f} ms "
                f"(cpu {result['tandem']['cpuMs']:.1f}), pytorch {p:.1f} ms "
                f"(cpu {result['torch']['cpuMs']:.1f})")
        if has_baseline(args):
            line += (f", baseline {statistics.median(result['baseline']['stepMs']):.1f} ms "
                     f"(cpu {result['baseline']['cpuMs']:.1f})")
        print(f"{line}, load {result['load']:.1f}", flush=True)

    # Same model, same tokens, same AdamW: the same loss at every step.
    worst = max(abs(a - b) for rnd in rounds for other in sides[2:] + ["tandem"]
                for a, b in zip(rnd[other]["losses"], rnd["torch"]["losses"]))
    tandem_ms = [statistics.median(rnd["tandem"]["stepMs"]) for rnd in rounds]
    torch_ms = [statistics.median(rnd["torch"]["stepMs"]) for rnd in rounds]
    tandem_cpu = [rnd["tandem"]["cpuMs"] for rnd in rounds]
    torch_cpu = [rnd["torch"]["cpuMs"] for rnd in rounds]
    ratios = [p / t for p, t in zip(torch_ms, tandem_ms)]
    tokens = args.batch * json.load(open(first_json))["runs"][0]["seqLen"]
    baseline = {}
    if has_baseline(args):
        base_ms = [statistics.median(rnd["baseline"]["stepMs"]) for rnd in rounds]
        base_cpu = [rnd["baseline"]["cpuMs"] for rnd in rounds]
        baseline = {
            "baselineBin": args.baseline_bin or args.bin,
            "baselineBackend": args.baseline_backend or args.backend,
            "baselineStepMs": {"min": min(base_ms), "median": statistics.median(base_ms)},
            "baselineCpuMs": {"min": min(base_cpu), "median": statistics.median(base_cpu)},
            "baselineSpeedup": {"ofMins": min(torch_ms) / min(base_ms),
                                "ofCpuMedians": statistics.median(torch_cpu) /
                                statistics.median(base_cpu)},
        }
    return baseline | {
        "config": config, "threads": threads, "batch": args.batch, "tokensPerStep": tokens,
        "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
        "tandemStepMs": {"min": min(tandem_ms), "median": statistics.median(tandem_ms)},
        "torchStepMs": {"min": min(torch_ms), "median": statistics.median(torch_ms)},
        "tandemCpuMs": {"min": min(tandem_cpu), "median": statistics.median(tandem_cpu)},
        "torchCpuMs": {"min": min(torch_cpu), "median": statistics.median(torch_cpu)},
        "speedup": {"ofMins": min(torch_ms) / min(tandem_ms),
                    "ofMedians": statistics.median(torch_ms) / statistics.median(tandem_ms),
                    "perRoundMin": min(ratios), "perRoundMedian": statistics.median(ratios),
                    "perRoundMax": max(ratios),
                    "ofCpuMedians": statistics.median(torch_cpu) / statistics.median(tandem_cpu)},
        "load": {"min": min(r["load"] for r in rounds), "max": max(r["load"] for r in rounds)},
        # libgomp spins at PyTorch's barriers unless this says PASSIVE: on a loaded machine that
        # decides its two-thread times (docs/benchmarks.md)
        "torchOmpWaitPolicy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "torchAttention": "sdpa" if args.sdpa else "written out", "backend": args.backend,
        "maxLossDifference": worst,
        "firstLoss": rounds[0]["tandem"]["losses"][0],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, help="path of tandem-bench-step")
    parser.add_argument("--baseline-bin",
                        help="another tandem-bench-step (e.g. main's) run in the same rounds")
    parser.add_argument("--baseline-backend",
                        help="the baseline's backend (e.g. cpu-openblas); default --backend")
    parser.add_argument("--configs", default="small,medium")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per run")
    parser.add_argument("--loss-tolerance", type=float, default=1e-3)
    parser.add_argument("--torch-openblas-core",
                        help="OPENBLAS_CORETYPE for PyTorch's OpenBLAS, e.g. SkylakeX on a CPU "
                             "that OpenBLAS 0.3.21 does not know (Zen 5 runs its Haswell kernels)")
    parser.add_argument("--torch-blas", default=OPENMP_BLAS,
                        help="folder put first on PyTorch's library path (its BLAS)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--backend", default="cpu", help="Tandem's backend: cpu or cuda")
    parser.add_argument("--python", default="/usr/bin/python3", help="the python with PyTorch")
    parser.add_argument("--sdpa", action="store_true",
                        help="PyTorch's attention through F.scaled_dot_product_attention")
    args = parser.parse_args()
    if args.backend not in ("cpu", "cuda"):
        parser.error("--backend is cpu or cuda")
    if args.backend == "cuda":
        args.threads = "1"
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    if args.backend == "cpu" and not os.path.exists(os.path.join(args.torch_blas, "libblas.so.3")):
        sys.exit(f"compare_torch_step: no libblas.so.3 in {args.torch_blas} "
                 "(apt-get install libopenblas0-openmp, or give --torch-blas)")

    header = (f"{'config':8} {'thr':>3} {'tandem ms':>17} {'pytorch ms':>17} {'x (mins)':>8} "
              f"{'x (medians)':>11} {'x per round':>17} {'x cpu':>6} {'load':>10} "
              f"{'max |dloss|':>11}")
    results, lines, failed = [], [], False
    with tempfile.TemporaryDirectory(prefix="tandem-vs-torch-") as work:
        for config in args.configs.split(","):
            for threads in (int(t) for t in args.threads.split(",")):
                r = compare(args, config, threads, work)
                results.append(r)
                s = r["speedup"]
                lines.append(
                    f"{r['config']:8} {r['threads']:>3} "
                    f"{r['tandemStepMs']['min']:>8.1f}/{r['tandemStepMs']['median']:<8.1f} "
                    f"{r['torchStepMs']['min']:>8.1f}/{r['torchStepMs']['median']:<8.1f} "
                    f"{s['ofMins']:>8.2f} {s['ofMedians']:>11.2f} "
                    f"{s['perRoundMin']:>5.2f}-{s['perRoundMedian']:.2f}-{s['perRoundMax']:<5.2f} "
                    f"{s['ofCpuMedians']:>6.2f} {r['load']['min']:>4.1f}-{r['load']['max']:<5.1f} "
                    f"{r['maxLossDifference']:>11.2e}")
                if has_baseline(args):
                    b = r["baselineStepMs"]
                    lines[-1] += (f"\n{'baseline':8} {r['threads']:>3} {b['min']:>8.1f}/"
                                  f"{b['median']:<8.1f} cpu min/median "
                                  f"{r['baselineCpuMs']['min']:.1f}/"
                                  f"{r['baselineCpuMs']['median']:.1f}, x cpu "
                                  f"{r['baselineSpeedup']['ofCpuMedians']:.2f} (tandem cpu "
                                  f"min/median {r['tandemCpuMs']['min']:.1f}/"
                                  f"{r['tandemCpuMs']['median']:.1f})")
                print(header + "\n" + lines[-1], flush=True)
                if not r["maxLossDifference"] <= args.loss_tolerance:
                    failed = True
                    print(f"  the losses differ by more than {args.loss_tolerance}: "
                          "not the same training", file=sys.stderr)
                if args.json:  # after every pair, so that an interrupted series keeps its rows
                    with open(args.json, "w") as f:
                        json.dump({"benchmark": "tandem-vs-pytorch", "results": results,
                                   "torchOpenblasCore": args.torch_openblas_core}, f,
                                  indent=1)
    print(f"\nms per step (B = {args.batch}): min / median over {args.rounds} rounds of each "
          f"run's median of {args.steps} steps; x: PyTorch's time / Tandem's")
    print(header + "\n" + "\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
