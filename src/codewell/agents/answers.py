"""What the agents produce, whoever wrote it (a model through the agent loop, or the deterministic retrieval
pipeline): a Markdown answer, the sources it cites pinned to commits, and the cost of producing it.

Every part of the agents capability speaks these types: `retrieval` and `loop` produce an `AgentAnswer`,
`finder` and the deep search jobs render and store it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Who wrote an answer: a model (its configured name is in AgentStats.model) or the retrieval pipeline.
Author = Literal["model", "retrieval"]


@dataclass(frozen=True)
class Citation:
    """One cited location, pinned: `repo@commit:path#Lstart-end` (1-based, inclusive lines)."""

    repo: str
    commit: str  # full 40-hex SHA
    path: str
    start_line: int
    end_line: int
    note: str = ""  # why it is cited (a symbol name, the matched terms), may be empty

    @property
    def pin(self) -> str:
        return f"{self.repo}@{self.commit}:{self.path}#L{self.start_line}-{self.end_line}"


@dataclass
class AgentStats:
    """The cost of one answer."""

    seconds: float = 0.0
    tool_calls: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    credits: int = 0
    model: str | None = None  # the configured model's name; None when the retrieval pipeline answered


@dataclass
class AgentAnswer:
    """A finished answer: Markdown text (without the sources list), the citations, and its stats.

    `sources` hold only locations that were re-checked to exist at their commit and lines, and that the actor
    who asked may read. `notice` says plainly when no model wrote the answer, or why the model was not used
    (provider down, budget exhausted) so that callers can show it.
    """

    text: str
    sources: list[Citation] = field(default_factory=list)
    stats: AgentStats = field(default_factory=AgentStats)
    author: Author = "retrieval"
    notice: str = ""
