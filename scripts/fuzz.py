#!/usr/bin/env python
"""tylo's fuzzers (issue 16): generated valid kernels, invalid kernels, cache faults.

    python scripts/fuzz.py --long [--kind valid|invalid|cache] [--count N] [--seed S] [--jobs J]

Each case runs in a worker process (a case that kills its process, e.g. an LLVM assertion, is
recorded as a crash and the worker restarted; a case that takes longer than --timeout is a hang).
The summary counts cases, internal errors, mismatches and wrong cubins, and groups failures by a
normalised message so that distinct root causes stand out, each with the seeds that reproduce it
(`python scripts/fuzz.py --kind valid --seed S --count 1 --show` prints one case's kernel).
Without --long a short campaign runs (the same as the default test slice, larger).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ_DIR = os.path.join(ROOT, "tests", "fuzz")
sys.path.insert(0, FUZZ_DIR)

BAD = {"valid": ("internal", "rejected", "exception", "mismatch", "crash", "hang"),
       "invalid": ("internal", "not_compile_error", "no_error", "wrong_line", "repr_message", "crash", "hang"),
       "cache": ("wrong_cubin", "hang", "exception", "crash", "stale_key", "leftover")}


def run_one(kind, seed, folder):
    if kind == "valid":
        from valid_check import check_case
        return check_case(seed, folder)
    if kind == "invalid":
        from mutations import check_mutant
        return check_mutant(seed, folder)
    from cache_faults import check_fault
    return check_fault(seed, folder)


def worker(kind):
    """Read seeds from stdin, write one JSON result per line."""
    import warnings
    warnings.simplefilter("ignore")
    folder = tempfile.mkdtemp(prefix=f"tylo-fuzz-{kind}-")
    os.environ["TYLO_CACHE_DIR"] = os.path.join(folder, "cache")
    for line in sys.stdin:
        seed = int(line)
        try:
            result = run_one(kind, seed, folder)
        except Exception as exc:  # noqa: BLE001 - a fuzzer bug must not stop the campaign
            result = {"seed": seed, "status": "fuzzer_error", "detail": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()
    shutil.rmtree(folder, ignore_errors=True)


class Worker:
    def __init__(self, kind):
        self.kind = kind
        self.proc = None

    def start(self):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + FUZZ_DIR)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", self.kind],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=ROOT)

    def run(self, seed, timeout):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(f"{seed}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"seed": seed, "status": "hang", "detail": f"no answer in {timeout} s"}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return {"seed": seed, "status": "crash", "detail": f"worker died with exit status {code}"}
        return json.loads(line)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def signature(result):
    """A normalised failure message: the same root cause gives the same text."""
    d = result.get("detail", "") or ""
    d = d.split("\n")[0].strip()
    d = re.sub(r"/\S+?\.py:\d+:\d+", "<loc>", d)
    d = re.sub(r"\(inlined from [^)]*\)", "", d)
    d = re.sub(r"\b[vhiswp]\d+(_\d+)?\b", "<var>", d)
    d = re.sub(r"\b[ox]_\w+\[\d+\]", "<out>", d)
    d = re.sub(r"0x[0-9a-f]+", "0x..", d)
    d = re.sub(r"sha [0-9a-f]+ vs [0-9a-f]+", "sha ... vs ...", d)
    d = re.sub(r"(?<=\s)\(?/\S+\)?", "<path>", d)
    d = re.sub(r"\b(entry|key) [0-9a-f]{12}\b", r"\1 <key>", d)
    d = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", d)
    if result["status"] == "mismatch":   # one group per output type and stage
        d = " ".join(sorted(set(re.findall(r"<out>|[or]_\w+", d)))) or d
    d = re.sub(r"\s+", " ", d).strip()
    return f"{result['status']} [{result.get('stage') or result.get('category') or ''}] {d[:160]}"


def campaign(kind, seeds, jobs, timeout, log=None):
    import threading
    queue = list(seeds)
    lock = threading.Lock()
    results = []

    def loop():
        w = Worker(kind)
        while True:
            with lock:
                if not queue:
                    break
                seed = queue.pop(0)
            r = w.run(seed, timeout)
            with lock:
                results.append(r)
                if log:
                    log.write(json.dumps(r, default=str) + "\n")
                    log.flush()
                if len(results) % 100 == 0:
                    print(f"  {len(results)} cases ...", file=sys.stderr, flush=True)
        w.close()

    threads = [threading.Thread(target=loop) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results, key=lambda r: r["seed"])


def summarize(kind, results, seconds):
    counts = collections.Counter(r["status"] for r in results)
    from findings import FIXED, finding_of
    groups = collections.defaultdict(list)
    for r in results:
        if r["status"] not in ("ok", "expected"):
            fid = finding_of(kind, r) or "NEW"
            label = f"{fid} (fixed, so a regression or a new cause)" if fid in FIXED else fid
            groups[f"{label}: {signature(r)}"].append(r["seed"])
    print(f"\n== tylo fuzz: {kind} ==")
    print(f"cases: {len(results)} in {seconds:.0f} s")
    for status, n in sorted(counts.items()):
        print(f"  {status}: {n}")
    if kind == "valid":
        print(f"internal errors: {counts['internal'] + counts['exception'] + counts['crash']}  "
              f"mismatches: {counts['mismatch']}  rejected valid kernels: {counts['rejected']}")
    elif kind == "invalid":
        print(f"internal compiler errors for user mistakes: {counts['internal']}  "
              f"other failures: {sum(counts[s] for s in BAD['invalid'] if s != 'internal')}")
    else:
        print(f"wrong cubins: {counts['wrong_cubin']}  hangs: {counts['hang']}")
    print(f"distinct failure signatures: {len(groups)}")
    for sig, seeds in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(seeds):5d}  {sig}\n         seeds: {' '.join(map(str, seeds[:8]))}")
    return counts, groups


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--long", action="store_true", help="a long campaign (default count 5000/1500/400)")
    ap.add_argument("--kind", choices=["valid", "invalid", "cache", "all"], default="all")
    ap.add_argument("--count", type=int)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--json", help="write every result (one JSON object per line) to this file")
    ap.add_argument("--show", action="store_true", help="print the case's source instead of running it")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    kinds = ["valid", "invalid", "cache"] if args.kind == "all" else [args.kind]
    if args.show:
        for kind in kinds:
            if kind == "valid":
                from kernelgen import generate
                print(generate(args.seed).source)
            elif kind == "invalid":
                from mutations import make_mutant
                print(make_mutant(args.seed).source)
            else:
                from cache_faults import describe_fault
                print(describe_fault(args.seed))
        return 0
    log = open(args.json, "w") if args.json else None
    failed = False
    for kind in kinds:
        n = args.count or ({"valid": 5000, "invalid": 1500, "cache": 400}[kind] if args.long
                           else {"valid": 200, "invalid": 150, "cache": 40}[kind])
        t0 = time.time()
        results = campaign(kind, range(args.seed, args.seed + n), args.jobs, args.timeout, log)
        counts, _ = summarize(kind, results, time.time() - t0)
        failed |= any(counts[s] for s in BAD[kind]) or counts["fuzzer_error"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
