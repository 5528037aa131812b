"""Offline training of conductors (docs/design.md, "Training"): never on live traffic."""
