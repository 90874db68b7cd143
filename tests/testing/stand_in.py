"""The stand-in llama.cpp tree of the verify tests (tests/fixtures/verify/stand-in): a tiny CMake project whose
test-backend-ops and test-chat replay real captured output, so the gate pipeline runs real builds in seconds."""

from __future__ import annotations

from tests.testing import FIXTURES

STAND_IN = FIXTURES / "verify" / "stand-in"
OPS = FIXTURES / "backend-ops"


def stand_in_files(mul_mat="cpu-test-MUL_MAT-iq1_s.log", chat_exit=None, mul_mat_exit=None) -> dict:
    files = {name: (STAND_IN / name).read_text() for name in ("CMakeLists.txt", "replay.c", "replay-named.c", "chat.c")}
    files["replay/test-MUL_MAT-CPU.log"] = (OPS / mul_mat).read_text()
    files["replay/test-MUL_MAT_ID-CPU.log"] = (OPS / "cpu-test-MUL_MAT_ID-iq1_s.log").read_text()
    files["replay/chat.exit"] = chat_exit
    files["replay/test-MUL_MAT-CPU.exit"] = mul_mat_exit
    return files
