"""The search index: shard building (builder, bitmaps, languages) and reading (shard)."""
