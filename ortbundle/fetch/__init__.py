"""Resolve coordinates to URLs, download once, keep verified bytes in a content-addressed cache."""
