"""The `codewell` command line: one group, each capability adding its own sub-commands."""
