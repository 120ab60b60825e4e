"""Model judges beside the labelers: a judge run's verdicts, its agreement with the humans, and routing."""
