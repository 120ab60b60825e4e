"""Feedback tasks in plain Python: scales, response validation and labeler agreement (no Django)."""
