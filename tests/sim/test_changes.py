"""Pure parsing of what a pin changes."""

from pinset.sim.changes import combine, is_substantive, parse_patch, touched_paths

PATCH_1 = """\
From 1111 Mon Sep 17 00:00:00 2001
Subject: [PATCH 1/2] add

---
diff --git a/src/mmq.cu b/src/mmq.cu
index 1..2 100644
--- a/src/mmq.cu
+++ b/src/mmq.cu
@@ -1,3 +1,5 @@
 switch (type) {
+    case GGML_TYPE_IQ1_M:
+    }
     case GGML_TYPE_Q4_0:
-        return old_value();
diff --git a/src/new.cu b/src/new.cu
new file mode 100644
index 0000000..3
--- /dev/null
+++ b/src/new.cu
@@ -0,0 +1,2 @@
+// a comment
+void load_tiles_iq1_m(void);
-- 
2.39.5
"""
PATCH_2 = """\
diff --git a/src/mmq.cu b/src/mmq.cu
index 2..3 100644
--- a/src/mmq.cu
+++ b/src/mmq.cu
@@ -1,3 +1,3 @@
-    case GGML_TYPE_IQ1_M:
+    case GGML_TYPE_IQ1_M: // moved
"""


def test_substantive_lines():
    assert is_substantive("    case GGML_TYPE_IQ1_M:")
    for line in ("", "   ", "}", "};", "break;", "// comment", "/* x */", " * doc", "#endif", "((("):
        assert not is_substantive(line), line


def test_parse_patch_files_lines_symbols():
    files = parse_patch(PATCH_1)
    assert sorted(files) == ["src/mmq.cu", "src/new.cu"]
    mmq = files["src/mmq.cu"]
    assert mmq.added == ["case GGML_TYPE_IQ1_M:"] and mmq.removed == ["return old_value();"]
    assert mmq.symbols == {"GGML_TYPE_IQ1_M"} and not mmq.new_file
    new = files["src/new.cu"]
    assert new.new_file and new.added == ["void load_tiles_iq1_m(void);"]  # signature after '-- ' ignored


def test_combine_drops_lines_a_later_patch_removes():
    net = combine([parse_patch(PATCH_1), parse_patch(PATCH_2)])
    assert net["src/mmq.cu"].added == ["case GGML_TYPE_IQ1_M: // moved"]
    assert net["src/mmq.cu"].removed == ["return old_value();"]
    assert net["src/new.cu"].new_file


def test_touched_paths_include_rename_sources():
    text = ("diff --git a/docs/old.md b/docs/new.md\nsimilarity index 90%\nrename from docs/old.md\n"
            "rename to docs/new.md\n" + PATCH_2)
    assert touched_paths([text, PATCH_1]) == {"docs/old.md", "docs/new.md", "src/mmq.cu", "src/new.cu"}
    assert touched_paths(['diff --git "a/sp ace" "b/sp ace"\n']) == {"sp ace"}   # quoted: read, not unknown
    assert touched_paths(['diff --git "a/bad\\q" "b/bad\\q"\n']) is None       # unreadable: unknown
