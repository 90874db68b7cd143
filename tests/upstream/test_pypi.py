"""sdists from a (fake) PyPI JSON API on 127.0.0.1: download, resume, sha256, damage, errors."""

from __future__ import annotations

import pytest

from pinset.cli import main
from pinset.upstream import pypi
from tests.testing import local_only, run_doc, write_pins
from tests.testing.fake_pypi import FakeIndex, make_sdist, note_patch, serve

NAME, VERSION = "llama-cpp-python", "9.9.9"
BUILD = f"pypi:{NAME}=={VERSION}"
TREE = {"README.md": "llama.cpp\n", "src/mmq.cu": "int mmq(void) { return 1; }\n"}


@pytest.fixture
def index(monkeypatch):
    idx = FakeIndex()
    idx.add(NAME, VERSION, make_sdist(VERSION, TREE, padding=600_000))
    server = serve(idx)
    monkeypatch.setenv("PINSET_PYPI_URL", idx.url)
    local_only(monkeypatch)
    yield idx
    server.shutdown()


@pytest.fixture
def cfg(tmp_path):
    note_patch(tmp_path)
    return write_pins(tmp_path / "pins.yaml", f"builds: [{BUILD}]\npins:\n  - id: note\n    patches: patches/note\n")


def sim(tmp_path, cfg, *extra: str) -> tuple[int, dict | None]:
    out = tmp_path / "sim.json"
    out.unlink(missing_ok=True)
    code = main(["sim", "-c", str(cfg), "--json", str(out), *extra])
    return code, run_doc(out.read_text()) if out.exists() else None


def downloads(cache) -> list[str]:
    folder = cache / "downloads"
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def test_download_is_checked_cached_and_reported(index, cfg, tmp_path, isolated_cache, capsys):
    code, data = sim(tmp_path, cfg)
    assert code == 0, data
    (build,) = data["builds"]
    assert build["commit"] == "0c1e57098" and build["pins"][0]["status"] == "applied"
    fn = index.filename(NAME, VERSION)
    assert downloads(isolated_cache) == [fn, fn + ".sha256"]
    data_bytes = index.releases[(NAME, VERSION)]
    assert (isolated_cache / "downloads" / fn).read_bytes() == data_bytes
    err = capsys.readouterr().err
    assert f"downloading {BUILD} (0.3 MB)" in err and f"downloaded {BUILD}: 0.3 MB in " in err  # no TTY: plain lines
    # The tree is imported once: a second run asks the index nothing.
    before = len(index.requests)
    assert sim(tmp_path, cfg)[0] == 0
    assert len(index.requests) == before


def test_download_resumes_a_part_file(index, isolated_cache, tmp_path):
    data = index.releases[(NAME, VERSION)]
    dest = isolated_cache / "downloads"
    dest.mkdir(parents=True)
    fn = index.filename(NAME, VERSION)
    (dest / f"{fn}.part").write_bytes(data[:1000])  # left by a killed run
    path = pypi.download_sdist(NAME, VERSION, dest, progress=False)
    assert path.read_bytes() == data
    assert index.file_requests() == ["bytes=1000-"]
    assert not (dest / f"{fn}.part").exists()


def test_dropped_connection_resumes_where_it_stopped(index, isolated_cache, monkeypatch):
    monkeypatch.setattr(pypi.time, "sleep", lambda s: None)
    data = index.releases[(NAME, VERSION)]
    index.drop_after = len(data) // 2
    path = pypi.download_sdist(NAME, VERSION, isolated_cache / "downloads", progress=False)
    assert path.read_bytes() == data
    first, second = index.file_requests()
    assert first is None and second.startswith("bytes=")
    assert 0 < int(second[6:-1]) <= len(data) // 2  # what arrived is kept (whole reads of the stream)


def test_sha256_mismatch_caches_nothing(index, cfg, tmp_path, isolated_cache, capsys):
    index.wrong_sha = True
    code, data = sim(tmp_path, cfg)
    assert code == 2 and data is None
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("download")]
    assert len(err) == 1 and "the index publishes" in err[0] and "(nothing cached)" in err[0], err
    assert err[0].startswith(f"pinset sim: error: {BUILD}: {index.filename(NAME, VERSION)} has sha256 ")
    assert downloads(isolated_cache) == []


def test_unknown_version_is_one_line(index, cfg, tmp_path, isolated_cache, capsys):
    code, _ = sim(tmp_path, cfg, "--builds", f"pypi:{NAME}==0.0.1")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"pinset sim: error: pypi:{NAME}==0.0.1: no such release on {index.url}"]


def test_unreachable_index_is_one_line(cfg, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PINSET_PYPI_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    code, _ = sim(tmp_path, cfg)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"pinset sim: error: {BUILD}: http://127.0.0.1:9 unreachable (127.0.0.1:9: connection refused (nothing listens there))"]


def test_truncated_cached_sdist_is_downloaded_again(index, cfg, tmp_path, isolated_cache):
    assert sim(tmp_path, cfg)[0] == 0
    good = sim(tmp_path, cfg)[1]
    fn = isolated_cache / "downloads" / index.filename(NAME, VERSION)
    fn.write_bytes(fn.read_bytes()[: fn.stat().st_size // 2])
    import shutil
    shutil.rmtree(isolated_cache / "mirror.git")  # so the sdist is read again
    code, again = sim(tmp_path, cfg)
    assert code == 0 and again == good
    assert fn.read_bytes() == index.releases[(NAME, VERSION)]


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_truncated_hand_placed_sdist_is_detected(index, cfg, tmp_path, isolated_cache, cut):
    """A cached sdist without digest marker (copied in by hand) is trusted only if it reads whole."""
    data = index.releases[(NAME, VERSION)]
    dest = isolated_cache / "downloads"
    dest.mkdir(parents=True)
    (dest / index.filename(NAME, VERSION)).write_bytes(data[: int(len(data) * cut)])
    code, again = sim(tmp_path, cfg)
    assert code == 0 and again["builds"][0]["pins"][0]["status"] == "applied"
    assert (dest / index.filename(NAME, VERSION)).read_bytes() == data
    assert index.file_requests() == [None]


def test_truncated_sdist_offline_is_one_line(cfg, tmp_path, isolated_cache, monkeypatch, capsys):
    monkeypatch.setenv("PINSET_PYPI_URL", "http://127.0.0.1:9")
    dest = isolated_cache / "downloads"
    dest.mkdir(parents=True)
    data = make_sdist(VERSION, TREE, padding=200_000)
    (dest / f"llama_cpp_python-{VERSION}.tar.gz").write_bytes(data[: len(data) // 2])
    code, _ = sim(tmp_path, cfg)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "unreachable" in err[0]
    assert downloads(isolated_cache) == []  # the damaged one is gone, not used


def test_terminal_progress_shows_bytes_and_rate(index, isolated_cache, monkeypatch):
    import io

    from rich.console import Console

    from pinset import output

    screen = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=screen, force_terminal=True, width=120))
    pypi.download_sdist(NAME, VERSION, isolated_cache / "downloads")
    text = screen.getvalue()
    assert f"downloading {BUILD}" in text and "kB" in text and "/s" in text


def test_a_foreign_part_file_is_replaced_not_trusted(index, isolated_cache):
    """A .part that is not the start of the file (garbage, another release): one fresh download."""
    data = index.releases[(NAME, VERSION)]
    dest = isolated_cache / "downloads"
    dest.mkdir(parents=True)
    (dest / f"{index.filename(NAME, VERSION)}.part").write_bytes(b"\0" * 1000)
    path = pypi.download_sdist(NAME, VERSION, dest, progress=False)
    assert path.read_bytes() == data
    assert index.file_requests() == ["bytes=1000-", None]
