"""codenav capability."""
