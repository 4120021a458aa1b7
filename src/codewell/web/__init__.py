"""web capability: the pages people read code with (home, search, repositories, file view)."""
