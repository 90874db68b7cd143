"""`bump` keeps YAML anchors and aliases valid (issue 40 class 7): `builds: [&ship b1, b2]` with `*ship` used
elsewhere stays a pins.yaml that reads, the alias naming the new build; a first entry that is an alias is
replaced where it is written, never at its anchor; every other byte stays the user's."""

from __future__ import annotations

import pytest
import yaml

from pinset.bump.yaml_edit import set_first_build
from pinset.errors import PinsetError
from tests.bump.test_bump import bump, git, project  # noqa: F401


@pytest.mark.parametrize("text, want", [
    ("builds: [&ship b1, b2]   # c\ndescription: *ship\n", "builds: [&ship b3, b2]   # c\ndescription: *ship\n"),
    ("description: &ship b1\nbuilds: [*ship, b2]\n", "description: &ship b1\nbuilds: [b3, b2]\n"),
    ("builds:\n  - &ship b1   # shipped\n  - b2\n  - b3\ndescription: *ship\n",
     "builds:\n  - &ship b3   # shipped\n  - b2\ndescription: *ship\n"),
    ("builds: [!!str b1, b2]\n", "builds: [!!str b3, b2]\n"),
    ("builds: [&sel {tags: {match: 'b*', newest: 3}}, b2]\n", "builds: [&sel b3, b2]\n"),
    ("x: &old b3\nbuilds: [b1, *old, b2]\n", "x: &old b3\nbuilds: [b3, b2]\n"),
    ("builds: [b1, b2]\n", "builds: [b3, b2]\n"),
])
def test_anchors_and_aliases_stay_valid(text, want):
    out = set_first_build(text, "b3")
    assert out == want
    data = yaml.safe_load(out)
    assert data["builds"][0] == "b3"
    if "*ship" in text and "&ship b1" in text.split("builds")[1]:
        assert data["description"] == "b3"   # the alias names the new build


def test_a_later_duplicate_with_an_anchor_is_left_to_the_user():
    with pytest.raises(PinsetError, match="carries the anchor &n; remove it by hand"):
        set_first_build("builds: [b1, &n b3]\ndescription: *n\n", "b3")


def test_bump_of_an_anchored_first_build_commits_a_pins_yaml_that_reads(project, capsys):
    _, dist, _ = project
    text = (dist.path / "pins.yaml").read_text()
    text = text.replace('builds: [b1, "tags:b*:3"]', 'builds: [&ship b1, "tags:b*:3"]')
    text = text.replace("  - id: q   # exact everywhere\n", "  - id: q   # exact everywhere\n    description: *ship\n")
    (dist.path / "pins.yaml").write_text(text)
    dist.git("commit", "-q", "-am", "anchored")
    assert bump(dist) == 0
    capsys.readouterr()
    committed = git(dist.path, "show", "pinset/bump:pins.yaml")
    assert 'builds: [&ship b3, "tags:b*:3"]' in committed and "description: *ship" in committed
    assert yaml.safe_load(committed)["pins"][1]["description"] == "b3"
