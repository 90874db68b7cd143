"""`pinset history`: the pin set's health night after night, from the result files of many runs.

Stages: load (pinset/history/load.py: a folder of runs or a results branch, every file read through its
kind's model, a damaged or foreign file named and skipped) -> model (pinset/history/model.py: pins x nights,
red streaks and their blame, refreshes, bench ratios, KLD, verify's gates, forecast alarms; pandas pivots)
-> render (pinset/history/render.py: one self-contained HTML page, markdown, JSON; matplotlib plots).
"""
