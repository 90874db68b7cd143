"""Golden files for the bench and kld JSON and markdown: what `pinset bench`/`pinset kld` write, what
`--reanalyse` recomputes and what the models read back, byte for byte, from recorded fixtures and from
rounds built here from captured llama-bench output. They prove that a refactor of pinset/measures/ keeps
every byte; a deliberate change regenerates them (`PINSET_REGEN_GOLDEN=1 pytest tests/measures/test_measures_golden.py`)
and the diff of tests/golden/measures/ shows what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinset.results import Doc
from tests import testing
from tests.testing import read_bench

FIX = testing.FIXTURES
GOLDEN = testing.GOLDEN / "measures"
REGEN = os.environ.get("PINSET_REGEN_GOLDEN") == "1"

BENCH_FIXTURES = sorted((FIX / "llama-bench").glob("*.json")) + sorted((FIX / "report").glob("*/bench-*.json"))
KLD_FIXTURES = sorted((FIX / "report").glob("*/kld-*.json"))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path} (PINSET_REGEN_GOLDEN=1 writes it)"
    assert text == path.read_text(), f"{name} differs from its golden file"


def dumps(doc) -> str:
    """The bytes `write_json` writes (pinset.output)."""
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def _label(path: Path) -> str:
    return f"{path.parent.name}--{path.stem}"


# --- bench ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fixture", BENCH_FIXTURES, ids=_label)
def test_bench_fixture_round_trip_markdown_and_reanalysis(fixture):
    from pinset.measures.bench_analysis import reanalysed
    from pinset.measures.bench_model import BenchResult
    from pinset.measures.bench_render import bench_markdown

    raw = json.loads(fixture.read_text())
    result = BenchResult.from_json(Doc(raw, fixture, ""))
    read = result.to_json()
    check_golden(f"bench/{_label(fixture)}.read.json", dumps(read))
    check_golden(f"bench/{_label(fixture)}.md", bench_markdown(result, "bench.png"))
    if raw.get("round_log") and all("runs" in r for r in raw["round_log"]):
        again = reanalysed(result)
        check_golden(f"bench/{_label(fixture)}.reanalysed.json", dumps(again.to_json()))
        check_golden(f"bench/{_label(fixture)}.reanalysed.md", bench_markdown(again))


def _captured_rounds(n: int, head_factor: float, aa: bool = False):
    """n rounds (warm-up first) from the captured llama-bench lines, head's speeds scaled by head_factor with a
    fixed per-round jitter, every run timed at 1.5 s: a deterministic stand-in for run_rounds, recorded as
    run_bench records them (Round.record)."""
    from dataclasses import replace

    from pinset.measures.bench_run import Round, SideRun
    from pinset.measures.llama_bench import parse_jsonl

    lines = parse_jsonl((FIX / "llama-bench" / "cpu-tiny-moe-iq1m.jsonl").read_text())
    jitter = [0.0, 0.004, -0.003, 0.006, -0.005, 0.002, -0.001, 0.003, -0.004, 0.001]
    out = []
    for i in range(n):
        rnd = Round(i, "BH" if i % 2 == 0 else "HB", warmup=(i == 0))
        for label in ("base", "head"):
            f = 1.0 + (jitter[i % len(jitter)] if label == "head" else -jitter[(i + 3) % len(jitter)] / 2)
            f *= head_factor if label == "head" and not aa else 1.0
            scaled = [replace(line, avg_ts=line.avg_ts * f, samples_ts=tuple(s * f for s in line.samples_ts))
                      for line in lines]
            rnd.runs[label] = SideRun(label, True, scaled, None, 1.5)
        out.append(rnd.record())
    return out


@pytest.mark.parametrize("case", [("faster", 1.03, 8), ("aa", 1.0, 8), ("insufficient", 1.03, 3),
                                  ("aa-check", 1.0, 8)], ids=lambda c: c[0])
def test_bench_document_from_captured_rounds(tmp_path, case):
    from pinset.measures.bench_analysis import bench_result, rounds_frame, write_csv
    from pinset.measures.bench_render import bench_markdown
    from pinset.measures.sides import Side

    name, factor, n = case
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    base = Side("base", "b1", "0c1e57098" + "0" * 31, tmp_path / "base", None, "abcdef0123456789")
    head = Side("head", "b1", "0c1e57098" + "0" * 31, tmp_path / "head", None, "abcdef0123456789")
    args = ["-t", "2", "-p", "64,128", "-n", "16", "-ub", "64,128", "-b", "128", "-ngl", "0"]
    result = bench_result({"base": model, "head": model}, args, _captured_rounds(n, factor, aa=name.startswith("aa")),
                          2, base, head, host={"hostname": "box", "gpu_uuids": [], "runner": None, "gpu_class": None},
                          **({"aa": True} if name == "aa-check" else {}))
    text = dumps(result.to_json()).replace(str(tmp_path), "<tmp>")
    check_golden(f"bench/captured-{name}.json", text)
    check_golden(f"bench/captured-{name}.md", bench_markdown(read_bench(json.loads(text)), "bench.png"))
    csv = write_csv(rounds_frame(result.round_log), tmp_path / "rounds.csv")
    check_golden(f"bench/captured-{name}.csv", csv.read_text())


# --- kld --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fixture", KLD_FIXTURES, ids=_label)
def test_kld_fixture_round_trip_and_markdown(fixture):
    from pinset.measures.kld_model import KldResult
    from pinset.measures.kld_render import kld_markdown

    read = KldResult.from_json(Doc(json.loads(fixture.read_text()), fixture, "")).to_json()
    check_golden(f"kld/{_label(fixture)}.read.json", dumps(read))
    check_golden(f"kld/{_label(fixture)}.md", kld_markdown(read))


def _device_run(label: str, fixture: str, backend: str = "CPU", shift: float = 0.0, commit: str | None = None):
    from dataclasses import replace

    from pinset.measures.kld import DeviceRun
    from pinset.measures.perplexity import kld_problem, parse_perplexity
    from pinset.measures.sides import Side

    out = parse_perplexity((FIX / "perplexity" / f"{fixture}.stdout").read_text(),
                           (FIX / "perplexity" / f"{fixture}.stderr").read_text())
    if shift and out.kld:
        out = replace(out, kld=replace(out.kld, kld_mean=replace(out.kld.kld_mean, value=out.kld.kld_mean.value + shift)))
    side = Side(label, "b1", commit or "0c1e57098" + "0" * 31, Path("/nonexistent"), None, None)
    return DeviceRun(label, side, backend, out, 0, kld_problem(out, 0), 12.25)


@pytest.mark.parametrize("case", [("as-close", "kld-iq1m-vs-f16", 0.0), ("further", "kld-iq1m-vs-f16", 0.3),
                                  ("failed", "kld-bad-base-file", 0.0)], ids=lambda c: c[0])
def test_kld_document_from_captured_runs(tmp_path, case):
    from pinset.measures.kld import Reference, kld_document
    from pinset.measures.kld_render import kld_markdown
    from pinset.measures.perplexity import parse_perplexity

    name, head_fixture, shift = case
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    text = tmp_path / "t.txt"
    text.write_text("some prose\n")
    ref_out = parse_perplexity((FIX / "perplexity" / "ref-cpu-f16.stdout").read_text(),
                               (FIX / "perplexity" / "ref-cpu-f16.stderr").read_text())
    ref = Reference(tmp_path / "logits.bin", ref_out, True, "0123456789abcdef", "b1", "0c1e57098" + "0" * 31)
    runs = [_device_run("base", "kld-iq1m-vs-f16"), _device_run("head", head_fixture, shift=shift)]
    doc = kld_document(model, text, 256, 3, ref, runs,
                       host={"hostname": "box", "gpu_uuids": [], "runner": None, "gpu_class": None})
    out = dumps(doc).replace(str(tmp_path), "<tmp>")
    check_golden(f"kld/captured-{name}.json", out)
    check_golden(f"kld/captured-{name}.md", kld_markdown(json.loads(out)))
