"""Offline training of conductors (DESIGN.md §5): never on live traffic."""
