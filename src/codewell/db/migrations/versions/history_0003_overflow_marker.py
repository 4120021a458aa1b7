"""History: mark already-indexed messages with more distinct words than the word index keeps.

The indexer now adds the marker word `~overflow` to messages with more than 200 distinct words, so a term
beyond the 200th word is still found (see history.indexer.message_words). This marks the commits indexed
before. Data only: no schema change.

Revision ID: history_0003
Revises: history_0002
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "history_0003"
down_revision = "history_0002"
branch_labels = None
depends_on = None

# Frozen copies of the indexer's rule at the time of this migration.
WORD = re.compile(r"[a-z0-9_]{3,64}")
MAX_WORDS_PER_COMMIT = 200
OVERFLOW_WORD = "~overflow"
# 201 distinct words of 3+ characters with separators need at least 803 characters: shorter messages are
# skipped in SQL, so only a few long messages are read.
MIN_CHARS = 800


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, search_text FROM history_commits WHERE length(search_text) >= :n"), {"n": MIN_CHARS}
    )
    marked = [cid for cid, text in rows if len(set(WORD.findall(text))) > MAX_WORDS_PER_COMMIT]
    if not marked:
        return
    bind.execute(
        sa.text(
            "INSERT INTO history_words (word) SELECT CAST(:w AS VARCHAR(64)) "
            "WHERE NOT EXISTS (SELECT 1 FROM history_words WHERE word = CAST(:w AS VARCHAR(64)))"
        ),
        {"w": OVERFLOW_WORD},
    )
    word_id = bind.execute(sa.text("SELECT id FROM history_words WHERE word = :w"), {"w": OVERFLOW_WORD}).scalar_one()
    bind.execute(
        sa.text(
            # Explicit casts: PostgreSQL cannot infer one type for a parameter used twice.
            "INSERT INTO history_word_commits (word_id, commit_id) SELECT CAST(:w AS BIGINT), CAST(:c AS BIGINT) "
            "WHERE NOT EXISTS (SELECT 1 FROM history_word_commits "
            "WHERE word_id = CAST(:w AS BIGINT) AND commit_id = CAST(:c AS BIGINT))"
        ),
        [{"w": word_id, "c": cid} for cid in marked],
    )


def downgrade() -> None:
    pass  # the marker postings are harmless candidates; nothing to undo
