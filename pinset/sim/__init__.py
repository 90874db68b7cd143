"""`pinset sim`: apply the pin set onto builds in memory, attribute conflicts, check contracts."""
