"""The autotuner on a CPU: real compiles of a small kernel through nvJitLink (resources, compile
errors), a fake launch that costs simulated time and a fake timer that reads it."""
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import tuned_kernels as tk
from fakes import FakeDeviceArray, FakeLaunch

from tylo import autotuner as autotune_module
from tylo.autotuner import AutotuneError, AutotuneWarning, Config, autotune, target_for_capability
from tylo.codegen.targets import TARGETS, resource_limits
from tylo.tuning_store import clear_tuned, format_tuned, list_tuned, tuning_root

ROOT = Path(__file__).resolve().parents[2]


def cdiv(a, b):
    return -(-a // b)


def grid(meta):
    return (cdiv(meta["n"], meta["BLOCK"]),)


def configs(*blocks, smem=None):
    return [Config(constexprs={"BLOCK": b, "SMEM": smem or b}, block=b) for b in blocks]


def costs_by_block(table):
    return lambda call: table[call["kwargs"]["BLOCK"]]


def tuned_kernel(monkeypatch, clock, timer, cfgs, cost, kernel=None, **kw):
    kernel = kernel or tk.staged_scale
    launch = FakeLaunch(clock, cost)
    monkeypatch.setattr(kernel, "launch", launch, raising=False)
    kw.setdefault("warmup", 5)
    kw.setdefault("rep", 20)
    tuned = autotune(configs=cfgs, key=["n"], timer=timer, clock=clock.seconds, **kw)(kernel)
    return tuned, launch


def test_winner_is_the_fastest_and_the_call_launches_it(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256, 512),
                                 costs_by_block({128: 3.0, 256: 1.0, 512: 2.0}))
    tuned[grid](out, x, 1000)
    best = tuned.best_config(out, x, 1000)
    assert best == Config(constexprs={"BLOCK": 256, "SMEM": 256}, block=256)
    last = launch.calls[-1]
    assert last["kwargs"] == {"BLOCK": 256, "SMEM": 256} and last["block"] == (256, 1, 1)
    assert last["grid"] == (4,) and last["args"] == (out, x, 1000)
    (timings,) = tuned.timings.values()
    assert [t.status for t in timings] == ["ok"] * 3
    assert [t.median_ms for t in timings] == pytest.approx([3.0, 1.0, 2.0])
    assert all(t.registers > 0 and t.shared_bytes == 4 * b for t, b in zip(timings, (128, 256, 512)))
    # the same key again: no timing, one launch
    n = len(launch.calls)
    tuned[grid](out, x, 1000)
    assert len(launch.calls) == n + 1 and launch.calls[-1]["kwargs"]["BLOCK"] == 256
    # another key value: tuned again (and here another winner)
    launch.cost = costs_by_block({128: 0.5, 256: 1.0, 512: 2.0})
    tuned[grid](out, x, 5000)
    assert len(launch.calls) > n + 2
    assert tuned.best_config(out, x, 5000).constexprs["BLOCK"] == 128
    assert tuned.best_config(out, x, 1000).constexprs["BLOCK"] == 256


def test_shared_memory_over_the_limit_is_pruned_before_timing(monkeypatch, clock, timer, arrays):
    out, x = arrays
    big = Config(constexprs={"BLOCK": 128, "SMEM": 60_000}, block=128)     # 240 000 bytes > 227 KiB
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(256) + [big],
                                 costs_by_block({128: 0.1, 256: 1.0}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned[grid](out, x, 1000)
    assert tuned.best_config(out, x, 1000).constexprs["BLOCK"] == 256
    assert all(c["kwargs"]["SMEM"] != 60_000 for c in launch.calls)
    (timings,) = tuned.timings.values()
    limit = resource_limits("sm_90a").shared_bytes_per_block
    if timings[1].status == "pruned":      # measured after compiling
        assert timings[1].reason == f"240000 bytes of shared memory; sm_90a allows {limit} per block"
        assert not caught
    else:                                  # a JIT that refuses the shared_array itself (CompileError)
        assert timings[1].status == "failed" and f"{limit:,}" in timings[1].reason
        assert "240,000" in timings[1].reason and len(caught) == 1


def test_registers_times_threads_over_the_register_file_is_pruned(monkeypatch, clock, timer, arrays):
    out, x = arrays
    small_file = dataclasses.replace(resource_limits("sm_90a"), registers_per_block=4096)
    monkeypatch.setattr(autotune_module, "resource_limits", lambda arch: small_file)
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 1024),
                                 costs_by_block({128: 1.0, 1024: 0.1}))
    tuned[grid](out, x, 1000)
    (timings,) = tuned.timings.values()
    regs = timings[0].registers
    assert regs > 0 and small_file.registers_used(regs, 128) <= 4096 < small_file.registers_used(regs, 1024)
    assert timings[1].status == "pruned" and f"{regs} registers x 1024 threads" in timings[1].reason
    assert all(c["block"] == (128, 1, 1) for c in launch.calls)


def test_block_and_cluster_limits_prune_without_compiling(monkeypatch, clock, timer, arrays):
    out, x = arrays
    cfgs = configs(128) + [Config(constexprs={"BLOCK": 2048, "SMEM": 2048}, block=(64, 32)),
                           Config(constexprs={"BLOCK": 256, "SMEM": 256}, block=256, cluster=(4, 4))]
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, cfgs, lambda call: 1.0)
    tuned[grid](out, x, 1000)
    (timings,) = tuned.timings.values()
    assert "block of 2048 threads" in timings[1].reason and timings[1].registers is None
    assert "cluster of 16 blocks" in timings[2].reason


def test_user_prune_hook(monkeypatch, clock, timer, arrays):
    out, x = arrays
    seen = []

    def prune(cfgs, args):
        seen.append((len(cfgs), args["n"]))
        return [c for c in cfgs if c.constexprs["BLOCK"] <= args["n"] // 2]

    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256, 512),
                                 costs_by_block({128: 3.0, 256: 2.0, 512: 1.0}), prune=prune)
    tuned[grid](out, x, 1000)
    assert seen == [(3, 1000)]
    assert tuned.best_config(out, x, 1000).constexprs["BLOCK"] == 256
    (timings,) = tuned.timings.values()
    assert timings[2].status == "pruned" and timings[2].reason == "removed by the prune hook"
    assert all(c["kwargs"]["BLOCK"] != 512 for c in launch.calls)


def test_config_that_does_not_compile_is_reported_and_skipped(monkeypatch, clock, timer, arrays):
    out, x = arrays
    broken = Config(constexprs={"BLOCK": 256, "SMEM": 64}, block=256)   # static_assert(SMEM >= BLOCK)
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128) + [broken],
                                 costs_by_block({128: 1.0, 256: 0.1}))
    with pytest.warns(AutotuneWarning, match="does not compile.*one value per thread"):
        tuned[grid](out, x, 1000)
    (timings,) = tuned.timings.values()
    assert timings[1].status == "failed" and "static_assert" in timings[1].reason
    assert tuned.best_config(out, x, 1000).constexprs["BLOCK"] == 128


def test_nothing_left_is_a_clear_error(monkeypatch, clock, timer, arrays):
    out, x = arrays
    broken = [Config(constexprs={"BLOCK": 256, "SMEM": 64}, block=256),
              Config(constexprs={"BLOCK": 128, "SMEM": 60_000}, block=128)]
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, broken, lambda call: 1.0)
    with pytest.warns(AutotuneWarning), pytest.raises(AutotuneError) as info:
        tuned[grid](out, x, 1000)
    text = str(info.value)
    assert "no configuration could be timed" in text and "does not compile" in text and "shared memory" in text
    assert launch.calls == []


def test_a_launch_failure_while_timing_is_skipped(monkeypatch, clock, timer, arrays):
    out, x = arrays

    def cost(call):
        if call["kwargs"]["BLOCK"] == 256:
            raise RuntimeError("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        return 1.0
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), cost)
    with pytest.warns(AutotuneWarning, match="failed to run"):
        tuned[grid](out, x, 1000)
    (timings,) = tuned.timings.values()
    assert timings[1].status == "failed" and "OUT_OF_RESOURCES" in timings[1].reason


def test_tuning_key_holds_key_values_and_array_dtypes(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    tuned[grid](out, x, 1000)
    h_out, h_x = FakeDeviceArray(1000, "<f2"), FakeDeviceArray(1000, "<f2", ptr=0x7F0000200000)
    tuned[grid](h_out, h_x, 1000)
    assert sorted(dict(k)["dtypes"] for k in tuned.timings) == ["f16,f16", "f32,f32"]


def test_passing_a_tuned_constexpr_or_bad_names_is_an_error(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, _ = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    with pytest.raises(TypeError, match="'BLOCK' is chosen by the autotuner"):
        tuned[grid](out, x, 1000, BLOCK=128)
    with pytest.raises(TypeError, match=r"staged_scale\[grid\]"):
        tuned(out, x, 1000)
    with pytest.raises(ValueError, match="'m', which is not a parameter"):
        autotune(configs=configs(128), key=["m"])(tk.staged_scale)
    with pytest.raises(ValueError, match="not a tylo.constexpr parameter"):
        autotune(configs=[Config(constexprs={"n": 3})], key=["n"])(tk.staged_scale)
    with pytest.raises(ValueError, match="empty"):
        autotune(configs=[], key=["n"])(tk.staged_scale)
    with pytest.raises(LookupError, match="has not been tuned"):
        tuned.best_config(out, x, 77)


def test_config_is_frozen_hashable_and_readable():
    c = Config(constexprs={"BM": 128, "BN": 64}, block=256, cluster=(2, 1), name="wide")
    assert c.block == (256, 1, 1) and c.cluster == (2, 1, 1) and c.threads == 256 and c.cluster_blocks == 2
    assert repr(c) == "Config(constexprs={'BM': 128, 'BN': 64}, block=256, cluster=(2, 1, 1), name='wide')"
    assert c == Config(constexprs={"BN": 64, "BM": 128}, block=(256,), cluster=(2, 1, 1), name="wide")
    assert len({c, Config(constexprs={"BN": 64, "BM": 128}, block=256, cluster=(2,), name="wide")}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.block = 128
    with pytest.raises(TypeError):
        c.constexprs["BM"] = 1
    with pytest.raises(TypeError, match="not hashable"):
        Config(constexprs={"S": [1, 2]})
    with pytest.raises(ValueError, match="positive"):
        Config(constexprs={}, block=(0,))
    assert Config(constexprs={"BM": 128}, block=(8, 16)).label == "BM=128 block=8x16"


def _run_subprocess(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'autotune'}")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def test_winner_persists_across_processes(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256, 512),
                                 costs_by_block({128: 3.0, 256: 2.0, 512: 1.0}))
    tuned[grid](out, x, 1000)
    (record,) = list_tuned()
    assert record.kernel == "staged_scale" and record.best == repr(configs(512)[0])
    assert record.key_text == "n=1000, dtypes=f32,f32" and record.device == "no GPU" and record.arch == "sm_90a"
    assert [t.median_ms for t in record.timings] == pytest.approx([3.0, 2.0, 1.0])
    path = Path(record.path)
    assert path.parent == tuning_root() and json.loads(path.read_text())["fingerprint"] == record.fingerprint
    proc = _run_subprocess("""
        import tuned_kernels as tk
        from fakes import FakeDeviceArray
        from tylo.autotuner import Config, autotune

        class NoTiming:
            def __getattr__(self, name):
                raise AssertionError("the second process timed something")

        calls = []
        tk.staged_scale.launch = lambda *a, **kw: calls.append(kw)
        cfgs = [Config(constexprs={"BLOCK": b, "SMEM": b}, block=b) for b in (128, 256, 512)]
        tuned = autotune(configs=cfgs, key=["n"], timer=NoTiming(), warmup=5, rep=20)(tk.staged_scale)
        tuned[lambda meta: (-(-meta["n"] // meta["BLOCK"]),)](FakeDeviceArray(1000), FakeDeviceArray(1000), 1000)
        print(len(calls), calls[0]["BLOCK"], calls[0]["grid"])
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "512", "(2,)"]
    assert "tylo.autotune" not in proc.stderr


def _kernel_module(tmp_path, name, body):
    path = tmp_path / "edited_kernel.py"
    path.write_text(textwrap.dedent(f'''
        import tylo

        @tylo.jit(arch="sm_90a")
        def edited(out, x, n, BLOCK: tylo.constexpr):
            i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
            if i < n:
                out[i] = {body}
        '''))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.edited


def test_an_edited_kernel_is_tuned_again(tmp_path, monkeypatch, clock, timer, arrays):
    out, x = arrays
    cfgs = [Config(constexprs={"BLOCK": b}, block=b) for b in (128, 256)]

    def tune(kernel):
        tuned, launch = tuned_kernel(monkeypatch, clock, timer, cfgs, costs_by_block({128: 1.0, 256: 2.0}),
                                     kernel=kernel)
        tuned[grid](out, x, 1000)
        return len(launch.calls)

    assert tune(_kernel_module(tmp_path, "edited_v1", "x[i] * 2.0")) > 1      # tuned
    assert tune(_kernel_module(tmp_path, "edited_v1_again", "x[i] * 2.0")) == 1  # same source: stored
    assert tune(_kernel_module(tmp_path, "edited_v2", "x[i] * 2.5 + 1.0")) > 1  # edited: tuned again
    records = list_tuned()
    assert len(records) == 2 and records[0].fingerprint != records[1].fingerprint


def test_clear_tuned_removes_the_records(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    tuned[grid](out, x, 1000)
    tuned[grid](out, x, 2000)
    assert len(list_tuned()) == 2 and len(list_tuned(kernel="staged_*")) == 2 and list_tuned(kernel="other") == []
    assert "staged_scale [n=1000, dtypes=f32,f32]" in format_tuned()
    as_json = json.loads(json.dumps(list_tuned()[0].to_json()))
    assert as_json["key"] == {"n": "1000", "dtypes": "f32,f32"} and len(as_json["timings"]) == 2
    first, second = list_tuned()
    data = json.loads(Path(first.path).read_text())
    data["created"] -= 3 * 86400
    Path(first.path).write_text(json.dumps(data))
    assert clear_tuned(older_than_days=2) == 1
    assert [r.key_text for r in list_tuned()] == [second.key_text]
    with pytest.raises(ValueError, match="older_than_days"):
        clear_tuned(older_than_days=-1)
    assert clear_tuned() == 1
    assert list_tuned() == [] and clear_tuned() == 0
    again, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    again[grid](out, x, 1000)
    assert len(launch.calls) > 1          # tuned again


def test_a_damaged_record_is_reported_and_tuned_again(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    tuned[grid](out, x, 1000)
    (record,) = list_tuned()
    Path(record.path).write_text('{"format": "tylo-tuning-1", "kernel": ')
    again, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    with pytest.warns(UserWarning, match="damaged"):
        again[grid](out, x, 1000)
    assert len(launch.calls) > 1 and len(list_tuned()) == 1


def test_no_disk_records_with_the_cache_off(monkeypatch, clock, timer, arrays):
    monkeypatch.setenv("TYLO_CACHE", "0")
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    tuned[grid](out, x, 1000)
    assert not tuning_root().exists()


def test_progress_on_stderr_only_when_tuning_takes_over_a_second(monkeypatch, clock, timer, arrays, capsys):
    out, x = arrays
    # about 3 x (1 + 5 + 5 + 20) calls of 5 ms: under a second of simulated time
    tuned, _ = tuned_kernel(monkeypatch, clock, timer, configs(128, 256, 512), lambda call: 5.0, rep=100)
    tuned[grid](out, x, 1000)
    assert capsys.readouterr().err == ""
    # 3 x (1 + 5 + 5 + 80) calls of 5 ms: over a second (another key: n=1000 is stored now)
    tuned, _ = tuned_kernel(monkeypatch, clock, timer, configs(128, 256, 512), lambda call: 5.0, rep=400)
    tuned[grid](out, x, 3000)
    err = capsys.readouterr().err
    assert err.startswith("tylo.autotune: tuning staged_scale [n=3000, dtypes=f32,f32] over 3 configs")
    assert "timed 3/3: BLOCK=512 SMEM=512 block=512: 5.0000 ms" in err
    assert "best BLOCK=128 SMEM=128 block=128 (5.0000 ms) after 1." in err.splitlines()[-1]


def test_limits_cover_every_target_and_count_whole_allocation_units():
    for name in TARGETS:
        limits = resource_limits(name)
        assert limits.registers_per_block == 65536 and 99 * 1024 <= limits.shared_bytes_per_block <= 227 * 1024
    limits = resource_limits("sm_90a")
    assert limits.registers_used(255, 256) == 8 * 8192          # 255 -> 256 per thread
    assert limits.registers_used(33, 32) == 1280                # 33 x 32 = 1056 -> 5 units of 256
    assert limits.registers_used(64, 1024) == 65536
    assert limits.registers_used(8, 33) == 2 * 256              # a partial warp takes a whole warp's share


def test_target_for_capability_matches_the_jit_choices():
    ccs = ((8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (9, 1), (10, 0), (10, 3), (12, 0), (12, 1))
    assert [target_for_capability(*cc) for cc in ccs] == \
        ["sm_80", "sm_86", "sm_86", "sm_89", "sm_90a", "sm_90", "sm_100a", "sm_100a", "sm_120a", "sm_120a"]
    with pytest.raises(RuntimeError, match="no target for compute capability 7.5"):
        target_for_capability(7, 5)


def test_positional_fast_path_and_keyword_calls_agree(monkeypatch, clock, timer, arrays):
    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256),
                                 lambda call: {128: 2.0, 256: 1.0}[call["kwargs"]["BLOCK"]])
    tuned[grid](out, x, n=1000)                      # keywords: the general path tunes
    tuned[grid](out, x, 1000)                        # positional: fills the fast path's table
    monkeypatch.setattr(tuned, "_tuning_key", lambda named: pytest.fail("the fast path bound arguments"))
    n = len(launch.calls)
    tuned[grid](out, x, 1000)
    assert len(launch.calls) == n + 1
    assert launch.calls[-1]["kwargs"] == {"BLOCK": 256, "SMEM": 256} and launch.calls[-1]["grid"] == (4,)
    assert launch.calls[-1]["args"] == (out, x, 1000)


def test_concurrent_first_calls_tune_once(monkeypatch, clock, timer, arrays):
    import threading

    out, x = arrays
    tuned, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 1.0)
    tunings = []
    real_tune = tuned._tune
    monkeypatch.setattr(tuned, "_tune", lambda *a: tunings.append(1) or real_tune(*a))
    threads = [threading.Thread(target=lambda: tuned[grid](out, x, 1000)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tunings) == 1


def test_print_autotuning_reports_short_tunings_and_stored_choices(monkeypatch, clock, timer, arrays, capsys):
    # TYLO_PRINT_AUTOTUNING=1: a tuning well under a second prints its steps and winner, and a new process (a tuner
    # with nothing in memory) that finds the stored choice says which it uses, once
    monkeypatch.setenv("TYLO_PRINT_AUTOTUNING", "1")
    out, x = arrays
    tuned, _ = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 5.0, rep=100)
    tuned[grid](out, x, 1000)
    err = capsys.readouterr().err
    assert err.startswith("tylo.autotune: tuning staged_scale [n=1000, dtypes=f32,f32] over 2 configs")
    assert "timed 2/2: BLOCK=256 SMEM=256 block=256: 5.0000 ms" in err and "best BLOCK=128" in err
    again, launch = tuned_kernel(monkeypatch, clock, timer, configs(128, 256), lambda call: 5.0, rep=100)
    again[grid](out, x, 1000)
    again[grid](out, x, 1000)
    err = capsys.readouterr().err
    assert err == ("tylo.autotune: staged_scale [n=1000, dtypes=f32,f32]: stored choice BLOCK=128 SMEM=128 "
                   "block=128 (tylo cache list shows its timings)\n")
    monkeypatch.setenv("TYLO_PRINT_AUTOTUNING", "maybe")
    with pytest.raises(ValueError, match="TYLO_PRINT_AUTOTUNING='maybe'"):
        tuned_kernel(monkeypatch, clock, timer, configs(64, 128), lambda call: 5.0, rep=100)[0][grid](out, x, 7)
