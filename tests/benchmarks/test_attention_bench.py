"""The pure parts of benchmarks/attention.py: FLOP counting, the shape matrix, argument parsing, the
agreement rule, the table, the summary and targets, the plot data, the JSON and the Blackwell line.
No GPU and no torch needed."""
import importlib.util
import json
import math
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load():
    spec = importlib.util.spec_from_file_location("attention_benchmark", os.path.join(ROOT, "benchmarks", "attention.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


bench = _load()
Case, Cell, Row = bench.Case, bench.Cell, bench.Row


# ---------------------------------------------------------------- FLOPs and the matrix

def test_flops_of_the_issue_reference_point():
    # B=2, H=16, S=8192, D=128: 4 * 2 * 16 * 8192^2 * 128 = 2^40
    assert bench.attention_flops(2, 16, 8192, 8192, 128, False) == 2 ** 40
    assert bench.attention_flops(2, 16, 8192, 8192, 128, True) == 2 ** 39
    assert bench.attention_flops(1, 1, 3, 5, 64, False) == 4 * 3 * 5 * 64
    assert Case(128, 2, 8192, False).flops == 2 ** 40
    assert Case(128, 2, 8192, True).flops == 2 ** 39
    # issue 11's cuDNN figure: 604 TFLOP/s is 2^40 FLOPs in 1.8204 ms
    assert bench.tflops(2 ** 40, 1.8204) == pytest.approx(604.0, abs=0.05)


def test_heads_keep_the_model_width():
    assert [bench.heads_for(d) for d in (64, 128, 256)] == [32, 16, 8]
    with pytest.raises(ValueError, match="does not divide"):
        bench.heads_for(96)
    assert Case(256, 4, 4096, True).heads == 8


def test_the_full_matrix():
    cases = bench.build_cases()
    assert len(cases) == 3 * 6 * 2
    assert cases[0] == Case(64, 32, 512, False) and cases[1] == Case(64, 32, 512, True)
    assert cases[-1] == Case(256, 1, 16384, True)
    # every point holds the same 16384 tokens of width 2048
    assert {c.batch * c.seqlen for c in cases} == {16384}
    assert {c.heads * c.head_dim for c in cases} == {2048}
    assert [c.shape_label for c in cases[:12:2]] == ["32x512", "16x1k", "8x2k", "4x4k", "2x8k", "1x16k"]
    assert sum(c.causal for c in cases) == 18


def test_quick_is_four_points_and_narrows():
    quick = bench.build_cases(quick=True)
    assert len(quick) == 4
    assert {(c.head_dim, c.batch, c.seqlen, c.causal) for c in quick} == set(bench.QUICK)
    assert bench.build_cases(causal="no", quick=True) == [Case(64, 16, 1024, False), Case(128, 2, 8192, False)]
    assert bench.build_cases(head_dims=(64,), shapes=((32, 512),), quick=True) == []


def test_seqlen_and_shape_parsing():
    assert bench.parse_seqlen("512") == 512
    assert bench.parse_seqlen("1k") == 1024
    assert bench.parse_seqlen(" 16K ") == 16384
    with pytest.raises(ValueError, match="k suffix"):
        bench.parse_seqlen("2m")
    with pytest.raises(ValueError, match="positive"):
        bench.parse_seqlen("0")
    assert bench.parse_shapes("32x512,16x1k") == ((32, 512), (16, 1024))
    assert bench.parse_shapes("2X8K") == ((2, 8192),)
    for bad, words in (("8k", "BATCHxSEQLEN"), ("2x", "k suffix"), ("0x512", "batch must be a positive integer"),
                       ("ax512", "batch must be a positive integer")):
        with pytest.raises(bench.argparse.ArgumentTypeError, match=words):
            bench.parse_shapes(bad)
    assert bench.seqlen_text(16384) == "16k" and bench.seqlen_text(1000) == "1000"


# ---------------------------------------------------------------- arguments

def test_default_arguments():
    args = bench.parse_args([])
    assert args.head_dims == (64, 128, 256) and args.shapes == bench.BATCH_SEQLENS
    assert args.causal == "both" and args.rounds == 3 and not args.quick
    assert args.json is None and args.plot_dir == "."
    assert len(args.cases) == 36


def test_arguments_narrow_the_matrix():
    args = bench.parse_args(["--head-dims", "64,256", "--shapes", "2x8k", "--causal", "yes", "--rounds", "5",
                             "--json", "out.json", "--plot-dir", "plots", "--rep-ms", "20"])
    assert args.cases == [Case(64, 2, 8192, True), Case(256, 2, 8192, True)]
    assert (args.rounds, args.json, args.plot_dir, args.rep_ms) == (5, "out.json", "plots", 20.0)
    assert bench.parse_args(["--quick", "--causal", "yes"]).cases == [Case(128, 2, 8192, True),
                                                                      Case(256, 4, 4096, True)]


@pytest.mark.parametrize("argv,words", [
    (["--head-dims", "96"], "head_dim 96 is not one of 64, 128, 256"),
    (["--head-dims", "x"], "integers separated by commas"),
    (["--shapes", "2x8q"], "k suffix"),
    (["--causal", "maybe"], "invalid choice"),
    (["--rounds", "0"], "--rounds must be at least 1"),
    (["--quick", "--shapes", "32x512"], "no point of the matrix is left"),
])
def test_bad_arguments_name_the_problem(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
    assert words in capsys.readouterr().err


# ---------------------------------------------------------------- agreement, cells, rows

def test_agreement_rule():
    assert bench.agrees(0.0, True)
    assert bench.agrees(bench.ATOL, True)
    assert not bench.agrees(bench.ATOL * 1.01, True)
    assert not bench.agrees(0.0, False)        # a NaN or inf anywhere disagrees


def test_failure_cells():
    class NoTritonConfig(RuntimeError):
        pass

    cell = bench.failure_cell(NoTritonConfig("no block size fits head_dim 256"))
    assert cell.status == "n/a" and cell.note == "NoTritonConfig: no block size fits head_dim 256"
    cell = bench.failure_cell(RuntimeError("No available kernel. Aborting execution."),
                              ["Flash attention requires q,k,v to have the same last dimension", ""])
    assert cell.status == "n/a"
    assert cell.note.endswith("[Flash attention requires q,k,v to have the same last dimension]")
    cell = bench.failure_cell(ValueError("attention: q must be bf16\n  got f32"))
    assert cell.status == "error" and cell.note == "ValueError: attention: q must be bf16 got f32"
    assert bench.short("x" * 200, 20) == "x" * 17 + "..."


REFERENCE_POINT = Case(128, 2, 8192, False)     # 2^40 FLOPs


def _row(case=REFERENCE_POINT, **cells):
    return Row(case, dict(cells))


def test_cell_and_row_figures():
    row = _row(tylo=Cell("ok", 1.0, (1.0, 1.1)), cudnn=Cell("ok", 2.0), flash=Cell("wrong", max_abs_err=0.5),
               triton=Cell("n/a", note="no fit"))
    assert row.tflops("tylo") == pytest.approx(2 ** 40 / 1e-3 / 1e12)
    assert row.tflops("flash") is None and row.tflops("triton") is None and row.tflops("other") is None
    assert row.ratio("tylo", "cudnn") == pytest.approx(2.0)
    assert row.ratio("tylo", "flash") is None


# ---------------------------------------------------------------- table and summary

def test_table_lines():
    rows = [
        _row(tylo=Cell("ok", 1.0, max_abs_err=2e-3), cudnn=Cell("ok", 2.0, max_abs_err=0.0),
             flash=Cell("wrong", max_abs_err=0.5, note="outside bf16 tolerance"),
             triton=Cell("n/a", note="NoTritonConfig: nothing fits")),
        _row(Case(64, 32, 512, True), cudnn=Cell("ok", 0.25, max_abs_err=0.0),
             flash=Cell("ok", 0.5, max_abs_err=1e-3), triton=Cell("error", note="RuntimeError: boom")),
    ]
    text = bench.format_table(rows)
    lines = text.splitlines()
    assert lines[0].split("|")[1].split() == ["tylo", "cuDNN", "flash", "Triton"]
    assert lines[0].split("|")[2].split() == ["tylo/cuDNN", "tylo/flash", "tylo/Triton"]
    assert set(lines[1]) == {"-"}
    first = lines[2].split("|")
    assert first[0].split() == ["128", "2x8k", "16", "no"]
    assert first[1].split() == ["1099.5", "549.8", "WRONG", "n/a"]
    assert first[2].split() == ["2.000", "-", "-"]
    assert first[3].strip() == "tylo 2.0e-03, flash 5.0e-01 (vs cuDNN)"
    second = lines[3].split("|")
    # 4 * 32 * 32 * 512^2 * 64 / 2 FLOPs in 0.25 ms
    assert second[1].split() == ["n/a", f"{Case(64, 32, 512, True).flops / 0.25e-3 / 1e12:.1f}", "68.7", "error"]
    assert second[2].split() == ["-", "-", "-"]
    assert lines[4] == "notes:"
    assert lines[5:] == ["  D128 2x8k h16 full flash: wrong: outside bf16 tolerance",
                         "  D128 2x8k h16 full Triton: n/a: NoTritonConfig: nothing fits",
                         "  D64 32x512 h32 causal Triton: error: RuntimeError: boom"]


def test_summary_and_targets():
    ok = lambda ms: Cell("ok", ms)
    rows = [_row(Case(128, 2, 8192, False), tylo=ok(1.0), cudnn=ok(1.2), triton=ok(2.0)),
            _row(Case(128, 8, 2048, True), tylo=ok(1.0), cudnn=ok(1.05)),
            _row(Case(64, 32, 512, False), tylo=ok(1.0), cudnn=ok(0.8))]
    lines = bench.summary_lines(rows)
    g = math.exp((math.log(1.2) + math.log(1.05) + math.log(0.8)) / 3)
    assert lines[0] == f"tylo/cuDNN: geometric mean {g:.3f}, minimum 0.800 over 3 points"
    assert lines[1] == "tylo/flash: no point with both timed"
    assert lines[2] == "tylo/Triton: geometric mean 2.000, minimum 2.000 over 1 points"
    assert lines[3] == "target tylo/cuDNN >= 1.10 at D=128, seqlen >= 2k: NOT met (minimum 1.050 over 2 points)"
    assert lines[4] == "target no point below 0.90x cuDNN: NOT met (minimum 0.800)"
    met = bench.summary_lines([_row(Case(128, 4, 4096, False), tylo=ok(1.0), cudnn=ok(1.2))])
    assert met[3].startswith("target tylo/cuDNN >= 1.10 at D=128, seqlen >= 2k: met")
    assert met[4].startswith("target no point below 0.90x cuDNN: met")
    # without tylo no target line is claimed
    assert len(bench.summary_lines([_row(cudnn=ok(1.0))])) == 3


# ---------------------------------------------------------------- plots, JSON, Blackwell

def test_plot_series():
    rows = [_row(Case(128, 4, 4096, False), tylo=Cell("ok", 1.0), cudnn=Cell("ok", 2.0)),
            _row(Case(128, 2, 8192, False), cudnn=Cell("ok", 4.0)),
            _row(Case(128, 2, 8192, True), cudnn=Cell("ok", 4.0)),
            _row(Case(64, 2, 8192, True), cudnn=Cell("ok", 4.0))]
    series = bench.plot_series(rows, 128)
    labels, values = series[False]
    assert labels == ["4x4k", "2x8k"]
    assert values["cudnn"] == [pytest.approx(rows[0].tflops("cudnn")), pytest.approx(rows[1].tflops("cudnn"))]
    assert values["tylo"][0] == pytest.approx(rows[0].tflops("tylo")) and math.isnan(values["tylo"][1])
    assert all(math.isnan(v) for v in values["flash"])
    assert series[True][0] == ["2x8k"]
    assert set(bench.plot_series(rows, 64)) == {True}


def test_plots_skipped_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert bench.write_plots([_row(cudnn=Cell("ok", 1.0))], str(tmp_path)) == ["(matplotlib not importable: plots skipped)"]
    assert list(tmp_path.iterdir()) == []


def test_plots_written_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(Case(128, 4, 4096, False), cudnn=Cell("ok", 2.0)), _row(Case(64, 2, 8192, True), cudnn=Cell("ok", 4.0))]
    messages = bench.write_plots(rows, str(tmp_path / "plots"), gpu_name="test GPU")
    assert messages == [f"plot written to {tmp_path / 'plots' / 'attention_d128.png'}",
                        f"plot written to {tmp_path / 'plots' / 'attention_d64.png'}"]
    for name in ("attention_d128.png", "attention_d64.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_holds_every_figure():
    rows = [_row(tylo=Cell("ok", 1.0, (0.9, 1.0, 1.1), 2e-3), cudnn=Cell("ok", 2.0, (2.0,), 0.0),
                 flash=Cell("wrong", max_abs_err=0.5, note="outside"))]
    data = json.loads(json.dumps(bench.to_json(rows, {"gpu": "test"})))
    assert data["meta"] == {"gpu": "test"} and data["tolerance"] == {"atol": bench.ATOL, "rtol": bench.RTOL}
    case = data["cases"][0]
    assert (case["head_dim"], case["heads"], case["batch"], case["seqlen_q"], case["causal"], case["flops"]) == \
        (128, 16, 2, 8192, False, 2 ** 40)
    assert case["libraries"]["tylo"]["round_ms"] == [0.9, 1.0, 1.1]
    assert case["libraries"]["tylo"]["tflops"] == pytest.approx(1099.5116, abs=1e-3)
    assert case["libraries"]["flash"] == {"status": "wrong", "median_ms": None, "round_ms": [], "tflops": None,
                                          "max_abs_err": 0.5, "note": "outside"}
    assert case["ratios"] == {"tylo/cudnn": pytest.approx(2.0), "tylo/flash": None, "tylo/triton": None}


def test_blackwell_line():
    assert bench.blackwell_message((9, 0), None).startswith(
        "Blackwell: no sm_100-class GPU present (this GPU is sm_90): examples/blackwell_attention.py not run")
    assert "offers no GPU path yet" in bench.blackwell_message((10, 0), False)
    assert "timed" in bench.blackwell_message((10, 0), True)
    assert bench.blackwell_message((12, 0), None).startswith("Blackwell: no sm_100-class GPU present (this GPU is sm_120)")


def test_examples_load_by_path():
    module, why = bench.load_example("no_such_attention")
    assert module is None and why == "examples/no_such_attention.py is not in this tree"
    module, why = bench.load_example("attention_host")   # imports, but is no attention example
    assert module is None and why == "examples/attention_host.py has no attention()"


def test_main_without_torch_says_so(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert bench.main(["--quick"]) == 1
    assert capsys.readouterr().out.strip() == \
        "benchmarks/attention.py: torch is not installed (pip install torch): nothing measured"


# ---------------------------------------------------------------- tuning variants of the Hopper kernel

def test_tylo_variants_parse_and_bad_ones_name_the_setting():
    args = bench.parse_args(["--tylo-variant", "pu=schedule:per_unit,tile:128x2x2p,l2mb:8",
                             "--tylo-variant", "d=schedule:dynamic", "--libraries", "tylo,cudnn"])
    assert args.tylo_variant == [("pu", {"schedule": "per_unit", "tile": (128, 2, 2, True), "l2mb": 8.0}),
                                 ("d", {"schedule": "dynamic"})]
    assert args.libraries == ("tylo", "cudnn")
    for bad, match in (("x", "NAME=KEY:VALUE"), ("x=speed:1", "one of schedule"), ("x=schedule:lpt", "per_unit"),
                       ("x=tile:128x2", "BNxSTAGESxCONSUMERS"), ("x=epilogue:smem", "tma or registers"),
                       ("x=oinq:1", "oinq is yes or no"), ("x=under:1", "under is yes or no")):
        with pytest.raises(SystemExit):
            bench.parse_args(["--tylo-variant", bad])
        with pytest.raises(Exception, match=match):
            bench.parse_variant(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--libraries", "tylo,cublas"])


def test_variant_runner_applies_settings_for_one_call_and_restores_them():
    class FakeHopper:                       # the settings hopper_attention.attention reads
        SCHEDULE = {False: "static", True: "dynamic"}
        TILE_OVERRIDES = {}
        L2_GROUP_BYTES = 1 << 24
        EPILOGUE = "tma"
        SOFTMAX_UNDER_PV = False
        INTERLEAVE_S_PV = False
        _LAUNCHES = {"mine": 1}
        TileConfig = staticmethod(lambda *a: a)
        seen = []

        @classmethod
        def attention(cls, q, k, v, causal):
            cls.seen.append((dict(cls.SCHEDULE), dict(cls.TILE_OVERRIDES), cls.L2_GROUP_BYTES, cls._LAUNCHES,
                             cls.EPILOGUE, cls.SOFTMAX_UNDER_PV, cls.INTERLEAVE_S_PV))
            return ("o", "lse")

    class Q:
        shape = (1, 8, 2, 64)
    run = bench.variant_runner(FakeHopper, {"schedule": "per_unit", "tile": (128, 2, 3, False), "l2mb": 2,
                                            "epilogue": "registers", "under": True, "interleave": True})
    assert run(Q(), None, None, True) == "o"
    schedule, tiles, l2, launches, epilogue, under, interleave = FakeHopper.seen[0]
    assert epilogue == "registers" and FakeHopper.EPILOGUE == "tma"
    assert under and interleave and not FakeHopper.SOFTMAX_UNDER_PV and not FakeHopper.INTERLEAVE_S_PV
    assert schedule == {False: "static", True: "per_unit"} and tiles == {(64, True): (128, 2, 3, False)}
    assert l2 == 2 << 20 and launches == {}
    assert FakeHopper.SCHEDULE == {False: "static", True: "dynamic"} and FakeHopper.TILE_OVERRIDES == {}
    assert FakeHopper.L2_GROUP_BYTES == 1 << 24 and FakeHopper._LAUNCHES == {"mine": 1}


def test_oinq_variant_stages_o_in_q_on_the_points_own_tile():
    # oinq:yes -> the call's default tile (tile_config for its head_dim, causal and key length) with o_in_q;
    # with tile: that tile with o_in_q; the module's overrides are restored after the call
    import dataclasses
    assert bench.parse_variant("oq=oinq:yes") == ("oq", {"oinq": True})
    assert bench.parse_variant("ov=oinv:no") == ("ov", {"oinv": False})
    assert bench.parse_variant("il=interleave:yes,under:no") == ("il", {"interleave": True, "under": False})

    @dataclasses.dataclass(frozen=True)
    class Tile:
        bn: int
        stages: int
        consumers: int
        pingpong: bool = False
        o_in_q: bool = False
        o_in_v: bool = False

    class FakeHopper:
        SCHEDULE = {False: "static", True: "dynamic"}
        TILE_OVERRIDES = {}
        L2_GROUP_BYTES = 1 << 24
        EPILOGUE = "tma"
        SOFTMAX_UNDER_PV = False
        INTERLEAVE_S_PV = False
        _LAUNCHES = {}
        TileConfig = Tile
        seen = []

        @staticmethod
        def tile_config(d, causal, seqlen_k):
            return Tile(80 if d == 256 else seqlen_k, 2, 2, pingpong=causal)

        @classmethod
        def attention(cls, q, k, v, causal):
            cls.seen.append(dict(cls.TILE_OVERRIDES))
            return ("o", "lse")

    class Q:
        shape = (1, 512, 8, 256)

    class K:
        shape = (1, 176, 8, 256)
    bench.variant_runner(FakeHopper, {"oinq": True})(Q(), K(), None, True)
    bench.variant_runner(FakeHopper, {"oinq": True, "tile": (64, 2, 2, False)})(Q(), K(), None, False)
    Q.shape = K.shape = (1, 176, 8, 128)
    bench.variant_runner(FakeHopper, {"oinq": True})(Q(), K(), None, False)
    # oinv:yes stages O in the V ring instead (clearing o_in_q); oinv:no leaves both off
    bench.variant_runner(FakeHopper, {"oinv": True, "tile": (80, 2, 2, False)})(Q(), K(), None, False)
    bench.variant_runner(FakeHopper, {"oinv": False})(Q(), K(), None, False)
    assert FakeHopper.seen == [{(256, True): Tile(80, 2, 2, True, True)}, {(256, False): Tile(64, 2, 2, False, True)},
                               {(128, False): Tile(176, 2, 2, False, True)},
                               {(128, False): Tile(80, 2, 2, False, False, True)},
                               {(128, False): Tile(176, 2, 2, False, False, False)}]
    assert FakeHopper.TILE_OVERRIDES == {}
