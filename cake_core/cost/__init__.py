"""Cost-model contract and calibration records. Models themselves are plugins."""
