"""``tylo.tune_launches`` on a CPU: candidates that cost simulated time, a fake timer that reads it, the real
tuning store in the test's own cache folder."""
import warnings

import pytest

import tylo
from tylo import autotuner as autotune_module
from tylo.autotuner import AutotuneError, AutotuneWarning
from tylo.tuning_store import format_tuned, list_tuned

TARGET = ("sm_90a", "fake device")
KEY = (("M", 64), ("N", 128))


@pytest.fixture(autouse=True)
def _fresh_process_memo(monkeypatch):
    """Each test starts as a new process would: nothing chosen in memory (the disk records are per test)."""
    monkeypatch.setattr(autotune_module, "_CHOSEN", {})


def costing(clock, costs, calls=None):
    """label -> a launch that advances ``clock`` by its cost (and records the call)."""
    def launch(label):
        def run():
            if calls is not None:
                calls.append(label)
            cost = costs[label]
            if isinstance(cost, Exception):
                raise cost
            clock.advance(cost)
        return run
    return {label: launch(label) for label in costs}


def tune(clock, timer, costs, key=KEY, source="v1", calls=None):
    return tylo.tune_launches("gemm.launch", key, costing(clock, costs, calls), source=source, warmup=1, rep=5,
                              target=TARGET, timer=timer, clock=clock.seconds)


def test_the_fastest_candidate_wins_and_is_stored(clock, timer):
    assert tune(clock, timer, {"a": 3.0, "b": 1.0, "c": 2.0}) == "b"
    (record,) = list_tuned()
    assert record.kernel == "gemm.launch" and record.best == "b" and record.key_text == "M=64, N=128"
    assert [t.config for t in record.timings] == ["a", "b", "c"]
    assert [t.median_ms for t in record.timings] == pytest.approx([3.0, 1.0, 2.0])
    assert record.device == "fake device" and record.arch == "sm_90a"
    assert "gemm.launch [M=64, N=128]" in format_tuned() and "* b:" in format_tuned()


def test_a_stored_choice_is_reused_without_timing(clock, timer, monkeypatch):
    tune(clock, timer, {"a": 3.0, "b": 1.0})
    monkeypatch.setattr(autotune_module, "_CHOSEN", {})      # a new process: only the disk record is left
    calls = []
    assert tune(clock, timer, {"a": 3.0, "b": 1.0}, calls=calls) == "b"
    assert calls == []


def test_the_choice_is_remembered_in_the_process(clock, timer, monkeypatch):
    tune(clock, timer, {"a": 3.0, "b": 1.0})
    monkeypatch.setenv("TYLO_CACHE", "0")        # no disk: the process memo answers
    calls = []
    assert tune(clock, timer, {"a": 3.0, "b": 1.0}, calls=calls) == "b" and calls == []


@pytest.mark.parametrize("change", ["key", "source", "labels"])
def test_another_key_source_or_candidate_list_is_tuned_again(clock, timer, change):
    tune(clock, timer, {"a": 3.0, "b": 1.0})
    calls = []
    costs = {"a": 1.0, "b": 3.0, **({"c": 5.0} if change == "labels" else {})}
    chosen = tune(clock, timer, costs, key=(("M", 65), ("N", 128)) if change == "key" else KEY,
                  source="v2" if change == "source" else "v1", calls=calls)
    assert chosen == "a" and calls
    assert len(list_tuned()) == 2


def test_ties_keep_the_first_candidate(clock, timer):
    assert tune(clock, timer, {"default": 2.0, "other": 2.0}) == "default"


def test_a_failing_candidate_is_reported_and_skipped(clock, timer):
    with pytest.warns(AutotuneWarning, match="broken failed to run, skipped: refused"):
        assert tune(clock, timer, {"broken": ValueError("refused"), "slow": 4.0, "fast": 2.0}) == "fast"
    statuses = {t.config: t.status for t in list_tuned()[0].timings}
    assert statuses == {"broken": "failed", "slow": "ok", "fast": "ok"}


def test_nothing_that_runs_is_a_clear_error(clock, timer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutotuneWarning)
        with pytest.raises(AutotuneError, match="no candidate could be timed"):
            tune(clock, timer, {"x": RuntimeError("no"), "y": RuntimeError("no")})
    assert list_tuned() == []


def test_bad_candidates_are_type_and_value_errors(clock, timer):
    with pytest.raises(ValueError, match="non-empty"):
        tylo.tune_launches("k", KEY, {}, target=TARGET, timer=timer)
    with pytest.raises(TypeError, match="string labels to functions"):
        tylo.tune_launches("k", KEY, {"a": 3}, target=TARGET, timer=timer)


def test_progress_on_stderr_once_tuning_takes_over_a_second(clock, timer, capsys):
    tune(clock, timer, {"a": 0.001, "b": 0.002})
    assert "tylo.autotune" not in capsys.readouterr().err
    tune(clock, timer, {"a": 300.0, "b": 200.0}, key=(("M", 1),))
    err = capsys.readouterr().err
    assert "tuning gemm.launch [M=1] over 2 candidates" in err and "best b" in err


def lazy_tune(clock, timer, costs, prepared, skip=()):
    """``tune_launches(lazy=True)``: each candidate prepared (recorded in ``prepared``) only when timed; the labels in
    ``skip`` prepare to None (not applicable)."""
    launches = costing(clock, costs)

    def preparer(label):
        def prepare():
            prepared.append(label)
            return None if label in skip else launches[label]
        return prepare
    return tylo.tune_launches("gemm.launch", KEY, {label: preparer(label) for label in costs}, source="v1", warmup=1,
                              rep=5, target=TARGET, timer=timer, clock=clock.seconds, lazy=True)


def test_lazy_candidates_are_prepared_only_when_timed(clock, timer, monkeypatch):
    prepared = []
    assert lazy_tune(clock, timer, {"a": 3.0, "b": 1.0, "c": 2.0}, prepared) == "b"
    assert prepared == ["a", "b", "c"]
    monkeypatch.setattr(autotune_module, "_CHOSEN", {})      # a new process: the stored choice, nothing prepared
    prepared.clear()
    assert lazy_tune(clock, timer, {"a": 3.0, "b": 1.0, "c": 2.0}, prepared) == "b"
    assert prepared == []


def test_lazy_candidates_that_do_not_apply_are_left_out(clock, timer):
    prepared = []
    assert lazy_tune(clock, timer, {"a": 3.0, "b": 1.0, "c": 2.0}, prepared, skip={"b"}) == "c"
    (record,) = list_tuned()
    assert [t.config for t in record.timings] == ["a", "c"]
    with pytest.raises(AutotuneError, match="no candidate applies"):
        lazy_tune(clock, timer, {"x": 1.0}, [], skip={"x"})


def test_a_lazy_preparer_must_return_a_function(clock, timer):
    with pytest.raises(TypeError, match="preparer of a returned 3"):
        tylo.tune_launches("k", KEY, {"a": lambda: 3}, target=TARGET, timer=timer, lazy=True)


def test_the_gemm_tuner_compiles_only_its_stored_winner(clock, timer, monkeypatch):
    # hopper_gemm's launch(autotune=True) on a shape tuned before prepares (compiles) only the winner: its
    # candidates are lazy (session 21 prepared all eight on every first call of a process)
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import hopper_gemm as hg
    prepared = []

    def fake_prepare(c, a, b, M, N, K, stream, config):
        prepared.append(config)
        return costing(clock, {"run": 2.0 if config.tn == 64 else 3.0})["run"]

    real = tylo.tune_launches
    monkeypatch.setattr(hg, "prepare", fake_prepare)
    monkeypatch.setattr(hg, "launch_stream", lambda stream, c: None)
    monkeypatch.setattr(tylo, "tune_launches", lambda *a, **kw: real(*a, target=TARGET, timer=timer,
                                                                         clock=clock.seconds, **kw))
    args = (None, None, None, 256, 1024, 8192, None, tylo.bf16, 132, False, True, 128)
    first = hg.tuned_config(*args)
    candidates = hg.tuning_candidates(256, 1024, 8192, tylo.bf16, 132, True, False, 128)
    assert prepared == candidates and first.tn == 64
    monkeypatch.setattr(autotune_module, "_CHOSEN", {})      # a new process
    prepared.clear()
    assert hg.tuned_config(*args) == first and prepared == []


def test_print_autotuning_reports_the_stored_launch_choice(clock, timer, monkeypatch, capsys):
    monkeypatch.setenv("TYLO_PRINT_AUTOTUNING", "1")
    tune(clock, timer, {"a": 3.0, "b": 1.0})
    assert "tylo.autotune: gemm.launch [M=64, N=128] over 2 candidates: best b (1.0000 ms)" in capsys.readouterr().err
    monkeypatch.setattr(autotune_module, "_CHOSEN", {})      # a new process
    tune(clock, timer, {"a": 3.0, "b": 1.0})
    assert capsys.readouterr().err == ("tylo.autotune: gemm.launch [M=64, N=128]: stored choice b (tylo cache list "
                                       "shows its timings)\n")
