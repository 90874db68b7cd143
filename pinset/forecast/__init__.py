"""`pinset forecast`: which open upstream PRs would break (fix, carry, move) a pin, before they land.

Layers: the API listing (github.py) and the git side (heads.py) feed run.py, which simulates the pin set with
the sim engine on BUILD and on BUILD+PR; model.py holds the result and its JSON, markdown.py the tracking
issue's text. Nothing here prints or reads argparse arguments (pinset/commands/forecast.py does).
"""
