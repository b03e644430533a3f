"""report.html: a page a person can look at, written with every build beside the manifest.

It shows the size of every package (a treemap per package, bars on one scale), the licence audit
per channel, each runtime's dependency closure, the models and their gates, and what changed
since an earlier build. Built from the evidence the build writes anyway (collect.py), so a
release merged from runners writes the same page; deterministic (no clock, no host path); listed
in the manifest like the other evidence.
"""
