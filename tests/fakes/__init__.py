"""Loopback servers that speak the real protocols of services outside this machine (code hosts, IdPs)."""
