"""The nightly job: choose the builds, pick the newest green one, blame the upstream commit that broke a pin."""
