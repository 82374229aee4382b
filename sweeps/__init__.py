"""Sweeps: many problems, one run, resumable (the sweep driver; its reports are in reports/)."""
