"""Query language: parsing (no I/O) and planning regexes into required literals."""
