"""The GitHub client, on its own floor below report, forecast and bump and above pinset/http.py.

client.py: transport (the API origin, deadlines, retries, redirects within the origin), paging, comments, the
repository and API-URL parsing, token sources; pulls.py: open pull requests and their files (forecast);
pr_state.py: the pins' PR state (GraphQL, REST fallback) for sim and bump.
"""
