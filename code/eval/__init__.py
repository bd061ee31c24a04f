"""Question sets and scripted runs for evaluate.py (M6)."""
