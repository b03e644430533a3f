"""Tools for developing ortbundle, kept outside the package users install: tasks.py imports them
(`invoke mutation`), the tests test them, and nothing under ortbundle/ may import them."""
