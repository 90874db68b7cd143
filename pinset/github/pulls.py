"""Upstream's open PRs from GitHub's REST API: the list pages (every one, by the `Link` header) and, for the
few PRs that touch a pin's file, their reviews (for the ranking).

The client is `pinset report --post`'s (pinset/github/client.py): the token comes from the caller (read from
GITHUB_TOKEN, never printed or written), goes to the API origin only, a 403 rate limit waits for its
Retry-After or reset, 5xx answers are retried by pinset.http's session; every failure is one line.
Without a token this is the list pages (100 PRs each) plus one request per PR that touches a pin.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinset.errors import GitHubError
from pinset.github.client import Answer, GitHub, kind_of


@dataclass(frozen=True)
class OpenPR:
    number: int
    title: str
    url: str
    head: str | None          # the API's head sha (git's refs/pull/N/head is the one used)
    draft: bool
    updated_at: str           # ISO 8601, as GitHub writes it (sorts as text)
    author: str | None = None


class PullsAPI(GitHub):
    """GitHub (report --post's client) reading pull requests; `requests` counts what it asked."""

    requests_made = 0

    def call(self, method: str, url: str, json_body: dict | None = None, params: dict | None = None,
              accept: tuple[int, ...] = ()) -> Answer:
        self.requests_made += 1   # the figure the forecast reports: list pages and review lists, no more
        return super().call(method, url, json_body=json_body, params=params, accept=accept)

    def _list_pages(self, url: str, what: str) -> list[dict]:
        """Every item of a listing (GitHub.pages: every page, loops refused), each an object."""
        items: list[dict] = []
        for answer, item in self.pages(url, {"per_page": 100}, what):
            if not isinstance(item, dict):
                raise GitHubError(f"GET {answer.url}: expected a list of {what}s, GitHub answered a list holding "
                                f"{kind_of(item)}")
            items.append(item)
        return items

    def open_pulls(self, owner: str, name: str) -> list[OpenPR]:
        """Every open PR (all pages of 100), each once: a PR opened or closed while the pages are read shifts the
        list by one, so a PR at a page's end may come again at the next page's start; the later copy (its
        newer state) is kept, at the place the PR first took."""
        url = f"{self.api_url}/repos/{owner}/{name}/pulls"
        prs: dict[int, OpenPR] = {}
        for item in self._list_pages(url + "?state=open", "pull request"):
            number = item.get("number")
            if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
                raise GitHubError(f"GET {url}: a pull request without a number ({kind_of(number)})")
            head = _obj(item.get("head"))
            sha = head.get("sha") if isinstance(head.get("sha"), str) else None
            user = _obj(item.get("user"))
            prs[number] = OpenPR(number, self.clean(item.get("title") or "", 200),
                                 self.clean(item.get("html_url") or f"https://github.com/{owner}/{name}/pull/{number}"),
                                 sha, item.get("draft") is True, str(item.get("updated_at") or ""),
                                 user.get("login") if isinstance(user.get("login"), str) else None)
        return list(prs.values())

    def review_state(self, owner: str, name: str, number: int) -> str:
        """`approved` (some reviewer's last word is an approval, nobody's is a change request), `reviewed`
        (any other submitted review), else `open`."""
        reviews = self._list_pages(f"{self.api_url}/repos/{owner}/{name}/pulls/{number}/reviews", "review")
        last: dict[str, str] = {}
        for review in reviews:
            user = _obj(review.get("user"))
            state = review.get("state")
            if isinstance(state, str) and state != "PENDING":
                last[str(user.get("login"))] = state
        if not last:
            return "open"
        words = set(last.values())
        return "approved" if "APPROVED" in words and "CHANGES_REQUESTED" not in words else "reviewed"


def _obj(value) -> dict:
    return value if isinstance(value, dict) else {}
