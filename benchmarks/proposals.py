"""Proposed speed-ups for modules the benchmarks' owner does not own, measured on patched copies.

These are drop-in replacements applied *in the benchmark process only* (monkeypatching), to measure
what the owners of the package modules would gain. The one left is for ``roofline/catalog.py``
(libyaml's loader); nothing here is imported by the package or the workflow.

    python benchmarks/proposals.py          # catalog loading: timings and equality
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


# Adopted into the package: the per-combination `parse._missing`, the per-distinct-name
# `short_kernel_name`, the dictionary-encoded reader of `ncu_csv._read_table`; then (parse speed,
# "Scale and speed") the number cast without a regex (fast_numbers), grid/block texts once per
# distinct value (fast_dims), the bincount check for repeated keys (fast_deduplicate) and the
# sha256 overlapping the parse on a thread (read_input_hashing).


@contextlib.contextmanager
def patched():
    """Apply the open proposals for ``roofline/parse.py`` and ``roofline/ncu_csv.py`` for the
    duration of the block: none are left (all adopted), so this changes nothing; kept so that the
    benchmarks can still say ``with patched():``."""
    yield


def c_yaml_loader():
    """The catalog's loader rebuilt on libyaml (``yaml.CSafeLoader``) with the same two rules."""
    import yaml

    from roofline import catalog

    class CLoader(yaml.CSafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    CLoader.yaml_implicit_resolvers = {k: list(v) for k, v in catalog._Loader.yaml_implicit_resolvers.items()}
    return CLoader


def catalog_yaml_times(path: Path) -> tuple[float, float, bool]:
    """(pure-Python SafeLoader, libyaml CSafeLoader) seconds to load the catalog, and equality."""
    import yaml

    from roofline import catalog

    text = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    slow = yaml.load(text, Loader=catalog._Loader)
    mid = time.perf_counter()
    fast = yaml.load(text, Loader=c_yaml_loader())
    end = time.perf_counter()
    return mid - start, end - mid, slow == fast


def main() -> int:
    from _common import REPO

    slow, fast, same = catalog_yaml_times(REPO / "config" / "gpus.yaml")
    print(f"catalog YAML: SafeLoader {slow:.3f} s, CSafeLoader {fast:.3f} s, same result: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
