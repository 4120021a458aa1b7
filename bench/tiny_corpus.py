"""A tiny stand-in for the Linux corpus, so that every benchmark's smallest mode runs in seconds (the benches'
smoke test, tests/bench/test_benches_run.py).

It lays out what `bench/corpus.py` would produce under a bench dir ($CODEWELL_BENCH_DIR), from generated C,
header, Rust and documentation files that hold every query of `search_bench.py` and `scale_bench.py`:
  linux-source/       the plain files, stamped done (corpus.linux_source and linux_many use it as is)
  linux/              the same files as a git repository with one commit on `main` (corpus.linux_repo)
`corpus.linux_many(N)` then cuts its N small repositories from linux-source/ as it does from the real tree.
The figures such a run prints mean nothing; the point is that the bench runs end to end as committed.

    .venv/bin/python bench/tiny_corpus.py DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import corpus

# Written into linux-source.done: corpus.linux_many records it as the tarball's name (no Debian package needed).
STAMP = "tiny-corpus-1"


def _c_file(n: int, lines: int) -> str:
    """A C file of about `lines` lines using the identifiers the benches search for."""
    out = [f"/* tiny corpus file {n}: Linus Torvalds wrote none of this */", "#include <linux/mutex.h>", ""]
    i = 0
    while len(out) < lines:
        out += [
            f"static int dev{n}_init_{i}(struct device *dev)",
            "{",
            f"\tunsigned long flags, mask = 0x{n:04x}{i:08x}ULL;",
            "\tmutex_lock(&dev->lock);",
            "\tspin_lock_irqsave(&dev->slock, flags);",
            f"\tdma_alloc_coherent(dev, {i}, NULL, 0);",
            "\tspin_lock_irqrestore(&dev->slock, flags);",
            "\tmutex_unlock(&dev->lock);",
            '\tprintk("init %lx\\n", mask);',
            "\treturn 0;",
            "}",
            "",
        ]
        i += 1
    return "\n".join(out) + "\n"


def _files() -> dict[str, str]:
    files: dict[str, str] = {
        "README": "Linux kernel (tiny stand-in)\n\nLinus Torvalds\n",
        "Documentation/process/howto.rst": "How to do Linux kernel development\n" * 20,
        "include/linux/mutex.h": "#ifndef _LINUX_MUTEX_H\n#define _LINUX_MUTEX_H\n"
        "void mutex_lock(struct mutex *lock);\nvoid mutex_unlock(struct mutex *lock);\n"
        "#define spin_lock_irqsave(l, f) do { (void)(l); (f) = 0; } while (0)\n#endif\n",
        "include/linux/ftrace.h": "unsigned long ftrace_graph_ret_addr(struct task_struct *task, int *idx,\n"
        "\t\t\t\t    unsigned long ret, unsigned long *retp);\n",
        "kernel/trace/fgraph.c": _c_file(0, 60)
        + "unsigned long ftrace_graph_ret_addr(struct task_struct *t, int *idx, unsigned long ret,"
        " unsigned long *retp)\n{\n\treturn ret;\n}\n",
        "kernel/sched/core.c": _c_file(1, 120)
        + "/* pick the next task to run: the scheduler's core */\nstatic struct task_struct *pick_next_task(void)\n"
        "{\n\treturn NULL;\n}\n",
        "mm/readahead.c": _c_file(2, 80)
        + "/* the readahead window of the page cache */\nstatic void ondemand_readahead(void)\n{\n}\n",
        "net/ipv4/tcp_timer.c": _c_file(3, 80)
        + "/* arm the TCP retransmission timer */\nvoid tcp_rearm_rto(struct sock *sk)\n{\n}\n",
        "fs/ext4/inode.c": _c_file(4, 150),
        "fs/ext4/super.c": _c_file(5, 100),
        "fs/btrfs/ctree.c": _c_file(6, 100),
        "rust/kernel/sync/lock.rs": "// mutex_lock from Rust\npub fn mutex_lock() -> i32 {\n    0\n}\n",
        # web_bench.py's large file (the real one has ~5,000 lines; this one a few hundred).
        "drivers/gpu/drm/omapdrm/dss/dsi.c": _c_file(7, 400),
        # web_bench.py's second highlighted file.
        "tools/perf/scripts/python/exported-sql-viewer.py": "".join(
            f"def view_{i}(rows):\n    return [r for r in rows if r > {i}]\n\n" for i in range(100)
        ),
        "drivers/net/ethernet/tiny.c": _c_file(8, 120),
        "arch/x86/kernel/setup.c": _c_file(9, 90),
        "scripts/checkpatch.pl": "#!/usr/bin/env perl\nprint 'return 0';\n",
    }
    for n in range(10, 40):
        files[f"drivers/misc/m{n:02d}.c"] = _c_file(n, 40)
    return files


def make(bench_dir: Path) -> Path:
    """Lay out the tiny corpus under `bench_dir` (idempotent); return `bench_dir`."""
    if (bench_dir / "linux-source.done").exists() and corpus._has_main(bench_dir / "linux"):
        return bench_dir
    source, repo = bench_dir / "linux-source", bench_dir / "linux"
    for root in (source, repo):
        for rel, text in _files().items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (root / "scripts" / "checkpatch.pl").chmod(0o755)
    (source / "include" / "asm").symlink_to("linux")  # linux_many copies symbolic links as links
    corpus._commit_tree(repo)
    (bench_dir / "linux-source.done").write_text(STAMP)
    return bench_dir


if __name__ == "__main__":
    print(make(Path(sys.argv[1])))
