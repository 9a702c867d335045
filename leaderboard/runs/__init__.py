"""A run's page, its API sub-resources and its KernelBench export (included from config/urls.py)."""
