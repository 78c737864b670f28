"""What one device call carries, in MiB, against the device's limit (layout.CALL_LIMIT_MIB): the working tree, which
travels with every call (tracked files, untracked files git does not ignore, and shared/ where the checkout has
one), plus the pack folders the part names in `carry`. `pack` adds up the folders it has just written; CI adds up
PACKED_MIB, the folders' sizes in the last full pack, with the same functions and today's tree."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from benchmarks.campaign import layout
from benchmarks.campaign.parts import Part

# The folders of the last full pack (`bash scripts/gpu-campaign.sh pack .campaign`, ../shared/data, counter-fitted
# vectors, 2026-11-27), rounded up to 0.1 MiB. `pack` says when a folder it writes comes out larger: then update it.
PACKED_MIB = {layout.BASE: 2.3, layout.TEST_WHEELS: 3.8, layout.MINILM: 37.4, layout.WORDNET: 5.4,
              layout.DATA_PERF: 8.7, layout.paper_folder("trec"): 3.2, layout.paper_folder("mr"): 5.6,
              layout.paper_folder("r8"): 6.6}
CI_MARGIN_MIB = 1.0  # what CI keeps free besides: the clbench wheel's growth since that pack, files git does not list
SHARED = "shared"  # a folder of this name inside the checkout travels even when git ignores it
HOW_TO_FIT = ("shrink what the repository tracks (results archives as .tar.xz, see docs/results/README.md) or "
              "what the part carries; docs/GPU-CAMPAIGN.md, \"The 64 MiB limit\"")


def tree_files(repo: Path) -> list[Path] | None:
    """The files the device copies with every call, or None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                                capture_output=True)
    except OSError:  # no such folder, or no git
        return None
    if listed.returncode != 0:
        return None
    files = {repo / name for name in listed.stdout.decode().split("\0") if name}
    if (repo / SHARED).is_dir():
        files |= {p for p in (repo / SHARED).rglob("*")}
    return sorted(f for f in files if f.is_file() and not f.is_symlink())


def tree_mib(repo: Path) -> float | None:
    """The size of the working tree the device copies with every call, in MiB (None outside a git checkout)."""
    files = tree_files(repo)
    return None if files is None else sum(f.stat().st_size for f in files) / 2**20


def part_mib(part: Part, folders: Mapping[str, float], tree: float) -> float:
    """What a device call for `part` carries: the tree plus the part's folders (sizes in MiB)."""
    return tree + sum(folders[folder] for folder in part.carry)


def refusal(part: Part, folders: Mapping[str, float], tree: float) -> str | None:
    """The one line refusing `part` when its call would carry the limit or more, else None."""
    size = part_mib(part, folders, tree)
    if size < layout.CALL_LIMIT_MIB:
        return None
    return (f"part {part.name} carries {size:.1f} MiB (working tree {tree:.1f} + folders {size - tree:.1f}), "
            f"over the {layout.CALL_LIMIT_MIB} MiB a device call may carry: {HOW_TO_FIT}")


def size_table(parts: list[Part], folders: Mapping[str, float], tree: float) -> str:
    """One line per part: what its call carries and how far that stays under the limit."""
    width = max(len(part.name) for part in parts)
    lines = [f"carried per call (working tree {tree:.1f} MiB + the part's folders), limit {layout.CALL_LIMIT_MIB} MiB:"]
    for part in parts:
        size = part_mib(part, folders, tree)
        lines.append(f"  {part.name:<{width}}  {size:5.1f} MiB  headroom {layout.CALL_LIMIT_MIB - size:5.1f} MiB")
    return "\n".join(lines)


def larger_than_recorded(folders: Mapping[str, float]) -> list[str]:
    """A note for each folder larger than PACKED_MIB records (CI checks the parts against those sizes)."""
    return [f"{folder}/ is {size:.2f} MiB, more than the {PACKED_MIB[folder]} MiB recorded in "
            f"benchmarks/campaign/sizes.py PACKED_MIB, which CI checks the parts against: update it"
            for folder, size in sorted(folders.items()) if folder in PACKED_MIB and size > PACKED_MIB[folder]]
