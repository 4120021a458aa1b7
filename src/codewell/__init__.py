"""codewell: self-hosted code intelligence for engineers and their agents."""

__version__ = "0.1.0"
