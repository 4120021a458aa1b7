"""Code host connections: repositories and their permissions discovered from GitHub, GitLab, Bitbucket, Gerrit."""
