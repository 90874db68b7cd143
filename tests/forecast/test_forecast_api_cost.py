"""Forecast's API cost and order (issue 40 class 7): a bad --onto is bad input before any API request
(docs/forecast.md: "nothing fetched"); a PR list that shifts while it is paged (a PR opened meanwhile pushes
one from the end of a page to the start of the next) lists each PR once and asks its reviews once."""

from __future__ import annotations

from collections import Counter

from pinset.cli import main
from tests.forecast.test_forecast import fake, pull, run_forecast, world  # noqa: F401 (fixtures)


def test_a_bad_onto_asks_the_api_nothing(world, tmp_path, fake, capsys):
    _, _, cfg = world
    code, data, _ = run_forecast(tmp_path, cfg, fake, "--onto", "no-such-build")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and data is None and len(err) == 1 and "no-such-build" in err[0]
    assert fake.requests == []


class Shifting(list):
    """The open PRs as the fake lists them; right after the first page is served, a new PR is opened at the
    top (GitHub lists newest first), so every later page starts one item earlier."""

    def __init__(self, items, newcomer):
        super().__init__(items)
        self.newcomer, self.served = newcomer, 0

    def __iter__(self):
        yield from list.__iter__(self)
        self.served += 1
        if self.served == 1:
            self.insert(0, self.newcomer)


def test_a_list_that_shifts_while_paged_lists_each_pr_once(world, tmp_path, fake, capsys):
    _, _, cfg = world
    fake.pulls = Shifting(fake.pulls, pull(9, "2026-01-07T00:00:00Z"))
    code, data, _ = run_forecast(tmp_path, cfg, fake)
    capsys.readouterr()
    numbers = [pr["number"] for pr in data["prs"]]
    assert sorted(numbers) == sorted(set(numbers)) == [1, 2, 3, 4, 5, 6, 7, 8]   # 3 came twice from the API
    listed = [r for r in fake.requests if r[1].startswith("/repos/o/r/pulls?")]
    assert len(listed) == 3
    reviews = Counter(r[1].split("/")[5] for r in fake.requests if "reviews" in r[1])
    assert reviews and set(reviews.values()) == {1}
    assert data["api_requests"] == len(fake.requests)


def test_the_forecast_table_of_a_shifted_list(world, tmp_path, fake, capsys):
    """The text output too: PR 3 once."""
    _, _, cfg = world
    fake.pulls = Shifting(fake.pulls, pull(9, "2026-01-07T00:00:00Z"))
    main(["forecast", "-c", str(cfg), "--repo", "o/r", "--api-url", fake.url])
    out = capsys.readouterr().out
    assert "8 open PRs" in out
