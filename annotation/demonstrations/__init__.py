"""Demonstrations: assignment, the recorded browsing episode, the answer step, BC data."""
