"""A fake PyPI on 127.0.0.1: the JSON API (/pypi/NAME/json, as PyPI and its mirrors serve it) and the files it names, with
HTTP Range support and knobs to inject faults (a dropped connection, a wrong published sha256)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LLAMA_COMMIT = "0c1e57098"



def note_patch(root: Path) -> Path:
    """`root/patches/note/`: one patch that adds a line to an sdist's README.md ("llama.cpp")."""
    folder = root / "patches" / "note"
    folder.mkdir(parents=True)
    (folder / "0001-note.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] note\n\n---\n"
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n llama.cpp\n"
        "+The pinned build carries a note.\n")
    return folder


def make_sdist(version: str, files: dict[str, str], commit: str = LLAMA_COMMIT, padding: int = 0) -> bytes:
    """A llama-cpp-python-like sdist: CHANGELOG.md naming `commit`, `files` under vendor/llama.cpp.

    `padding` adds a file of random-looking bytes so the archive is large enough to cut in half.
    """
    buf = io.BytesIO()
    top = f"llama_cpp_python-{version}"
    entries = {"CHANGELOG.md": f"## [{version}]\n\n- feat: update llama.cpp to ggml-org/llama.cpp@{commit}\n"}
    entries.update({f"vendor/llama.cpp/{path}": text for path, text in files.items()})
    if padding:
        noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() + "\n" for i in range(padding // 65 + 1))
        entries["vendor/llama.cpp/data/noise.txt"] = noise
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in entries.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class FakeIndex:
    releases: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (name, version) -> sdist
    wrong_sha: bool = False            # publish a sha256 that does not match the file
    drop_after: int | None = None      # the next file answer stops after this many bytes
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    url: str = ""
    uploaded: dict[tuple[str, str], str] = field(default_factory=dict)  # (name, version) -> ISO 8601 upload time

    def add(self, name: str, version: str, data: bytes, uploaded: str | None = None) -> None:
        self.releases[(name, version)] = data
        if uploaded is not None:
            self.uploaded[(name, version)] = uploaded

    def filename(self, name: str, version: str) -> str:
        return f"{name.replace('-', '_')}-{version}.tar.gz"

    def file_requests(self) -> list[str | None]:
        return [rng for path, rng in self.requests if path.startswith("/files/")]


def serve(index: FakeIndex):
    """Start the server in a thread; returns (server, index) with index.url set."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            index.requests.append((self.path, self.headers.get("Range")))
            parts = self.path.strip("/").split("/")
            if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json":
                return self._json(parts[1])
            if len(parts) == 2 and parts[0] == "files":
                return self._file(parts[1])
            self.send_error(404)

        def _json(self, name):
            """The project's document, as PyPI serves it at /pypi/NAME/json: every release's files."""
            versions = {v: d for (n, v), d in index.releases.items() if n == name}
            if not versions:
                return self.send_error(404)
            releases = {}
            for version, data in versions.items():
                sha = hashlib.sha256(data + (b"x" if index.wrong_sha else b"")).hexdigest()
                fn = index.filename(name, version)
                releases[version] = [
                    {"packagetype": "bdist_wheel", "filename": "x.whl", "url": f"{index.url}/files/x.whl",
                     "digests": {"sha256": "0" * 64}},
                    # relative, as PyPI's mirrors and proxies write it
                    {"packagetype": "sdist", "filename": fn, "url": f"../../files/{fn}",
                     "digests": {"sha256": sha},
                     "upload_time_iso_8601": index.uploaded.get((name, version), "2024-01-01T00:00:00.000000Z")}]
            body = json.dumps({"info": {"name": name}, "releases": releases}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _file(self, fn):
            data = next((d for (n, v), d in index.releases.items() if index.filename(n, v) == fn), None)
            if data is None:
                return self.send_error(404)
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            body = data[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if index.drop_after is not None:
                cut, index.drop_after = index.drop_after, None
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
