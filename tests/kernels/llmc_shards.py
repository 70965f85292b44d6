#!/usr/bin/python3
"""llm.c token shards for test_token_shard, written and read independently of Tandem's code, by
the rules of llm.c's dev/data/data_common.py (write_datafile) and llmc/dataloader.h: a header of
256 little-endian int32 (magic 20240520, version 1, token count), then uint16 tokens.

  llmc_shards.py write DIR      writes shard_NN.bin with random tokens and shard_NN.txt listing
                                them (one per line), and the bad shards bad_*.bin
  llmc_shards.py read FILE      checks FILE's header by the rules and prints its tokens
"""
import sys

import numpy as np


def write_datafile(path, toks, magic=20240520, version=1, count=None, dtype=np.uint16):
    header = np.zeros(256, dtype="<i4")
    header[0] = magic
    header[1] = version
    header[2] = len(toks) if count is None else count
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks).astype(np.dtype(dtype).newbyteorder("<")).tobytes())


def write(folder):
    rng = np.random.default_rng(20240520)
    # Lengths: one token, odd, and larger than a 16 MiB scan chunk is not needed here.
    for i, (n, vocab) in enumerate([(1, 50257), (257, 65536), (100003, 50257), (4096, 300)]):
        toks = rng.integers(0, vocab, size=n, dtype=np.int64)
        write_datafile(f"{folder}/shard_{i:02d}.bin", toks)
        with open(f"{folder}/shard_{i:02d}.txt", "w") as f:
            f.write("\n".join(str(int(t)) for t in toks) + "\n")
    toks = rng.integers(0, 50257, size=64, dtype=np.int64)
    write_datafile(f"{folder}/bad_magic.bin", toks, magic=20240521)
    write_datafile(f"{folder}/bad_version.bin", toks, version=2)
    write_datafile(f"{folder}/bad_llama3.bin", toks, magic=20240801, version=7, dtype=np.uint32)
    write_datafile(f"{folder}/bad_count.bin", toks, count=65)  # says 65, holds 64
    with open(f"{folder}/bad_truncated.bin", "wb") as f:
        write_datafile(f"{folder}/bad_truncated.full", toks)
        f.write(open(f"{folder}/bad_truncated.full", "rb").read()[:-3])
    with open(f"{folder}/bad_short.bin", "wb") as f:
        f.write(b"\x00" * 100)


def read(path):
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    assert header[0] == 20240520, "bad magic"
    assert header[1] == 1, "bad version"
    count = int(header[2])
    assert len(data) == 1024 + 2 * count, "file size disagrees with the token count"
    toks = np.frombuffer(data[1024:], dtype="<u2")
    sys.stdout.write("\n".join(str(int(t)) for t in toks) + "\n")


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](sys.argv[2])
