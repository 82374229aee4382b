"""Sweeps: many problems, one run. Executors (local pool; parallel builds, exclusive timing), metrics, reports."""
